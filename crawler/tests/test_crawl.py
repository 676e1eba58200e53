"""Crawl jobs end to end in one process: real valkey, the system Chromium, loopback sites."""

from __future__ import annotations

from crawler.tests.conftest import SITES, CrawlClient, RunCrawler, needs_chromium
from crawler.tests.siteserver import SiteServer

pytestmark = needs_chromium


async def test_a_small_site_is_crawled_whole(client: CrawlClient, run_crawler: RunCrawler) -> None:
    with SiteServer(SITES / "help") as site:
        async with run_crawler():
            request = await client.start([site.url("/")], max_pages=20, max_depth=3)
            finished = await client.finished(request)
            pages = await client.pages(request)
    print(finished.model_dump_json(indent=1))
    base = site.url("")
    assert finished.reason == "frontier_empty"
    assert set(pages) == {
        f"{base}/",
        f"{base}/vpn",
        f"{base}/vpn/portal.html",
        f"{base}/printing.html",
        f"{base}/email.html",
        f"{base}/legal.html",
    } or set(pages) == {
        f"{base}/",
        f"{base}/vpn",
        f"{base}/vpn/portal.html",
        f"{base}/printing.html",
        f"{base}/email-copy.html",
        f"{base}/legal.html",
    }
    assert finished.skipped["duplicate"] == 1
