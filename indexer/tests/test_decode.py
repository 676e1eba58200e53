"""Text files are read in the encoding they were saved in, from the bytes an editor writes."""

from __future__ import annotations

import codecs
import random
from pathlib import Path

import pytest

from indexer.cases import CaseFileError, read_cases
from indexer.extract import (
    ExtractedDocument,
    NotText,
    UnreadableDocument,
    decode_text,
    extract_bytes,
    extract_document,
)

UPLOAD_URL = "upload://0123456789abcdef0123456789abcdef/note"

# What Windows editors save as "ANSI" in Western locales: typographic quotes, dashes, the euro
# sign and accented letters all sit in cp1252's own range (0x80-0x9f is not Latin-1's).
WESTERN_NOTES = [
    "Printer “Quasar-7” – reset\n\n1. Open the front cover.\n2. Press Reset for 5 s.\n\n"
    "Costs €12 per ribbon; don’t order more than two.\n",
    "Drucker einrichten\n\n1. Öffnen Sie die Systemsteuerung.\n2. Wählen Sie „Geräte und "
    "Drucker“.\n3. Klicken Sie auf „Hinzufügen“ – fertig.\n",
    "Réinitialiser le mot de passe\n\nL’élève a réglé la tâche : très bien, voilà.\n",
    "Résumé",
    "Café €5",
]

MANUAL_MD = """# Reset the VPN password

The VPN uses its own password – not your account’s.

1. Open the portal at https://portal.example/vpn.
2. Choose “Reset” and confirm.

```
vpnctl reset --user me
```
"""


def sections(doc: ExtractedDocument) -> list[tuple[tuple[str, ...], list[tuple[str, str]]]]:
    return [(s.path, [(b.kind, b.text) for b in s.blocks]) for s in doc.sections]


@pytest.mark.parametrize("text", WESTERN_NOTES)
def test_cp1252_text_reads_as_written(text: str) -> None:
    assert decode_text(text.encode("cp1252")) == text
    doc = extract_bytes(text.encode("cp1252"), "note.txt", UPLOAD_URL)
    assert doc == extract_bytes(text.encode("utf-8"), "note.txt", UPLOAD_URL)


@pytest.mark.parametrize(
    "encoded",
    [
        codecs.BOM_UTF16_LE + MANUAL_MD.encode("utf-16-le"),  # Notepad's "Unicode"
        codecs.BOM_UTF16_BE + MANUAL_MD.encode("utf-16-be"),
        MANUAL_MD.encode("utf-16-le"),  # no BOM: PowerShell's Out-File and some exports
        MANUAL_MD.encode("utf-16-be"),
        MANUAL_MD.encode("utf-32"),
    ],
    ids=["utf16le-bom", "utf16be-bom", "utf16le", "utf16be", "utf32-bom"],
)
def test_utf16_markdown_has_the_same_sections_as_utf8(encoded: bytes) -> None:
    expected = extract_bytes(MANUAL_MD.encode(), "vpn.md", UPLOAD_URL)
    assert decode_text(encoded) == MANUAL_MD
    doc = extract_bytes(encoded, "vpn.md", UPLOAD_URL)
    assert sections(doc) == sections(expected)
    assert [kind for _, blocks in sections(doc) for kind, _ in blocks] == [
        "paragraph",
        "step",
        "step",
        "code",
    ]


def test_latin1_text_reads_as_written(tmp_path: Path) -> None:
    text = "Straße 5, Zürich: Wi-Fi im Café, Passwort beim Empfang. Ñandú, élève à côté.\n"
    path = tmp_path / "wifi.txt"
    path.write_bytes(text.encode("latin-1"))
    assert extract_document(path).sections[0].blocks[0].text == text.strip()


def test_other_code_pages_are_not_forced_into_cp1252() -> None:
    russian = "Сброс пароля VPN: откройте портал и нажмите «Сбросить».\n"
    greek = "Επαναφορά κωδικού: ανοίξτε την πύλη.\n"
    assert decode_text(russian.encode("cp1251")) == russian
    assert decode_text(greek.encode("cp1253")) == greek


@pytest.mark.parametrize(
    "text",
    [
        "plain ASCII\n",
        "Zürich – “quotes”, € and 日本語, a\u00a0no-break space, zero\u200bwidth, 🙂\r\nCRLF\r\n",
        "",
    ],
)
def test_utf8_is_read_exactly(text: str) -> None:
    assert decode_text(text.encode("utf-8")) == text
    assert decode_text(codecs.BOM_UTF8 + text.encode("utf-8")) == text


def test_utf8_bom_is_dropped_before_front_matter() -> None:
    doc = extract_bytes(b"\xef\xbb\xbf---\ntitle: BOM\n---\nHello\n", "bom.md", UPLOAD_URL)
    assert doc.title == "BOM"
    assert "\ufeff" not in doc.text


JUNK = [
    random.Random(7).randbytes(4096),
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(8).randbytes(2048),
    bytes(b for b in random.Random(9).randbytes(8192) if b)[:4096],  # no NUL byte at all
    b"Wi-Fi password\x00\x01\x02\x03" * 64,
]


@pytest.mark.parametrize("junk", JUNK, ids=["random", "png", "random-without-nul", "controls"])
def test_binary_data_named_as_text_gets_a_clear_error(junk: bytes, tmp_path: Path) -> None:
    with pytest.raises(NotText):
        decode_text(junk)
    with pytest.raises(UnreadableDocument, match="holds binary data, not text") as raised:
        extract_bytes(junk, "notes.md", UPLOAD_URL)
    assert raised.value.problem == "the file holds binary data, not text"
    path = tmp_path / "page.html"
    path.write_bytes(junk)
    with pytest.raises(UnreadableDocument, match="holds binary data"):
        extract_document(path)


def test_a_cp1252_ticket_export_is_read_and_a_binary_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "tickets.csv"
    path.write_bytes(
        "id,summary,resolution\nIT-7,Drucker “Quasar” – Fehler,Farbband getauscht (€12)\n".encode(
            "cp1252"
        )
    )
    (case,) = read_cases(path).cases
    assert (case.summary, case.resolution) == (
        "Drucker “Quasar” – Fehler",
        "Farbband getauscht (€12)",
    )
    path.write_bytes(JUNK[0])
    with pytest.raises(CaseFileError, match=r"tickets\.csv: the file holds binary data"):
        read_cases(path)
