"""Section-aware chunking: an extracted document in, retrieval-sized chunks out.

Rules a caller can rely on:

* A chunk never spans two sections; its ``section_path`` is the heading path of the one it is from.
* Inside a section the text is cut into *units*: sentences of paragraphs, and whole steps, bullets,
  code blocks and tables. Units are packed in order up to ``max_chars`` of body, so a numbered step
  or a command is never cut in half, unless that single unit is longer than ``max_chars`` on its
  own; then it is split at line, then word, boundaries (code pieces are re-fenced).
* Consecutive chunks of a section share ``overlap_sentences`` units, so a sentence that needs its
  predecessor still finds it in the same chunk.
* A section's trailing chunk shorter than ``min_chars`` takes units from the chunk before it (the
  two are re-split as evenly as ``max_chars`` allows), so a section does not end in a stray
  sentence. A section that is short as a whole stays one short chunk: crossing a heading would be
  worse.
* ``body`` is what a user is shown; ``text`` (section path line + body) is what is embedded, so a
  chunk such as "3. Click Save." still matches a query about resetting the VPN password.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from indexer.extract import SECTION_SEPARATOR, Block, BlockKind, ExtractedDocument, Section


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable piece of a document, in document order (``ordinal`` starts at 0)."""

    ordinal: int
    section_path: tuple[str, ...]
    body: str

    @property
    def section(self) -> str:
        """The heading path as one line, e.g. ``"Reset your VPN password > On Windows"``."""
        return SECTION_SEPARATOR.join(self.section_path)

    @property
    def text(self) -> str:
        """What gets embedded: the section path as a heading line, then the body."""
        return f"{self.section}\n\n{self.body}" if self.section_path else self.body


@dataclass(frozen=True, slots=True)
class _Unit:
    """The smallest piece the packer moves: a sentence, or a whole step/bullet/code/table."""

    text: str
    kind: BlockKind
    block_index: int
    # Separator to the previous unit when both come from the same block: " " between sentences,
    # "\n" between the line-split pieces of an oversized unit.
    same_block_separator: str = " "


def chunk_document(
    doc: ExtractedDocument,
    max_chars: int,
    min_chars: int,
    overlap_sentences: int,
) -> list[Chunk]:
    """Cut ``doc`` into chunks section by section; see the module docstring for the guarantees.

    ``max_chars`` bounds the body (the section line in ``text`` comes on top); ``min_chars`` must
    be smaller than ``max_chars``.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    if not 0 <= min_chars < max_chars:
        raise ValueError("min_chars must be at least 0 and smaller than max_chars")
    if overlap_sentences < 0:
        raise ValueError("overlap_sentences must not be negative")

    chunks: list[Chunk] = []
    for section in doc.sections:
        for units in _chunk_section(section, max_chars, min_chars, overlap_sentences):
            chunks.append(Chunk(len(chunks), section.path, _join(units)))
    return chunks


def _chunk_section(
    section: Section, max_chars: int, min_chars: int, overlap: int
) -> list[list[_Unit]]:
    units = [
        unit
        for index, block in enumerate(section.blocks)
        for unit in _block_units(block, index, max_chars)
    ]
    if not units:
        return []
    packed = _pack(units, max_chars, overlap)
    return _fix_small_tail(packed, max_chars, min_chars, overlap)


# --------------------------------------------------------------------------------------------
# Units

# A sentence ends at . ! ? or … (plus closing quotes/brackets) followed by whitespace and a
# capital, digit or opening quote. Lower-case continuations ("e.g. this") never split.
_SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?…])([\"'”’)\]]*)(\s+)(?=[\"'“‘(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset({"e.g", "i.e", "mr", "mrs", "ms", "dr", "vs", "fig", "approx", "incl"})


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences with a regex: good enough for help articles, no model needed."""
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_BOUNDARY.finditer(text):
        end = match.start(2)
        candidate = text[start:end]
        last_word = candidate.rsplit(maxsplit=1)[-1].rstrip(".").lower() if candidate else ""
        if last_word in _ABBREVIATIONS:
            continue
        if candidate.strip():
            sentences.append(candidate.strip())
        start = match.end(2)
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _block_units(block: Block, index: int, max_chars: int) -> list[_Unit]:
    if block.kind == "paragraph":
        pieces = [
            piece
            for sentence in split_sentences(block.text)
            for piece in (
                [sentence] if len(sentence) <= max_chars else _split_text(sentence, max_chars)
            )
        ]
        return [_Unit(piece, block.kind, index) for piece in pieces]
    if len(block.text) <= max_chars:
        return [_Unit(block.text, block.kind, index)]
    if block.kind == "code":
        pieces = _split_code(block.text, max_chars)
    else:
        pieces = _split_text(block.text, max_chars)
    return [_Unit(piece, block.kind, index, same_block_separator="\n") for piece in pieces]


def _split_text(text: str, limit: int) -> list[str]:
    """Split an oversized unit at line boundaries, then word boundaries, then hard."""
    pieces: list[str] = []
    current = ""

    def add(fragment: str, separator: str) -> None:
        nonlocal current
        if not current:
            current = fragment
        elif len(current) + len(separator) + len(fragment) <= limit:
            current += separator + fragment
        else:
            pieces.append(current)
            current = fragment

    for line in text.split("\n"):
        if len(line) <= limit:
            add(line, "\n")
            continue
        separator = "\n"
        for word in line.split():
            for start in range(0, len(word), limit):
                add(word[start : start + limit], separator)
                separator = " "
    if current.strip():
        pieces.append(current)
    return [piece for piece in pieces if piece.strip()]


def _split_code(fenced: str, limit: int) -> list[str]:
    """Split an oversized fenced block into several fenced blocks, each within ``limit``."""
    lines = fenced.split("\n")
    opening, closing = lines[0], lines[-1]
    inner_limit = max(1, limit - len(opening) - len(closing) - 2)
    return [
        f"{opening}\n{piece}\n{closing}"
        for piece in _split_text("\n".join(lines[1:-1]), inner_limit)
    ]


def _join(units: Sequence[_Unit]) -> str:
    """Render units for display: sentences of one paragraph on one line, list items on adjacent
    lines, everything else a blank line apart."""
    out: list[str] = []
    previous: _Unit | None = None
    for unit in units:
        if previous is not None:
            if previous.block_index == unit.block_index:
                out.append(unit.same_block_separator)
            elif previous.kind in ("step", "bullet") and unit.kind in ("step", "bullet"):
                out.append("\n")
            else:
                out.append("\n\n")
        out.append(unit.text)
        previous = unit
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Packing


def _carry(chunk: Sequence[_Unit], overlap: int, following: _Unit, max_chars: int) -> list[_Unit]:
    """The last ``overlap`` units of ``chunk``, fewer if they would not fit with ``following``."""
    carried = list(chunk[-overlap:]) if overlap else []
    while carried and len(_join([*carried, following])) > max_chars:
        carried.pop(0)
    return carried


def _pack(units: list[_Unit], max_chars: int, overlap: int) -> list[list[_Unit]]:
    """Greedy packing in order; each chunk adds at least one unit the previous did not have."""
    chunks: list[list[_Unit]] = []
    current: list[_Unit] = []
    fresh = 0  # units in ``current`` that were not carried over from the previous chunk
    for unit in units:
        if current and len(_join([*current, unit])) > max_chars:
            if fresh:
                chunks.append(current)
            current = _carry(current, overlap, unit, max_chars) if fresh else []
            fresh = 0
        current.append(unit)
        fresh += 1
    if fresh:
        chunks.append(current)
    return chunks


def _fix_small_tail(
    chunks: list[list[_Unit]], max_chars: int, min_chars: int, overlap: int
) -> list[list[_Unit]]:
    """Give a too-small last chunk of a section units from its neighbour.

    Plain merging never fits: greedy packing only started the last chunk because its first new
    unit did not fit after the previous one. So the pair's units are re-split at the point that
    leaves the smaller side as large as possible with both within ``max_chars`` (the original
    split is one candidate, so the result is never worse than before).
    """
    if len(chunks) < 2 or len(_join(chunks[-1])) >= min_chars:
        return chunks
    previous, last = chunks[-2], chunks[-1]
    carried = 0
    while carried < len(last) and any(unit is last[carried] for unit in previous):
        carried += 1  # units carried over as overlap are the very same objects
    units = [*previous, *last[carried:]]

    best: tuple[int, list[_Unit], list[_Unit]] = (-1, previous, last)
    for split in range(1, len(units)):
        left = units[:split]
        right = [*_carry(left, overlap, units[split], max_chars), *units[split:]]
        left_len, right_len = len(_join(left)), len(_join(right))
        if left_len <= max_chars and right_len <= max_chars and min(left_len, right_len) > best[0]:
            best = (min(left_len, right_len), left, right)
    return [*chunks[:-2], best[1], best[2]]
