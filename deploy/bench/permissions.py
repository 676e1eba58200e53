"""``deskpilot bench permissions``: what permission filtering costs a retrieval.

A synthetic corpus is written into a Chroma collection of its own, opened as the orchestrator
opens its knowledge base, in a temporary directory removed afterwards: ``--documents``
documents of ``--chunks-per-document`` chunks each (10,000 chunks by default). Each document
has a topic: a random unit vector in the embedding model's 384 dimensions; its chunks'
embeddings are the topic plus Gaussian noise, normalised, and their texts are drawn from a
Zipf-distributed vocabulary of made-up words, the topic's own words more often, so the keyword
ranker has real work. ``--public`` of the documents are public; each other one is readable by
one to three of ``--groups`` groups (and sometimes one user), drawn at random with a fixed seed.

Each question is a topic's vector plus noise and five of its words. Every question is asked
twice in a row, in alternating order, by the same :class:`~orchestrator.retrieval.Retriever`:
once unfiltered (an operator's reader that reads everything: Chroma's approximate dense search,
as before permissions existed) and once as a reader in ``--reader-groups`` groups (exact dense
search over the readable chunks of the in-process snapshot, keyword and document ranking
masked). Both time ``retrieve`` alone: the question's embedding is computed before (it costs the
same either way). The snapshot is built before timing, and is not rechecked meanwhile.

``--as-turn`` times what a turn's retrieval costs: the orchestrator's retriever settings (the
snapshot is checked for changes every few seconds, in a background thread, during the timing)
and the packaged query encoder embedding each question's text first (the retrieval still uses
the synthetic vector, whose neighbours are known; the encoder's time does not depend on the
corpus). Every run also reports what the snapshot costs: its build, the growth of the process's
resident memory across it (after garbage collection and giving freed memory back), one
check of an unchanged collection, and its update after a crawl's worth of new chunks (ten
documents, written, then deleted again so a kept corpus stays as it was): only the new chunks
are read, and the keyword index takes their postings (and drops them again) without being built
anew. ``--corpus-dir`` keeps the corpus for later runs: 100,000 chunks take about ten minutes to
write into embedded Chroma on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

DIMENSIONS = 384


def add_parser(bench_kinds: Any) -> argparse.ArgumentParser:
    """Add ``permissions`` to ``deskpilot bench``'s kinds."""
    parser: argparse.ArgumentParser = bench_kinds.add_parser(
        "permissions",
        help="retrieval p50 with and without permission filtering, on a synthetic corpus",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--documents", type=int, default=500)
    parser.add_argument("--chunks-per-document", type=int, default=20)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--public", type=float, default=0.3, help="share of public documents")
    parser.add_argument("--reader-groups", type=int, default=3, help="the reader's groups")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument(
        "--corpus-dir",
        type=Path,
        help="keep the corpus in this directory and reuse it on later runs with the same "
        "corpus options (writing 100,000 chunks takes minutes); default: a temporary one",
    )
    parser.add_argument(
        "--as-turn",
        action="store_true",
        help="the orchestrator's retriever settings, and each question embedded by the "
        "packaged encoder, timed with its retrieval",
    )
    parser.add_argument("--json", action="store_true")
    return parser


class _Precomputed:
    """The retriever's encoder: each question's vector was computed before the timing."""

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}

    def encode(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[text] for text in texts]


def build_corpus(
    args: argparse.Namespace, collection: Any, batch: int = 1000, *, write: bool = True
) -> tuple[list[Any], list[Any]]:
    """Write the synthetic corpus (``batch`` chunks a call), unless ``write`` is False (it was
    written before); the topics' vectors and words, for the questions."""
    import numpy as np

    from contracts.readers import Readers

    rng = np.random.default_rng(args.seed)
    vocabulary = np.array([f"w{i:05d}" for i in range(20_000)])
    zipf = 1.0 / np.arange(1, len(vocabulary) + 1)
    zipf /= zipf.sum()
    # ``rng.choice(vocabulary, size, p=zipf)`` draws exactly these words from the same random
    # stream, but checks and sums ``p`` again on every call: 1.4 ms a chunk, minutes at 100,000.
    zipf_cdf = zipf.cumsum()
    zipf_cdf /= zipf_cdf[-1]
    topics, topic_words = [], []
    ids: list[str] = []
    # One array, not lists of floats: 100,000 chunks' lists would take over a gigabyte.
    embeddings = np.empty((args.documents * args.chunks_per_document, DIMENSIONS), np.float32)
    texts: list[str] = []
    metadatas: list[dict[str, Any]] = []
    groups = [f"group-{i:02d}" for i in range(args.groups)]
    for doc in range(args.documents):
        topic = rng.normal(size=DIMENSIONS)
        topic /= np.linalg.norm(topic)
        words = rng.choice(vocabulary, size=30, replace=False)
        topics.append(topic)
        topic_words.append(words)
        if rng.random() < args.public:
            readers = Readers()
        else:
            chosen = rng.choice(groups, size=int(rng.integers(1, 4)), replace=False)
            users = (f"user-{int(rng.integers(0, 1000))}",) if rng.random() < 0.1 else ()
            readers = Readers(public=False, users=users, groups=tuple(str(g) for g in chosen))
        url = f"https://wiki.example/doc-{doc}"
        for index in range(args.chunks_per_document):
            vector = topic + rng.normal(scale=0.06, size=DIMENSIONS)
            vector /= np.linalg.norm(vector)
            own = rng.choice(words, size=12)
            common = vocabulary[zipf_cdf.searchsorted(rng.random(48), side="right")]
            body = " ".join([*own, *common])
            ids.append(f"{doc}-{index}")
            embeddings[len(ids) - 1] = vector
            texts.append(body)
            metadatas.append(
                {
                    "doc_id": f"doc-{doc}",
                    "url": url,
                    "title": f"Document {doc}",
                    "section": f"Document {doc} > part {index}",
                    "chunk_index": index,
                    "os": "",
                    **readers.metadata(),
                }
            )
    for start in range(0, len(ids) if write else 0, batch):
        end = start + batch
        collection.add(
            ids=ids[start:end],
            embeddings=embeddings[start:end],
            documents=texts[start:end],
            metadatas=metadatas[start:end],
        )
    return topics, topic_words


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure in a temporary Chroma directory, closed and removed afterwards, or in
    ``--corpus-dir``, kept there for the next run with the same corpus options."""
    if args.corpus_dir is not None:
        args.corpus_dir.mkdir(parents=True, exist_ok=True)
        return _run_in(args, args.corpus_dir)
    with tempfile.TemporaryDirectory(prefix="deskpilot-bench-permissions-") as folder:
        return _run_in(args, Path(folder))


def _run_in(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from contracts.settings import ServiceSettings
    from orchestrator.retrieval import open_chroma, open_collection

    # Named by what makes the corpus, so a kept directory is reused for the same corpus only.
    name = (
        f"bench-{args.documents}x{args.chunks_per_document}-g{args.groups}"
        f"-p{args.public:g}-s{args.seed}"
    )
    # A local directory whatever CHROMA_HOST this shell sets: the bench writes a corpus.
    settings = ServiceSettings(
        data_dir=folder,
        chroma_host=None,
        chroma_auth_token=None,
        chroma_collection=name if args.corpus_dir is not None else f"bench-{uuid.uuid4().hex[:12]}",
    )
    client = open_chroma(settings)
    try:
        return _measure(args, open_collection(settings, client), client.get_max_batch_size())
    finally:
        client.close()  # Chroma's files are released before the directory goes


def _measure(args: argparse.Namespace, collection: Any, batch: int) -> dict[str, Any]:
    import numpy as np

    from contracts.readers import EVERYONE, Principals
    from orchestrator.retrieval import HybridConfig, Retriever, use_one_blas_thread

    expected = args.documents * args.chunks_per_document
    stored = collection.count()
    if stored not in (0, expected):
        raise SystemExit(f"{collection.name} holds {stored} chunks, not {expected}: remove it")
    started = time.perf_counter()
    topics, topic_words = build_corpus(args, collection, batch, write=stored == 0)
    written_s = time.perf_counter() - started

    use_one_blas_thread()  # as the orchestrator does
    rng = np.random.default_rng(args.seed + 1)
    encoder = _Precomputed()
    config = HybridConfig() if args.as_turn else HybridConfig(refresh_interval_s=1e9)
    retriever = Retriever(encoder, collection, config)
    before = _resident_bytes()
    started = time.perf_counter()
    retriever.refresh(force=True)
    snapshot_s = time.perf_counter() - started
    snapshot_mb = (_resident_bytes() - before) / 2**20
    started = time.perf_counter()
    retriever.refresh(force=True)  # the collection is unchanged: a check, no rebuild
    check_s = time.perf_counter() - started
    added_s, removed_s, added = _crawl_update(
        retriever, collection, np.random.default_rng(args.seed + 2)
    )
    model = _turn_encoder() if args.as_turn else None
    reader = Principals(
        user_id="user-1",
        groups=frozenset(f"group-{i:02d}" for i in range(args.reader_groups)),
    )
    snapshot = retriever._index
    assert snapshot is not None  # nosec B101 # the corpus was just written
    readable = snapshot.readable(reader)
    readable_share = 1.0 if readable is None else float(readable.mean())

    questions = []
    for i in range(args.questions):
        topic = int(rng.integers(0, len(topics)))
        vector = topics[topic] + rng.normal(scale=0.08, size=DIMENSIONS)
        vector /= np.linalg.norm(vector)
        text = f"q{i} " + " ".join(rng.choice(topic_words[topic], size=5))
        encoder.vectors[text] = vector.astype(np.float32).tolist()
        questions.append(text)
    for text in questions[:10]:  # warm-up: both paths once
        retriever.retrieve(text, args.k, principals=EVERYONE)
        retriever.retrieve(text, args.k, principals=reader)

    timings: dict[str, list[float]] = {"unfiltered": [], "filtered": [], "encode": []}
    leaked = 0
    for i, text in enumerate(questions):
        order = [("unfiltered", EVERYONE), ("filtered", reader)]
        for name, principals in order if i % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            if model is not None:
                model.encode([f"{name} {text}"])  # a text of its own: no remembered vector
                timings["encode"].append((time.perf_counter() - started) * 1000)
            found = retriever.retrieve(text, args.k, principals=principals)
            timings[name].append((time.perf_counter() - started) * 1000)
            if name == "filtered":
                leaked += sum(
                    not reader.may_read(record.readers)
                    for hit in [*found.hits, *found.best_document]
                    for record in [snapshot.records[snapshot.position[hit.chunk_id]]]
                )

    def p(values: list[float], q: int) -> float:
        return round(statistics.quantiles(values, n=100)[q - 1], 2)

    result = {
        "chunks": len(snapshot.records),
        "documents": args.documents,
        "groups": args.groups,
        "public_share": args.public,
        "reader_groups": args.reader_groups,
        "readable_share": round(readable_share, 3),
        "questions": args.questions,
        "k": args.k,
        "corpus_written_s": round(written_s, 1),
        "corpus_reused": stored == expected,
        "as_turn": args.as_turn,
        "snapshot_built_s": round(snapshot_s, 2),
        "snapshot_memory_mb": round(snapshot_mb),
        "snapshot_check_s": round(check_s, 3),
        "snapshot_update_chunks": added,
        "snapshot_updated_s": round(added_s, 2),
        "snapshot_shrunk_s": round(removed_s, 2),
        "unfiltered_p50_ms": p(timings["unfiltered"], 50),
        "filtered_p50_ms": p(timings["filtered"], 50),
        "unfiltered_p95_ms": p(timings["unfiltered"], 95),
        "filtered_p95_ms": p(timings["filtered"], 95),
        "unreadable_hits": leaked,
        "load_average": round(os.getloadavg()[0], 2),
    }
    if timings["encode"]:
        result["encode_p50_ms"] = p(timings["encode"], 50)
    result["ratio_p50"] = round(result["filtered_p50_ms"] / result["unfiltered_p50_ms"], 3)
    return result


def _crawl_update(retriever: Any, collection: Any, rng: Any) -> tuple[float, float, int]:
    """Seconds the snapshot takes to take in ten new documents (a crawl's pages), and to let
    them go again once deleted; and how many chunks they were."""
    import numpy as np

    vectors = rng.normal(size=(50, DIMENSIONS))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"crawled-{i}" for i in range(len(vectors))]
    collection.add(
        ids=ids,
        embeddings=vectors.astype(np.float32),
        documents=[f"crawled page {i // 5} part {i % 5}" for i in range(len(ids))],
        metadatas=[
            {
                "url": f"https://help.example/page-{i // 5}",
                "title": f"Page {i // 5}",
                "chunk_index": i % 5,
            }
            for i in range(len(ids))
        ],
    )
    started = time.perf_counter()
    retriever.refresh(force=True)
    added_s = time.perf_counter() - started
    collection.delete(ids=ids)
    started = time.perf_counter()
    retriever.refresh(force=True)
    return added_s, time.perf_counter() - started, len(ids)


def _resident_bytes() -> int:
    """This process's resident memory after a garbage collection, with the C library's freed
    memory given back first where it can be (glibc), so it counts what is still held."""
    import ctypes
    import ctypes.util
    import gc

    import psutil

    gc.collect()
    if libc := ctypes.util.find_library("c"):
        trim = getattr(ctypes.CDLL(libc), "malloc_trim", None)
        if trim is not None:
            trim(0)
    return int(psutil.Process().memory_info().rss)


def _turn_encoder() -> Any:
    """The orchestrator's query encoder with its configured threads (one by default), warmed up
    (its first call loads more than a turn's)."""
    from orchestrator.config import OrchestratorSettings
    from orchestrator.embedding import QueryEncoder

    model = QueryEncoder(OrchestratorSettings().torch_threads)
    model.encode(["warm-up"])
    return model


def run_permissions_bench(args: argparse.Namespace) -> int:
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{result['chunks']} chunks, {result['documents']} documents, {result['groups']} "
            f"groups ({result['public_share']:.0%} of documents public); the reader is in "
            f"{result['reader_groups']} groups and may read {result['readable_share']:.1%} of "
            f"the chunks; {result['questions']} questions, k={result['k']}"
        )
        what = "embed + retrieve" if result["as_turn"] else "retrieve"
        print(
            f"{what} p50: unfiltered {result['unfiltered_p50_ms']} ms, filtered "
            f"{result['filtered_p50_ms']} ms, ratio {result['ratio_p50']} (target <= 1.2); "
            f"p95 {result['unfiltered_p95_ms']} / {result['filtered_p95_ms']} ms"
        )
        if "encode_p50_ms" in result:
            print(f"of which embedding the question: p50 {result['encode_p50_ms']} ms")
        print(
            f"unreadable chunks shown to the reader: {result['unreadable_hits']}; snapshot "
            f"built in {result['snapshot_built_s']} s, {result['snapshot_memory_mb']} MB, "
            f"checked unchanged in {result['snapshot_check_s']} s, updated with "
            f"{result['snapshot_update_chunks']} new chunks in {result['snapshot_updated_s']} s "
            f"and without them again in {result['snapshot_shrunk_s']} s; load average "
            f"{result['load_average']}"
        )
    return 0 if result["unreadable_hits"] == 0 else 1
