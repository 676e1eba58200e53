"""What removing a source's unconfigured parts costs: the check every complete sync run makes
(which known documents lie under none of the key prefixes the source covers), and the removal
of a library taken out of the configuration.

Run ``python -m indexer.tests.bench_coverage [--documents 100000] [--removed 2000]`` from the
repository root. It starts a real ``valkey-server`` (AOF on, as the tests start it) and an
embedded Chroma in a temporary directory, records ``--documents`` known documents in a source's
sync state, keyed as a SharePoint source keys library files (``<drive id>/<item id>``): all but
``--removed`` of them in one library, the rest in a second one, whose documents also get
:data:`CHUNKS` chunks each in Chroma (vectors of the packaged model's size, not embedded: nothing
here embeds). Then it times three runs of the indexer's own sync
(:class:`indexer.sources.sync.SourceSync`) over a delta source with nothing to report, as an
incremental run on a quiet site:

1. **cannot tell** (the source covers None): the run as it was before the check existed;
2. **both covered**: the same run with the check, nothing to remove: what the check adds to every
   run (one ``HKEYS`` of the documents and one ``HGETALL`` of the failed ones, a prefix test a
   key);
3. **one library taken out**: the second library's documents removed, hidden and their chunks
   deleted in batches (:func:`indexer.sources.sync.remove_documents`), counted ``deleted``;
4. **a whole source taken out** of the configuration (:mod:`indexer.sources.removal`): another
   source of ``--removed`` documents with :data:`CHUNKS` chunks each, hidden, then removed
   with no grace period.

The bench exits with status 1 when the counts are not what they must be (nothing removed by the
first two runs; every document of the second library, and only those, by the third; no chunk
left of them; every document of the whole source, and its chunks, by the fourth). The machine's
cores and load average are printed: figures on a shared machine are upper bounds.

Not collected by pytest (timings on shared machines are measurements, not pass/fail signals);
``indexer/tests/test_bench_coverage.py`` runs it on a few documents and checks its counts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

import redis

from contracts.live import LIVE_KEY
from indexer.embedding import Embedder
from indexer.extract import ExtractedDocument
from indexer.service import Ingestor
from indexer.sources.base import Change, ChangePage, Readers, Source
from indexer.sources.removal import SourceRemovals
from indexer.sources.state import SyncState
from indexer.sources.sync import SourceSync, source_doc_id
from indexer.tests.bench_support import bench_store, load_average, reported

KEPT, TAKEN_OUT = "b!drive0/", "b!drive1/"
GONE = "bench-gone"
"""The source taken out of the configuration whole: ``--removed`` documents, all with chunks."""
CHUNKS = 5
DIMENSIONS = 384
"""all-MiniLM-L6-v2's vector size."""
BATCH = 5000


class QuietSource(Source):
    """A delta source with nothing to report, covering what it is given."""

    kind = "quiet"

    def __init__(self, covers: tuple[str, ...] | None) -> None:
        super().__init__("bench")
        self.covers = covers

    def changes(self, cursor: str | None) -> Iterator[ChangePage]:
        yield ChangePage((), "quiet", last=True)

    def covered(self) -> tuple[str, ...] | None:
        return self.covers

    def fetch(self, change: Change) -> ExtractedDocument:
        raise AssertionError("a quiet source lists nothing to fetch")

    def permissions(self, change: Change) -> Readers:
        raise AssertionError("a quiet source lists nothing to read")


def record(
    client: redis.Redis, collection: Any, documents: int, removed: int, source: str = "bench"
) -> None:
    """The sync state of ``documents`` known documents of ``source``, the last ``removed`` in
    the second library with their chunks in ``collection`` (published, as a sync leaves them)."""
    state = SyncState(client, source)
    rng = random.Random(16)
    pipe = client.pipeline(transaction=False)
    chunk_ids: list[str] = []
    vectors: list[list[float]] = []
    metadatas: list[dict[str, Any]] = []
    for index in range(documents):
        prefix = TAKEN_OUT if index >= documents - removed else KEPT
        key = f"{prefix}01ITEM{index:08d}"
        doc_id = source_doc_id(source, key)
        known = {"v": f'"c:{{{index}}},1"', "h": "h" * 64, "g": "g" * 24, "d": doc_id, "c": "x"}
        pipe.hset(state._key("docs"), key, json.dumps(known))
        if prefix == TAKEN_OUT:
            pipe.hset(LIVE_KEY, doc_id, "g" * 24)
            for chunk in range(CHUNKS):
                chunk_ids.append(f"{doc_id}:{chunk}")
                vectors.append([rng.uniform(-1.0, 1.0) for _ in range(DIMENSIONS)])
                metadatas.append({"doc_id": doc_id, "generation": "g" * 24, "source": source})
        if index % BATCH == BATCH - 1:
            pipe.execute()
    pipe.execute()
    for start in range(0, len(chunk_ids), BATCH):
        end = start + BATCH
        collection.add(
            ids=chunk_ids[start:end],
            embeddings=vectors[start:end],
            metadatas=metadatas[start:end],
            documents=["chunk"] * len(chunk_ids[start:end]),
        )


def timed_run(ingestor: Ingestor, client: redis.Redis, covers: tuple[str, ...] | None) -> Any:
    state = SyncState(client, "bench")
    started = time.perf_counter()
    result = SourceSync(QuietSource(covers), ingestor, state).run()
    return {
        "wall_s": round(time.perf_counter() - started, 4),
        "deleted": result.summary.deleted,
        "error": result.error,
        "known_after": state.document_count(),
    }


def timed_removal(ingestor: Ingestor, client: redis.Redis, collection: Any) -> Any:
    """A whole source (``removed`` documents with their chunks) taken out of the configuration:
    hidden, then removed with no grace period."""
    removals = SourceRemovals(client, ingestor, grace_s=0)
    chunks = len(collection.get(where={"source": GONE}, include=[])["ids"])
    started = time.perf_counter()
    removals.hide(GONE)
    hidden = time.perf_counter()
    results = removals.purge_due([])
    ended = time.perf_counter()
    for result in results:
        removals.done(result)
    return {
        "hide_s": round(hidden - started, 4),
        "remove_s": round(ended - hidden, 4),
        "deleted": sum(result.summary.deleted for result in results),
        "chunks_before": chunks,
        "chunks_after": len(collection.get(where={"source": GONE}, include=[])["ids"]),
        "known_after": SyncState(client, GONE).document_count(),
    }


def bench(documents: int, removed: int) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "documents": documents,
        "removed": removed,
        "cpus": os.cpu_count(),
        "load_average_start": load_average(),
    }
    with bench_store("bench-coverage") as (client, collection, settings):
        record(client, collection, documents, removed)
        figures["chunks_before"] = collection.count()
        ingestor = Ingestor(Embedder(), collection, settings)  # its model is never loaded
        figures["cannot_tell"] = timed_run(ingestor, client, None)
        figures["both_covered"] = timed_run(ingestor, client, (KEPT, TAKEN_OUT))
        figures["taken_out"] = timed_run(ingestor, client, (KEPT,))
        figures["chunks_after"] = collection.count()
        record(client, collection, removed, removed, source=GONE)
        figures["source_removed"] = timed_removal(ingestor, client, collection)
    figures["load_average_end"] = load_average()
    return figures


def problems(figures: dict[str, Any]) -> list[str]:
    """What is wrong with the runs' counts (empty: nothing)."""
    documents, removed = figures["documents"], figures["removed"]
    found = []
    for name in ("cannot_tell", "both_covered"):
        run = figures[name]
        if run["error"] or run["deleted"] or run["known_after"] != documents:
            found.append(f"{name}: {run}")
    taken_out = figures["taken_out"]
    if taken_out["error"] or taken_out["deleted"] != removed:
        found.append(f"taken_out removed {taken_out['deleted']}, not {removed}: {taken_out}")
    if taken_out["known_after"] != documents - removed:
        found.append(f"taken_out left {taken_out['known_after']} known documents")
    if figures["chunks_before"] != removed * CHUNKS or figures["chunks_after"] != 0:
        found.append(f"chunks {figures['chunks_before']} before, {figures['chunks_after']} after")
    gone = figures["source_removed"]
    if (gone["deleted"], gone["known_after"], gone["chunks_after"]) != (removed, 0, 0):
        found.append(f"source_removed removed {gone['deleted']}, not {removed}: {gone}")
    return found


def report(figures: dict[str, Any]) -> None:
    documents, removed = figures["documents"], figures["removed"]
    cannot, covered, taken = (
        figures["cannot_tell"],
        figures["both_covered"],
        figures["taken_out"],
    )
    print(
        f"{documents} known documents, {removed} of them in a second library "
        f"({figures['chunks_before']} chunks); cpus={figures['cpus']}, load average at the start "
        f"{figures['load_average_start']}"
    )
    print(f"quiet run, the source cannot tell:     {cannot['wall_s']:8.3f} s")
    print(
        f"quiet run, both libraries covered:     {covered['wall_s']:8.3f} s  "
        f"(the check: {covered['wall_s'] - cannot['wall_s']:+.3f} s)"
    )
    per_document = 1000 * (taken["wall_s"] - covered["wall_s"]) / max(removed, 1)
    print(
        f"quiet run, second library taken out:  {taken['wall_s']:8.3f} s  "
        f"{taken['deleted']} deleted, {per_document:.2f} ms a document removed"
    )
    gone = figures["source_removed"]
    print(
        f"whole source taken out ({removed} documents, {gone['chunks_before']} chunks): hidden "
        f"in {gone['hide_s']:.3f} s, removed in {gone['remove_s']:.3f} s, {gone['deleted']} "
        f"deleted, {1000 * gone['remove_s'] / max(removed, 1):.2f} ms a document removed"
    )
    print(f"load average at the end {figures['load_average_end']}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the bench, print its figures and return them; exits with status 1 when a run's counts
    are wrong."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--removed", type=int, default=2_000)
    args = parser.parse_args(argv)
    if not 0 <= args.removed <= args.documents:
        parser.error("--removed must be between 0 and --documents")
    return reported(bench(args.documents, args.removed), report, problems)


if __name__ == "__main__":
    main()
