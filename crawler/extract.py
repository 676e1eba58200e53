"""A page as the crawler reads it: its title, its links and the text crawling decisions need.

The knowledge base's content is not made here: a page's HTML (or a PDF's bytes) goes out on
``pages.crawled`` as read, and the indexer extracts it with the structured extractor it uses for
uploaded files, so a crawled page and the same page uploaded keep the same headings, steps, code
and tables. The crawler reads only what crawling needs:

* **links**, from the whole page, navigation included, because that is where a crawler finds the
  rest of the site; each with its anchor text and the text around it, which the link planner
  scores against the question;
* **the title**, for progress and the job's summary;
* **the visible text of the content** (``<main>``, ``[role=main]``, ``<article>``, else
  ``<body>``, without navigation, header, footer, asides, dialogs, scripts and hidden elements):
  how many words it has tells whether the served HTML holds the content or the page must be
  rendered, and its hash (whitespace folded) finds the same content under two URLs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urljoin, urlsplit

from bs4 import BeautifulSoup, UnicodeDammit
from bs4.element import Tag

from crawler.urls import normalise

_DROP_TAGS = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "svg",
        "canvas",
        "iframe",
        "object",
        "embed",
        "form",
        "select",
        "input",
        "textarea",
        "nav",
        "header",
        "footer",
        "aside",
        "dialog",
        "head",
    }
)
_DROP_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "search", "complementary", "dialog"}
)
_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "li",
        "dd",
        "dt",
        "td",
        "th",
        "tr",
        "blockquote",
        "figcaption",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "br",
        "hr",
        "ul",
        "ol",
        "table",
    }
)
"""Elements whose text is a line of its own: words either side of them never run together."""
_LINK_CONTEXT_TAGS = _BLOCK_TAGS - {"br", "hr", "tr", "table"}
_SPACE = re.compile(r"[ \t\r\f\v\u00a0]+")
CONTEXT_CHARS = 200
PDF_MAGIC = b"%PDF-"


@dataclass(frozen=True, slots=True)
class Link:
    url: str
    anchor: str
    context: str = ""


@dataclass(frozen=True, slots=True)
class ExtractedPage:
    """What the crawler read from a page (never the knowledge base's form of it)."""

    title: str
    text: str
    """The visible text of the content, a line per block (:func:`visible_text`)."""
    content_hash: str
    links: tuple[Link, ...] = field(default=())
    asks_for_javascript: bool = False
    """The page says, in a ``<noscript>``, that it needs JavaScript."""
    html: str = ""
    """The page's HTML as read (decoded), which the ``pages.crawled`` event carries."""

    @property
    def words(self) -> int:
        return len(self.text.split())


def text_hash(text: str) -> str:
    """SHA-256 of ``text`` with whitespace folded: the same content under two URLs (or with
    different markup) hashes alike."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def decode_html(body: bytes, charset: str | None = None) -> str:
    """A served document's text: the HTTP ``charset`` when given, else what the document
    declares (``<meta charset>``, a BOM) or looks like."""
    known = [charset] if charset else []
    decoded = UnicodeDammit(body, known_definite_encodings=known, is_html=True).unicode_markup
    return decoded if decoded is not None else body.decode("utf-8", errors="replace")


def _clean(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _hidden(tag: Tag) -> bool:
    if tag.name in _DROP_TAGS:
        return True
    attrs = tag.attrs or {}
    if "hidden" in attrs or attrs.get("aria-hidden") == "true":
        return True
    if attrs.get("role") in _DROP_ROLES:
        return True
    style = str(attrs.get("style", "")).replace(" ", "").lower()
    return "display:none" in style or "visibility:hidden" in style


def visible_text(root: Tag) -> str:
    """The text a reader sees in ``root``, one line per block element, chrome and hidden
    elements left out. Changes ``root`` (it drops those elements): pass a tree read for this."""
    for tag in [tag for tag in root.find_all(True) if _hidden(tag)]:
        if not tag.decomposed:  # a hidden ancestor already took it along
            tag.decompose()
    for tag in root.find_all(_BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = (_clean(line) for line in root.get_text().split("\n"))
    return "\n".join(line for line in lines if line)


def html_text(html: str) -> str:
    """:func:`visible_text` of an HTML document's content root."""
    return visible_text(_content_root(BeautifulSoup(html, "html.parser")))


def _content_root(soup: BeautifulSoup) -> Tag:
    for candidate in (soup.find("main"), soup.find(None, {"role": "main"}), soup.find("article")):
        if isinstance(candidate, Tag):
            return candidate
    body = soup.find("body")
    return body if isinstance(body, Tag) else soup


def _links(soup: BeautifulSoup, base: str, limit: int) -> tuple[Link, ...]:
    found: dict[str, Link] = {}
    for anchor in soup.find_all("a", href=True):
        href = str(anchor.get("href", ""))
        if href.startswith(("javascript:", "mailto:", "tel:", "#")):
            continue
        url = normalise(href, base)
        if url is None or url in found:
            continue
        text = _clean(anchor.get_text(" "))
        if not text:
            text = _clean(str(anchor.get("title") or anchor.get("aria-label") or ""))
        context = ""
        parent = anchor.parent
        while isinstance(parent, Tag) and parent.name not in _LINK_CONTEXT_TAGS | {"body"}:
            parent = parent.parent
        if isinstance(parent, Tag) and parent.name != "body":
            context = _clean(parent.get_text(" "))[:CONTEXT_CHARS]
        found[url] = Link(url, text[:CONTEXT_CHARS], context)
        if len(found) >= limit:
            break
    return tuple(found.values())


def read_html(html: str, url: str, *, max_links: int = 300) -> ExtractedPage:
    """Title, visible text, links and the JavaScript hint of an HTML page whose address is
    ``url`` (a rendered DOM, or the document as served, decoded by :func:`decode_html`)."""
    soup = BeautifulSoup(html, "html.parser")
    asks_for_javascript = any(
        "javascript" in tag.get_text(" ").lower() for tag in soup.find_all("noscript")
    )
    base = url
    base_tag = soup.find("base", href=True)
    if isinstance(base_tag, Tag):
        base = urljoin(url, str(base_tag["href"]))
    links = _links(soup, base, max_links)
    title_tag = soup.find("title")
    title = _clean(title_tag.get_text(" ")) if isinstance(title_tag, Tag) else ""
    if not title:
        first = soup.find(["h1", "h2"])
        title = _clean(first.get_text(" ")) if isinstance(first, Tag) else url
    text = visible_text(_content_root(soup))
    return ExtractedPage(title, text, text_hash(text), links, asks_for_javascript, html)


def is_pdf(data: bytes) -> bool:
    """Whether ``data`` starts like a PDF (leading whitespace allowed, as readers allow it)."""
    return data[:1024].lstrip().startswith(PDF_MAGIC)


def read_pdf(data: bytes, url: str) -> ExtractedPage:
    """What the crawler knows of a PDF without reading it (the indexer does): its file name as
    the title and the hash of its bytes, so the same file under two URLs is published once."""
    name = unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])
    title = _clean(name) or url
    return ExtractedPage(title, "", hashlib.sha256(data).hexdigest())
