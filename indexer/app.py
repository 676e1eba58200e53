"""Wires the indexer: loads the embedding model and Chroma once, seeds the demo knowledge base.

On start it ingests the built-in demo articles (``INDEXER_SEED_DEMO_KB``); ingestion is
idempotent, so on later starts nothing is written unless an article changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.runtime import Worker
from indexer.config import IndexerSettings
from indexer.embedding import Embedder
from indexer.service import Ingestor, demo_kb_path
from indexer.store import open_collection

SERVICE = "indexer"
log = logging.getLogger("deskpilot.indexer")


def create_worker(settings: IndexerSettings | None = None) -> Worker:
    settings = settings or IndexerSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        embedder = await asyncio.to_thread(Embedder.from_settings, settings)
        collection = await asyncio.to_thread(open_collection, settings)
        ingestor = Ingestor(embedder, collection, settings)
        seeding: asyncio.Task[bool] | None = None
        if settings.seed_demo_kb:
            seeding = asyncio.create_task(_seed(ingestor))

        async def chroma() -> bool:
            return await asyncio.to_thread(collection.count) >= 0

        async def demo_kb() -> bool:
            # Not ready until the demo articles are searchable; /health reports it.
            return seeding is None or (seeding.done() and seeding.result())

        try:
            yield {"chroma": chroma, "demo_kb": demo_kb}
        finally:
            if seeding is not None and not seeding.done():
                seeding.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await seeding

    return Worker(bus, resources)


async def _seed(ingestor: Ingestor) -> bool:
    try:
        report = await asyncio.to_thread(ingestor.ingest_path, demo_kb_path())
    except Exception:
        log.exception("seeding the demo knowledge base failed")
        return False
    log.info("demo knowledge base ingested", extra={"report": str(report)})
    return True
