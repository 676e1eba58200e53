"""The keyword ranker's index: BM25 over chunks' tokens, updated in place of being rebuilt.

A knowledge base changes a few pages at a time (a crawl's pages, a synced space's edits), but a
BM25 index that stores each chunk's score for each of its words must score every chunk again
whenever the number of chunks or their average length moves, because both are in every score.
At 100,000 chunks that took 16 of the 19.5 seconds a snapshot's update cost.

:class:`KeywordIndex` stores what does not move instead: for each token the rows of the chunks
that hold it and how often (its *postings*), and each chunk's length in tokens. A question's score
is computed when it is asked, from the postings of its few tokens, so the inverse document
frequency and the average length are always those of the chunks there are. An update drops the
removed chunks' postings, renumbers the kept ones (array operations over the postings, no
tokenising or scoring) and adds the new chunks' own.

The scores are BM25 in Lucene's variant, the one Lucene and the ``bm25s`` package use by default
(``k1`` 1.5, ``b`` 0.75), computed as ``bm25s`` computes them, in the same floating-point steps,
so an index built here ranks exactly as ``bm25s.BM25(method="lucene")`` over the same tokens:

    score(chunk, question) = Σ over the question's tokens t held by the chunk of
        idf(t) · tf / (tf + k1 · (1 - b + b · length / average length))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

with ``tf`` how often the chunk holds ``t``, ``df`` how many of the ``N`` chunks hold it. A
token the question repeats counts as often as it is repeated, as in ``bm25s``.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

K1 = 1.5
"""How quickly a word's repetitions in a chunk stop adding to its score (Lucene's default)."""
B = 0.75
"""How much a long chunk's score is scaled down for its length (Lucene's default)."""


def lucene_idf(frequency: int, records: int) -> float:
    """BM25's inverse document frequency as Lucene (and bm25s by default) computes it: of a
    token ``frequency`` of ``records`` chunks hold (always positive)."""
    return math.log(1 + (records - frequency + 0.5) / (frequency + 0.5))


class KeywordIndex:
    """BM25 postings of a list of chunks, each a row, given as its tokens. Immutable:
    :meth:`updated` returns a new index and leaves this one as it was, so questions can still
    be scored with it while the next one is made (the two share arrays, which neither changes).
    """

    __slots__ = ("_frequencies", "_lengths", "_norms", "_rows", "_starts", "_vocabulary")

    def __init__(
        self,
        vocabulary: dict[str, int],
        starts: Any,
        rows: Any,
        frequencies: Any,
        lengths: Any,
    ) -> None:
        # Token -> its column: its postings are ``rows[starts[c]:starts[c + 1]]`` (each row
        # once), and how often each of those rows holds it, ``frequencies`` there. A column
        # may be empty (its chunks were removed) until the columns are compacted.
        self._vocabulary = vocabulary
        self._starts = starts
        self._rows = rows
        self._frequencies = frequencies
        self._lengths = lengths
        # ``k1 · (1 - b + b · length / average length)`` of every row, as bm25s computes it
        # per chunk: float64, the average an exact integer sum over the count.
        count = len(lengths)
        average = np.float64(int(lengths.sum())) / count if count else np.float64(1.0)
        self._norms = K1 * ((1 - B) + B * lengths.astype(np.float64) / average)

    @classmethod
    def empty(cls) -> KeywordIndex:
        """An index of no chunks."""
        return cls(
            {},
            np.zeros(1, dtype=np.int64),
            np.empty(0, dtype=np.int32),
            np.empty(0, dtype=np.float32),
            np.empty(0, dtype=np.int64),
        )

    @classmethod
    def built(cls, documents: Iterable[Sequence[str]]) -> KeywordIndex:
        """The index of ``documents`` (each a chunk's tokens), in their order."""
        return cls.empty().updated(np.empty(0, dtype=np.int64), documents)

    def __len__(self) -> int:
        """How many chunks (rows) the index holds."""
        return len(self._lengths)

    def __contains__(self, token: object) -> bool:
        """Whether some chunk holds ``token``."""
        column = self._vocabulary.get(token) if isinstance(token, str) else None
        return column is not None and self._starts[column + 1] > self._starts[column]

    def tokens(self) -> Iterator[str]:
        """Every token some chunk holds, once each."""
        counts = np.diff(self._starts)
        return (token for token, column in self._vocabulary.items() if counts[column])

    def holding(self, token: str, mask: Any = None) -> int:
        """How many chunks hold ``token`` (of those the boolean ``mask`` over the rows keeps,
        when given); 0 for a token none holds."""
        rows = self._postings(token)[0]
        return len(rows) if mask is None else int(np.count_nonzero(mask[rows]))

    def scores(self, tokens: Sequence[str], mask: Any = None) -> Any:
        """Every row's BM25 score for a question of ``tokens`` (float32, 0 where it holds none
        of them). With a boolean ``mask`` over the rows, the rows it drops score 0 and each
        token's inverse document frequency counts the kept rows alone, as if the others did
        not exist (the average length stays every row's)."""
        scores = np.zeros(len(self._lengths), dtype=np.float32)
        records = len(self._lengths) if mask is None else int(np.count_nonzero(mask))
        # A token's share is computed once however often the question repeats it (a message
        # of one word pasted a thousand times costs one pass of its postings, not a thousand);
        # it is still added once per mention, in the question's order, as bm25s adds it.
        shares: dict[str, tuple[Any, Any] | None] = {}
        for token in tokens:
            if token not in shares:
                shares[token] = self._share(token, mask, records)
            if (share := shares[token]) is not None:
                rows, values = share
                scores[rows] += values
        return scores

    def _share(self, token: str, mask: Any, records: int) -> tuple[Any, Any] | None:
        """The rows holding ``token`` (of those ``mask`` keeps) and what it adds to each
        one's score; None when no such row holds it."""
        rows, frequencies = self._postings(token)
        if mask is not None:
            kept = mask[rows]
            rows, frequencies = rows[kept], frequencies[kept]
        if not len(rows):
            return None
        # bm25s's steps: a float32 IDF, the term-frequency part in float64, their product
        # stored as float32, summed over the question's tokens in float32.
        idf = np.float32(lucene_idf(len(rows), records))
        weight = frequencies / (self._norms[rows] + frequencies)
        return rows, (idf * weight).astype(np.float32)

    def _postings(self, token: str) -> tuple[Any, Any]:
        column = self._vocabulary.get(token)
        if column is None:
            return self._rows[:0], self._frequencies[:0]
        start, end = int(self._starts[column]), int(self._starts[column + 1])
        return self._rows[start:end], self._frequencies[start:end]

    def updated(self, kept: Any, added: Iterable[Sequence[str]]) -> KeywordIndex:
        """The index of this one's rows ``kept`` (row numbers, in the order they take; the
        others are dropped) followed by the chunks ``added`` (each a chunk's tokens).

        Costs the added chunks' tokens, plus passes of array operations over the postings
        (renumbering the kept rows, placing the new postings in their columns): nothing kept is
        tokenised or scored again.
        """
        kept = np.asarray(kept, dtype=np.int64)
        renumbered = np.full(len(self._lengths), -1, dtype=np.int64)
        renumbered[kept] = np.arange(len(kept), dtype=np.int64)
        old_rows = renumbered[self._rows]
        staying = old_rows >= 0
        # Kept postings before each old column: the column's kept count is a difference.
        before = np.zeros(len(self._rows) + 1, dtype=np.int64)
        np.cumsum(staying, out=before[1:])
        kept_before = before[self._starts]
        kept_counts = np.diff(kept_before)

        vocabulary = self._vocabulary
        # Machine integers, not lists of Python ints: a whole build's postings are millions.
        columns, rows, frequencies, lengths = array("q"), array("q"), array("q"), array("q")
        for row, document in enumerate(added, start=len(kept)):
            lengths.append(len(document))
            for token, frequency in Counter(document).items():
                column = vocabulary.get(token)
                if column is None:
                    if vocabulary is self._vocabulary:  # this index keeps its own
                        vocabulary = dict(vocabulary)
                    column = vocabulary[token] = len(vocabulary)
                columns.append(column)
                rows.append(row)
                frequencies.append(frequency)

        size = len(vocabulary)
        new_columns = np.frombuffer(columns, dtype=np.int64)
        new_counts = np.bincount(new_columns, minlength=size)
        old_counts = np.zeros(size, dtype=np.int64)
        old_counts[: len(kept_counts)] = kept_counts
        counts = old_counts + new_counts
        starts = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        all_rows = np.empty(int(starts[-1]), dtype=np.int32)
        all_frequencies = np.empty(int(starts[-1]), dtype=np.float32)

        # The kept postings keep their order, at the start of their column's new place.
        staying_count = int(before[-1])
        to = np.repeat(starts[: len(kept_counts)] - kept_before[:-1], kept_counts)
        to += np.arange(staying_count, dtype=np.int64)
        all_rows[to] = old_rows[staying]
        all_frequencies[to] = self._frequencies[staying]

        # The new postings follow them in their column, in the order of their rows.
        order = np.argsort(new_columns, kind="stable")
        by_column = new_columns[order]
        first = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(new_counts, out=first[1:])
        to = starts[by_column] + old_counts[by_column]
        to += np.arange(len(order), dtype=np.int64) - first[by_column]
        all_rows[to] = np.frombuffer(rows, dtype=np.int64)[order]
        all_frequencies[to] = np.frombuffer(frequencies, dtype=np.int64)[order]

        all_lengths = np.concatenate([self._lengths[kept], np.frombuffer(lengths, np.int64)])
        if 2 * int(np.count_nonzero(counts == 0)) > size:
            vocabulary, starts = _compacted(vocabulary, starts, counts)
        return KeywordIndex(vocabulary, starts, all_rows, all_frequencies, all_lengths)


def _compacted(vocabulary: dict[str, int], starts: Any, counts: Any) -> tuple[dict[str, int], Any]:
    """The vocabulary and column starts without the columns no chunk holds any more: once they
    are most of it (pages removed take their own words along), so it does not grow for ever.
    The postings do not move: an empty column takes no place among them."""
    held = counts > 0
    columns = np.cumsum(held) - 1
    kept = {token: int(columns[column]) for token, column in vocabulary.items() if held[column]}
    return kept, np.concatenate([starts[:1], starts[1:][held]])
