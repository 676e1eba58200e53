"""Fixtures of the crawler's tests: settings on a fresh namespace, in-process workers, a client.

Integration tests run the real thing: valkey (the root conftest's ``redis_url``), the system
Chromium (modules mark themselves ``needs_chromium``: skipped without it, failed with ``CI=true``),
fixture sites on loopback (:mod:`crawler.tests.siteserver`). Each test gets its own
``CRAWLER_NAMESPACE``, so its streams, consumer groups and keys (robots cache, host rate limits)
are its own on the shared server.

The in-process workers of :func:`run_crawler` attach over CDP (``CRAWLER_CDP_URL``) to one
Chromium of this test process (:func:`shared_chromium`, started with the flags the crawler
launches it with), instead of each launching its own: attaching costs about a second less a
worker (test_sitemap_crawl.py, 11 workers: 66-68 s against 76-79 s, loaded machine), and most of
these tests crawl for less than a launch takes. Each worker still makes its own browser contexts
and closes them. Tests of the launch itself (recycling, a crash) pass ``cdp_url=None``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import redis.asyncio as aioredis

from contracts.bus import RAW_FIELD, Bus
from contracts.events import (
    ContextInsufficient,
    CrawlBudget,
    CrawledPage,
    CrawlFinished,
    CrawlStop,
    Event,
    PagesCrawled,
    SiteMapped,
    new_id,
)
from contracts.runtime import Worker
from crawler.app import create_worker
from crawler.browser import BrowserPool
from crawler.config import CrawlerSettings
from crawler.service import Topics
from tests.support import wait_until, wait_until_sync
from tests.support.chromium import needs_chromium as needs_chromium  # re-exported for modules
from tests.support.chromium import require_chromium

SITES = Path(__file__).resolve().parent / "sites"


@pytest.fixture
def crawler_settings(redis_url: str) -> CrawlerSettings:
    """Settings for a fast, test-sized fleet on its own namespace; loopback allowlisted."""
    return CrawlerSettings(
        redis_url=redis_url,
        namespace=f"t{uuid4().hex[:10]}",
        allow_networks=["127.0.0.0/8"],  # type: ignore[list-item]
        embeddings=False,
        contexts=2,
        page_timeout_s=10,
        render_timeout_s=3,
        domain_requests_per_s=100,
        domain_concurrency=8,
        backoff_s=0.2,
        reclaim_idle_ms=1000,
        heartbeat_interval_s=0.5,
        graceful_timeout_s=10,
        sweep_interval_s=0.2,
        freshness_s=0,  # tests crawl a site again on purpose; the window has a test of its own
        log_level="INFO",
    )


def decode_entries(entries: list[tuple[bytes, dict[bytes, bytes]]]) -> list[dict[str, Any]]:
    """Event payloads (JSON) of raw stream entries written by FastStream."""
    out = []
    for _, fields in entries:
        raw = fields[RAW_FIELD]
        # FastStream keeps headers and body together; the body is the JSON object inside.
        start = raw.find(b'{"event_id"')
        out.append(json.loads(raw[start : raw.rfind(b"}") + 1]))
    return out


class CrawlClient:
    """What the orchestrator or the CLI would do: request a job, stop it, read its results."""

    def __init__(self, settings: CrawlerSettings, redis: aioredis.Redis, bus: Bus) -> None:
        self.settings = settings
        self.redis = redis
        self.bus = bus
        self.topics = Topics.for_namespace(settings.namespace)

    async def publish(self, topic: str, event: Event) -> None:
        await self.bus.publish(topic, event)

    async def start(
        self,
        seeds: list[str],
        *,
        question: str = "",
        allowed: list[str] | None = None,
        reply_to: str | None = None,
        **budget: Any,
    ) -> ContextInsufficient:
        request = ContextInsufficient(
            correlation_id=new_id(),
            conversation_id=new_id(),
            question=question,
            seed_urls=seeds,
            allowed_domains=allowed or [],
            budget=CrawlBudget(**{"deadline_s": 60.0, **budget}),
            reply_to=reply_to,
            source="test",
        )
        await self.publish(self.topics.requests, request)
        return request

    async def stop(self, request: ContextInsufficient) -> None:
        stop = CrawlStop(
            correlation_id=request.correlation_id,
            conversation_id=request.conversation_id,
            job_id=request.job_id,
        )
        await self.publish(self.topics.stop, stop)

    async def finished(self, request: ContextInsufficient, timeout_s: float = 60) -> CrawlFinished:
        async def find() -> CrawlFinished | None:
            for event in decode_entries(await self.redis.xrange(self.topics.finished)):
                if event["job_id"] == request.job_id:
                    return CrawlFinished.model_validate(event)
            return None

        return await wait_until(find, timeout_s, interval_s=0.05)

    async def mapped(self) -> list[SiteMapped]:
        """Every ``site.mapped`` event the fleet published, oldest first."""
        return [
            SiteMapped.model_validate(e)
            for e in decode_entries(await self.redis.xrange(self.topics.mapped))
        ]

    async def page_events(self, request: ContextInsufficient) -> list[PagesCrawled]:
        events = decode_entries(await self.redis.xrange(self.topics.pages))
        return [PagesCrawled.model_validate(e) for e in events if e["job_id"] == request.job_id]

    async def pages(self, request: ContextInsufficient) -> dict[str, CrawledPage]:
        """Published pages by URL; fails if one URL was published under two event ids."""
        by_url: dict[str, tuple[str, CrawledPage]] = {}
        for event in await self.page_events(request):
            for page in event.pages:
                earlier = by_url.get(page.url)
                assert earlier is None or earlier[0] == event.event_id, f"{page.url} twice"
                by_url[page.url] = (event.event_id, page)
        return {url: page for url, (_, page) in by_url.items()}


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def client(
    crawler_settings: CrawlerSettings, redis: aioredis.Redis
) -> AsyncIterator[CrawlClient]:
    bus = Bus(crawler_settings, "crawl-client")
    await bus.start()
    try:
        yield CrawlClient(crawler_settings, redis, bus)
    finally:
        await bus.stop()


RunCrawler = Callable[..., contextlib.AbstractAsyncContextManager[Worker]]

SHARED_BROWSER_PIDS: set[int] = set()
"""The process of :func:`shared_chromium` while it runs: tests that count the Chromium processes
a worker leaves behind leave its tree out."""


@pytest.fixture(scope="session")
def shared_chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The CDP address of one headless Chromium for this test process, launched with the
    crawler's own flags (no name resolved, no sandbox as root), on a free port it picks and
    writes to ``DevToolsActivePort`` in its profile."""
    path = require_chromium()
    profile = tmp_path_factory.mktemp("shared-chromium")
    flags = BrowserPool(CrawlerSettings(chromium_path=path)).launch_args()
    process = subprocess.Popen(  # the system Chromium, fixed arguments
        [str(path), "--headless", "--remote-debugging-port=0", f"--user-data-dir={profile}"]
        + [*flags, "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    active = profile / "DevToolsActivePort"
    try:
        wait_until_sync(
            lambda: process.poll() is not None or (active.exists() and active.read_text()),
            60,
        )
        assert process.poll() is None, f"Chromium exited ({process.returncode})"
        SHARED_BROWSER_PIDS.add(process.pid)
        yield f"http://127.0.0.1:{active.read_text().split()[0]}"
    finally:
        SHARED_BROWSER_PIDS.discard(process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture
def run_crawler(crawler_settings: CrawlerSettings, shared_chromium: str) -> RunCrawler:
    """``async with run_crawler(**overrides) as worker``: an in-process worker, consuming,
    attached to :func:`shared_chromium` unless ``cdp_url`` is overridden."""

    @contextlib.asynccontextmanager
    async def run(**overrides: Any) -> AsyncIterator[Worker]:
        settings = crawler_settings.model_copy(update={"cdp_url": shared_chromium, **overrides})
        worker = create_worker(settings)
        stop = asyncio.Event()
        task = asyncio.create_task(worker.serve(stop))

        async def consuming() -> bool:
            if task.done():
                task.result()  # raises what made it stop
            return bool(worker.bus.broker.subscribers) and worker.consuming()

        try:
            await wait_until(consuming, 60)
            yield worker
        finally:
            stop.set()
            await asyncio.wait_for(task, 60)

    return run
