"""HTML pages (files, uploads and crawled pages): the content a reader reads, in sections.

The content root is the page's ``<main>`` (or ``[role=main]``, ``<article>``, ``<body>``);
what is no text to read (scripts, styles, forms, media), navigation (headers, footers, sidebars,
tables of contents, breadcrumbs, lists of bare links: :func:`drop_navigation`) and an index
page's link cards (:func:`drop_boilerplate` says why) are dropped before the walk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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
_HIDDEN_SELECTOR = '[role="dialog"], [hidden], [aria-hidden="true"]'
_CHROME_TAGS = ("nav", "footer", "aside")
_CHROME_ROLES = ("navigation", "banner", "contentinfo", "search", "complementary")
_CHROME_SELECTOR = ", ".join(f'[role="{role}"]' for role in _CHROME_ROLES)
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
    """Remove what the knowledge base does not index: what is no text to read (scripts,
    styles, media, forms and their controls, hidden elements), navigation
    (:func:`drop_navigation`) and link cards.

    Link cards (an index page's list of links, each with a short description of the page it
    leads to) are content to a reader choosing where to go, but not to the index: each
    describes a page the knowledge base holds in full, and indexed on the index page the
    descriptions outrank the pages they describe. Kept, they put the words of 137 of the 142
    GNOME help queries of ``deskpilot eval retrieval`` on an index page, and recall@1 fell from
    0.831 to 0.718 (MRR 0.893 to 0.825).
    """
    _decompose([*root.find_all(_DROP_TAGS), *root.select(_HIDDEN_SELECTOR)])
    _decompose(drop_navigation(root))


def drop_navigation(root: Tag) -> list[Tag]:
    """Remove from ``root`` what takes a reader elsewhere rather than tells what to do; return
    the lists of link cards, which are not navigation and stay.

    The rule (``deskpilot bench crawl`` leaves the same parts out of its coverage reference):

    * what the page marks as its chrome: ``<nav>``, ``<aside>``, ``<footer>``, ``<header>``
      (except an article's own title block: a ``<header>`` inside an ``<article>`` holding a
      heading, as Docusaurus and blogs write it) and the ARIA roles of the same (``navigation``,
      ``banner``, ``contentinfo``, ``complementary``, ``search``);
    * tables of contents: elements with ``toc`` or ``table-of-contents`` as a class token
      (Docusaurus, Sphinx, MkDocs; Docusaurus' "On this page" button is one) and lists whose
      every item is only a link into the page itself (``href="#..."``): they repeat the headings;
    * lists whose every item is only a link to another page, nothing said about it:
      breadcrumbs, tag lists, bare "see also" and child-page lists (:func:`link_lists`).

    A list whose items say what the pages they link to are for (the link cards of an index
    page: a title and a short description) is no navigation: it stays, and is returned.
    """
    doomed: list[Tag] = [*root.find_all(_CHROME_TAGS), *root.find_all(class_=_TOC_CLASS)]
    doomed.extend(root.select(_CHROME_SELECTOR))
    for header in root.find_all("header"):
        keeps_title = header.find_parent("article") is not None and header.find(
            list(_HEADING_LEVELS)
        )
        if not keeps_title:
            doomed.append(header)
    _decompose(doomed)
    lists = link_lists(root)
    _decompose([*lists.contents, *lists.bare])
    return [tag for tag in lists.cards if not tag.decomposed]


def _decompose(tags: list[Tag]) -> None:
    for tag in tags:
        if not tag.decomposed:  # a dropped ancestor already took it along
            tag.decompose()


LINK_LIST_MIN_ITEMS = 2
"""Items a container other than ``<ul>`` or ``<ol>`` needs to be a list of links."""
LINK_BLURB_MAX_WORDS = 40
"""Words beside an item's leading link beyond which the item is prose that starts with a link."""
_LIST_TAGS = frozenset({"ul", "ol"})
_ITEM_TAGS = frozenset({"li", "div", "article", "section", "p"})
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True, slots=True)
class LinkLists:
    """Containers (``<ul>``, ``<ol>``, or a box of two or more boxes) whose every item leads
    with a link, by what their items hold."""

    contents: list[Tag] = field(default_factory=list)
    """Every item only a link into the page itself: a table of contents."""
    bare: list[Tag] = field(default_factory=list)
    """Every item only a link to another page."""
    cards: list[Tag] = field(default_factory=list)
    """Items leading with a link to another page, at least one with a short description."""


def link_lists(root: Tag) -> LinkLists:
    """The lists of links in ``root``, outermost first (a grid of card columns is one list)."""
    found = LinkLists()
    for container in root.find_all(True):
        kind = _link_list_kind(container)
        if kind is not None:
            getattr(found, kind).append(container)
    return found


def _link_list_kind(container: Tag) -> str | None:
    """``contents``, ``bare`` or ``cards`` (see :class:`LinkLists`) for a list of links."""
    items = [child for child in container.children if isinstance(child, Tag)]
    is_list = container.name in _LIST_TAGS
    if len(items) < (1 if is_list else LINK_LIST_MIN_ITEMS):
        return None
    if not is_list and any(item.name not in _ITEM_TAGS for item in items):
        return None  # inline elements: a paragraph with links in it
    if any(
        isinstance(child, NavigableString)
        and not isinstance(child, _SKIPPED_STRINGS)
        and child.strip()
        for child in container.children
    ):
        return None  # words between the items
    read = [_link_item(item) for item in items]
    if any(item is None for item in read):
        return None
    described = any(item[1] for item in read if item is not None)
    if any(item[0] == "page" for item in read if item is not None):
        return "cards" if described else "bare"
    return None if described else "contents"


def _link_item(item: Tag) -> tuple[str, bool] | None:
    """``(target, described)`` for an item whose first text is a link, else None.

    ``target`` is ``"fragment"`` for a link into the page (``#...``), else ``"page"``;
    ``described`` says whether words (with a letter: not a count or a separator) other than
    the link's title come with it: after it, or inside it after a title element, as cards
    write ``<a><h2>title</h2><p>description</p></a>``. An item with more than
    :data:`LINK_BLURB_MAX_WORDS` such words is prose, not a list item of links: None.
    """
    anchor = _leading_anchor(item)
    href = str(anchor.get("href") or "").strip() if anchor is not None else ""
    if anchor is None or not href:
        return None
    inside = [
        child
        for child in anchor.children
        if not isinstance(child, _SKIPPED_STRINGS) and child.get_text().strip()
    ]
    words: list[str] = []
    if len(inside) > 1 and isinstance(inside[0], Tag):  # a title element, then more
        words.extend(word for part in inside[1:] for word in part.get_text(" ").split())
    for node in item.descendants:
        if (
            isinstance(node, NavigableString)
            and not isinstance(node, _SKIPPED_STRINGS)
            and node.find_parent("a") is None
        ):
            words.extend(node.split())
    if len(words) > LINK_BLURB_MAX_WORDS:
        return None
    target = "fragment" if href.startswith("#") else "page"
    return target, any(_LETTER.search(word) for word in words)


def _leading_anchor(item: Tag) -> Tag | None:
    """The link holding the first text of ``item``, if it is one."""
    for node in item.descendants:
        if (
            isinstance(node, NavigableString)
            and not isinstance(node, _SKIPPED_STRINGS)
            and node.strip()
        ):
            anchor = node.find_parent("a")
            if anchor is None or not any(parent is item for parent in anchor.parents):
                return None
            return anchor
    return None


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
