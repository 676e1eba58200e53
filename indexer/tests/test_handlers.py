"""The indexer's subscriptions on a real bus (valkey) with real Chroma: what a handled event leaves
on its stream. A crawled page's event carries the page's HTML (tens of KB, up to the crawler's
page-size limit), so once a page is indexed its entry is deleted; an entry not handled yet stays,
pending, for the retry that indexes it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from chromadb.api.models.Collection import Collection

from contracts.bus import Bus
from contracts.events import CrawledPage, PagesCrawled, new_id
from contracts.settings import ServiceSettings
from contracts.topics import Group, Topic
from indexer import handlers
from indexer.crawled import CrawledPages
from indexer.documents import DocumentStore
from indexer.service import Ingestor
from indexer.uploads import UploadService
from tests.support import free_port, wait_until
from tests.support.help_documents import GUIDE_HTML

URL = "http://help.example/vpn/reset.html"


def crawled(url: str = URL) -> PagesCrawled:
    page = CrawledPage(url=url, title="Reset your VPN password", content_hash="h", html=GUIDE_HTML)
    return PagesCrawled(
        correlation_id=new_id(), conversation_id=new_id(), job_id=new_id(), pages=[page]
    )


@pytest.fixture
async def redis(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    async with aioredis.from_url(fresh_redis_url) as client:
        yield client


@pytest.fixture
async def indexer_bus(
    fresh_redis_url: str, ingestor: Ingestor, collection: Collection
) -> AsyncIterator[Callable[[DocumentStore], Bus]]:
    """Start the indexer's handlers on a bus of their own, its document store given; each is
    stopped at teardown. Redelivery waits a minute: a failed entry stays pending meanwhile."""
    started: list[Bus] = []

    def make(store: DocumentStore) -> Bus:
        bus = Bus(ServiceSettings(redis_url=fresh_redis_url, reclaim_idle_ms=60_000), "indexer")
        handlers.register(
            bus, UploadService(ingestor, collection, store), CrawledPages(ingestor, store)
        )
        started.append(bus)
        return bus

    yield make
    for bus in started:
        await bus.stop()


async def entries(redis: aioredis.Redis, topic: str) -> list[str]:
    found: Any = await redis.xrange(topic)
    return [entry_id.decode() for entry_id, _ in found]


async def test_a_handled_page_leaves_the_stream_and_an_unhandled_one_stays(
    indexer_bus: Callable[[DocumentStore], Bus],
    redis: aioredis.Redis,
    store: DocumentStore,
    collection: Collection,
) -> None:
    # A document store whose Redis is down: indexing fails, the page is not handled.
    down = DocumentStore.from_url(f"redis://127.0.0.1:{free_port()}/0")
    failing = indexer_bus(down)
    await failing.start()
    unhandled = await failing.publish(Topic.PAGES_CRAWLED, crawled("http://help.example/a.html"))

    async def tried() -> bool:
        summary: Any = await redis.xpending(Topic.PAGES_CRAWLED, Group.INDEXER)
        return bool(summary["pending"] == 1)

    await wait_until(tried)
    await failing.stop()
    down.close()
    assert await entries(redis, Topic.PAGES_CRAWLED) == [unhandled]
    assert collection.count() == 0

    working = indexer_bus(store)
    await working.start()
    handled = await working.publish(Topic.PAGES_CRAWLED, crawled())

    async def indexed() -> bool:
        answers: Any = await redis.xrange(Topic.CHUNKS_INDEXED)
        return len(answers) == 1

    await wait_until(indexed)

    async def deleted() -> bool:
        return handled not in await entries(redis, Topic.PAGES_CRAWLED)

    await wait_until(deleted)
    assert collection.count() >= 1
    # The one that failed waits, whole, for its retry (a minute later, by another consumer).
    assert await entries(redis, Topic.PAGES_CRAWLED) == [unhandled]
    pending: Any = await redis.xpending(Topic.PAGES_CRAWLED, Group.INDEXER)
    assert pending["pending"] == 1
