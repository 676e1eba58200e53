"""The extracted form of a document, and the builder every format's reader fills.

A document is kept as :class:`Section` objects, each with its heading path and a list of typed
:class:`Block` s, because the chunker must know where headings are (chunks never cross them) and
which lines are numbered steps, code or tables (those are never split). The format readers
(:mod:`indexer.extract.html`, ``markdown``, ``text``, ``pdf``) walk their input and feed a
:class:`SectionBuilder` headings and blocks in document order.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from contracts.readers import Readers

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
    readers: Readers | None = None
    """Who may read it, when an admin restricted an upload; None is everyone. (Synced source
    documents file their readers through :class:`indexer.service.Versioned` instead.)"""

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
# Building sections from a stream of headings and blocks


class BlockSink(Protocol):
    def heading(self, level: int, text: str) -> None: ...

    def block(self, kind: BlockKind, text: str) -> None: ...


class SectionBuilder:
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
        text = clean_inline(text)
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


class ItemCollector:
    """Collects the blocks inside one list item; headings there are just text."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []

    def heading(self, level: int, text: str) -> None:
        self.block("paragraph", clean_inline(text))

    def block(self, kind: BlockKind, text: str) -> None:
        if text.strip():
            self.blocks.append(Block(kind, text))


def render_item(marker: str, blocks: list[Block]) -> str:
    """One list item as Markdown: ``marker`` on the first line, later lines indented under it."""
    lines = "\n".join(block.text for block in blocks).split("\n")
    indent = " " * (len(marker) + 1)
    rendered = [f"{marker} {lines[0]}".rstrip()]
    rendered.extend(f"{indent}{line}" if line.strip() else "" for line in lines[1:])
    return "\n".join(rendered)


def fence(code: str, language: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside the code."""
    code = code.strip("\n")
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{code}\n{fence}"


_WHITESPACE = re.compile(r"\s+")


def clean_inline(text: str) -> str:
    """Collapse whitespace and drop zero-width characters that anchor links leave behind."""
    text = text.replace("\u200b", "").replace("\ufeff", "").replace("\xa0", " ")
    return _WHITESPACE.sub(" ", text).strip()
