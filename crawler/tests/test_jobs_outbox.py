"""A worker that dies around a page's publication: the job still publishes exactly the pages it
counts, never more than ``max_pages``, and loses none (the outbox of :mod:`crawler.jobs`). Also
what a worker's jobs share: its cache of scripts and stylesheets, within each job's scope.

Deterministic, without killing a process: workers here are :class:`CrawlService` objects on the
real valkey, fetching a loopback site, and one "dies" by raising out of its bus at the moment a
page event is published (as SIGKILL would: nothing after that point runs in it). Its task stream
entry then goes to another worker, as the bus would redeliver it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import pytest
import redis.asyncio as aioredis

from contracts.events import CrawlFinished, CrawlTask, Event, PagesCrawled
from crawler.browser import BrowserPool, Fulfilment, SubRequest, SubrequestRefused
from crawler.config import CrawlerSettings
from crawler.fetch import Fetcher
from crawler.fresh import FreshPages
from crawler.guard import AddressGuard
from crawler.jobs import JobStore
from crawler.planner import LinkPlanner
from crawler.ratelimit import HostLimiter
from crawler.robots import RobotsCache
from crawler.service import CrawlService, Publisher, Topics
from crawler.tests.conftest import CrawlClient, decode_entries
from crawler.tests.siteserver import Reply, SiteServer
from crawler.urls import Scope

Moment = Literal["before", "after"]


class WorkerDied(Exception):
    """The worker's process ends here; nothing after this point runs in it."""


class DiesAtFirstPage:
    """A worker's bus that dies when the worker publishes its first page event: just before the
    event reaches the stream, or just after."""

    def __init__(self, bus: Publisher, moment: Moment) -> None:
        self.bus = bus
        self.moment: Moment | None = moment

    async def publish(self, topic: str, event: Event) -> str:
        moment = self.moment
        if not isinstance(event, PagesCrawled) or moment is None:
            return await self.bus.publish(topic, event)
        self.moment = None
        if moment == "after":
            await self.bus.publish(topic, event)
        raise WorkerDied(f"{moment} publishing {event.pages[0].url}")


class Recorded:
    """A worker's bus that remembers what it published, in order."""

    def __init__(self, bus: Publisher) -> None:
        self.bus = bus
        self.events: list[Event] = []

    async def publish(self, topic: str, event: Event) -> str:
        self.events.append(event)
        return await self.bus.publish(topic, event)


def words(topic: str) -> str:
    """Enough served text that the page is read without the browser (``render_min_words``)."""
    sentence = f"This help page explains {topic} step by step for every employee of the company. "
    return f"<p>{sentence * 8}</p>"


def page(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"


def help_site(site: SiteServer, root_reply: Reply | None = None) -> None:
    site.page("/", page("Help", words("the help desk") + '<a href="/b">VPN</a>'))
    site.page("/b", page("VPN", words("the VPN client") + '<a href="/c">Printers</a>'))
    site.page("/c", page("Printers", words("the printers")))
    if root_reply is not None:  # "/" as served to every fetch after the first
        first = Reply(body=page("Help", words("the help desk") + '<a href="/b">VPN</a>').encode())
        site.route("/", lambda n: first if n == 1 else root_reply)


@pytest.fixture
async def worker_redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


class Fleet:
    """Workers built as ``crawler.app`` builds one (robots.txt off: the site has none)."""

    def __init__(self, settings: CrawlerSettings, redis: aioredis.Redis) -> None:
        self.settings = settings
        self.redis = redis
        self.fetchers: list[Fetcher] = []

    def worker(self, name: str, publisher: Publisher) -> CrawlService:
        settings, redis, prefix = self.settings, self.redis, self.settings.key_prefix
        guard = AddressGuard(settings.allow_networks)
        fetcher = Fetcher(settings.user_agent, settings.page_timeout_s, guard)
        self.fetchers.append(fetcher)

        async def no_robots(url: str) -> tuple[int, bytes]:
            raise AssertionError(f"robots.txt is not read in these tests ({url})")

        return CrawlService(
            settings,
            jobs=JobStore(redis, prefix, settings.job_ttl_s),
            pool=BrowserPool(settings),  # never started: every page here is read as served
            fetcher=fetcher,
            robots=RobotsCache(redis, no_robots, prefix=prefix, ttl_s=60),
            limiter=HostLimiter(
                redis,
                prefix=prefix,
                concurrency=settings.domain_concurrency,
                requests_per_s=settings.domain_requests_per_s,
                lease_ms=15_000,
            ),
            guard=guard,
            planner=LinkPlanner(None),
            publisher=publisher,
            topics=Topics.for_namespace(settings.namespace),
            worker_id=name,
            fresh=FreshPages(redis, prefix, settings.freshness_s),
        )

    async def close(self) -> None:
        for fetcher in self.fetchers:
            await fetcher.close()


@pytest.fixture
async def fleet(
    crawler_settings: CrawlerSettings, worker_redis: aioredis.Redis
) -> AsyncIterator[Fleet]:
    group = Fleet(crawler_settings.model_copy(update={"respect_robots": False}), worker_redis)
    try:
        yield group
    finally:
        await group.close()


async def run_tasks(client: CrawlClient, first: CrawlService, second: CrawlService) -> None:
    """Hand every task of the stream to ``first`` until it dies; the entry it held, and every
    later one, go to ``second`` (the bus redelivers a dead consumer's pending entries)."""
    worker, handled = first, set[str]()
    while True:
        raw = await client.redis.xrange(client.topics.tasks)
        todo = [
            (entry_id.decode(), CrawlTask.model_validate(payload))
            for (entry_id, _), payload in zip(raw, decode_entries(raw), strict=True)
            if entry_id.decode() not in handled
        ]
        if not todo:
            return
        for entry, task in todo:
            handled.add(entry)
            try:
                await worker.handle_task(task, entry)
            except WorkerDied:
                worker = second
                await worker.handle_task(task, entry)


async def crawl_with_a_death(
    client: CrawlClient, fleet: Fleet, site: SiteServer, moment: Moment, *seeds: str
) -> tuple[CrawlFinished, dict[str, str]]:
    first = fleet.worker("w1", DiesAtFirstPage(client.bus, moment))
    second = fleet.worker("w2", client.bus)
    request = await client.start([site.url(s) for s in seeds], max_pages=1, concurrency=1)
    await first.start_job(request, dispatcher="create:1")
    await run_tasks(client, first, second)
    finished = await client.finished(request, timeout_s=5)
    pages = await client.pages(request)  # fails if a URL went out under two event ids
    base = site.url("")
    return finished, {url.removeprefix(base): p.title for url, p in pages.items()}


@pytest.mark.parametrize("moment", ["before", "after"])
async def test_a_page_read_again_as_fresh_after_its_worker_died_is_published_once(
    client: CrawlClient, fleet: Fleet, moment: Moment
) -> None:
    """The dead worker had read "/" (kept as read for the freshness window); its successor must
    neither publish a second page in its place (max_pages 1) nor drop "/"."""
    fleet.settings = fleet.settings.model_copy(update={"freshness_s": 3600})
    with SiteServer() as site:
        help_site(site)
        finished, pages = await crawl_with_a_death(client, fleet, site, moment, "/")
    assert pages == {"/": "Help"}
    assert finished.reason == "max_pages"
    assert [p.url for p in finished.pages] == [site.url("/")]
    assert site.count("/b") == 0  # nothing beyond the budget was fetched


async def test_a_page_whose_second_fetch_fails_after_its_worker_died_is_published_once(
    client: CrawlClient, fleet: Fleet
) -> None:
    """The successor's own fetch of "/" fails; the page the dead worker published is the job's,
    and "/b" is not published beside it."""
    with SiteServer() as site:
        help_site(site, root_reply=Reply(500, b"down"))
        finished, pages = await crawl_with_a_death(client, fleet, site, "after", "/", "/b")
    assert pages == {"/": "Help"}
    assert finished.reason == "max_pages"
    assert [p.url for p in finished.pages] == [site.url("/")]
    assert site.count("/") == 1  # recorded before it died: the successor only replays it


async def test_the_end_is_announced_after_a_page_its_worker_did_not_publish(
    client: CrawlClient, fleet: Fleet
) -> None:
    """The job's last page was recorded, its worker died before publishing it; the deadline sweep
    of another worker announces the end (the announcer is dead) before the task is redelivered:
    the page goes out first."""
    with SiteServer() as site:
        help_site(site)
        first = fleet.worker("w1", DiesAtFirstPage(client.bus, "before"))
        sweeper = Recorded(client.bus)
        second = fleet.worker("w2", sweeper)
        request = await client.start([site.url("/")], max_pages=1, concurrency=1)
        await first.start_job(request, dispatcher="create:1")
        [(entry_id, _)] = await client.redis.xrange(client.topics.tasks)
        [payload] = decode_entries(await client.redis.xrange(client.topics.tasks))
        with pytest.raises(WorkerDied):
            await first.handle_task(CrawlTask.model_validate(payload), entry_id.decode())
        await second.announce(request.job_id)  # what the sweep does for an orphaned end
        assert [type(e).__name__ for e in sweeper.events] == ["PagesCrawled", "CrawlFinished"]
        pages = await client.pages(request)
        assert list(pages) == [site.url("/")]
        # The redelivered entry then republishes nothing new.
        await second.handle_task(CrawlTask.model_validate(payload), entry_id.decode())
        assert await client.pages(request) == pages
        assert len(await client.page_events(request)) == 1


async def test_a_script_another_job_kept_is_served_only_within_this_jobs_scope(
    fleet: Fleet, client: CrawlClient
) -> None:
    """The worker's script cache is shared by its jobs: a job whose allowed domains leave the
    script's host out is refused it, however it came into memory (:mod:`crawler.subresources`)."""
    worker = fleet.worker("w1", client.bus)
    worker.subresources.ttl_s = 600  # the tests' freshness window is 0: nothing would be kept
    script = SubRequest("http://127.0.0.1:9/app.js", "GET", {}, None, "script")  # port 9: closed
    kept = Fulfilment(200, {"content-type": "application/javascript"}, b"window.x = 1;")
    assert worker.subresources.put(script, kept, redirected=False)

    assert await worker._subrequest(script, Scope.build(["127.0.0.1"], [])) == kept  # no fetch
    with pytest.raises(SubrequestRefused, match="not under an allowed domain"):
        await worker._subrequest(script, Scope.build(["docs.example"], []))
