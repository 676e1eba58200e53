"""Crawled pages as the indexer's handler indexes them, on real Chroma and Redis."""

from __future__ import annotations

from chromadb.api.models.Collection import Collection

from contracts.events import CrawledPage
from indexer.crawled import CrawledPages, page_document
from indexer.documents import DocumentStore
from indexer.service import Ingestor

URL = "http://help.example/vpn/reset.html"
MARKDOWN = """# Reset the VPN password

The VPN uses its own password, separate from your account password.

1. Open the self-service portal at https://portal.help.example/vpn.
2. Choose **Reset VPN password** and confirm with your authenticator app.
3. Sign in to the VPN client again with the new password.
"""


def page(url: str = URL, markdown: str = MARKDOWN, **fields: object) -> CrawledPage:
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
