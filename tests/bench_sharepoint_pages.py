"""Figures of the SharePoint source's site pages: a first sync of an emulated site, and the same
site synced again unchanged.

Run ``python -m tests.bench_sharepoint_pages --pages 300`` from the repository root (it needs
the Graph emulator of ``tests/support``, on loopback). It starts a real ``valkey-server`` and an
embedded Chroma in a temporary folder and the real embedder, fills the emulator with ``--pages``
published pages (each three text web parts under two headings, about 120 words; made from a
fixed vocabulary with a seeded generator, so every run syncs the same site), then:

1. the first sync: pages per second, chunks per second, the texts embedded, and how much of the
   time went to indexing (chunking, embedding, storing) and how much to the rest;
2. the same site again, by a new source object as the indexer makes for each run: wall time,
   pages read and texts embedded (both should be 0: an unchanged page is known by its ``eTag``,
   ``lastModifiedDateTime`` and readers, and not even read; its readers are, two requests a
   page).

Not collected by pytest (figures on shared machines are measurements, not pass/fail signals).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

from conftest import start_valkey
from indexer.config import IndexerSettings
from indexer.embedding import Embedder
from indexer.service import Ingestor
from indexer.sources.sharepoint import SharePointSource
from indexer.sources.state import SyncState
from indexer.sources.sync import SourceSync, SyncResult
from indexer.store import open_collection
from indexer.tests.counting import CountingEmbedder
from indexer.tests.synced_sources import sharepoint_config
from tests.support.fake_graph import FakeGraph

WORDS = (
    "printer",
    "queue",
    "badge",
    "floor",
    "laptop",
    "reboot",
    "password",
    "portal",
    "account",
    "vpn",
    "client",
    "certificate",
    "network",
    "wifi",
    "proxy",
    "mailbox",
    "calendar",
    "license",
    "install",
    "update",
    "driver",
    "token",
    "device",
    "policy",
    "ticket",
    "desk",
    "manager",
    "approval",
    "backup",
    "restore",
    "folder",
    "share",
    "access",
    "group",
    "request",
    "form",
)


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def fill(graph: FakeGraph, pages: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for number in range(pages):
        intro = f"<h2>Before you start</h2><p>{sentence(rng, 40)}</p>"
        steps = f"<h2>Steps</h2><p>{sentence(rng, 40)}</p><p>{sentence(rng, 40)}</p>"
        graph.add_page(f"Guide {number}", [[[intro], [steps]]])


def timed_run(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> tuple[SyncResult, float]:
    """One sync with a source of its own, as the indexer runs each (its caches start empty);
    the token is fetched before the clock starts (the login is not the sync's)."""
    source = SharePointSource(sharepoint_config(graph))
    try:
        source._access_token()
        started = time.perf_counter()
        result = SourceSync(source, ingestor, SyncState(client, "intranet")).run()
        return result, time.perf_counter() - started
    finally:
        source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        server = start_valkey(root / "valkey")
        try:
            client = redis.Redis.from_url(f"{server.connection_url}/0")
            settings = IndexerSettings(
                data_dir=root / "data",
                chroma_host=None,
                chroma_collection=f"bench-{uuid.uuid4().hex[:12]}",
            )
            embedder = CountingEmbedder(Embedder())
            collection = open_collection(settings)
            ingestor = Ingestor(embedder, collection, settings)
            indexing = [0.0]
            ingest = ingestor.ingest_documents

            def timed(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return ingest(*args, **kwargs)
                finally:
                    indexing[0] += time.perf_counter() - started

            setattr(ingestor, "ingest_documents", timed)  # noqa: B010 - a bench's probe
            (root / "tls").mkdir()
            with FakeGraph(root / "tls") as graph:
                graph.page_size = 100
                fill(graph, args.pages)
                first, first_s = timed_run(graph, ingestor, client)
                chunks = collection.count()
                embedded = embedder.texts
                reads = len(graph.page_reads)
                again, again_s = timed_run(graph, ingestor, client)
        finally:
            server.stop()
    print(f"pages: {args.pages}, chunks: {chunks}, first sync: {first.summary.new} new")
    print(
        f"first sync: {first_s:.1f} s, {args.pages / first_s:.1f} pages/s, "
        f"{chunks / first_s:.1f} chunks/s, {embedded} texts embedded, {reads} pages read; "
        f"{indexing[0]:.1f} s of it indexing (extracted pages chunked, embedded, stored), "
        f"{first_s - indexing[0]:.1f} s the rest (Graph on loopback, readers, sync state)"
    )
    print(
        f"unchanged sync: {again_s:.2f} s, {again.summary.unchanged} unchanged, "
        f"{embedder.texts - embedded} texts embedded, "
        f"{len(graph.page_reads) - reads} pages read"
    )


if __name__ == "__main__":
    main()
