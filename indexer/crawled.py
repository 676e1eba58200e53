"""Pages the crawler fleet read: index each under its URL, so a waiting turn can cite it.

A page arrives as the crawler read it, its HTML (or a PDF's bytes), and is extracted here with
the extractor uploaded files go through (:mod:`indexer.extract`), so a crawled page keeps the same
sections, numbered steps, code and tables as the same file uploaded. It is filed like any other
document: its ``doc_id`` is the SHA-256 of its URL, so a page crawled again replaces its earlier
version, an unchanged page (same content hash) writes nothing, and its extracted form is kept in
the document store so ``deskpilot reindex`` keeps it. A page with no readable text, or a PDF that
cannot be read, is skipped (and logged).

Events from crawlers before this extraction moved here carry the crawler's Markdown (or plain
text) instead; they are still read (:func:`legacy_page_document`), so indexers can be upgraded
before crawlers. Crawled pages are public help pages, not user text: nothing here redacts them.
Nothing here knows about the message bus; the methods block (run them in a thread).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from contracts.events import CrawledPage
from indexer.documents import DocumentStore
from indexer.extract import (
    ExtractedDocument,
    UnreadableDocument,
    extract_html,
    extract_markdown,
    extract_pdf,
    extract_plain_text,
)
from indexer.service import Ingestor

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class CrawledResult:
    """What became of one batch of crawled pages."""

    doc_ids: list[str] = field(default_factory=list)
    """Documents now in the index for the pages (written now or already current)."""
    urls: list[str] = field(default_factory=list)
    chunks_written: int = 0
    unchanged: int = 0
    """Pages whose indexed version was already the same."""
    empty: list[str] = field(default_factory=list)
    """URLs of pages with no readable text (not indexed)."""


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*?)\s*$")
_LINK_MARKUP = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def without_link_lists(markdown: str, anchors: set[str]) -> str:
    """``markdown`` without list items that are nothing but one of the page's links.

    A hub page ("Drawing tablets: - Calibrate the pen - Order nibs") names the topics it links
    to; indexed as it is, it matches a question as well as the page that answers it, and says
    nothing. HTML loses such link lists in extraction; a legacy event's Markdown has no links
    left, so the page's outgoing links tell which items were links.
    """
    if not anchors:
        return markdown
    kept = []
    for line in markdown.splitlines():
        item = _LIST_ITEM.match(line)
        if item and _norm(_LINK_MARKUP.sub(r"\1", item.group(1))) in anchors:
            continue
        kept.append(line)
    return "\n".join(kept)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def page_document(page: CrawledPage) -> ExtractedDocument | None:
    """The page as a document filed under its (final, normalised) URL; None without text.

    A PDF (``content_b64``) and HTML are extracted as an uploaded ``.pdf`` or ``.html`` file
    is; the title falls back to the crawler's. An unreadable PDF is logged and gives None.
    """
    if page.content_b64:
        doc = _pdf_document(page)
    elif page.html.strip():
        doc = extract_html(page.html, fallback_title=page.title or page.url, fallback_url=page.url)
    else:
        doc = legacy_page_document(page)
    if doc is None or not doc.sections:
        return None
    # The URL is the page's, whatever its content claims (a canonical link, front matter): it
    # is what the answer cites and what a re-crawl replaces.
    return dataclasses.replace(doc, url=page.url, title=doc.title or page.title or page.url)


def _pdf_document(page: CrawledPage) -> ExtractedDocument | None:
    name = PurePosixPath(unquote(urlsplit(page.url).path)).name or "page.pdf"
    try:
        data = base64.b64decode(page.content_b64, validate=True)
        return extract_pdf(
            data,
            fallback_title=page.title or PurePosixPath(name).stem,
            fallback_url=page.url,
            path=Path(name),  # named in a problem's message only
        )
    except (binascii.Error, ValueError) as exc:  # UnreadableDocument is a ValueError
        problem = exc.problem if isinstance(exc, UnreadableDocument) else "not valid base64"
        logger.warning("crawled PDF skipped: %s", problem, extra={"url": page.url})
        return None


def legacy_page_document(page: CrawledPage) -> ExtractedDocument | None:
    """A page from a crawler that extracted it itself: its Markdown, else its plain text."""
    anchors = {_norm(link.text) for link in page.links if link.text.strip()}
    markdown = without_link_lists(page.markdown, anchors)
    if markdown.strip():
        return extract_markdown(markdown, fallback_title=page.title, fallback_url=page.url)
    if page.text.strip():
        return extract_plain_text(page.text, fallback_title=page.title, fallback_url=page.url)
    return None


class CrawledPages:
    def __init__(self, ingestor: Ingestor, store: DocumentStore) -> None:
        self._ingestor = ingestor
        self._store = store

    def index(self, pages: Sequence[CrawledPage]) -> CrawledResult:
        """Index ``pages`` in one embedding batch; idempotent, so a redelivery is harmless."""
        result = CrawledResult()
        docs: list[ExtractedDocument] = []
        for page in pages:
            doc = page_document(page)
            if doc is None:
                result.empty.append(page.url)
            else:
                docs.append(doc)
        if not docs:
            return result
        for doc in docs:
            # Stored first: a re-index running meanwhile then keeps the chunks written next.
            self._store.put(doc)
        report = self._ingestor.ingest_documents(docs)
        result.chunks_written = report.chunks_written
        result.unchanged = report.files_unchanged
        result.doc_ids = [doc.doc_id for doc in docs]
        result.urls = [doc.url for doc in docs]
        logger.info(
            "crawled pages indexed",
            extra={
                "pages": len(docs),
                "chunks_written": report.chunks_written,
                "unchanged": report.files_unchanged,
                "empty": len(result.empty),
            },
        )
        return result
