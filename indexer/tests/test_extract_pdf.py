"""PDF extraction (its text layer) and extraction of uploaded bytes by file name."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from indexer.extract import (
    ExtractedDocument,
    UnreadableDocument,
    UnsupportedDocument,
    extract_bytes,
    extract_document,
)
from tests.support.pdf import build_pdf

UPLOAD_URL = "upload://0123456789abcdef0123456789abcdef/file"

MANUAL = build_pdf(
    [
        [
            (20, "Badge printer manual"),
            (11, "The Quasar-7 prints visitor badges at reception. When the ribbon runs low"),
            (11, "it stops and its light turns amber; a new ribbon is in the supply con-"),
            (11, "tainer next to it."),
            (14, "Reset the printer"),
            (11, "1. Open the front cover."),
            (11, "2. Hold the reset key for ten seconds until the light"),
            (11, "blinks, then release it."),
            (11, "- Works for the Quasar-7 and the Quasar-9."),
            (11, ""),
            (11, "Run the self-test from a terminal:"),
            (10, "quasarctl selftest --full", "mono"),
            (11, "The self-test prints a grid."),
        ],
        [
            (14, "Order supplies"),
            (11, "Ribbons are ordered from the IT shop like any other consumable."),
        ],
    ],
    title="Quasar-7 badge printer",
)


def blocks(doc: ExtractedDocument) -> list[tuple[str, str, str]]:
    """(section heading, block kind, text) for every block, in order."""
    return [(s.heading, b.kind, b.text) for s in doc.sections for b in s.blocks]


def test_headings_steps_bullets_code_and_wrapped_lines_are_recognised() -> None:
    doc = extract_bytes(MANUAL, "manual.pdf", UPLOAD_URL)

    assert doc.title == "Quasar-7 badge printer"  # the metadata title
    assert doc.url == UPLOAD_URL
    top = "Quasar-7 badge printer > Badge printer manual"
    assert blocks(doc) == [
        (
            top,
            "paragraph",
            "The Quasar-7 prints visitor badges at reception. When the ribbon runs low it stops "
            "and its light turns amber; a new ribbon is in the supply container next to it.",
        ),
        (f"{top} > Reset the printer", "step", "1. Open the front cover."),
        (
            f"{top} > Reset the printer",
            "step",
            "2. Hold the reset key for ten seconds until the light blinks, then release it.",
        ),
        (f"{top} > Reset the printer", "bullet", "- Works for the Quasar-7 and the Quasar-9."),
        (f"{top} > Reset the printer", "paragraph", "Run the self-test from a terminal:"),
        (f"{top} > Reset the printer", "code", "```\nquasarctl selftest --full\n```"),
        (f"{top} > Reset the printer", "paragraph", "The self-test prints a grid."),
        # Headings follow the font size across pages: 14 pt is below the 20 pt title.
        (
            f"{top} > Order supplies",
            "paragraph",
            "Ribbons are ordered from the IT shop like any other consumable.",
        ),
    ]


def test_without_a_metadata_title_the_first_line_is_the_title() -> None:
    for meta_title in (None, "", "Microsoft Word - badge.docx", "Untitled"):
        pdf = build_pdf(
            [[(18, "Guest Wi-Fi for visitors"), (11, "Ask reception.")]], title=meta_title
        )
        assert extract_bytes(pdf, "wifi.pdf", UPLOAD_URL).title == "Guest Wi-Fi for visitors"


def test_a_pdf_in_one_font_size_is_sectioned_by_page() -> None:
    pdf = build_pdf(
        [
            [(11, "Connect to the office Wi-Fi NW-Corp with your account.")],
            [(11, "On a phone, install the company profile first.")],
        ]
    )
    doc = extract_bytes(pdf, "wifi notes.pdf", UPLOAD_URL)
    assert doc.title == "Connect to the office Wi-Fi NW-Corp with your account."
    assert [(s.path[1:], s.text) for s in doc.sections] == [
        (("Page 1",), "Connect to the office Wi-Fi NW-Corp with your account."),
        (("Page 2",), "On a phone, install the company profile first."),
    ]


def test_page_numbers_and_running_headers_are_dropped() -> None:
    rules = [
        ("Lock your screen.", "Press Windows+L when you leave."),
        ("Use the VPN.", "Connect before opening intranet pages."),
        ("Report phishing.", "Forward the mail to the security team."),
        ("Patch on Fridays.", "Restart when the update prompt appears."),
    ]
    pages = [
        [(9, "Northwind IT handbook"), (11, rule), (11, detail), (9, f"Page {n} of 4")]
        for n, (rule, detail) in enumerate(rules, start=1)
    ]
    doc = extract_bytes(build_pdf(pages, title="Handbook"), "handbook.pdf", UPLOAD_URL)
    assert [(section.path[-1], section.text) for section in doc.sections] == [
        (f"Page {n}", f"{rule} {detail}") for n, (rule, detail) in enumerate(rules, start=1)
    ]


def test_a_pdf_without_a_text_layer_has_no_sections() -> None:
    doc = extract_bytes(build_pdf([[], []], title="Scanned form"), "scan.pdf", UPLOAD_URL)
    assert doc.title == "Scanned form"
    assert doc.sections == ()


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.7\nTOPSECRET-BODY\n%%EOF", b"", b"\x00" * 64],
    ids=["garbage", "empty", "zeros"],
)
def test_an_unreadable_pdf_raises_without_quoting_it(data: bytes) -> None:
    with pytest.raises(UnreadableDocument, match="not a readable PDF") as caught:
        extract_bytes(data, "broken.pdf", UPLOAD_URL)
    assert "TOPSECRET" not in str(caught.value)
    assert isinstance(caught.value, UnsupportedDocument)  # callers skip both alike


def test_a_truncated_pdf_is_read_as_far_as_it_goes_or_refused() -> None:
    try:
        doc = extract_bytes(MANUAL[: len(MANUAL) // 2], "truncated.pdf", UPLOAD_URL)
    except UnreadableDocument:
        return
    assert doc.title  # pypdf recovered what it could; whatever it read is the file's own text


def test_a_password_protected_pdf_is_unreadable_but_an_owner_only_one_is_read() -> None:
    def encrypted(user_password: str) -> bytes:
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(MANUAL)))
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
        out = io.BytesIO()
        writer.write(out)
        return out.getvalue()

    with pytest.raises(UnreadableDocument, match="password-protected"):
        extract_bytes(encrypted("secret"), "locked.pdf", UPLOAD_URL)
    assert "Open the front cover" in extract_bytes(encrypted(""), "open.pdf", UPLOAD_URL).text


def test_pdf_files_are_extracted_from_disk_too(tmp_path: Path) -> None:
    path = tmp_path / "manual.pdf"
    path.write_bytes(MANUAL)
    doc = extract_document(path)
    assert doc.url == path.resolve().as_uri()
    assert doc.source_path == path
    assert doc == extract_bytes(MANUAL, "manual.pdf", path.resolve().as_uri())


@pytest.mark.parametrize(
    ("filename", "data", "title", "text"),
    [
        (
            "note.md",
            b"---\nurl: https://elsewhere.example/x\n---\n# Dock\n\nPlug in.",
            "Dock",
            "Plug in.",
        ),
        (
            "page.HTML",
            b'<link rel="canonical" href="https://x.example/"><h1>Dock</h1><p>Plug in.</p>',
            "Dock",
            "Plug in.",
        ),
        ("page.htm", b"<title>Dock</title><p>Plug in.</p>", "Dock", "Plug in."),
        ("dock notes.txt", b"Plug in.\n\n1. Press power.", "dock notes", "1. Press power."),
        ("dock.markdown", b"# Dock\n\nPlug in.", "Dock", "Plug in."),
    ],
)
def test_uploaded_bytes_are_extracted_by_extension_and_keep_the_upload_url(
    filename: str, data: bytes, title: str, text: str
) -> None:
    doc = extract_bytes(data, filename, UPLOAD_URL)
    assert doc.title == title
    assert text in doc.text
    # Front matter and canonical links do not move an upload away from its upload URL.
    assert doc.url == UPLOAD_URL


@pytest.mark.parametrize("filename", ["report.docx", "archive.pdf.zip", "README"])
def test_uploads_of_other_types_are_unsupported(filename: str) -> None:
    with pytest.raises(UnsupportedDocument, match="unsupported file type"):
        extract_bytes(b"whatever", filename, UPLOAD_URL)


def test_an_explicit_id_replaces_the_url_hash() -> None:
    doc = extract_bytes(b"# A\n\nText.", "a.md", UPLOAD_URL)
    assert len(doc.doc_id) == 64
    pinned = ExtractedDocument(doc.title, doc.url, doc.sections, explicit_id="abc123")
    assert pinned.doc_id == "abc123"
    assert pinned.content_hash == doc.content_hash  # identity is not content
