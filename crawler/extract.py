"""A rendered page in, what the knowledge base needs out: title, clean Markdown, plain text, links.

The Markdown keeps the structure a chunker and a reader rely on (headings, numbered steps, bullets,
code blocks, tables) and leaves out what every page of a site repeats (navigation, header, footer,
cookie banners, scripts). Links are taken from the whole page, navigation included, because that
is where a crawler finds the rest of the site; each comes with its anchor text and the text around
it, which the link planner scores against the question.

PDF documents (served as ``application/pdf``) yield the text of their text layer.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urljoin

from bs4 import BeautifulSoup
from bs4.element import Comment, NavigableString, PageElement, Tag

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
        "blockquote",
        "figcaption",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
    }
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SPACE = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")
CONTEXT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Link:
    url: str
    anchor: str
    context: str = ""


@dataclass(frozen=True, slots=True)
class ExtractedPage:
    title: str
    markdown: str
    text: str
    links: tuple[Link, ...] = field(default=())
    asks_for_javascript: bool = False
    """The page says, in a ``<noscript>``, that it needs JavaScript."""

    @property
    def words(self) -> int:
        return len(self.text.split())

    @property
    def content_hash(self) -> str:
        """SHA-256 of the text with whitespace folded: the same content under two URLs (or with
        different markup) hashes alike."""
        folded = " ".join(self.text.split())
        return hashlib.sha256(folded.encode("utf-8")).hexdigest()


def _clean(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _code_text(pre: Tag) -> str:
    """The text of a code block, a line break for each ``<br>``: highlighters (Docusaurus's
    Prism among them) write one element per line ending in ``<br>``, not a newline."""
    parts: list[str] = []
    for node in pre.descendants:
        if isinstance(node, Tag) and node.name == "br":
            parts.append("\n")
        elif isinstance(node, NavigableString) and not isinstance(node, Comment):
            parts.append(str(node))
    return "".join(parts)


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


class _Markdown:
    """Walks the content tree once, writing Markdown and plain text side by side."""

    def __init__(self) -> None:
        self.md: list[str] = []
        self.txt: list[str] = []

    def block(self, md: str, txt: str | None = None) -> None:
        if md.strip():
            self.md.append(md.rstrip())
            self.txt.append((txt if txt is not None else md).rstrip())

    def joined(self, nodes: Iterable[PageElement], *, markup: bool = True) -> str:
        """The inline text of ``nodes`` in a row. An element that is only a number, right after a
        letter (a count badge, a footnote mark: "Getting started<span>1</span>"), is set apart by
        a space, as it is on the screen, so that it does not glue onto the word."""
        text = ""
        for node in nodes:
            piece = self.inline(node, markup=markup)
            if isinstance(node, Tag) and text[-1:].isalpha() and piece.strip("*`").isdigit():
                text += " "
            text += piece
        return text

    def inline(self, node: PageElement, *, markup: bool = True) -> str:
        """The text of an inline run, with emphasis and code marked when ``markup``."""
        if isinstance(node, Comment):
            return ""
        if isinstance(node, NavigableString):
            return str(node)
        if not isinstance(node, Tag) or _hidden(node):
            return ""
        if node.name == "br":
            return "\n"
        if node.name == "img":
            return ""
        inner = self.joined(node.children, markup=markup)
        if not markup or not inner.strip():
            return inner
        mark = {"strong": "**", "b": "**", "em": "*", "i": "*", "code": "`"}.get(node.name)
        if mark is None:
            return inner
        # Whitespace at the edges stays outside the marks, or "**90 days **" would not render.
        lead = " " if inner[:1].isspace() else ""
        trail = " " if inner[-1:].isspace() else ""
        return f"{lead}{mark}{inner.strip()}{mark}{trail}"

    def walk(self, node: Tag, depth: int = 0) -> None:
        inline_run: list[PageElement] = []

        def flush() -> None:
            if inline_run:
                md = _clean(self.joined(inline_run))
                txt = _clean(self.joined(inline_run, markup=False))
                self.block(md, txt)
                inline_run.clear()

        for child in node.children:
            if isinstance(child, Comment):
                continue
            if isinstance(child, NavigableString):
                inline_run.append(child)
                continue
            if not isinstance(child, Tag) or _hidden(child):
                continue
            name = child.name
            if name in _HEADINGS:
                flush()
                text = _clean(self.inline(child, markup=False))
                if text:
                    self.block(f"{'#' * _HEADINGS[name]} {text}", text)
            elif name == "pre":
                flush()
                code = _code_text(child)
                if code.strip():
                    self.block(f"```\n{code.strip(chr(10))}\n```", code.strip("\n"))
            elif name in ("ul", "ol"):
                flush()
                self.list(child, ordered=name == "ol", level=0)
            elif name == "table":
                flush()
                self.table(child)
            elif name == "blockquote":
                flush()
                inner = _Markdown()
                inner.walk(child, depth + 1)
                if inner.md:
                    quoted = "\n".join(f"> {line}" for line in "\n\n".join(inner.md).splitlines())
                    self.block(quoted, "\n\n".join(inner.txt))
            elif name == "dl":
                flush()
                for item in child.find_all(["dt", "dd"], recursive=False):
                    text = _clean(self.inline(item, markup=False))
                    if text:
                        self.block(f"**{text}**" if item.name == "dt" else text, text)
            elif name in _BLOCK_TAGS or name in ("hr", "details", "summary", "figure"):
                flush()
                self.walk(child, depth + 1)
            else:
                inline_run.append(child)
        flush()

    def list(self, node: Tag, *, ordered: bool, level: int) -> None:
        number = 0
        for item in node.find_all("li", recursive=False):
            if _hidden(item):
                continue
            number += 1
            marker = f"{number}." if ordered else "-"
            parts = [
                c for c in item.children if not (isinstance(c, Tag) and c.name in ("ul", "ol"))
            ]
            md = _clean("".join(self.inline(p) for p in parts))
            txt = _clean("".join(self.inline(p, markup=False) for p in parts))
            if md:
                indent = "  " * level
                self.block(f"{indent}{marker} {md}", f"{indent}{marker} {txt}")
            for sub in item.find_all(["ul", "ol"], recursive=False):
                self.list(sub, ordered=sub.name == "ol", level=level + 1)

    def table(self, node: Tag) -> None:
        rows = []
        for row in node.find_all("tr"):
            cells = [_clean(self.inline(c, markup=False)) for c in row.find_all(["th", "td"])]
            if any(cells):
                rows.append(cells)
        if not rows:
            return
        width = max(len(r) for r in rows)
        lines = []
        for index, cells in enumerate(rows):
            cells = cells + [""] * (width - len(cells))
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            if index == 0:
                lines.append("|" + " --- |" * width)
        self.block("\n".join(lines), "\n".join(" ".join(r) for r in rows))


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
        while isinstance(parent, Tag) and parent.name not in _BLOCK_TAGS | {"body", "ul", "ol"}:
            parent = parent.parent
        if isinstance(parent, Tag) and parent.name != "body":
            context = _clean(parent.get_text(" "))[:CONTEXT_CHARS]
        found[url] = Link(url, text[:CONTEXT_CHARS], context)
        if len(found) >= limit:
            break
    return tuple(found.values())


def extract_html(
    html: str | bytes,
    url: str,
    *,
    max_links: int = 300,
    max_chars: int = 400_000,
    encoding: str | None = None,
) -> ExtractedPage:
    """Title, Markdown, text and links of an HTML page whose address is ``url``.

    ``html`` is a rendered DOM (text) or the document as served (bytes, decoded by ``encoding``,
    the HTTP charset, else by what the document declares or looks like).
    """
    soup = BeautifulSoup(
        html, "html.parser", from_encoding=encoding if isinstance(html, bytes) else None
    )
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
    root: Tag | None = None
    for candidate in (soup.find("main"), soup.find(None, {"role": "main"}), soup.find("article")):
        if isinstance(candidate, Tag):
            root = candidate
            break
    if root is None:
        body = soup.find("body")
        root = body if isinstance(body, Tag) else soup
    writer = _Markdown()
    writer.walk(root)
    if not title:
        first = soup.find(["h1", "h2"])
        title = _clean(first.get_text(" ")) if isinstance(first, Tag) else url
    markdown = _BLANK_LINES.sub("\n\n", "\n\n".join(writer.md))
    text = _BLANK_LINES.sub("\n\n", "\n\n".join(writer.txt))
    if not markdown.lstrip().startswith("# "):
        markdown = f"# {title}\n\n{markdown}" if markdown else f"# {title}"
    return ExtractedPage(title, markdown[:max_chars], text[:max_chars], links, asks_for_javascript)


def extract_pdf(data: bytes, url: str, *, max_chars: int = 400_000) -> ExtractedPage:
    """The text layer of a PDF (empty for a scanned one); the title from its metadata."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    pages = [(page.extract_text() or "").strip() for page in reader.pages]
    text = "\n\n".join(p for p in pages if p)[:max_chars]
    meta_title = reader.metadata.title if reader.metadata else None
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    title = _clean(str(meta_title or first_line or url.rsplit("/", 1)[-1]))[:200]
    return ExtractedPage(title, f"# {title}\n\n{text}" if text else f"# {title}", text)
