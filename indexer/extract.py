"""Extraction: a knowledge-base file in, the text a reader would see out, organised by section.

The chunker needs more than flat text: it must know where headings are (chunks never cross them),
which lines are numbered steps and which are code (those are never split). So extraction keeps the
document's structure as :class:`Section` objects, each with its heading path and a list of typed
:class:`Block` s, and drops everything a reader skips: navigation, headers and footers, scripts,
styles, forms.

Supported: HTML (``.html``, ``.htm``), Markdown (``.md``, ``.markdown``, with optional
``key: value`` front matter), plain text (``.txt``) and PDF (``.pdf``, its text layer only: a
scanned PDF without one yields no text). Anything else raises :class:`UnsupportedDocument`; a PDF
that cannot be parsed or is password-protected raises :class:`UnreadableDocument`. Nothing here
touches the network.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

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
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

logger = logging.getLogger(__name__)

BlockKind = Literal["paragraph", "step", "bullet", "code", "table"]

HTML_SUFFIXES = frozenset({".html", ".htm"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
TEXT_SUFFIXES = frozenset({".txt"})
PDF_SUFFIXES = frozenset({".pdf"})
SUPPORTED_SUFFIXES = HTML_SUFFIXES | MARKDOWN_SUFFIXES | TEXT_SUFFIXES | PDF_SUFFIXES

SECTION_SEPARATOR = " > "


class UnsupportedDocument(ValueError):
    """The file's type is not one the indexer can extract; callers skip it and report it."""

    def __init__(self, path: Path) -> None:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        super().__init__(
            f"cannot extract {path}: unsupported file type {path.suffix or '(none)'!r} "
            f"(supported: {supported})"
        )
        self.path = path


class UnreadableDocument(UnsupportedDocument):
    """The type is supported but this file cannot be read (a corrupt or password-protected PDF).

    A subclass of :class:`UnsupportedDocument` because callers treat both alike: skip the file and
    report why. The message names the problem, never the document's content.
    """

    def __init__(self, path: Path, problem: str) -> None:
        ValueError.__init__(self, f"cannot extract {path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Block:
    """A typed piece of a section, so the chunker knows what it may cut.

    ``paragraph`` text may be split into sentences by the chunker; ``step`` (``"3. ..."``),
    ``bullet`` (``"- ..."``), ``code`` (a fenced block) and ``table`` are kept whole whenever they
    fit in a chunk, because half a step or half a command is worse than none.
    """

    kind: BlockKind
    text: str


@dataclass(frozen=True, slots=True)
class Section:
    """The content under one heading, with the headings above it (document title first)."""

    path: tuple[str, ...]
    blocks: tuple[Block, ...]

    @property
    def heading(self) -> str:
        """The section path as one line, e.g. ``"Reset your VPN password > On Windows"``."""
        return SECTION_SEPARATOR.join(self.path)

    @property
    def text(self) -> str:
        return join_blocks(self.blocks)


@dataclass(frozen=True, slots=True)
class ExtractedDocument:
    """A document's readable content and the metadata the knowledge base files it under."""

    title: str
    url: str
    sections: tuple[Section, ...]
    category: str | None = None
    os: str | None = None
    source_path: Path | None = field(default=None, compare=False)
    explicit_id: str | None = None
    """An id chosen elsewhere (an upload's document id), used instead of the URL's hash."""

    @property
    def doc_id(self) -> str:
        """Stable identity across re-ingestion: ``explicit_id`` when set (uploads keep the id the
        gateway gave them, so a redelivered upload overwrites instead of duplicating), else the
        SHA-256 of the URL, so a moved file or a re-crawled page with the same URL replaces its
        earlier version instead of duplicating it."""
        if self.explicit_id:
            return self.explicit_id
        return hashlib.sha256(self.url.encode("utf-8")).hexdigest()

    @property
    def text(self) -> str:
        """The whole extracted text, headings included, as a reader would see it."""
        parts: list[str] = []
        for section in self.sections:
            parts.append(section.heading)
            parts.append(section.text)
        return "\n\n".join(parts)

    @property
    def content_hash(self) -> str:
        """SHA-256 of everything the index stores about the document.

        Covers the extracted text and the metadata (title, category, os), so editing only the
        front matter also counts as a change; markup-only edits (classes, scripts) do not.
        """
        canonical = json.dumps(
            {"title": self.title, "category": self.category, "os": self.os, "text": self.text},
            ensure_ascii=False,
            sort_keys=True,
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def join_blocks(blocks: tuple[Block, ...] | list[Block]) -> str:
    """Render blocks for display: list items on adjacent lines, other blocks a paragraph apart."""
    out: list[str] = []
    previous: Block | None = None
    for block in blocks:
        if previous is not None:
            out.append("\n" if _is_list_item(previous) and _is_list_item(block) else "\n\n")
        out.append(block.text)
        previous = block
    return "".join(out)


def _is_list_item(block: Block) -> bool:
    return block.kind in ("step", "bullet")


# --------------------------------------------------------------------------------------------
# Entry points


def extract_document(path: Path) -> ExtractedDocument:
    """Read ``path`` and extract its title, URL, metadata and sectioned text.

    Raises :class:`UnsupportedDocument` for file types other than HTML, Markdown, plain text and
    PDF (and its subclass :class:`UnreadableDocument` for a PDF that cannot be read). The URL falls
    back to the file's ``file://`` URI, so every document has a stable identity.
    """
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise UnsupportedDocument(path)
    doc = _extract(path.read_bytes(), path, fallback_url=path.resolve().as_uri())
    return dataclasses.replace(doc, source_path=path)


def extract_bytes(data: bytes, filename: str, url: str) -> ExtractedDocument:
    """Extract an uploaded file's content; its type comes from ``filename``'s extension.

    ``url`` names the document whatever its content claims (a Markdown front-matter ``url`` or an
    HTML canonical link are ignored): an upload is known, cited and deleted by its upload URL.
    The title falls back to the file name without its extension. Raises like
    :func:`extract_document`.
    """
    path = Path(filename)
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise UnsupportedDocument(path)
    doc = _extract(data, path, fallback_url=url)
    return dataclasses.replace(doc, url=url)


def _extract(data: bytes, path: Path, *, fallback_url: str) -> ExtractedDocument:
    suffix = path.suffix.lower()
    fallback_title = path.stem
    if suffix in PDF_SUFFIXES:
        return extract_pdf(
            data, fallback_title=fallback_title, fallback_url=fallback_url, path=path
        )
    text = decode_text(data)
    if suffix in HTML_SUFFIXES:
        return extract_html(text, fallback_title=fallback_title, fallback_url=fallback_url)
    if suffix in MARKDOWN_SUFFIXES:
        return extract_markdown(text, fallback_title=fallback_title, fallback_url=fallback_url)
    return extract_plain_text(text, fallback_title=fallback_title, fallback_url=fallback_url)


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM) when valid, else Latin-1, which decodes any byte sequence."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# --------------------------------------------------------------------------------------------
# Building sections from a stream of headings and blocks


class _BlockSink(Protocol):
    def heading(self, level: int, text: str) -> None: ...

    def block(self, kind: BlockKind, text: str) -> None: ...


class _SectionBuilder:
    """Turns a flat stream of headings and blocks into sections with heading paths.

    A heading closes the current section and replaces every heading of the same or a deeper level
    on the path. The document title always heads the path, so a chunk from a Markdown article whose
    title lives in front matter still embeds with it.
    """

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []
        self._blocks: list[Block] = []
        self._sections: list[tuple[tuple[str, ...], tuple[Block, ...]]] = []
        self.first_h1: str | None = None

    def heading(self, level: int, text: str) -> None:
        text = _clean_inline(text)
        if not text:
            return
        self._flush()
        if level == 1 and self.first_h1 is None:
            self.first_h1 = text
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text))

    def block(self, kind: BlockKind, text: str) -> None:
        if text.strip():
            self._blocks.append(Block(kind, text))

    def _flush(self) -> None:
        if self._blocks:
            path = tuple(text for _, text in self._stack)
            self._sections.append((path, tuple(self._blocks)))
            self._blocks = []

    def sections(self, title: str) -> tuple[Section, ...]:
        self._flush()
        result: list[Section] = []
        for path, blocks in self._sections:
            full_path = path if path and path[0] == title else (title, *path)
            result.append(Section(full_path, blocks))
        return tuple(result)


class _ItemCollector:
    """Collects the blocks inside one list item; headings there are just text."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []

    def heading(self, level: int, text: str) -> None:
        self.block("paragraph", _clean_inline(text))

    def block(self, kind: BlockKind, text: str) -> None:
        if text.strip():
            self.blocks.append(Block(kind, text))


def _render_item(marker: str, blocks: list[Block]) -> str:
    """One list item as Markdown: ``marker`` on the first line, later lines indented under it."""
    lines = "\n".join(block.text for block in blocks).split("\n")
    indent = " " * (len(marker) + 1)
    rendered = [f"{marker} {lines[0]}".rstrip()]
    rendered.extend(f"{indent}{line}" if line.strip() else "" for line in lines[1:])
    return "\n".join(rendered)


def _fence(code: str, language: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside the code."""
    code = code.strip("\n")
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{code}\n{fence}"


_WHITESPACE = re.compile(r"\s+")


def _clean_inline(text: str) -> str:
    """Collapse whitespace and drop zero-width characters that anchor links leave behind."""
    text = text.replace("\u200b", "").replace("\ufeff", "").replace("\xa0", " ")
    return _WHITESPACE.sub(" ", text).strip()


# --------------------------------------------------------------------------------------------
# HTML

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
    page_title = _clean_inline(soup.title.get_text()) if soup.title else ""
    canonical = _canonical_url(soup)
    root: Tag = (
        soup.select_one("main")
        or soup.select_one('[role="main"]')
        or soup.select_one("article")
        or soup.body
        or soup
    )
    _drop_boilerplate(root)

    builder = _SectionBuilder()
    _HtmlWalker(builder).walk(root)
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


def _drop_boilerplate(root: Tag) -> None:
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


class _HtmlWalker:
    """Walks the DOM in document order, emitting headings and typed blocks to a sink.

    Inline text is buffered and flushed as a paragraph at every block boundary, so text sitting
    directly in a ``<div>`` (common in generated help) is not lost.
    """

    def __init__(self, sink: _BlockSink) -> None:
        self._sink = sink
        self._inline: list[str] = []

    def walk(self, node: Tag) -> None:
        self._walk_children(node)
        self._flush()

    def _flush(self) -> None:
        text = _clean_inline("".join(self._inline))
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
            self._sink.block("code", _fence(_pre_text(node), _code_language(node)))
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
        number = _list_start(node.get("start")) if ordered else 1
        for item in node.find_all("li", recursive=False):
            collector = _ItemCollector()
            _HtmlWalker(collector).walk(item)
            if not collector.blocks:
                continue
            marker = f"{number}." if ordered else "-"
            rendered = _render_item(marker, collector.blocks)
            self._sink.block("step" if ordered else "bullet", rendered)
            number += 1


def _list_start(value: object) -> int:
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
        cells = [_clean_inline(_inline_text(cell)) for cell in row.find_all(("td", "th"))]
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------
# Markdown

_MARKDOWN = MarkdownIt("commonmark").enable("table")
_FRONT_MATTER_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$")


def extract_markdown(text: str, *, fallback_title: str, fallback_url: str) -> ExtractedDocument:
    """Extract a Markdown article.

    Front matter (``---`` lines around ``key: value`` pairs) may give ``title``, ``url``,
    ``category`` and ``os``. Title: front matter, else the first ``# heading``, else
    ``fallback_title``. URL: front matter, else ``fallback_url``.
    """
    meta, body = split_front_matter(text)
    builder = _SectionBuilder()
    _MarkdownWalker(builder).walk(SyntaxTreeNode(_MARKDOWN.parse(body)))
    title = meta.get("title") or builder.first_h1 or fallback_title
    return ExtractedDocument(
        title=title,
        url=meta.get("url") or fallback_url,
        sections=builder.sections(title),
        category=meta.get("category") or None,
        os=meta.get("os") or None,
    )


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split ``---``-delimited front matter of simple ``key: value`` lines from the body.

    Deliberately not YAML: the demo articles need flat strings only, and a YAML parser would be
    one more dependency. Keys are lower-cased; surrounding quotes are stripped; lines that are not
    ``key: value`` (comments, blank lines) are ignored. Text without a closing ``---`` (or ``...``)
    line is treated as having no front matter.
    """
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            meta: dict[str, str] = {}
            for line in lines[1:index]:
                match = _FRONT_MATTER_KEY.match(line.strip())
                if match:
                    meta[match.group(1).lower()] = _unquote(match.group(2).strip())
            return meta, "".join(lines[index + 1 :])
    return {}, text


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


class _MarkdownWalker:
    """Walks markdown-it's syntax tree, emitting headings and typed blocks to a sink."""

    def __init__(self, sink: _BlockSink) -> None:
        self._sink = sink

    def walk(self, node: SyntaxTreeNode) -> None:
        for child in node.children:
            self._visit(child)

    def _visit(self, node: SyntaxTreeNode) -> None:
        kind = node.type
        if kind == "heading":
            self._sink.heading(int(node.tag[1:]), _md_inline_text(node))
        elif kind == "paragraph":
            self._sink.block("paragraph", _clean_inline(_md_inline_text(node)))
        elif kind in ("fence", "code_block"):
            language = node.info.split()[0] if node.info.strip() else ""
            self._sink.block("code", _fence(node.content, language))
        elif kind in ("bullet_list", "ordered_list"):
            self._emit_list(node, ordered=kind == "ordered_list")
        elif kind == "table":
            self._sink.block("table", _md_table_text(node))
        elif kind == "html_block":
            soup = BeautifulSoup(node.content, "html.parser")
            _drop_boilerplate(soup)
            _HtmlWalker(self._sink).walk(soup)
        elif kind == "hr":
            return
        else:  # blockquote and any container a plugin adds: their content counts
            self.walk(node)

    def _emit_list(self, node: SyntaxTreeNode, *, ordered: bool) -> None:
        number = _list_start(node.attrs.get("start", 1)) if ordered else 1
        for item in node.children:
            collector = _ItemCollector()
            _MarkdownWalker(collector).walk(item)
            if not collector.blocks:
                continue
            marker = f"{number}." if ordered else "-"
            rendered = _render_item(marker, collector.blocks)
            self._sink.block("step" if ordered else "bullet", rendered)
            number += 1


def _md_inline_text(node: SyntaxTreeNode) -> str:
    """Plain text of a node's inline content: link text kept, images and raw HTML dropped."""
    parts: list[str] = []

    def visit(current: SyntaxTreeNode) -> None:
        for child in current.children:
            if child.type in ("text", "code_inline"):
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            elif child.type in ("image", "html_inline"):
                continue
            else:
                visit(child)

    visit(node)
    return "".join(parts)


def _md_table_text(table: SyntaxTreeNode) -> str:
    rows: list[str] = []

    def visit(node: SyntaxTreeNode) -> None:
        for child in node.children:
            if child.type == "tr":
                cells = [_clean_inline(_md_inline_text(cell)) for cell in child.children]
                if any(cells):
                    rows.append(" | ".join(cells))
            else:
                visit(child)

    visit(table)
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------
# Plain text

_STEP_LINE = re.compile(r"^\s*(\d+)[.)]\s+(.*)$")
_BULLET_LINE = re.compile(r"^\s*[-*•]\s+(.*)$")


def extract_plain_text(text: str, *, fallback_title: str, fallback_url: str) -> ExtractedDocument:
    """Extract a plain-text note: paragraphs are separated by blank lines; a paragraph whose every
    line is ``1. ...`` or ``- ...`` becomes numbered steps or bullets. The title is the file name,
    since plain text has no reliable title line."""
    builder = _SectionBuilder()
    for paragraph in re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n")):
        lines = [line for line in paragraph.split("\n") if line.strip()]
        if not lines:
            continue
        if all(_STEP_LINE.match(line) for line in lines):
            _emit_lines(builder, lines, _STEP_LINE, "step", lambda m: f"{m.group(1)}. {m.group(2)}")
        elif all(_BULLET_LINE.match(line) for line in lines):
            _emit_lines(builder, lines, _BULLET_LINE, "bullet", lambda m: f"- {m.group(1)}")
        else:
            builder.block("paragraph", _clean_inline(paragraph))
    return ExtractedDocument(
        title=fallback_title, url=fallback_url, sections=builder.sections(fallback_title)
    )


def _emit_lines(
    sink: _BlockSink,
    lines: list[str],
    pattern: re.Pattern[str],
    kind: BlockKind,
    render: Callable[[re.Match[str]], str],
) -> None:
    for line in lines:
        match = pattern.match(line)
        if match:
            sink.block(kind, _clean_inline(render(match)))


# --------------------------------------------------------------------------------------------
# PDF

_PDF_BULLET_LINE = re.compile(r"^\s*[-*•◦▪‣●·\uf0b7\uf0a7]\s+(.*)$")
_PDF_PAGE_NUMBER = re.compile(r"^(\d{1,4}|[ivxlc]{1,6})$", re.IGNORECASE)
_PDF_LEADER_LINE = re.compile(r"(?:\.\s*){4,}\S*$")
"""A table-of-contents entry: dot leaders, then a page number."""
_PDF_MONOSPACE = re.compile(
    r"mono|courier|consol|code|nimbusmon|menlo|monaco|cmtt|lmtt|typewriter", re.IGNORECASE
)
_PDF_HEADING_RATIO = 1.15
"""A line counts as a heading when its font is at least this much larger than the body's."""
_PDF_MAX_HEADING_CHARS = 150
_PDF_PARAGRAPH_GAP = 1.5
"""A vertical gap above this many font sizes between two lines starts a new paragraph."""
_PDF_UNHELPFUL_TITLES = re.compile(
    r"^(untitled|microsoft (word|powerpoint) - .*|.*\.(docx?|pptx?|odt|pdf|rtf|tex))$",
    re.IGNORECASE,
)


@dataclass(slots=True)
class _PdfLine:
    """One line of a page's text layer, with what headings and paragraphs are told apart by."""

    text: str
    size: float
    """Font size (points, after text and page transforms) of most of the line's characters."""
    y: float | None
    """Baseline height on the page; None when the PDF did not position the line explicitly."""
    mono: bool
    """Every character is in a monospaced font: code or a command."""
    page: int


def extract_pdf(
    data: bytes, *, fallback_title: str, fallback_url: str, path: Path | None = None
) -> ExtractedDocument:
    """Extract a PDF's text layer with pypdf.

    What a PDF gives is positioned text, not structure, so the structure is inferred and kept
    deliberately simple:

    * **Title:** the metadata title when it is a real one (not empty, "Untitled" or a file name),
      else the first line of text, else ``fallback_title``.
    * **Sections:** when the document has at least two lines set in a font clearly larger than the
      body text, those lines are headings (bigger font, higher level) and sections follow them
      across pages. Otherwise each page is a section ("Page 3"), which is all the file says.
    * **Blocks:** lines starting with ``1.`` or ``1)`` are steps and bullet glyphs make bullets (a
      wrapped item's next lines join it); lines set entirely in a monospaced font are code; other
      lines join into paragraphs, which end at a larger vertical gap or a page break. Hyphenated
      line ends are joined.
    * **Dropped:** page numbers, table-of-contents lines with dot leaders, and running headers or
      footers (the same line on at least three pages and more than half of them).

    A scanned PDF without a text layer yields no sections; OCR is a separate service's job.
    Raises :class:`UnreadableDocument` for a file pypdf cannot parse or a password-protected one.
    """
    from pypdf import PdfReader

    where = path or Path(fallback_title + ".pdf")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument(where, "the PDF is password-protected")
        pages = list(reader.pages)
        meta_title = _pdf_meta_title(reader)
    except UnreadableDocument:
        raise
    except Exception as exc:  # pypdf raises many types for damaged files; all mean "unreadable"
        raise UnreadableDocument(where, f"not a readable PDF ({type(exc).__name__})") from None

    lines: list[_PdfLine] = []
    for number, page in enumerate(pages, start=1):
        try:
            lines.extend(_pdf_page_lines(page, number))
        except Exception as exc:  # one damaged page should not cost the rest of the document
            logger.warning(
                "skipping unreadable page %d of %s (%s)", number, where, type(exc).__name__
            )
    lines = _drop_pdf_boilerplate(lines, page_count=len(pages))

    title = meta_title or (_clean_inline(lines[0].text)[:120] if lines else "") or fallback_title
    builder = _SectionBuilder()
    _PdfBlocks(builder, lines).emit()
    return ExtractedDocument(title=title, url=fallback_url, sections=builder.sections(title))


def _pdf_meta_title(reader: object) -> str | None:
    metadata = getattr(reader, "metadata", None)
    raw = getattr(metadata, "title", None) if metadata is not None else None
    title = _clean_inline(str(raw)) if raw else ""
    if not title or _PDF_UNHELPFUL_TITLES.match(title):
        return None
    return title


def _pdf_page_lines(page: object, number: int) -> list[_PdfLine]:
    """The page's lines in content order, built from pypdf's text runs."""
    # Each fragment: text, effective font size, baseline y, monospaced.
    fragments: list[list[tuple[str, float, float | None, bool]]] = [[]]

    def visit(text: str, cm: list[float], tm: list[float], font: object, font_size: float) -> None:
        scale = math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])
        size = round(float(font_size) * (scale or 1.0) * 2) / 2
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        mono = _is_monospace(font)
        pieces = text.split("\n")
        for index, piece in enumerate(pieces):
            if index:
                fragments.append([])
            if piece:
                fragments[-1].append((piece, size, y if y else None, mono))

    page.extract_text(visitor_text=visit)  # type: ignore[attr-defined]
    lines: list[_PdfLine] = []
    for parts in fragments:
        text = "".join(piece for piece, *_ in parts).replace("\x00", "")
        if not text.strip():
            continue
        weights: Counter[float] = Counter()
        for piece, size, _, _ in parts:
            weights[size] += len(piece.strip())
        y = next((y for piece, _, y, _ in parts if piece.strip() and y is not None), None)
        mono = all(m for piece, _, _, m in parts if piece.strip())
        lines.append(_PdfLine(text.rstrip(), weights.most_common(1)[0][0], y, mono, number))
    return lines


def _is_monospace(font: object) -> bool:
    """A fixed-pitch font, by its descriptor's FixedPitch flag or its name (most code fonts)."""
    if not isinstance(font, dict):
        return False
    if _PDF_MONOSPACE.search(str(font.get("/BaseFont", ""))):
        return True
    try:
        descriptor = font.get("/FontDescriptor")
        descriptor = descriptor.get_object() if descriptor is not None else None
        return bool(int(descriptor.get("/Flags", 0)) & 1) if isinstance(descriptor, dict) else False
    except (AttributeError, TypeError, ValueError):
        return False


def _drop_pdf_boilerplate(lines: list[_PdfLine], *, page_count: int) -> list[_PdfLine]:
    """Without page numbers, table-of-contents entries and running headers and footers.

    A running header or footer is one of a page's first or last two lines that recurs (digits
    aside, so "Page 3 of 9" recurs) at the same size on at least three pages and on more than
    half of them.
    """

    def key(line: _PdfLine) -> tuple[str, float]:
        return re.sub(r"\d+", "#", _clean_inline(line.text).lower()), line.size

    by_page: dict[int, list[_PdfLine]] = {}
    for line in lines:
        by_page.setdefault(line.page, []).append(line)
    edges = {id(line) for page in by_page.values() for line in (*page[:2], *page[-2:])}
    pages_with: dict[tuple[str, float], set[int]] = {}
    for line in lines:
        if id(line) in edges:
            pages_with.setdefault(key(line), set()).add(line.page)
    repeated = {
        k for k, pages in pages_with.items() if len(pages) >= 3 and len(pages) > page_count / 2
    }
    kept: list[_PdfLine] = []
    for line in lines:
        text = _clean_inline(line.text)
        if not text or _PDF_PAGE_NUMBER.match(text) or _PDF_LEADER_LINE.search(text):
            continue
        if id(line) in edges and key(line) in repeated:
            continue
        kept.append(line)
    return kept


class _PdfBlocks:
    """Turns the lines of a whole PDF into headings and typed blocks (see :func:`extract_pdf`)."""

    def __init__(self, sink: _BlockSink, lines: list[_PdfLine]) -> None:
        self._sink = sink
        self._lines = lines
        self._paragraph: list[str] = []
        self._item: tuple[BlockKind, str] | None = None
        self._code: list[str] = []
        sizes: Counter[float] = Counter()
        for line in lines:
            sizes[line.size] += len(line.text.strip())
        body = sizes.most_common(1)[0][0] if sizes else 0.0
        self._heading_levels = self._levels(body)

    def _levels(self, body: float) -> dict[float, int]:
        """Heading font sizes, largest first, mapped to levels 1, 2, ...; empty when the document
        has fewer than two heading lines, and is then sectioned by page."""
        headings = [line for line in self._lines if self._looks_like_heading(line, body)]
        if len(headings) < 2:
            return {}
        ordered = sorted({line.size for line in headings}, reverse=True)
        return {size: min(level, 6) for level, size in enumerate(ordered, start=1)}

    @staticmethod
    def _looks_like_heading(line: _PdfLine, body: float) -> bool:
        text = _clean_inline(line.text)
        return (
            body > 0
            and line.size >= body * _PDF_HEADING_RATIO
            and len(text) <= _PDF_MAX_HEADING_CHARS
            and not line.mono
            and any(ch.isalpha() for ch in text)
        )

    def emit(self) -> None:
        previous: _PdfLine | None = None
        heading: tuple[int, str, _PdfLine] | None = None  # a heading may wrap onto more lines
        for line in self._lines:
            new_page = previous is None or line.page != previous.page
            if new_page and not self._heading_levels:
                self._flush()
                self._sink.heading(1, f"Page {line.page}")
            level = self._heading_levels.get(line.size)
            if level is not None and not line.mono:
                text = _clean_inline(line.text)
                if heading and heading[0] == level and not self._gap(heading[2], line):
                    heading = (level, _join_lines(heading[1], text), line)
                else:
                    self._emit_heading(heading)
                    self._flush()
                    heading = (level, text, line)
                previous = line
                continue
            self._emit_heading(heading)
            heading = None
            self._add(line, broken=new_page or (previous is not None and self._gap(previous, line)))
            previous = line
        self._emit_heading(heading)
        self._flush()

    def _emit_heading(self, heading: tuple[int, str, _PdfLine] | None) -> None:
        if heading is not None:
            self._sink.heading(heading[0], heading[1])

    @staticmethod
    def _gap(above: _PdfLine, below: _PdfLine) -> bool:
        """True when ``below`` does not simply continue ``above``: another page, a column jump, or
        more vertical space than ordinary line spacing."""
        if above.page != below.page:
            return True
        if above.y is None or below.y is None:
            return False
        distance = above.y - below.y
        return distance < 0 or distance > _PDF_PARAGRAPH_GAP * max(above.size, below.size, 1.0)

    def _add(self, line: _PdfLine, *, broken: bool) -> None:
        text = _clean_inline(line.text)
        if line.mono:
            if not self._code:
                self._flush()
            self._code.append(line.text.strip("\n"))
            return
        if self._code:
            self._flush()
        step = _STEP_LINE.match(text)
        bullet = None if step else _PDF_BULLET_LINE.match(text)
        if step or bullet:
            self._flush()
            self._item = (
                ("step", f"{step.group(1)}. {step.group(2)}")
                if step
                else ("bullet", f"- {bullet.group(1)}" if bullet else text)
            )
            return
        if broken:
            self._flush()
        if self._item is not None:
            kind, item_text = self._item
            self._item = (kind, _join_lines(item_text, text))
        else:
            self._paragraph.append(text)

    def _flush(self) -> None:
        if self._paragraph:
            joined = self._paragraph[0]
            for text in self._paragraph[1:]:
                joined = _join_lines(joined, text)
            self._sink.block("paragraph", _clean_inline(joined))
            self._paragraph = []
        if self._item is not None:
            self._sink.block(self._item[0], _clean_inline(self._item[1]))
            self._item = None
        if self._code:
            self._sink.block("code", _fence("\n".join(self._code)))
            self._code = []


def _join_lines(first: str, second: str) -> str:
    """Join two lines of one paragraph, undoing end-of-line hyphenation (``config-`` + ``ure``)."""
    if len(first) > 1 and first.endswith("-") and first[-2].isalpha() and second[:1].islower():
        return first[:-1] + second
    return f"{first} {second}"
