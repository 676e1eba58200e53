"""Retrieval: the knowledge-base chunks that best answer a question, by hybrid search.

Three rankers look at every question, because each fails where another is strong:

* **dense**: cosine similarity of the question's embedding to the chunks' embeddings in Chroma.
  It finds paraphrases ("my screen is too dark" → "Set the screen brightness") but blurs exact
  terms: product names, error codes, commands.
* **keyword**: BM25 over the chunks' words (section path, which starts with the title, and body),
  scored by :class:`~orchestrator.keyword_index.KeywordIndex`. It finds "0x80070005" or "nmcli"
  verbatim, but not a paraphrase.
* **document**: cosine similarity to each document's *opening* chunk (``chunk_index`` 0: title,
  lead and first section), which says what the whole document is about. Every chunk of a document
  shares its document's rank, so a page *about* the question outranks a page that only mentions
  it in passing (an overview page listing many topics, a "see also" line).

Their rankings are merged by weighted *reciprocal rank fusion* (Cormack et al., SIGIR 2009):
each chunk gets ``Σ weight / (rrf_k + rank)`` over the rankers that returned it. RRF uses ranks
only, so it needs no calibration between a cosine and a BM25 score, which have unrelated scales
and distributions that differ from corpus to corpus; the default weights are equal and ``rrf_k``
is the paper's 60, not values fitted to one corpus.

What a caller can rely on:

* ``Hit.score`` is always the chunk's **cosine similarity** to the question, also for chunks that
  only the keyword ranker found, so a fixed answer/no-answer threshold keeps its meaning.
  ``Hit.fused_score`` is the rank-fusion score the hits are ordered by; it only compares hits of
  one retrieval.
* The keyword index is built in this process from the chunks stored in the collection, and is
  updated when the collection changes (checked at most every ``refresh_interval_s``, and at once
  on ``chunks.indexed``), so chunks the indexer writes while the orchestrator runs become
  keyword-searchable within seconds. The check and the rebuild run in a background thread (the
  first build excepted): a question is answered from the snapshot there is. Dense search sees
  the collection as it is for a reader who may read every chunk, or more than
  ``HybridConfig.exact_dense_limit`` of them (Chroma answers, those they may not read dropped);
  for one who may read fewer, it is exact over the readable chunks of the snapshot, which
  includes new chunks from its next check.
* With the user's operating system known, chunks for that OS (by the document's ``os`` metadata
  or an OS name in the section path) get a small multiplicative boost; chunks for no particular OS
  stay neutral.
* With a feedback source (:mod:`orchestrator.feedback`), a chunk's fused score is multiplied by
  ``1 + adjustment`` of its document: documents users rated mostly well rank a little higher,
  mostly badly a little lower. ``Hit.score`` (the cosine) is never adjusted, and without ratings
  every adjustment is 0, so the ranking is exactly the unadjusted one.
* Every path (dense, keyword, the document ranking, the best document's chunks) considers only
  the chunks the reader (:class:`~contracts.readers.Principals`) may read, *before* ranking: a
  chunk they may not read never takes a place in any top ``k``, so the readable ones rank
  exactly as if it did not exist. The default reader is anonymous (public chunks only).
* A retrieval holds the chunks of its best :data:`ANSWER_DOCUMENTS` documents (an answer quotes
  one of them whole) and the snapshot's keyword statistics (:class:`TermStats`, ``None``
  without a snapshot), which the sufficiency check weighs a question's words by.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from contracts.live import LiveReader
from contracts.readers import ANONYMOUS, PUBLIC, Principals, Readers
from contracts.settings import ServiceSettings
from orchestrator.keyword_index import KeywordIndex, lucene_idf

logger = logging.getLogger(__name__)

Mode = Literal["hybrid", "dense", "keyword"]


class Encoder(Protocol):
    def encode(self, texts: list[str]) -> list[list[float]]: ...


class FeedbackSource(Protocol):
    def adjustment(self, url: str) -> float:
        """The document's rank adjustment from users' ratings (0 for none); must be cheap and
        thread-safe: it is asked once per candidate chunk."""
        ...


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with what a citation needs."""

    chunk_id: str
    text: str
    url: str
    title: str
    section: str
    score: float
    """Cosine similarity in [-1, 1]; higher is closer. Comparable across questions."""
    chunk_index: int = 0
    fused_score: float = 0.0
    """The rank-fusion score hits are ordered by; only comparable within one retrieval."""
    keyword_score: float = 0.0
    """The chunk's BM25 score for the question; 0 when they share no indexed word."""
    os: str = ""
    """The operating system the chunk is for ("windows", "macos", "linux"), "" when none."""
    feedback: float = 0.0
    """The rank adjustment users' ratings of its document gave it (``fused_score`` includes it)."""
    source: str = ""
    """The knowledge source (Confluence, SharePoint) the chunk was synced from; "" for uploaded,
    ingested and crawled documents."""


@dataclass(frozen=True)
class TermStats:
    """How many of the knowledge base's chunks hold each keyword token: the BM25 index's own
    statistics, for telling the words a question is about from the words every page has."""

    chunks: int
    holding: Mapping[str, int]
    """Token (as :func:`keyword_tokens` gives it) -> how many chunks hold it."""

    def idf(self, token: str) -> float:
        """The token's inverse document frequency, as BM25 weighs it (always positive; a token
        no chunk holds gets the highest value)."""
        return lucene_idf(self.holding.get(token, 0), self.chunks)


@dataclass(frozen=True)
class Retrieval:
    """The best chunks overall (by fused rank), and every chunk of the best document, both best
    first; the chunks of the next best documents too (``documents``, by URL), so an answer can
    quote any of them whole, and the keyword statistics of the collection searched."""

    hits: list[Hit]
    best_document: list[Hit]
    documents: Mapping[str, list[Hit]] = field(default_factory=dict)
    terms: TermStats | None = None

    def document(self, url: str) -> list[Hit]:
        """The chunks of ``url``'s document, best first: as fetched for the best documents,
        else its chunks among the hits."""
        if self.best_document and self.best_document[0].url == url:
            return self.best_document
        return self.documents.get(url) or [hit for hit in self.hits if hit.url == url]

    @property
    def confidence(self) -> float | None:
        """The highest cosine similarity among the hits (None without hits): what to compare
        with a relevance threshold. The first hit is the best *ranked*, which with keyword
        fusion is not always the one with the highest similarity."""
        return max((hit.score for hit in self.hits), default=None)


@dataclass(frozen=True, slots=True)
class HybridConfig:
    """How the rankers are combined (equal weights and the usual ``rrf_k`` by default).

    ``candidates`` chunks are taken from each ranker before fusion. ``rrf_k`` damps the head of
    each ranking (60 is the value of the original RRF paper and the usual default). A weight of 0
    switches a ranker off (``mode`` does the same by name, for ablations). ``os_boost`` multiplies
    the fused score of a chunk for the user's operating system by ``1 + os_boost``.

    A reader who may read at most ``exact_dense_limit`` chunks (but not every one) is searched
    exactly: the question's product with each readable chunk's embedding, which costs less than
    asking Chroma below about 20,000 chunks and grows with them (22 ms for 38,000 of 100,000 on
    2 busy cores, most of it copying their rows). Above it Chroma's approximate index is asked,
    as for a reader who may read everything, for enough chunks that about twice ``candidates``
    of them are readable, and the others are dropped before ranking; if fewer than
    ``candidates`` are left, the search is done exactly after all.

    The in-process snapshot is checked for changes every ``refresh_interval_s``; a dense hit it
    does not hold rebuilds it at once, but not within ``rebuild_min_interval_s`` of the last
    build, so a collection written continuously (a crawl being indexed) does not rebuild it per
    question.
    """

    candidates: int = 50
    rrf_k: float = 60.0
    dense_weight: float = 1.0
    keyword_weight: float = 1.0
    document_weight: float = 1.0
    os_boost: float = 0.1
    refresh_interval_s: float = 5.0
    rebuild_min_interval_s: float = 1.0
    mode: Mode = "hybrid"
    exact_dense_limit: int = 20_000

    def __post_init__(self) -> None:
        if self.candidates < 1:
            raise ValueError("candidates must be positive")
        weights = (self.dense_weight, self.keyword_weight, self.document_weight)
        if self.rrf_k < 0 or min(weights) < 0:
            raise ValueError("rrf_k and the weights must not be negative")
        if self.os_boost < 0 or min(self.refresh_interval_s, self.rebuild_min_interval_s) < 0:
            raise ValueError("os_boost and the refresh intervals must not be negative")
        if self.exact_dense_limit < 0:
            raise ValueError("exact_dense_limit must not be negative")


def use_one_blas_thread() -> None:
    """numpy's BLAS on one thread in this process (call once, at start).

    The snapshot's products are matrix-vector products over up to every chunk: bound by memory,
    not arithmetic, so a second OpenBLAS thread gains nothing, and on a busy host its threads
    spin waiting for a core. Measured on this project's 2-core machine under load: the product
    of a question with 10,000 embeddings took 11.8 ms with numpy's default two threads and 2.8
    ms with one. (The query encoder's torch has its own pool, which this leaves alone.)
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


def open_chroma(settings: ServiceSettings) -> Any:
    """A client of the configured Chroma (server, or local directory), telemetry off. Its
    ``close()`` releases a local directory's files; a service keeps it for its lifetime."""
    import chromadb
    from chromadb.config import Settings

    chroma_settings = Settings(anonymized_telemetry=False, **settings.chroma_client_settings())
    if settings.chroma_host:
        return chromadb.HttpClient(
            host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
        )
    return chromadb.PersistentClient(
        path=str(settings.data_dir / "chroma"), settings=chroma_settings
    )


def open_collection(settings: ServiceSettings, client: Any = None) -> Any:
    """The knowledge-base collection on ``client`` (by default a new :func:`open_chroma`).

    Same creation arguments as the indexer's: cosine space given as ``configuration`` and no
    embedding function, because Chroma's default function (also attached by the legacy
    ``hnsw:space`` metadata form) downloads a model. Queries always pass embeddings.
    """
    return (client or open_chroma(settings)).get_or_create_collection(
        settings.chroma_collection,
        configuration={"hnsw": {"space": "cosine"}},
        embedding_function=None,
    )


# --------------------------------------------------------------------------------------------
# Keyword side: tokens, operating systems, the BM25 snapshot

# The NLTK English stop list (as shipped by bm25s): questions carry "how do I ..." that says
# nothing about the topic.
_TOKEN = re.compile(r"[^\W_]+(?:[-.'’][^\W_]+)*")
_SPLIT = re.compile(r"[-.'’]")


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


_STOPWORDS: frozenset[str] | None = None


def light_stem(word: str) -> str:
    """Harman's "S" stemmer (1991): plural and possessive endings only.

    Conservative on purpose: it never merges words of different meaning ("policy"/"police"), which
    aggressive stemmers do, and no stemmer package is needed.
    """
    if len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def keyword_tokens(text: str) -> list[str]:
    """Lower-cased, stop-word-free, lightly stemmed words of ``text`` for BM25.

    A compound such as "Wi-Fi" or "e-mail" yields its parts and the joined form ("wi", "fi",
    "wifi"), so it matches however a user spells it; possessives lose their "'s".
    """
    tokens: list[str] = []
    for word in keyword_words(text):
        tokens.extend(word_tokens(word))
    return tokens


def keyword_words(text: str) -> list[str]:
    """The lower-cased written words of ``text`` that :func:`keyword_tokens` tokenises, a
    compound ("wi-fi") as one."""
    return _TOKEN.findall(text.lower())


@functools.lru_cache(maxsize=1 << 18)
def word_tokens(word: str) -> tuple[str, ...]:
    """The keyword tokens of one lower-cased word of :func:`keyword_words` (a compound's parts
    and joined form, stop words out). Remembered: a knowledge base repeats a vocabulary of some
    ten thousand words, and a snapshot of 100,000 chunks tokenises millions of them."""
    global _STOPWORDS
    if _STOPWORDS is None:
        _STOPWORDS = _stopwords()
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    parts = [part for part in _SPLIT.split(word) if part]
    candidates = [*parts, "".join(parts)] if len(parts) > 1 else parts
    return tuple(light_stem(t) for t in candidates if t not in _STOPWORDS)


# Proper nouns, matched case-sensitively: "windows" in "Move windows" is not the OS.
_OS_PATTERNS: dict[str, re.Pattern[str]] = {
    "windows": re.compile(r"\bWindows\b"),
    "macos": re.compile(r"\b(?:macOS|MacOS|Mac OS|OS X|Mac|MacBook)\b"),
    "linux": re.compile(r"\b(?:Linux|Ubuntu|Debian|Fedora|RHEL)\b"),
}
_OS_ALIASES = {
    "windows": "windows",
    "win": "windows",
    "win10": "windows",
    "win11": "windows",
    "macos": "macos",
    "mac": "macos",
    "osx": "macos",
    "darwin": "macos",
    "linux": "linux",
    "ubuntu": "linux",
}


def normalise_os(value: str | None) -> str | None:
    """Aliases to a canonical name ("mac", "OSX" → "macos"); None for "any", "", unknown."""
    if not value:
        return None
    return _OS_ALIASES.get(re.sub(r"[\s_-]", "", value.strip().lower()))


def chunk_os(section: str, metadata_os: str) -> set[str]:
    """The operating systems a chunk is specifically for: its document's ``os`` metadata (a name
    or a comma-separated list; "any" means none) and the OS names in its section path."""
    found = {
        name
        for part in re.split(r"[,;/\s]+", metadata_os or "")
        if (name := normalise_os(part)) is not None
    }
    found.update(name for name, pattern in _OS_PATTERNS.items() if pattern.search(section))
    return found


@dataclass(frozen=True, slots=True)
class _Record:
    """What the keyword snapshot keeps of one stored chunk, enough to build a :class:`Hit`."""

    chunk_id: str
    text: str
    url: str
    title: str
    section: str
    chunk_index: int
    os: frozenset[str]
    doc_id: str = ""
    generation: str = ""
    """Set on chunks of synced source documents (``contracts.live``); "" on all others."""
    readers: Readers = PUBLIC
    """Who may read the chunk's document (``contracts.readers``); public when it says nothing."""
    source: str = ""
    """The source a synced chunk came from (its ``source`` metadata); "" on all others."""


class _Gate:
    """Which chunks one retrieval may show: those its reader may read and, of synced documents,
    those of the published generation (``contracts.live``), read once per document; ``stable``
    turns False when a
    generation was switched during the retrieval (its epoch moved), and the retrieval is done
    again, so it never shows a document's two versions, nor none while it is being replaced."""

    def __init__(self, live: LiveReader | None, principals: Principals = ANONYMOUS) -> None:
        self.live = live
        self.principals = principals
        self.start = live.epoch() if live is not None else 0
        self.stable = True
        self._published: dict[str, str | None] = {}

    def keep(self, records: list[_Record]) -> list[bool]:
        """Per record, whether it may be shown: readable by the reader (checked again here, the
        last door, whatever path found it) and of its document's published generation."""
        readable = [self.principals.may_read(r.readers) for r in records]
        records = [r for r, ok in zip(records, readable, strict=True) if ok]
        published = iter(self._published_generation(records))
        return [ok and next(published) for ok in readable]

    def _published_generation(self, records: list[_Record]) -> list[bool]:
        if self.live is None:
            return [True] * len(records)
        needed = list(
            dict.fromkeys(
                r.doc_id for r in records if r.generation and r.doc_id not in self._published
            )
        )
        if needed:
            epoch, published = self.live.read(needed)
            self._published.update(published)
            self.stable = self.stable and epoch == self.start
        return [not r.generation or self._published.get(r.doc_id) == r.generation for r in records]


class _Snapshot:
    """An immutable in-process copy of the collection, replaced when the collection changes:
    the keyword (BM25) index over every chunk, and every chunk's stored embedding. The
    replacement keeps what is still stored (rows, embeddings and keyword postings: a chunk's id
    is derived from its text) and reads only the chunks written since
    (:meth:`Retriever.refresh`), so a crawl's pages at 100,000 chunks cost their own rows, not
    every row again: the keyword index takes the new chunks' postings and drops the removed
    ones' (:meth:`KeywordIndex.updated`), without tokenising or scoring the others again.

    The embeddings let the per-document ranking, the cosines of keyword-only candidates and the
    best document's chunks be computed here, exactly, instead of by three more Chroma round
    trips per question; dense search asks Chroma, except for a reader who may read only a few
    of the chunks (see ``HybridConfig.exact_dense_limit``).
    """

    def __init__(
        self,
        records: list[_Record],
        embeddings: Any,
        marker: str,
        keywords: KeywordIndex | None = None,
    ) -> None:
        import numpy as np

        self.records = records
        self.marker = marker
        self.position = {record.chunk_id: i for i, record in enumerate(records)}
        self.embeddings = _matrix(embeddings, len(records))
        self.openings = np.asarray(
            [i for i, record in enumerate(records) if record.chunk_index == 0], dtype=np.int64
        )
        # The openings' own rows, side by side: every question ranks them all, and gathering
        # them from the whole matrix copied a twentieth of it per question.
        self.opening_embeddings = self.embeddings[self.openings]
        by_url: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            by_url.setdefault(record.url, []).append(i)
        self.by_url = {url: np.asarray(rows, dtype=np.int64) for url, rows in by_url.items()}
        self.public = np.fromiter(
            (r.readers.public for r in records), dtype=bool, count=len(records)
        )
        by_user: dict[str, list[int]] = {}
        by_group: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            if not record.readers.public:
                for user in record.readers.users:
                    by_user.setdefault(user, []).append(i)
                for group in record.readers.groups:
                    by_group.setdefault(group, []).append(i)
        self.by_user = {user: np.asarray(rows, dtype=np.int64) for user, rows in by_user.items()}
        self.by_group = {name: np.asarray(rows, dtype=np.int64) for name, rows in by_group.items()}
        self.keywords = (
            keywords if keywords is not None else KeywordIndex.built(map(_tokens, records))
        )

    def updated(self, collection: Any, ids: Sequence[str]) -> _Snapshot | None:
        """The snapshot of the collection now holding ``ids``: this one's rows that are still
        stored, and the others read from ``collection``; None when it holds nothing."""
        import numpy as np

        present = set(ids)
        kept = np.asarray(
            [i for i, record in enumerate(self.records) if record.chunk_id in present],
            dtype=np.int64,
        )
        added = [chunk_id for chunk_id in ids if chunk_id not in self.position]
        new_records, new_embeddings = _records(collection, added)
        records = [self.records[i] for i in kept.tolist()] + new_records
        if not records:
            return None
        parts = [self.embeddings[kept], _matrix(new_embeddings, len(new_records))]
        embeddings = np.concatenate([part for part in parts if len(part)])
        keywords = self.keywords.updated(kept, map(_tokens, new_records))
        return _Snapshot(records, embeddings, _marker(r.chunk_id for r in records), keywords)

    def terms(self, mask: Any = None) -> TermStats | None:
        """How many of the chunks ``mask`` keeps (all, without one) hold each token, read from
        the keyword index when a token is asked about: a reader's statistics count only what
        they may read, so a restricted page's words weigh nothing in what they are told. None
        for a snapshot of no chunks."""
        if not self.records:
            return None
        chunks = len(self.records) if mask is None else int(mask.sum())
        return TermStats(chunks, _Holding(self.keywords, mask))

    def readable(self, principals: Principals) -> Any | None:
        """Which records ``principals`` may read, as a boolean mask over the records; None when
        they may read every one (the common case: nothing restricted, or an operator's tool),
        so the unfiltered paths stay as fast as they were."""
        import numpy as np

        if principals.everything or bool(self.public.all()):
            return None
        mask = self.public.copy()
        if (
            principals.user_id is not None
            and (rows := self.by_user.get(principals.user_id)) is not None
        ):
            mask[rows] = True
        for group in principals.groups:
            if (rows := self.by_group.get(group)) is not None:
                mask[rows] = True
        return None if bool(mask.all()) else np.asarray(mask)

    def search(self, question: str, limit: int, mask: Any = None) -> list[tuple[int, float]]:
        """Positions and BM25 scores of the best ``limit`` records with a positive score (of
        those ``mask`` keeps, when given, each word's inverse document frequency then counted
        over the kept records only: a restricted chunk's words weigh nothing in a reader's
        ranking, as if it did not exist; the lengths' average stays the whole snapshot's)."""
        tokens = [t for t in keyword_tokens(question) if t in self.keywords]
        if not tokens:
            return []
        return _top(self.keywords.scores(tokens, mask), limit, positive=True)

    def cosines(self, vector: Any, rows: Any) -> Any:
        """Cosine similarity of the (unit-length) ``vector`` to the records at ``rows``."""
        return self.embeddings[rows] @ vector

    def nearest(self, vector: Any, limit: int, mask: Any) -> list[tuple[int, float]]:
        """Positions and cosines of the ``limit`` records ``mask`` keeps closest to ``vector``:
        exact (a product with every kept embedding), for readers who may not read everything."""
        import numpy as np

        return self._ranked(vector, np.flatnonzero(mask), limit)

    def openings_ranked(self, vector: Any, limit: int, mask: Any = None) -> list[tuple[int, float]]:
        """Positions and cosines of the ``limit`` document openings closest to ``vector``."""
        scores = self.opening_embeddings @ vector
        openings = self.openings
        if mask is not None:
            kept = mask[openings]
            openings, scores = openings[kept], scores[kept]
        return [(int(openings[i]), score) for i, score in _top(scores, limit)]

    def document(
        self, vector: Any, url: str, limit: int, mask: Any = None
    ) -> list[tuple[int, float]] | None:
        """Positions and cosines of ``url``'s chunks closest to ``vector``; None if unknown."""
        rows = self.by_url.get(url)
        if rows is None:
            return None
        return self._ranked(vector, rows if mask is None else rows[mask[rows]], limit)

    def _ranked(self, vector: Any, rows: Any, limit: int) -> list[tuple[int, float]]:
        if not len(rows):
            return []
        scores = self.cosines(vector, rows)
        return [(int(rows[i]), score) for i, score in _top(scores, limit)]


def _matrix(vectors: Any, rows: int) -> Any:
    """``rows`` embeddings as a float32 matrix, one a row (of no columns when there are none)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    return matrix.reshape(rows, -1) if matrix.size else matrix.reshape(rows, 0)


class _Holding(Mapping[str, int]):
    """Token -> how many chunks hold it (of those ``mask`` keeps), counted from the keyword
    index's postings when asked: a question asks about a few words of a large vocabulary. Its
    keys are the tokens some chunk holds (a reader may read none of them: then 0)."""

    def __init__(self, keywords: KeywordIndex, mask: Any) -> None:
        self._keywords = keywords
        self._mask = mask

    def __getitem__(self, token: str) -> int:
        if not token or token not in self._keywords:
            raise KeyError(token)
        return self._keywords.holding(token, self._mask)

    def __iter__(self) -> Iterator[str]:
        return (token for token in self._keywords.tokens() if token)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _top(scores: Any, limit: int, *, positive: bool = False) -> list[tuple[int, float]]:
    """Indices and values of the ``limit`` highest ``scores``, best first (ties by index)."""
    import numpy as np

    count = min(limit, len(scores))
    if count <= 0:
        return []
    top = np.argpartition(-scores, count - 1)[:count]
    ranked = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
    return [(i, float(scores[i])) for i in ranked if not positive or scores[i] > 0]


ANSWER_DOCUMENTS = 3
"""Documents a retrieval fetches the chunks of (the best ranked ones): an answer quotes one of
them whole, the best that answers the question (:mod:`orchestrator.sufficiency`)."""


def _first_of_each_document(hits: list[Hit], limit: int) -> list[Hit]:
    """The best ranked hit of each of the first ``limit`` documents among ``hits``."""
    first: dict[str, Hit] = {}
    for hit in hits:
        if len(first) >= limit:
            break
        first.setdefault(hit.url, hit)
    return list(first.values())


_STABLE_ATTEMPTS = 3
"""Retrievals tried while a synced document's generation switches under them; the last one is
kept whatever happens (three switches within three retrievals' time, a sync of many pages)."""

_PAGE = 2000  # rows per collection.get, well under Chroma's per-call limits
_ID_PAGE = 50_000
"""Ids per collection.get of ids alone: reading 100,000 ids 2,000 at a time took 2.4 s (Chroma
skips to each page's offset), 100,000 at a time 0.4 s; the check reads them every few seconds."""


def _all_ids(collection: Any) -> list[str]:
    ids: list[str] = []
    offset = 0
    while True:
        page = collection.get(include=[], limit=_ID_PAGE, offset=offset)["ids"]
        ids.extend(page)
        if len(page) < _ID_PAGE:
            return ids
        offset += _ID_PAGE


def _marker(ids: Iterable[str]) -> str:
    """A version marker of the collection's content: chunk ids are derived from the chunk's
    text (see the indexer), so any added, changed or removed chunk changes this hash."""
    digest = hashlib.sha256()
    for chunk_id in sorted(ids):
        digest.update(chunk_id.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _records(collection: Any, ids: Sequence[str] | None = None) -> tuple[list[_Record], list[Any]]:
    """Every stored chunk (or those of ``ids`` still stored) and its embedding, page by page."""
    records: list[_Record] = []
    embeddings: list[Any] = []
    include = ["documents", "metadatas", "embeddings"]
    offset = 0
    while ids is None or offset < len(ids):
        if ids is None:
            page = collection.get(include=include, limit=_PAGE, offset=offset)
        else:
            page = collection.get(ids=list(ids[offset : offset + _PAGE]), include=include)
        vectors = page["embeddings"] if page["embeddings"] is not None else []
        for chunk_id, text, meta, vector in zip(
            page["ids"], page["documents"] or [], page["metadatas"] or [], vectors, strict=True
        ):
            records.append(_record(chunk_id, text, meta))
            embeddings.append(vector)
        if ids is None and len(page["ids"]) < _PAGE:
            break
        offset += _PAGE
    return records, embeddings


def _tokens(record: _Record) -> list[str]:
    """A chunk's words as the keyword index holds them (never empty: BM25 needs a token)."""
    return keyword_tokens(f"{record.section}\n{record.text}") or [""]


def _record(chunk_id: str, text: str | None, meta: Mapping[str, Any] | None) -> _Record:
    meta = meta or {}
    section = str(meta.get("section", ""))
    return _Record(
        chunk_id=chunk_id,
        text=text or "",
        url=str(meta.get("url", "")),
        title=str(meta.get("title", "")),
        section=section,
        chunk_index=int(meta.get("chunk_index", 0) or 0),
        os=frozenset(chunk_os(section, str(meta.get("os", "") or ""))),
        doc_id=str(meta.get("doc_id", "") or ""),
        generation=str(meta.get("generation", "") or ""),
        readers=Readers.of(meta),
        # Only synced documents carry a generation; a "source" without one is not a sync's.
        source=str(meta.get("source", "") or "") if meta.get("generation") else "",
    )


# --------------------------------------------------------------------------------------------
# The retriever


@dataclass(slots=True)
class _Candidate:
    record: _Record
    cosine: float | None = None
    dense_rank: int | None = None
    keyword_rank: int | None = None
    keyword_score: float = 0.0
    fused: float = 0.0
    feedback: float = 0.0


class Retriever:
    """Hybrid dense + keyword retrieval over one Chroma collection.

    One question costs one embedding and one Chroma query: the keyword ranking, the document
    ranking, the cosines of keyword-only candidates and the best document's chunks come from the
    in-process snapshot (see :class:`_Snapshot`). A dense hit the snapshot does not hold yet
    (written since it was built) makes the next question check for changes at once, and its
    document is then read from Chroma.

    Thread-safe: ``retrieve`` may run in several worker threads at once; the snapshot is replaced
    atomically and rebuilt by one thread at a time.
    """

    def __init__(
        self,
        encoder: Encoder,
        collection: Any,
        config: HybridConfig | None = None,
        feedback: FeedbackSource | None = None,
        live: LiveReader | None = None,
    ) -> None:
        self.encoder = encoder
        self.collection = collection
        self.config = config or HybridConfig()
        self.feedback = feedback
        self.live = live
        self._index: _Snapshot | None = None
        self._checked_at = -math.inf
        self._built_at = -math.inf
        self._refresh_lock = threading.Lock()
        self._checking: threading.Thread | None = None
        """The background check under way, if any (see ``_snapshot``); started under
        ``_starting``, never under ``_refresh_lock``, which a rebuild holds for seconds."""
        self._starting = threading.Lock()
        self._epoch = 0
        """The published generations' epoch (``contracts.live``) at the last check."""

    def retrieve(
        self,
        question: str,
        k: int,
        document_chunks: int = 12,
        *,
        os: str | None = None,
        principals: Principals = ANONYMOUS,
    ) -> Retrieval:
        """The ``k`` best chunks for ``question``, and the best document's own chunks, among
        those ``principals`` may read (public ones only by default).

        ``os`` is the user's operating system ("windows", "macos", "linux"; aliases such as "mac"
        work); chunks for it are preferred. The best document's chunks (by cosine similarity,
        at most ``document_chunks``) let the answer quote its steps even when another of its
        sections (say, "when to contact the service desk") happened to match the words best.
        """
        if k <= 0:
            return Retrieval([], [])
        import numpy as np

        vector = np.asarray(self.encoder.encode([question])[0], dtype=np.float32)
        for attempt in range(1, _STABLE_ATTEMPTS + 1):
            gate = _Gate(self.live, principals)
            snapshot = self._snapshot(principals)
            if snapshot is not None and gate.start > self._epoch:
                # A synced document's generation was switched since the snapshot was checked:
                # its new chunks may be missing from it, and a reader searching the snapshot
                # alone would see neither version. Rebuild (at most once a second).
                snapshot = self._rebuilt(snapshot)
            hits = self._hybrid(question, vector, k, normalise_os(os), snapshot, gate)
            documents: dict[str, list[Hit]] = {}
            if hits:
                if snapshot is not None:
                    snapshot = self._index or snapshot  # rebuilt by ``_hybrid`` when stale
                for best in _first_of_each_document(hits, ANSWER_DOCUMENTS):
                    documents[best.url] = self._document(
                        vector, best, document_chunks, snapshot, gate
                    )
            if gate.stable or attempt == _STABLE_ATTEMPTS:
                break
        if not hits:
            return Retrieval([], [])
        terms = snapshot.terms(snapshot.readable(principals)) if snapshot is not None else None
        return Retrieval(hits, documents.pop(hits[0].url), documents, terms)

    def search(
        self,
        question: str,
        k: int,
        *,
        os: str | None = None,
        principals: Principals = ANONYMOUS,
    ) -> list[Hit]:
        """The ``k`` best chunks for ``question`` that ``principals`` may read, best first."""
        if not k:
            return []
        return self.retrieve(question, k, document_chunks=0, os=os, principals=principals).hits

    def ping(self) -> bool:
        self.collection.count()
        return True

    def refresh(self, *, force: bool = False) -> None:
        """Rebuild the snapshot if the collection changed since it was built.

        Called by ``retrieve``; checks at most every ``refresh_interval_s`` unless ``force``
        (for a caller that knows new chunks were written, such as on ``chunks.indexed``).
        """
        if not force and time.monotonic() - self._checked_at < self.config.refresh_interval_s:
            return
        with self._refresh_lock:
            if not force and time.monotonic() - self._checked_at < self.config.refresh_interval_s:
                return  # another thread checked while this one waited
            # Read first: the snapshot then holds every generation published by this epoch.
            epoch = self.live.epoch() if self.live is not None else 0
            ids = _all_ids(self.collection)
            marker = _marker(ids)
            if self._index is None or self._index.marker != marker:
                started = time.perf_counter()
                # The marker of what was actually read: a write between the two reads is
                # picked up by the next check instead of being hidden by the earlier marker.
                # An empty collection has nothing to rank: no snapshot, dense search only.
                if self._index is not None:
                    self._index = self._index.updated(self.collection, ids)
                else:
                    records, embeddings = _records(self.collection)
                    self._index = (
                        _Snapshot(records, embeddings, _marker(r.chunk_id for r in records))
                        if records
                        else None
                    )
                self._built_at = time.monotonic()
                logger.info(
                    "retrieval snapshot built: %d chunks in %.2fs",
                    len(self._index.records) if self._index is not None else 0,
                    time.perf_counter() - started,
                )
            self._checked_at = time.monotonic()
            self._epoch = epoch

    # ----------------------------------------------------------------------------------------

    def _hybrid(
        self,
        question: str,
        vector: Any,
        k: int,
        os: str | None,
        snapshot: _Snapshot | None,
        gate: _Gate | None = None,
    ) -> list[Hit]:
        config = self.config
        dense_weight = config.dense_weight if config.mode != "keyword" else 0.0
        keyword_weight = config.keyword_weight if config.mode != "dense" else 0.0
        document_weight = config.document_weight if config.mode == "hybrid" else 0.0
        depth = max(config.candidates, k)
        gate = gate or _Gate(None)
        candidates: dict[str, _Candidate] = {}
        mask = snapshot.readable(gate.principals) if snapshot is not None else None
        if dense_weight > 0 or keyword_weight == 0 or snapshot is None:
            nearest: list[_Candidate] = []
            if mask is None or snapshot is None or mask.sum() > config.exact_dense_limit:
                wanted = depth
                if mask is not None and snapshot is not None:
                    # Enough nearest chunks that about twice ``depth`` of them are readable.
                    wanted = math.ceil(2 * depth * len(snapshot.records) / mask.sum())
                nearest = self._dense(vector, wanted, snapshot=snapshot)
                if snapshot is not None and any(
                    c.record.chunk_id not in snapshot.position for c in nearest
                ):
                    # Chunks written since the snapshot: rebuild it now (at most once a
                    # second), so that they get their keyword and document ranks in this very
                    # answer.
                    snapshot = self._rebuilt(snapshot)
                    mask = snapshot.readable(gate.principals)
            # A chunk this reader may not read takes no rank: dropped before ranking, so the
            # readable ones rank as if it did not exist (also one written since the snapshot).
            nearest = [c for c in nearest if gate.principals.may_read(c.record.readers)]
            if mask is not None and snapshot is not None and len(nearest) < depth:
                # Few enough readable chunks to compare with each (the question's product
                # with their embeddings costs less than Chroma's answer), or too few of them
                # among the nearest Chroma found: exact search over the readable ones in the
                # snapshot. (Chunks written since it was built reach them at its next check:
                # at once on ``chunks.indexed``, else within ``refresh_interval_s``.)
                nearest = [
                    _Candidate(snapshot.records[position], cosine=cosine)
                    for position, cosine in snapshot.nearest(vector, depth, mask)
                ]
            nearest = nearest[:depth]
            for rank, candidate in enumerate(nearest, 1):
                candidate.dense_rank = rank if dense_weight > 0 else None
                candidates[candidate.record.chunk_id] = candidate
        if keyword_weight > 0 and snapshot is not None:
            for rank, (position, score) in enumerate(snapshot.search(question, depth, mask), 1):
                record = snapshot.records[position]
                candidate = candidates.setdefault(record.chunk_id, _Candidate(record))
                candidate.keyword_rank, candidate.keyword_score = rank, score
        document_rank: dict[str, int] = {}
        if document_weight > 0 and snapshot is not None:
            for position, cosine in snapshot.openings_ranked(vector, depth, mask):
                record = snapshot.records[position]
                document_rank.setdefault(record.url, len(document_rank) + 1)
                candidates.setdefault(record.chunk_id, _Candidate(record, cosine=cosine))
        shown = gate.keep([c.record for c in candidates.values()])
        candidates = {
            chunk_id: candidate
            for (chunk_id, candidate), keep in zip(candidates.items(), shown, strict=True)
            if keep
        }
        self._fill_cosines(vector, candidates, snapshot)

        for candidate in candidates.values():
            fused = 0.0
            if candidate.dense_rank is not None:
                fused += dense_weight / (config.rrf_k + candidate.dense_rank)
            if candidate.keyword_rank is not None:
                fused += keyword_weight / (config.rrf_k + candidate.keyword_rank)
            if (document := document_rank.get(candidate.record.url)) is not None:
                fused += document_weight / (config.rrf_k + document)
            if os is not None and os in candidate.record.os:
                fused *= 1.0 + config.os_boost
            if self.feedback is not None:
                candidate.feedback = self.feedback.adjustment(candidate.record.url)
                fused *= 1.0 + candidate.feedback
            candidate.fused = fused
        ranked = sorted(
            candidates.values(),
            key=lambda c: (-c.fused, -(c.cosine if c.cosine is not None else -1.0)),
        )
        return [self._hit(candidate) for candidate in ranked[:k]]

    def _document(
        self,
        vector: Any,
        best: Hit,
        limit: int,
        snapshot: _Snapshot | None,
        gate: _Gate | None = None,
    ) -> list[Hit]:
        """The chunks of ``best``'s document closest to ``vector``: from the snapshot when it
        holds ``best`` itself (so it holds that version of the document), else from Chroma."""
        if limit <= 0:
            return []
        gate = gate or _Gate(None)
        candidates: list[_Candidate] | None = None
        if snapshot is not None and best.chunk_id in snapshot.position:
            # Twice the limit: a replaced generation's chunks may still be there, unshown.
            mask = snapshot.readable(gate.principals)
            rows = snapshot.document(vector, best.url, 2 * limit, mask)
            if rows is not None:
                candidates = [
                    _Candidate(snapshot.records[position], cosine=cosine)
                    for position, cosine in rows
                ]
        if candidates is None:
            candidates = self._dense(vector, 2 * limit, where={"url": best.url})
        shown = gate.keep([candidate.record for candidate in candidates])
        return [self._hit(c) for c, keep in zip(candidates, shown, strict=True) if keep][:limit]

    def _rebuilt(self, stale: _Snapshot) -> _Snapshot:
        """A snapshot that holds what was written since ``stale`` was built, unless one was
        built less than ``rebuild_min_interval_s`` ago (then the next question checks)."""
        if time.monotonic() - self._built_at < self.config.rebuild_min_interval_s:
            self._checked_at = -math.inf
            return stale
        try:
            self.refresh(force=True)
        except Exception:
            logger.exception("rebuilding the retrieval snapshot failed; using the previous one")
        return self._index or stale

    def _snapshot(self, principals: Principals = ANONYMOUS) -> _Snapshot | None:
        """The snapshot to answer from. The first one is built in the asking thread (without it
        the answer would lack its keyword and document ranks); after that, a due check for
        changes runs in a background thread and the question is answered from the snapshot
        there is: over 100,000 chunks the check alone reads every id, and a rebuild takes
        seconds, which no turn should wait for. (A ``refresh_interval_s`` of 0, every question
        sees the collection as it is, keeps the check in the asking thread.)"""
        if self.config.mode == "dense" and principals.everything:
            return None  # nothing here needs it (a reader who may not read everything does)
        if self._index is None or self.config.refresh_interval_s == 0:
            self._refresh_logged()
        elif time.monotonic() - self._checked_at >= self.config.refresh_interval_s:
            with self._starting:
                running = self._checking is not None and self._checking.is_alive()
                if not running:
                    self._checking = threading.Thread(
                        target=self._refresh_logged, name="retrieval-snapshot", daemon=True
                    )
                    self._checking.start()
        return self._index

    def _refresh_logged(self) -> None:
        try:
            self.refresh()
        except Exception:
            # The snapshot is an improvement, not a dependency: answer from dense search (and
            # the last good snapshot, if any) rather than fail the user's turn.
            logger.exception("refreshing the retrieval snapshot failed; using the previous one")
            self._checked_at = time.monotonic()

    def _dense(
        self,
        vector: Any,
        k: int,
        where: dict[str, Any] | None = None,
        snapshot: _Snapshot | None = None,
    ) -> list[_Candidate]:
        """The ``k`` chunks closest to ``vector`` by Chroma. With a snapshot, Chroma sends ids
        and distances only (a third of the time of a full result); the texts come from the
        snapshot, and only chunks written since it was built are fetched."""
        if k <= 0:
            return []
        include = ["distances"] if snapshot is not None else ["documents", "metadatas", "distances"]
        result = self.collection.query(
            query_embeddings=[vector], n_results=k, where=where, include=include
        )
        ids, distances = result["ids"][0], result["distances"][0]
        records: dict[str, _Record] = {}
        if snapshot is None:
            documents, metadatas = result["documents"][0], result["metadatas"][0]
            for chunk_id, text, meta in zip(ids, documents, metadatas, strict=True):
                records[chunk_id] = _record(chunk_id, text, meta)
        else:
            unknown = []
            for chunk_id in ids:
                if (position := snapshot.position.get(chunk_id)) is not None:
                    records[chunk_id] = snapshot.records[position]
                else:
                    unknown.append(chunk_id)
            if unknown:
                fetched = self.collection.get(ids=unknown, include=["documents", "metadatas"])
                for chunk_id, text, meta in zip(
                    fetched["ids"],
                    fetched["documents"] or [],
                    fetched["metadatas"] or [],
                    strict=True,
                ):
                    records[chunk_id] = _record(chunk_id, text, meta)
        return [
            _Candidate(records[chunk_id], cosine=1.0 - float(distance))
            for chunk_id, distance in zip(ids, distances, strict=True)
            if chunk_id in records  # deleted between the query and the fetch
        ]

    def _fill_cosines(
        self, vector: Any, candidates: dict[str, _Candidate], snapshot: _Snapshot | None
    ) -> None:
        """Cosine similarity for candidates only the keyword ranker found, from the snapshot's
        embeddings (normalised by the indexer, so a dot product with the normalised query)."""
        missing = [chunk_id for chunk_id, c in candidates.items() if c.cosine is None]
        if not missing or snapshot is None:
            return
        import numpy as np

        rows = np.asarray([snapshot.position[chunk_id] for chunk_id in missing], dtype=np.int64)
        for chunk_id, cosine in zip(missing, snapshot.cosines(vector, rows), strict=True):
            candidates[chunk_id].cosine = float(cosine)

    @staticmethod
    def _hit(candidate: _Candidate) -> Hit:
        record = candidate.record
        return Hit(
            chunk_id=record.chunk_id,
            text=record.text,
            url=record.url,
            title=record.title,
            section=record.section,
            score=candidate.cosine if candidate.cosine is not None else 0.0,
            chunk_index=record.chunk_index,
            fused_score=candidate.fused,
            keyword_score=candidate.keyword_score,
            os=",".join(sorted(record.os)),
            feedback=candidate.feedback,
            source=record.source,
        )
