"""The fleet on real sites: the Dispatch documentation (JavaScript-driven, with a missing page),
the GNOME help (hundreds of interlinked pages), and three worker processes sharing one job while
one of them is killed.

The real sites are read in place from ``../shared/data`` beside the repository, never copied.
"""

from __future__ import annotations

import collections
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from contracts.heartbeat import heartbeat_key
from contracts.topics import Group
from crawler.config import CrawlerSettings
from crawler.extract import html_text
from crawler.tests.conftest import CrawlClient, RunCrawler, needs_chromium
from crawler.tests.siteserver import SiteServer
from tests.support import SHARED_DATA, Child, Children, child_env, wait_until

pytestmark = needs_chromium

DISPATCH = SHARED_DATA / "sites" / "dispatch-docs"
GNOME = SHARED_DATA / "kb" / "gnome-help"


def shared_site(path: Path) -> Path:
    if not path.is_dir():
        pytest.skip(f"{path.resolve()} is absent (the shared data lives beside the repository)")
    return path


async def test_dispatch_docs_with_a_question(client: CrawlClient, run_crawler: RunCrawler) -> None:
    """Best-first with the embedding model: pages about the question come within a small budget;
    the missing docs/api page is an error, not a failure of the job."""
    with SiteServer(shared_site(DISPATCH)) as site:
        async with run_crawler(embeddings=True, contexts=2):
            request = await client.start(
                [site.url("/dispatch/")],
                question="How do I configure incident priorities?",
                max_pages=12,
                max_depth=4,
                concurrency=2,
            )
            finished = await client.finished(request, timeout_s=120)
            pages = await client.pages(request)
    assert finished.reason == "max_pages"
    assert len(pages) == 12
    assert all(url.startswith(site.url("/dispatch")) for url in pages)
    assert all(html_text(page.html) and page.title for page in pages.values())
    # Pages about incidents are read early in a site of 70 pages.
    assert any("incident" in url for url in pages), sorted(pages)
    for page in pages.values():
        assert "Skip to main content" not in html_text(page.html)


async def test_dispatch_docs_breadth_first_finds_the_missing_page(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer(shared_site(DISPATCH)) as site:
        async with run_crawler(contexts=2):
            request = await client.start(
                [site.url("/dispatch/")], max_pages=12, max_depth=1, concurrency=4
            )
            finished = await client.finished(request, timeout_s=120)
    assert finished.reason in ("max_pages", "frontier_empty")
    assert site.count("/dispatch/docs/api") == 1  # missing on purpose: 404
    assert finished.skipped["error"] >= 1
    assert {p.depth for p in finished.pages} <= {0, 1}


async def test_gnome_help_breadth_first(client: CrawlClient, run_crawler: RunCrawler) -> None:
    with SiteServer(shared_site(GNOME)) as site:
        async with run_crawler(contexts=2):
            request = await client.start(
                [site.url("/index.html")], max_pages=25, max_depth=2, concurrency=4
            )
            finished = await client.finished(request, timeout_s=120)
            pages = await client.pages(request)
    assert finished.reason == "max_pages"
    assert len(pages) == 25
    assert finished.pages[0].depth == 0
    # Breadth first: depth 2 only once the home page's own links are used up.
    home = pages[site.url("/index.html")]
    first_level = {link.url for link in home.links if link.url.endswith(".html")} - {home.url}
    depth_one = [p for p in finished.pages if p.depth == 1]
    assert len(depth_one) == min(len(first_level), 24)
    assert all(html_text(page.html) for page in pages.values())


# -- three processes, one killed ----------------------------------------------------------------


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Children]:
    group = Children(log_dir=tmp_path)
    try:
        yield group
    finally:
        group.kill_all()


def worker_env(settings: CrawlerSettings) -> dict[str, str]:
    return child_env(
        {
            "REDIS_URL": settings.redis_url,
            "DESKPILOT_NODE": settings.node_name,
            "DESKPILOT_RECLAIM_IDLE_MS": "2000",
            "DESKPILOT_HEARTBEAT_INTERVAL": "0.5",
            "CRAWLER_NAMESPACE": settings.namespace,
            "CRAWLER_ALLOW_NETWORKS": "127.0.0.0/8",
            "CRAWLER_EMBEDDINGS": "false",
            "CRAWLER_CONTEXTS": "2",
            "CRAWLER_DOMAIN_REQUESTS_PER_S": "200",
            "CRAWLER_DOMAIN_CONCURRENCY": "16",
            "CRAWLER_SWEEP_INTERVAL_S": "0.2",
            "LOG_LEVEL": "INFO",
        }
    )


async def test_three_workers_one_killed_lose_no_page_and_fetch_none_twice(
    client: CrawlClient,
    crawler_settings: CrawlerSettings,
    redis: aioredis.Redis,
    children: Children,
) -> None:
    env = worker_env(crawler_settings)
    workers = [children.start_module("crawler", env=env, name=f"crawler{n}") for n in range(3)]

    async def ready(child: Child) -> bool:
        assert child.running(), child.log_tail()
        return bool(
            await redis.exists(heartbeat_key("crawler", crawler_settings.node_name, child.pid))
        )

    for child in workers:
        await wait_until(lambda c=child: ready(c), 60, message=children.logs)

    tasks = client.topics.tasks
    with SiteServer(shared_site(GNOME), delay_s=0.15) as site:
        request = await client.start(
            [site.url("/index.html")], max_pages=40, max_depth=3, concurrency=6
        )

        async def victim() -> Child | None:
            """A worker holding tasks of the job, once some pages are in."""
            if (
                await redis.llen(
                    f"{crawler_settings.key_prefix}crawler:job:{{{request.job_id}}}:pages"
                )
                < 8
            ):
                return None
            for consumer in await redis.xinfo_consumers(tasks, Group.CRAWLER):
                pid = int(consumer["name"].decode().rsplit("-", 1)[1])
                if consumer["pending"] > 0:
                    return next(c for c in workers if c.pid == pid)
            return None

        killed = await wait_until(victim, 60, interval_s=0.02, message=children.logs)
        pending = await redis.xpending_range(tasks, Group.CRAWLER, "-", "+", 100)
        in_flight = sum(1 for p in pending if p["consumer"].decode().endswith(f"-{killed.pid}"))
        killed_at = time.monotonic()
        killed.send_signal(signal.SIGKILL)
        assert await killed.wait_exit() == -signal.SIGKILL

        finished = await client.finished(request, timeout_s=120)
        pages = await client.pages(request)  # fails if a URL was published under two ids
        page_events = await client.page_events(request)
        hits = collections.Counter(site.paths())

    assert finished.reason == "max_pages", children.logs()
    assert len(pages) == 40
    assert len({e.event_id for e in page_events}) == 40  # no page published twice in effect
    meta = await redis.hgetall(
        f"{crawler_settings.key_prefix}crawler:job:{{{request.job_id}}}:meta"
    )
    assert meta[b"outstanding"] == b"0"  # every dispatched URL came to an outcome
    # Documents only: every render also loads the site's style sheet and scripts.
    fetched_twice = [path for path, n in hits.items() if n > 1 and path.endswith(".html")]
    # Only what the killed worker had in flight may have been fetched again, by its successor.
    detail = [(h.path, round(h.at - killed_at, 3)) for h in site.hits if h.path in fetched_twice]
    assert len(fetched_twice) <= in_flight, (detail, in_flight)
    for path in fetched_twice:  # once by the killed worker, once by its successor
        # The killed worker's fetch was in flight when it died (it may reach the site a moment
        # after killed_at, taken just before the signal); the successor's comes only once the
        # dead worker's claim and lease have run out, a second or more later.
        times = sorted(h.at - killed_at for h in site.hits if h.path == path)
        assert times[0] < 0.5 <= times[-1], (path, detail)
    assert in_flight >= 1
    for child in workers:
        if child is not killed:
            assert child.running(), child.log_tail()
