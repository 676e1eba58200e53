"""Plain-text notes, and the decoding of any text file's bytes (HTML, Markdown, text, CSV)."""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

from charset_normalizer import from_bytes

from indexer.extract.model import (
    BlockKind,
    BlockSink,
    ExtractedDocument,
    SectionBuilder,
    clean_inline,
)

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16's: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_WIDE_ENCODINGS = ("utf_16", "utf_32")
"""Encodings whose text holds NUL bytes (every ASCII character has one or three)."""
WESTERN_CODE_PAGE = "cp1252"
"""What a Windows editor saves "ANSI" text in for Western languages, and what Latin-1 files fit."""
_WESTERN_CHAOS_MARGIN = 0.1
"""How much more "mess" (charset-normalizer's chaos, 0-1) cp1252 may show than the best guess and
still be preferred. Short Western text fits many code pages about equally, and the detector's
first choice is then often cp1250, cp775 or even UTF-16, which turn "è" or "ü" into other
letters; text in another script (Cyrillic, Greek) read as cp1252 is far messier than that."""
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_MAX_CONTROL_SHARE = 0.01


class NotText(ValueError):
    """The bytes are binary data, not text in any encoding (the caller names the file)."""

    def __init__(self) -> None:
        super().__init__("the file holds binary data, not text")


def decode_text(data: bytes) -> str:
    """The text of a text file, whatever encoding it was saved in.

    A byte-order mark decides (UTF-8, UTF-16, UTF-32); else valid UTF-8 is read as UTF-8, exactly;
    else charset-normalizer detects the encoding: UTF-16 or UTF-32 without a BOM when the bytes
    hold NULs, otherwise a legacy code page, cp1252 whenever it reads the text about as cleanly as
    the detector's first choice (see ``_WESTERN_CHAOS_MARGIN``). Raises :class:`NotText` for
    binary data: nothing decodes it, or what decodes is full of control characters.
    """
    text = _decoded(data)
    if "\x00" in text or len(_CONTROL.findall(text)) > _MAX_CONTROL_SHARE * len(text):
        raise NotText
    return text


def _decoded(data: bytes) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                raise NotText from None
    wide = b"\x00" in data
    if not wide:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    matches = [
        match for match in from_bytes(data) if match.encoding.startswith(_WIDE_ENCODINGS) == wide
    ]
    if not matches:
        raise NotText
    best = matches[0]
    western = any(
        WESTERN_CODE_PAGE in match.could_be_from_charset
        and match.chaos <= best.chaos + _WESTERN_CHAOS_MARGIN
        for match in matches
    )
    return data.decode(WESTERN_CODE_PAGE if western else best.encoding, errors="replace")


STEP_LINE = re.compile(r"^\s*(\d+)[.)]\s+(.*)$")
BULLET_LINE = re.compile(r"^\s*[-*•]\s+(.*)$")


def extract_plain_text(text: str, *, fallback_title: str, fallback_url: str) -> ExtractedDocument:
    """Extract a plain-text note: paragraphs are separated by blank lines; a paragraph whose every
    line is ``1. ...`` or ``- ...`` becomes numbered steps or bullets. The title is the file name,
    since plain text has no reliable title line."""
    builder = SectionBuilder()
    for paragraph in re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n")):
        lines = [line for line in paragraph.split("\n") if line.strip()]
        if not lines:
            continue
        if all(STEP_LINE.match(line) for line in lines):
            _emit_lines(builder, lines, STEP_LINE, "step", lambda m: f"{m.group(1)}. {m.group(2)}")
        elif all(BULLET_LINE.match(line) for line in lines):
            _emit_lines(builder, lines, BULLET_LINE, "bullet", lambda m: f"- {m.group(1)}")
        else:
            builder.block("paragraph", clean_inline(paragraph))
    return ExtractedDocument(
        title=fallback_title, url=fallback_url, sections=builder.sections(fallback_title)
    )


def _emit_lines(
    sink: BlockSink,
    lines: list[str],
    pattern: re.Pattern[str],
    kind: BlockKind,
    render: Callable[[re.Match[str]], str],
) -> None:
    for line in lines:
        match = pattern.match(line)
        if match:
            sink.block(kind, clean_inline(render(match)))
