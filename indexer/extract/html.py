"""HTML pages (files, uploads and crawled pages): the content a reader reads, in sections.

The content root is the page's ``<main>`` (or ``[role=main]``, ``<article>``, ``<body>``);
navigation, headers, footers, forms, media, tables of contents and lists of links to other pages
are dropped before the walk.
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from bs4.element import (
    CData,
    Comment,
    Declaration,
    Doctype,
    NavigableString,
    PageElement,
    ProcessingInstruction,
    Tag,
)

from indexer.extract.model import (
    BlockSink,
    ExtractedDocument,
    ItemCollector,
    SectionBuilder,
    clean_inline,
    fence,
    render_item,
)

_DROP_TAGS = (
    "nav",
    "footer",
    "aside",
    "script",
    "style",
    "noscript",
    "template",
    "form",
    "button",
    "input",
    "select",
    "textarea",
    "label",
    "iframe",
    "svg",
    "canvas",
    "img",
    "picture",
    "video",
    "audio",
    "object",
    "embed",
)
_DROP_ROLES = ("navigation", "banner", "contentinfo", "search", "complementary", "dialog")
_DROP_SELECTOR = ", ".join(
    [*(f'[role="{role}"]' for role in _DROP_ROLES), "[hidden]", '[aria-hidden="true"]']
)
# Class tokens of generated tables of contents: "toc", "theme-doc-toc-desktop",
# "table-of-contents", "tableOfContents_bqdL" (Docusaurus, Sphinx, MkDocs).
_TOC_CLASS = re.compile(r"(^|[-_])(toc|table-?of-?contents)([-_]|$)", re.IGNORECASE)
_SKIPPED_STRINGS = (Comment, CData, ProcessingInstruction, Declaration, Doctype)
_HEADING_LEVELS = {f"h{level}": level for level in range(1, 7)}
_BLOCK_TAGS = frozenset(
    {
        "address",
        "article",
        "blockquote",
        "body",
        "center",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "header",
        "hgroup",
        "hr",
        "html",
        "li",
        "main",
        "p",
        "section",
        "summary",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
    }
)


def extract_html(html: str, *, fallback_title: str, fallback_url: str) -> ExtractedDocument:
    """Extract an HTML page (a file or a crawled page).

    The content root is ``<main>``, ``[role=main]`` or ``<article>`` when the page has one, else
    ``<body>``. Title: first ``<h1>`` of the content, else ``<title>``, else ``fallback_title``.
    URL: ``<link rel="canonical">``, else ``fallback_url``.
    """
    soup = BeautifulSoup(html, "html.parser")
    page_title = clean_inline(soup.title.get_text()) if soup.title else ""
    canonical = _canonical_url(soup)
    root: Tag = (
        soup.select_one("main")
        or soup.select_one('[role="main"]')
        or soup.select_one("article")
        or soup.body
        or soup
    )
    drop_boilerplate(root)

    builder = SectionBuilder()
    HtmlWalker(builder).walk(root)
    title = builder.first_h1 or page_title or fallback_title
    return ExtractedDocument(
        title=title, url=canonical or fallback_url, sections=builder.sections(title)
    )


def _canonical_url(soup: BeautifulSoup) -> str | None:
    for link in soup.select("link[href]"):
        if "canonical" in (rel.lower() for rel in link.get_attribute_list("rel") if rel):
            href = str(link.get("href") or "").strip()
            if href:
                return href
    return None


def drop_boilerplate(root: Tag) -> None:
    """Remove what readers skip.

    A ``<header>`` inside an ``<article>`` that holds a heading is the article's own title block
    (Docusaurus, blogs), so it stays; other headers are site chrome. Tables of contents repeat the
    headings and would turn into a bogus trailing list, so they go too.
    """
    doomed: list[Tag] = list(root.find_all(_DROP_TAGS))
    doomed.extend(root.find_all(class_=_TOC_CLASS))
    doomed.extend(root.select(_DROP_SELECTOR))
    for header in root.find_all("header"):
        keeps_title = header.find_parent("article") is not None and header.find(
            list(_HEADING_LEVELS)
        )
        if not keeps_title:
            doomed.append(header)
    for tag in doomed:
        if not tag.decomposed:  # a dropped ancestor already took it along
            tag.decompose()
    _drop_link_lists(root)


LINK_LIST_MIN_ITEMS = 2
LINK_BLURB_MAX_WORDS = 40


def _drop_link_lists(root: Tag) -> None:
    """Remove lists whose every item starts with a link to another page, plus a short blurb.

    Topic pages, "see also" lists and tables of contents repeat other pages' titles and
    summaries; indexed, they would outrank the pages they point to.
    """
    doomed = []
    for container in root.find_all(True):
        items = [child for child in container.children if isinstance(child, Tag)]
        if len(items) >= LINK_LIST_MIN_ITEMS and all(_leads_with_link(item) for item in items):
            doomed.append(container)
    for tag in doomed:
        if not tag.decomposed:
            tag.decompose()


def _leads_with_link(item: Tag) -> bool:
    """Whether the first text of ``item`` is a link to another page, followed by a short blurb."""
    for node in item.descendants:
        if not isinstance(node, NavigableString) or not node.strip():
            continue
        anchor = node.find_parent("a")
        if anchor is None or item not in anchor.parents:
            return False
        href = str(anchor.get("href") or "")
        if not href or href.startswith("#"):
            return False
        rest = item.get_text(" ", strip=True)[len(anchor.get_text(" ", strip=True)) :]
        return len(rest.split()) <= LINK_BLURB_MAX_WORDS
    return False


class HtmlWalker:
    """Walks the DOM in document order, emitting headings and typed blocks to a sink.

    Inline text is buffered and flushed as a paragraph at every block boundary, so text sitting
    directly in a ``<div>`` (common in generated help) is not lost.
    """

    def __init__(self, sink: BlockSink) -> None:
        self._sink = sink
        self._inline: list[str] = []

    def walk(self, node: Tag) -> None:
        self._walk_children(node)
        self._flush()

    def _flush(self) -> None:
        text = clean_inline("".join(self._inline))
        self._inline = []
        if text:
            self._sink.block("paragraph", text)

    def _walk_children(self, node: Tag) -> None:
        for child in node.children:
            self._visit(child)

    def _visit(self, node: PageElement) -> None:
        if isinstance(node, NavigableString):
            if not isinstance(node, _SKIPPED_STRINGS):
                self._inline.append(str(node))
            return
        if not isinstance(node, Tag):
            return
        name = node.name.lower()
        if name in _HEADING_LEVELS:
            self._flush()
            self._sink.heading(_HEADING_LEVELS[name], _inline_text(node))
        elif name == "pre":
            self._flush()
            self._sink.block("code", fence(_pre_text(node), _code_language(node)))
        elif name in ("ol", "ul"):
            self._flush()
            self._emit_list(node, ordered=name == "ol")
        elif name == "table":
            self._flush()
            self._sink.block("table", _table_text(node))
        elif name == "br":
            self._inline.append("\n")
        elif name in _BLOCK_TAGS:
            self._flush()
            self._walk_children(node)
            self._flush()
        else:  # inline element: its text joins the current paragraph
            self._walk_children(node)

    def _emit_list(self, node: Tag, *, ordered: bool) -> None:
        number = list_start(node.get("start")) if ordered else 1
        for item in node.find_all("li", recursive=False):
            collector = ItemCollector()
            HtmlWalker(collector).walk(item)
            if not collector.blocks:
                continue
            marker = f"{number}." if ordered else "-"
            rendered = render_item(marker, collector.blocks)
            self._sink.block("step" if ordered else "bullet", rendered)
            number += 1


def list_start(value: object) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 1


def _inline_text(tag: Tag) -> str:
    """Readable text of an element: comments skipped, ``<br>`` as a space, no separator added
    between adjacent strings (markup like ``<code>A</code><!-- -->[B]`` must not gain spaces)."""
    parts: list[str] = []
    for node in tag.descendants:
        if isinstance(node, NavigableString) and not isinstance(node, _SKIPPED_STRINGS):
            parts.append(str(node))
        elif isinstance(node, Tag) and node.name == "br":
            parts.append(" ")
    return "".join(parts)


def _pre_text(pre: Tag) -> str:
    """Text of a ``<pre>`` with its line breaks; highlighters often emit ``<br>`` between lines."""
    parts: list[str] = []
    for node in pre.descendants:
        if isinstance(node, NavigableString) and not isinstance(node, _SKIPPED_STRINGS):
            parts.append(str(node))
        elif isinstance(node, Tag) and node.name == "br":
            parts.append("\n")
    return "".join(parts).replace("\u200b", "")


def _code_language(pre: Tag) -> str:
    """The ``language-xxx`` class of the block or its wrapper, as the fence's info string."""
    candidates: list[Tag] = [pre]
    code = pre.find("code")
    if isinstance(code, Tag):
        candidates.append(code)
    if isinstance(pre.parent, Tag):
        candidates.append(pre.parent)
    for tag in candidates:
        for cls in tag.get_attribute_list("class"):
            if cls and cls.startswith(("language-", "lang-")):
                return cls.split("-", 1)[1]
    return ""


def _table_text(table: Tag) -> str:
    rows: list[str] = []
    for row in table.find_all("tr"):
        cells = [clean_inline(_inline_text(cell)) for cell in row.find_all(("td", "th"))]
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)
