"""Wires the indexer: loads the embedding model and Chroma once, seeds the demo knowledge base,
subscribes to uploaded and deleted documents, to crawled pages and to source sync requests
(syncing configured sources on request and on their schedule, hiding and then removing those
taken out of the configuration), and keeps gap questions
(audit decisions, low ratings) from which it drafts knowledge-base update proposals every
``INDEXER_GAPS_INTERVAL_S``.

On start it ingests the built-in demo articles (``INDEXER_SEED_DEMO_KB``); ingestion is
idempotent, so on later starts nothing is written unless an article changed. The articles are
also recorded in the document store, so ``deskpilot reindex`` keeps them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.bus import Bus
from contracts.events import SourceSyncRequested, new_id
from contracts.heartbeat import Probe
from contracts.periodic import every
from contracts.runtime import Worker
from contracts.sources import SOURCES_CONVERSATION
from contracts.topics import Topic
from indexer import handlers
from indexer.cases import open_cases_collection
from indexer.config import IndexerSettings
from indexer.crawled import CrawledPages
from indexer.documents import DocumentStore, ingest_and_record
from indexer.embedding import Embedder, seed_embedder
from indexer.gaps import GapWindow
from indexer.proposals import Drafter, GapDetector
from indexer.service import Ingestor, demo_kb_path
from indexer.sources.runner import SourceRunner
from indexer.store import open_collection
from indexer.uploads import UploadService

SERVICE = "indexer"
log = logging.getLogger("deskpilot.indexer")


def create_worker(settings: IndexerSettings | None = None) -> Worker:
    settings = settings or IndexerSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        embedder = await asyncio.to_thread(lambda: Embedder.from_settings(settings).load())
        collection = await asyncio.to_thread(open_collection, settings)
        ingestor = Ingestor(embedder, collection, settings)
        store = DocumentStore.from_url(settings.redis_url)
        handlers.register(
            bus, UploadService(ingestor, collection, store), CrawledPages(ingestor, store)
        )
        runner = SourceRunner(
            settings.sources, ingestor, store.client, settings.removed_source_grace_s
        )
        await asyncio.to_thread(runner.announce)
        handlers.register_sources(bus, runner)
        handlers.register_drafts(bus, runner)

        async def schedule() -> None:
            for name in await asyncio.to_thread(runner.due):
                await bus.publish(
                    Topic.SOURCE_SYNC_REQUESTED,
                    SourceSyncRequested(
                        correlation_id=new_id(),
                        conversation_id=SOURCES_CONVERSATION,
                        source=name,
                        requested_by="schedule",
                    ),
                )

        async def remove_sources() -> None:
            await handlers.remove_sources(bus, runner)

        window = GapWindow(bus.redis, settings.gaps_window_days)
        handlers.register_gaps(bus, window)
        cases = await asyncio.to_thread(open_cases_collection, settings)
        drafter = Drafter(collection, cases, settings.gaps_source_similarity, store.client)
        gaps = GapDetector(bus, window, embedder, drafter, settings)
        seeding: asyncio.Task[bool] | None = None
        if settings.seed_demo_kb:
            seeder = Ingestor(
                seed_embedder(embedder, settings.embedding_cache_dir), collection, settings
            )
            seeding = asyncio.create_task(_seed(seeder, store))

        async def chroma() -> bool:
            return await asyncio.to_thread(collection.count) >= 0

        async def demo_kb() -> bool:
            # Not ready until the demo articles are searchable; /health reports it.
            return seeding is None or (seeding.done() and seeding.result())

        try:
            async with (
                every(settings.gaps_interval_s, gaps.run, name="knowledge-gaps"),
                every(settings.source_tick_s, schedule, name="source-schedule"),
                every(settings.source_tick_s, remove_sources, name="source-removal"),
            ):
                yield {"chroma": chroma, "demo_kb": demo_kb}
        finally:
            if seeding is not None and not seeding.done():
                seeding.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await seeding
            store.close()

    return Worker(bus, resources)


async def _seed(ingestor: Ingestor, store: DocumentStore) -> bool:
    try:
        report = await asyncio.to_thread(ingest_and_record, ingestor, demo_kb_path(), store)
    except Exception:
        log.exception("seeding the demo knowledge base failed")
        return False
    log.info("demo knowledge base ingested", extra={"report": str(report)})
    return True
