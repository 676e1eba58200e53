"""``deskpilot sources list`` and ``deskpilot sources sync NAME`` on a real Redis, with the
indexer's real sync handler (real Chroma, the real embedder) syncing the Confluence emulator: the
command queues the request, waits for the run's summary and prints it; a name that is malformed
or not configured is refused before anything is sent."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import AuditRecorded, SourceSyncCompleted
from contracts.settings import ServiceSettings
from contracts.sources import read_source
from contracts.topics import Topic
from deploy.cli import sources as cli
from deploy.cli.main import main
from indexer import handlers
from indexer.config import IndexerSettings
from indexer.embedding import Embedder
from indexer.service import Ingestor
from indexer.sources.config import ConfluenceConfig
from indexer.sources.runner import SourceRunner
from indexer.store import open_collection
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence


@pytest.fixture
def confluence() -> Iterator[FakeConfluence]:
    with FakeConfluence({"IT": "Information Technology"}) as fake:
        fake.add_page(
            "IT", "VPN", "<h1>VPN</h1><p>Connect with GlobalProtect to vpn.example.com.</p>"
        )
        fake.add_page(
            "IT", "Printers", "<h1>Printers</h1><p>Add the floor printer in Settings.</p>"
        )
        yield fake


@pytest.fixture
async def indexer(
    fresh_redis_url: str, confluence: FakeConfluence, tmp_path: Path
) -> AsyncIterator[SourceRunner]:
    """The indexer's source handler on a bus of its own, with one configured source, ``wiki``."""
    settings = IndexerSettings(
        redis_url=fresh_redis_url,
        data_dir=tmp_path / "data",
        chroma_host=None,
        chroma_collection=f"test-{uuid.uuid4().hex[:12]}",
        sources=[
            ConfluenceConfig(
                name="wiki",
                base_url=confluence.base_url,  # type: ignore[arg-type]
                spaces=("IT",),
                email=EMAIL,
                api_token=TOKEN,  # type: ignore[arg-type]
            )
        ],
    )
    client = redis.Redis.from_url(fresh_redis_url)
    ingestor = Ingestor(Embedder(batch_size=8), open_collection(settings), settings)
    runner = SourceRunner(settings.sources, ingestor, client)
    runner.announce()
    bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "indexer")
    handlers.register_sources(bus, runner)
    await bus.start()
    try:
        yield runner
    finally:
        await bus.stop()
        client.close()


def args(redis_url: str, *argv: str) -> argparse.Namespace:
    namespace = argparse.Namespace(
        action=argv[0], redis_url=redis_url, data_dir=None, timeout=120.0, no_wait=False
    )
    if len(argv) > 1:
        namespace.name = argv[1]
    return namespace


async def test_sync_waits_for_the_summary_and_the_catalogue_and_audit_keep_it(
    indexer: SourceRunner, fresh_redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli._sync(args(fresh_redis_url, "sync", "wiki")) == 0
    out = capsys.readouterr().out
    assert "wiki: 2 documents: 2 new, 0 changed, 0 unchanged, 0 deleted, 0 failed" in out

    assert await cli._sync(args(fresh_redis_url, "sync", "wiki")) == 0
    assert "2 unchanged" in capsys.readouterr().out

    async with aioredis.from_url(fresh_redis_url) as client:
        status = await read_source(client, "wiki")
        assert status is not None
        assert status.state == "idle"
        assert status.documents == 2
        assert status.last_summary is not None
        assert status.last_summary.unchanged == 2
        completed = [
            decode_entry(f, SourceSyncCompleted)
            for _, f in await client.xrange(Topic.SOURCE_SYNC_COMPLETED)
        ]
        assert [c.summary.new for c in completed] == [2, 0]
        audits = [decode_entry(f, AuditRecorded) for _, f in await client.xrange(Topic.AUDIT)]
        synced = [a for a in audits if a.action == "source_sync"]
        assert [a.details["new"] for a in synced] == [2, 0]
        assert all(a.details["requested_by"] == "cli" for a in synced)

    assert await cli._list(args(fresh_redis_url, "list")) == 0
    assert "wiki (confluence): idle, 2 documents" in capsys.readouterr().out

    # Taken out of INDEXER_SOURCES (an indexer started without it): listed while hidden.
    await asyncio.to_thread(SourceRunner([], indexer.ingestor, indexer.client).announce)
    assert await cli._list(args(fresh_redis_url, "list")) == 0
    listed = capsys.readouterr().out
    assert "wiki (confluence): hidden, 2 documents" in listed
    assert "no longer configured: answered no more, removed 20" in listed
    assert await cli._sync(args(fresh_redis_url, "sync", "wiki")) == 2
    assert "wiki is no longer configured" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["nope", "../wiki", "WIKI", "wiki;FLUSHALL", "w" * 70])
def test_a_name_that_is_not_a_configured_source_sends_nothing(
    fresh_redis_url: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sources", "sync", name, "--redis-url", fresh_redis_url, "--timeout", "1"])
    assert code == 2
    assert "nothing was sent" in capsys.readouterr().err
    client = redis.Redis.from_url(fresh_redis_url)
    try:
        assert client.xlen(Topic.SOURCE_SYNC_REQUESTED) == 0
    finally:
        client.close()


async def test_sync_of_a_source_the_indexer_does_not_know_reports_it(
    indexer: SourceRunner, fresh_redis_url: str
) -> None:
    """A request that reaches the indexer for a name it has no settings for (the catalogue was
    stale) ends with an error, not a dead letter."""
    from contracts.events import SourceSyncRequested, new_id

    bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "gateway")
    await bus.start()
    try:
        request = SourceSyncRequested(
            correlation_id=new_id(), conversation_id="c", source="gone", requested_by="admin"
        )
        await bus.publish(Topic.SOURCE_SYNC_REQUESTED, request)
        async with aioredis.from_url(fresh_redis_url) as client:
            for _ in range(200):
                found = await client.xrange(Topic.SOURCE_SYNC_COMPLETED)
                if found:
                    break
                await asyncio.sleep(0.05)
            [(_, fields)] = found
            done = decode_entry(fields, SourceSyncCompleted)
            assert done.error == "no source named 'gone' is configured"
    finally:
        await bus.stop()
