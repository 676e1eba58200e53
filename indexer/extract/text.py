"""Plain-text notes, and the decoding of any text file's bytes (HTML, Markdown, text, CSV): the
decoder every service shares (:mod:`contracts.textfiles`), re-exported for the indexer's readers."""

from __future__ import annotations

import re
from collections.abc import Callable

from contracts.textfiles import NotText, decode_text
from indexer.extract.model import (
    BlockKind,
    BlockSink,
    ExtractedDocument,
    SectionBuilder,
    clean_inline,
)

__all__ = ["NotText", "decode_text", "extract_plain_text"]

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
