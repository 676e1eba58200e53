"""The link planner: which of a page's links the job should read next, and why.

The frontier is best-first. A link's score is

    0.50 * similarity + 0.35 * keywords + 0.15 * novelty - 0.05 * depth

* similarity: cosine of the question and the link's anchor text, URL words and surrounding text
  under the packaged sentence model (0 when embeddings are off);
* keywords: the share of the question's words found in the anchor or URL (full weight) or in the
  surrounding text (half weight); the job's *focus* words (those no article of the knowledge base
  is about) count :data:`FOCUS_WEIGHT` times, so a link naming them comes first;
* novelty: 1 / (1 + links of the same URL pattern already queued), so a site's hundredth
  calendar page ranks below its first article;
* depth: links far from the seeds cost a little.

Without a question every link scores ``-depth`` (less a hair per position on the page): plain
breadth-first order.

A site's sitemap entries are candidates too, as links of the seed (depth 1) whose anchor is the
entry's title, if it has one, and whose context is empty: they are scored by the words of their
URL. A sitemap may list 50,000 pages, so :meth:`LinkPlanner.shortlist` first keeps the few
hundred whose URL and title share the most words with the question (in the sitemap's order
without a question), and only those are scored in full.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from crawler.urls import url_words

W_SIMILARITY = 0.50
W_KEYWORDS = 0.35
W_NOVELTY = 0.15
DEPTH_PENALTY = 0.05
FOCUS_WEIGHT = 3.0
"""How many question words a focus word counts as (``ContextInsufficient.focus``)."""

_TOKEN = re.compile(r"[a-z0-9][a-z0-9\-]+")
STOPWORDS = frozenset(
    (
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
        "how", "i", "in", "is", "it", "my", "of", "on", "or", "our", "the", "this", "to", "what",
        "when", "where", "which", "who", "why", "will", "with", "you", "your", "me", "we", "not",
        "no", "yes", "get", "use", "using", "set",
    )
)  # fmt: skip


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> list[list[float]]: ...


def terms(text: str) -> set[str]:
    """Content words of ``text``, lower-cased, with a crude plural fold."""
    words = set()
    for token in _TOKEN.findall(text.lower()):
        for word in token.split("-"):
            if len(word) < 3 or word in STOPWORDS:
                continue
            words.add(word[:-1] if word.endswith("s") and len(word) > 3 else word)
    return words


@dataclass(frozen=True)
class Candidate:
    url: str
    anchor: str
    context: str
    depth: int
    pattern: str
    source: str = ""
    """Where it was found when not on a page: the sitemap that lists it."""


@dataclass(frozen=True)
class PlannedLink:
    candidate: Candidate
    score: float
    similarity: float
    keywords: float
    novelty: float
    matched: tuple[str, ...]
    llm_rank: int | None = None
    """Place the LLM gave the link among the top candidates it re-ranked (1 = best), if any."""

    @property
    def reason(self) -> str:
        words = ", ".join(self.matched) if self.matched else "no question words"
        llm = f"; LLM rank {self.llm_rank}" if self.llm_rank is not None else ""
        return (
            f"anchor {self.candidate.anchor[:60]!r}: {words}; similarity {self.similarity:.2f}; "
            f"novelty {self.novelty:.2f}; depth {self.candidate.depth}{llm}"
        )


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def link_text(candidate: Candidate) -> str:
    """What the model reads for a link."""
    return f"{candidate.anchor}. {' '.join(url_words(candidate.url))}. {candidate.context}"[:400]


def _strong_terms(candidate: Candidate) -> set[str]:
    """Words of the anchor and the URL: what a link says of itself."""
    return terms(f"{candidate.anchor} {' '.join(url_words(candidate.url))}")


def term_weights(question: str, focus: Sequence[str] = ()) -> dict[str, float]:
    """The question's content words, each weighing 1, and the ``focus`` words
    :data:`FOCUS_WEIGHT`."""
    weights = dict.fromkeys(terms(question), 1.0)
    weights.update(dict.fromkeys(terms(" ".join(focus)), FOCUS_WEIGHT))
    return weights


class LinkPlanner:
    def __init__(self, encoder: Encoder | None) -> None:
        self.encoder = encoder

    def shortlist(
        self,
        question: str,
        candidates: Sequence[Candidate],
        limit: int,
        focus: Sequence[str] = (),
    ) -> list[Candidate]:
        """The ``limit`` candidates sharing the most words of anchor and URL with the question
        (``focus`` words weighing more), in their order among equals (all of them, in order, up
        to ``limit`` without question words): what :meth:`plan` then scores in full."""
        weights = term_weights(question, focus)
        if not weights or len(candidates) <= limit:
            return list(candidates[:limit])
        overlap = [sum(weights.get(t, 0.0) for t in _strong_terms(c)) for c in candidates]
        order = sorted(range(len(candidates)), key=lambda i: -overlap[i])
        return [candidates[i] for i in order[:limit]]

    def plan(
        self,
        question: str,
        candidates: Sequence[Candidate],
        pattern_counts: Sequence[int],
        focus: Sequence[str] = (),
    ) -> list[PlannedLink]:
        """Score ``candidates`` (``pattern_counts[i]``: URLs of the i-th one's pattern already
        queued), best first; ``focus`` words weigh :data:`FOCUS_WEIGHT` times."""
        if not candidates:
            return []
        weights = term_weights(question, focus)
        question_terms = set(weights)
        if not question_terms:
            # Breadth first; within a depth, in the order the page lists them.
            return [
                PlannedLink(c, -float(c.depth) - i * 1e-6, 0.0, 0.0, 1.0, ())
                for i, c in sorted(enumerate(candidates), key=lambda ic: (ic[1].depth, ic[0]))
            ]
        similarities = [0.0] * len(candidates)
        if self.encoder is not None:
            vectors = self.encoder.encode([question, *(link_text(c) for c in candidates)])
            similarities = [max(0.0, _cosine(vectors[0], v)) for v in vectors[1:]]
        # Same-pattern links on this very page count too: a page of 40 calendar days is one idea.
        on_page: dict[str, int] = {}
        planned = []
        for candidate, similarity, earlier in zip(
            candidates, similarities, pattern_counts, strict=True
        ):
            strong = _strong_terms(candidate)
            weak = terms(candidate.context)
            matched = tuple(sorted(question_terms & (strong | weak)))
            hits = sum(weights[t] for t in question_terms & strong)
            hits += 0.5 * sum(weights[t] for t in question_terms & (weak - strong))
            keywords = min(1.0, hits / sum(weights.values()))
            seen = earlier + on_page.get(candidate.pattern, 0)
            on_page[candidate.pattern] = on_page.get(candidate.pattern, 0) + 1
            novelty = 1.0 / (1.0 + seen)
            score = (
                W_SIMILARITY * similarity
                + W_KEYWORDS * keywords
                + W_NOVELTY * novelty
                - DEPTH_PENALTY * candidate.depth
            )
            planned.append(PlannedLink(candidate, score, similarity, keywords, novelty, matched))
        planned.sort(key=lambda p: p.score, reverse=True)
        return planned
