"""An answer cut into what a critique judges one by one: sentences of prose, whole list items
(a step with its command), and other blocks whole (:func:`split_answer`); and put back together
without the parts taken out (:meth:`Split.rebuilt`).

The block structure (paragraphs, lists, code fences, headings) is CommonMark's, read by
markdown-it-py; only prose is cut further, into sentences. A code block is never cut and belongs
to the sentence or step before it (the command that sentence introduces), so the two are judged
and kept or removed together.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_SENTENCE_END = re.compile(
    r"[.!?]+[\"')\]”’]*(?:[ \t]*\[\d+(?:\s*[,;]\s*\d+)*\])*(?=\s+[A-Z0-9\"'(“‘`*_])"
)
_ORDERED = re.compile(r"^(?P<indent>\s*)\d{1,9}(?P<delimiter>[.)])")
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "vs", "approx", "incl", "cf", "dr", "mr", "mrs", "ms", "no", "nos"}
    | {"fig", "st", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov"}
    | {"dec"}
)


@dataclass
class Block:
    """One block of the answer: a paragraph (its sentences), a list (its items) or anything else
    (a heading, a lone code block, a table: one part)."""

    kind: Literal["prose", "list", "other"]
    parts: list[str] = field(default_factory=list)
    ordered: bool = False


@dataclass(frozen=True)
class Split:
    """The parts of an answer, in order, and the blocks they came in."""

    blocks: tuple[Block, ...]

    @property
    def parts(self) -> list[str]:
        """What is judged, numbered from 1 in this order."""
        return [part for block in self.blocks for part in block.parts]

    def rebuilt(self, keep: Sequence[bool]) -> str:
        """The answer with only the parts ``keep`` marks (one flag per part, in order).

        Sentences of a paragraph are joined by a space, list items by a line break, blocks by a
        blank line; a block with nothing kept goes, and an ordered list is numbered again from 1
        (steps run on across lists split by a code block or a heading, and restart after prose).
        """
        if len(keep) != len(self.parts):
            raise ValueError(f"{len(keep)} flags for {len(self.parts)} parts")
        flags = iter(keep)
        out: list[str] = []
        step = 0
        for block in self.blocks:
            kept = [part for part in block.parts if next(flags)]
            if not kept:
                continue
            if block.kind == "prose":
                step = 0
                out.append(" ".join(kept))
            elif block.kind == "list" and block.ordered:
                numbered = enumerate(kept, start=step + 1)
                out.append(
                    "\n".join(
                        _ORDERED.sub(rf"\g<indent>{n}\g<delimiter>", item, count=1)
                        for n, item in numbered
                    )
                )
                step += len(kept)
            elif block.kind == "list":
                out.append("\n".join(kept))
            else:
                out.append("\n\n".join(kept))
        return "\n\n".join(out)


def split_answer(text: str) -> Split:
    """``text`` (light Markdown, as the model writes answers) cut into parts to judge."""
    lines = text.splitlines()
    blocks: list[Block] = []
    tokens = _MARKDOWN.parse(text)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token.level != 0 or token.map is None or token.type.endswith("_close"):
            continue
        start, end = token.map
        source = _lines(lines, start, end)
        if token.type == "paragraph_open":
            blocks.append(Block("prose", split_sentences(" ".join(source.split("\n")))))
        elif token.type in ("bullet_list_open", "ordered_list_open"):
            items: list[str] = []
            while i < len(tokens) and tokens[i].type not in (
                "bullet_list_close",
                "ordered_list_close",
            ):
                item = tokens[i]
                if item.type == "list_item_open" and item.level == 1 and item.map is not None:
                    items.append(_lines(lines, *item.map))
                i += 1
            blocks.append(Block("list", items, ordered=token.type == "ordered_list_open"))
        elif token.type in ("fence", "code_block") and blocks and blocks[-1].parts:
            # The command the sentence or step before it introduces.
            blocks[-1].parts[-1] = f"{blocks[-1].parts[-1]}\n{source}"
        elif source.strip():
            blocks.append(Block("other", [source]))
    return Split(tuple(block for block in blocks if block.parts))


def split_sentences(prose: str) -> list[str]:
    """The sentences of one paragraph; a citation marker after a full stop ("… it. [2]") stays
    with its sentence, and full stops inside inline code, decimals, versions, addresses and
    common abbreviations ("e.g.") end nothing."""
    masked = _INLINE_CODE.sub(lambda match: "x" * len(match.group(0)), prose)
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(masked):
        words = masked[start : match.start()].split()
        last = words[-1].lower().rstrip(".") if words else ""
        if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue
        sentences.append(prose[start : match.end()].strip())
        start = match.end()
    rest = prose[start:].strip()
    if rest:
        sentences.append(rest)
    return [sentence for sentence in sentences if sentence]


def _lines(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start:end]).rstrip()
