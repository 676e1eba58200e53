"""Crawled pages as the indexer's handler indexes them, on real Chroma and Redis.

A page arrives as its HTML (or a PDF's bytes) and is extracted here exactly as the same file
uploaded; events from crawlers that extracted pages themselves (Markdown, plain text) are still
read, so indexers can be upgraded before crawlers.
"""

from __future__ import annotations

import base64

import pytest
from chromadb.api.models.Collection import Collection

from contracts.events import CrawledPage
from indexer.crawled import CrawledPages, page_document
from indexer.documents import DocumentStore
from indexer.extract import ExtractedDocument, extract_bytes
from indexer.service import Ingestor
from tests.support.help_documents import GUIDE_CHROME, GUIDE_HTML, MANUAL_PDF

URL = "http://help.example/vpn/reset.html"
PDF_URL = "http://help.example/manuals/quasar-7.pdf"
UPLOAD_URL = "upload://0123456789abcdef0123456789abcdef/file"


def html_page(url: str = URL, html: str = GUIDE_HTML) -> CrawledPage:
    """What the crawler publishes for an HTML page (links left out: the indexer ignores them)."""
    return CrawledPage(
        url=url, title="Reset your VPN password | IT Help", content_hash="h", html=html
    )


def pdf_page(url: str = PDF_URL, data: bytes = MANUAL_PDF) -> CrawledPage:
    return CrawledPage(
        url=url,
        title="quasar-7.pdf",
        content_hash="h",
        content_type="application/pdf",
        content_b64=base64.b64encode(data).decode(),
    )


def structure(doc: ExtractedDocument) -> list[tuple[tuple[str, ...], str, str]]:
    """(section path, block kind, text) of every block, in order."""
    return [(s.path, b.kind, b.text) for s in doc.sections for b in s.blocks]


def test_a_crawled_html_page_has_the_sections_of_the_same_file_uploaded() -> None:
    crawled = page_document(html_page())
    uploaded = extract_bytes(GUIDE_HTML.encode(), "reset.html", UPLOAD_URL)

    assert crawled is not None
    assert structure(crawled) == structure(uploaded)
    assert (crawled.url, crawled.title) == (URL, "Reset your VPN password")
    kinds = {kind for _, kind, _ in structure(crawled)}
    assert kinds == {"paragraph", "step", "code", "table"}
    paths = [s.heading for s in crawled.sections]
    assert paths == [
        "Reset your VPN password",
        "Reset your VPN password > On Windows",
        "Reset your VPN password > From a terminal",
        "Reset your VPN password > From a terminal > Which client",
    ]
    steps = [text for _, kind, text in structure(crawled) if kind == "step"]
    assert steps[0] == "1. Open the self-service portal."
    assert len(steps) == 3
    for chrome in GUIDE_CHROME:
        assert chrome not in crawled.text
    assert "Wi-Fi" not in crawled.text  # the "See also" list of links


def test_a_crawled_pdf_has_the_sections_of_the_same_file_uploaded() -> None:
    crawled = page_document(pdf_page())
    uploaded = extract_bytes(MANUAL_PDF, "quasar-7.pdf", UPLOAD_URL)

    assert crawled is not None
    assert structure(crawled) == structure(uploaded)
    assert (crawled.url, crawled.title) == (PDF_URL, "Quasar-7 badge printer")
    top = ("Quasar-7 badge printer", "Badge printer manual")
    assert [s.path for s in crawled.sections] == [
        top,
        (*top, "Reset the printer"),
        (*top, "Order supplies"),
    ]
    assert [(kind, text) for _, kind, text in structure(crawled)][1:] == [
        ("step", "1. Open the front cover."),
        ("step", "2. Hold the reset key for ten seconds until the light blinks, then release it."),
        ("paragraph", "Run the self-test from a terminal:"),
        ("code", "```\nquasarctl selftest --full\n```"),
        ("paragraph", "Ribbons NW-RIB-7 are ordered from the IT shop like any other consumable."),
    ]


def test_crawled_html_and_pdf_are_indexed_and_kept_for_reindex(
    ingestor: Ingestor, collection: Collection, store: DocumentStore
) -> None:
    result = CrawledPages(ingestor, store).index([html_page(), pdf_page()])

    assert result.urls == [URL, PDF_URL]
    assert result.chunks_written == collection.count() >= 2
    documents = collection.get(include=["documents"])["documents"] or []
    assert any("vpnctl connect --profile office" in text for text in documents)
    assert any("NW-RIB-7" in text for text in documents)
    for doc_id in result.doc_ids:
        stored = store.get(doc_id)
        assert stored is not None
        assert any(block.kind == "step" for s in stored.sections for block in s.blocks)


def test_a_canonical_link_does_not_move_a_crawled_page() -> None:
    html = GUIDE_HTML.replace(
        "<title>", '<link rel="canonical" href="https://elsewhere.example/x"><title>'
    )
    doc = page_document(html_page(html=html))
    assert doc is not None
    assert doc.url == URL


@pytest.mark.parametrize(
    ("content_b64", "why"),
    [
        (base64.b64encode(b"%PDF-1.4 broken beyond repair").decode(), "not a readable PDF"),
        ("%%% not base64 %%%", "not valid base64"),
    ],
)
def test_an_unreadable_crawled_pdf_is_skipped_with_a_reason_and_the_rest_indexed(
    ingestor: Ingestor,
    store: DocumentStore,
    caplog: pytest.LogCaptureFixture,
    content_b64: str,
    why: str,
) -> None:
    broken = pdf_page().model_copy(update={"content_b64": content_b64})
    with caplog.at_level("WARNING", logger="indexer.crawled"):
        result = CrawledPages(ingestor, store).index([broken, html_page()])

    assert result.empty == [PDF_URL]
    assert result.urls == [URL]
    assert any(why in record.getMessage() for record in caplog.records)


# Events of crawlers that extracted pages themselves (Markdown or plain text).
MARKDOWN = """# Reset the VPN password

The VPN uses its own password, separate from your account password.

1. Open the self-service portal at https://portal.help.example/vpn.
2. Choose **Reset VPN password** and confirm with your authenticator app.
3. Sign in to the VPN client again with the new password.
"""


def page(url: str = URL, markdown: str = MARKDOWN, **fields: object) -> CrawledPage:
    """A page event as crawlers before this version wrote it: Markdown, no HTML."""
    return CrawledPage.model_validate(
        {"url": url, "title": "Reset the VPN password", "content_hash": "h", "markdown": markdown}
        | fields
    )


def test_a_page_is_indexed_under_its_url_and_kept_for_reindex(
    ingestor: Ingestor, collection: Collection, store: DocumentStore
) -> None:
    result = CrawledPages(ingestor, store).index([page()])

    doc = page_document(page())
    assert doc is not None
    assert result.urls == [URL]
    assert result.doc_ids == [doc.doc_id]
    assert result.chunks_written == collection.count() >= 1
    metadatas = collection.get(include=["metadatas"])["metadatas"] or []
    assert {meta["url"] for meta in metadatas} == {URL}
    assert {meta["title"] for meta in metadatas} == {"Reset the VPN password"}
    stored = store.get(doc.doc_id)
    assert stored is not None
    assert stored.url == URL
    documents = collection.get(include=["documents"])["documents"] or []
    assert any("Reset VPN password" in text for text in documents)


def test_an_unchanged_page_writes_nothing_and_a_changed_one_replaces_its_chunks(
    ingestor: Ingestor, collection: Collection, store: DocumentStore
) -> None:
    pages = CrawledPages(ingestor, store)
    first = pages.index([page()])
    before = set(collection.get(include=[])["ids"])

    again = pages.index([page()])
    assert (again.chunks_written, again.unchanged, again.urls) == (0, 1, [URL])
    assert set(collection.get(include=[])["ids"]) == before

    changed = MARKDOWN.replace("authenticator app", "hardware key")
    third = pages.index([page(markdown=changed)])
    after = collection.get(include=["documents"])
    assert third.chunks_written >= 1
    assert first.doc_ids == third.doc_ids
    assert any("hardware key" in text for text in after["documents"] or [])
    assert not any("authenticator app" in text for text in after["documents"] or [])


def test_a_page_without_text_is_skipped_and_plain_text_is_read(
    ingestor: Ingestor, collection: Collection, store: DocumentStore
) -> None:
    text_url = "http://help.example/notes.txt"
    result = CrawledPages(ingestor, store).index(
        [
            page(url="http://help.example/empty", markdown="  \n"),
            page(url=text_url, markdown="", text="Printers on floor 3 need the PRN-3 driver."),
        ]
    )

    assert result.empty == ["http://help.example/empty"]
    assert result.urls == [text_url]
    metadatas = collection.get(include=["metadatas"])["metadatas"] or []
    assert {meta["url"] for meta in metadatas} == {text_url}


def test_front_matter_does_not_move_a_page_to_another_url(
    ingestor: Ingestor, store: DocumentStore
) -> None:
    claimed = "---\nurl: https://elsewhere.example/x\n---\n" + MARKDOWN

    result = CrawledPages(ingestor, store).index([page(markdown=claimed)])

    assert result.urls == [URL]


def test_a_hub_pages_link_list_is_left_out(ingestor: Ingestor, store: DocumentStore) -> None:
    hub = page(
        url="http://help.example/tablets/",
        markdown="# Drawing tablets\n\nThe design team uses Wacom tablets.\n\n"
        "- Calibrate the Wacom tablet pen\n- [Order spare pen nibs](nibs.html)\n"
        "- Keep the tablet away from radiators.\n",
        links=[
            {
                "url": "http://help.example/tablets/calibrate.html",
                "text": "Calibrate the Wacom tablet pen",
            },
            {"url": "http://help.example/tablets/nibs.html", "text": "Order  spare pen nibs"},
        ],
    )

    doc = page_document(hub)

    assert doc is not None
    assert "design team uses Wacom tablets" in doc.text
    assert "radiators" in doc.text  # a list item that is not a link stays
    assert "Calibrate" not in doc.text
    assert "nibs" not in doc.text
