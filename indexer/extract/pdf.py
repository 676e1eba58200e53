"""PDF documents: structure inferred from the text layer's fonts and positions (pypdf)."""

from __future__ import annotations

import io
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from indexer.extract.model import (
    BlockKind,
    BlockSink,
    ExtractedDocument,
    SectionBuilder,
    UnreadableDocument,
    clean_inline,
    fence,
)
from indexer.extract.text import STEP_LINE

logger = logging.getLogger(__name__)

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

    title = meta_title or (clean_inline(lines[0].text)[:120] if lines else "") or fallback_title
    builder = SectionBuilder()
    _PdfBlocks(builder, lines).emit()
    return ExtractedDocument(title=title, url=fallback_url, sections=builder.sections(title))


def _pdf_meta_title(reader: object) -> str | None:
    metadata = getattr(reader, "metadata", None)
    raw = getattr(metadata, "title", None) if metadata is not None else None
    title = clean_inline(str(raw)) if raw else ""
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
        return re.sub(r"\d+", "#", clean_inline(line.text).lower()), line.size

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
        text = clean_inline(line.text)
        if not text or _PDF_PAGE_NUMBER.match(text) or _PDF_LEADER_LINE.search(text):
            continue
        if id(line) in edges and key(line) in repeated:
            continue
        kept.append(line)
    return kept


class _PdfBlocks:
    """Turns the lines of a whole PDF into headings and typed blocks (see :func:`extract_pdf`)."""

    def __init__(self, sink: BlockSink, lines: list[_PdfLine]) -> None:
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
        text = clean_inline(line.text)
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
                text = clean_inline(line.text)
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
        text = clean_inline(line.text)
        if line.mono:
            if not self._code:
                self._flush()
            self._code.append(line.text.strip("\n"))
            return
        if self._code:
            self._flush()
        step = STEP_LINE.match(text)
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
            self._sink.block("paragraph", clean_inline(joined))
            self._paragraph = []
        if self._item is not None:
            self._sink.block(self._item[0], clean_inline(self._item[1]))
            self._item = None
        if self._code:
            self._sink.block("code", fence("\n".join(self._code)))
            self._code = []


def _join_lines(first: str, second: str) -> str:
    """Join two lines of one paragraph, undoing end-of-line hyphenation (``config-`` + ``ure``)."""
    if len(first) > 1 and first.endswith("-") and first[-2].isalpha() and second[:1].islower():
        return first[:-1] + second
    return f"{first} {second}"
