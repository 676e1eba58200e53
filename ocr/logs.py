"""Log files: bytes in, the lines worth reading and their error signatures out.

* :func:`decode_log` reads the log with the decoder every service shares
  (:mod:`contracts.textfiles`: BOMs first, then UTF-8, UTF-16/32 without a BOM, then
  charset-normalizer for legacy code pages, cp1252 preferred when it reads as cleanly), refuses
  binary content (nothing decodes, NULs or control bytes) as ``unsupported_media_type`` and drops
  terminal colours and CR line ends.
* :func:`trim_log` keeps a long log's head, its tail and its error-bearing lines in between, each
  gap marked ``… N lines omitted …``, bounded by the line and character limits of the settings.
* :func:`read_log` does both and adds the signatures (:mod:`ocr.signatures`) of the whole log,
  not only of the lines kept, and the first error's timestamp.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contracts.textfiles import NotText, read_text
from ocr import signatures
from ocr.config import OcrSettings
from ocr.errors import AttachmentRefused

# Terminal colours and cursor moves in captured console output.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")

BINARY_DETAIL = (
    "This file does not look like a text log (it holds binary data). Attach the log as plain "
    "text (.txt, .log, .json, .xml or .csv), or a screenshot of the error."
)


@dataclass(frozen=True)
class LogText:
    """What is kept of a log."""

    text: str
    signatures: list[str]
    first_error_at: str | None
    encoding: str
    lines: int
    """Lines in the whole log."""
    omitted: int
    """Lines left out of :attr:`text`."""


def read_log(data: bytes, settings: OcrSettings) -> LogText:
    if len(data) > settings.max_log_bytes:
        raise AttachmentRefused(
            "attachment_too_large",
            f"The log file is larger than {settings.max_log_bytes // 1024} KiB. Attach the part "
            "around the error (for example the last few thousand lines).",
        )
    text, encoding = decode_log(data)
    if not text.strip():
        raise AttachmentRefused(
            "extraction_failed", "The log file is empty. Attach the log that shows the error."
        )
    found = signatures.scan(text.removesuffix("\n"))
    lines = found.lines
    kept, omitted = trim_log(lines, settings, found.error_lines)
    return LogText(
        text=kept,
        signatures=found.signatures(settings.max_signatures),
        first_error_at=found.first_error_at(),
        encoding=encoding,
        lines=len(lines),
        omitted=omitted,
    )


def decode_log(data: bytes) -> tuple[str, str]:
    """The text of a log and the encoding it was read with; binary content is refused."""
    try:
        text, encoding = read_text(data)
    except NotText as exc:
        raise AttachmentRefused("unsupported_media_type", BINARY_DETAIL) from exc
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n"), encoding


def omitted_marker(count: int) -> str:
    return f"… {count} line{'s' if count != 1 else ''} omitted …"


def trim_log(
    lines: list[str], settings: OcrSettings, error_lines: list[int] | None = None
) -> tuple[str, int]:
    """The lines worth keeping, joined, with a marker for every gap; and how many were left out.

    A log within both limits is kept whole (long lines cut). Otherwise the first
    ``log_head_lines`` and last ``log_tail_lines`` lines are kept, and error-bearing lines in
    between up to ``log_max_lines`` in all (the earliest and the latest errors, half each). When
    that is still over ``log_max_chars``, lines are dropped from the largest of head, errors and
    tail (the head from its end, the tail from its start, errors from their middle) until it fits.
    """
    cut = [_cut(line, settings.max_line_chars) for line in lines]
    total = len(cut)
    if total <= settings.log_max_lines and _length(cut, range(total)) <= settings.log_max_chars:
        return "\n".join(cut), 0

    head = list(range(min(settings.log_head_lines, total)))
    tail_start = max(len(head), total - settings.log_tail_lines)
    tail = list(range(tail_start, total))
    room = settings.log_max_lines - len(head) - len(tail)
    if error_lines is None:
        error_lines = signatures.scan("\n".join(lines)).error_lines
    errors = [i for i in error_lines if len(head) <= i < tail_start]
    if len(errors) > room:
        errors = errors[: (room + 1) // 2] + errors[len(errors) - room // 2 :] if room else []

    groups = [head, errors, tail]
    while _length(cut, sorted(i for g in groups for i in g)) > settings.log_max_chars:
        largest = max(groups, key=lambda g: sum(len(cut[i]) + 1 for i in g))
        if not largest:
            break
        if largest is head:
            head.pop()
        elif largest is tail:
            tail.pop(0)
        else:
            errors.pop(len(errors) // 2)

    kept = sorted(i for g in groups for i in g)
    out: list[str] = []
    previous = -1
    for index in kept:
        if index > previous + 1:
            out.append(omitted_marker(index - previous - 1))
        out.append(cut[index])
        previous = index
    if previous < total - 1:
        out.append(omitted_marker(total - 1 - previous))
    return "\n".join(out), total - len(kept)


def _cut(line: str, limit: int) -> str:
    line = line.rstrip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _length(lines: list[str], indices: range | list[int]) -> int:
    """Characters of the kept lines joined, with a generous allowance for gap markers."""
    chosen = list(indices)
    gaps = sum(1 for a, b in zip([-1, *chosen], [*chosen, len(lines)], strict=True) if b > a + 1)
    return sum(len(lines[i]) + 1 for i in chosen) + gaps * 28
