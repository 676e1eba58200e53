"""Crawl jobs that read their sites' sitemaps: real valkey, the system Chromium, loopback sites.

Each test builds the site it needs and asserts on what the site's server (and any server the
sitemap points at) saw. The attacks end to end: a sitemap naming a private address, a host outside
the allowed domains, a path robots.txt disallows, a file over the size cap.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis

from contracts.events import SiteMapped
from contracts.runtime_config import publish_defaults
from crawler import app as crawler_app
from crawler.config import CrawlerSettings
from crawler.service import Topics
from crawler.tests.conftest import CrawlClient, RunCrawler, decode_entries, needs_chromium
from crawler.tests.siteserver import (
    LOOPBACK_ONE,
    PROSE,
    Reply,
    SiteServer,
    html,
    internal_server,
    links,
)
from tests.support import wait_until

pytestmark = needs_chromium

XML = "application/xml"
PEN_QUESTION = "How do I calibrate the drawing tablet pen?"

# A link only the page's script adds: the served HTML has enough words to be read as served
# (CRAWLER_RENDER=auto), so the browser never runs the script and the link is never seen.
SCRIPT_LINK = """<script>
  document.addEventListener('DOMContentLoaded', () => {
    const link = document.createElement('a');
    link.href = '/guides/tablet-pen-calibration';
    link.textContent = 'Calibrate the drawing tablet pen';
    document.querySelector('main').append(link);
  });
</script>"""


def urlset(*entries: str | tuple[str, str]) -> bytes:
    """A urlset of ``loc`` or ``(loc, lastmod)`` entries."""
    body = ""
    for entry in entries:
        loc, lastmod = (entry, "") if isinstance(entry, str) else entry
        body += f"<url><loc>{loc}</loc>" + (f"<lastmod>{lastmod}</lastmod>" if lastmod else "")
        body += "</url>"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'
    ).encode()


def help_site(site: SiteServer) -> None:
    """A home page with prose and links to two articles; the pen guide is linked by script."""
    site.page(
        "/",
        html("Help", f"<main><p>{PROSE}</p>{links('/printing', '/email')}</main>", SCRIPT_LINK),
    )
    site.page("/printing", html("Printing", "<main><p>Add the printer NW-PRINT-2.</p></main>"))
    site.page("/email", html("Email", "<main><p>Your mailbox holds 50 GB.</p></main>"))
    site.page(
        "/guides/tablet-pen-calibration",
        html("Calibrate the pen", "<main><p>Open Wacom settings, then Calibrate.</p></main>"),
    )


async def test_a_page_only_a_script_links_to_is_found_through_the_sitemap(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """The sitemap's URL words match the question: the guide is read second, before the pages
    the home page links to. Without sitemaps it is never found."""
    with SiteServer() as site:
        help_site(site)
        site.route(
            "/sitemap.xml",
            Reply(
                body=urlset(
                    site.url("/printing"),
                    site.url("/email"),
                    site.url("/guides/tablet-pen-calibration"),
                ),
                content_type=XML,
            ),
        )
        async with run_crawler(sitemaps=False):
            blind = await client.start([site.url("/")], question=PEN_QUESTION, max_pages=5)
            blind_finished = await client.finished(blind)
        async with run_crawler():
            request = await client.start(
                [site.url("/")], question=PEN_QUESTION, max_pages=2, concurrency=1
            )
            finished = await client.finished(request)
            pages = await client.pages(request)
    assert blind_finished.reason == "frontier_empty"
    assert {p.url for p in blind_finished.pages} == {
        site.url("/"),
        site.url("/printing"),
        site.url("/email"),
    }
    assert not {p.url: p for p in blind_finished.pages}[site.url("/")].rendered  # read as served
    assert [p.url for p in finished.pages] == [
        site.url("/"),
        site.url("/guides/tablet-pen-calibration"),
    ]
    guide = pages[site.url("/guides/tablet-pen-calibration")]
    assert guide.depth == 1
    assert site.count("/sitemap.xml") == 1


async def test_robots_sitemap_lines_an_index_and_gzip(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """robots.txt names an index; the index names a gzip sitemap and a plain one; every page they
    list is crawled though no page links to another. A second job reads the files from Redis."""
    with SiteServer() as site:
        site.route(
            "/robots.txt",
            Reply(
                body=b"User-agent: *\nDisallow: /private/\nSitemap: /maps/index.xml\n",
                content_type="text/plain",
            ),
        )
        index = (
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            "<sitemap><loc>/maps/a.xml.gz</loc></sitemap>"
            f"<sitemap><loc>{site.url('/maps/b.xml')}</loc></sitemap></sitemapindex>"
        )
        site.route("/maps/index.xml", Reply(body=index.encode(), content_type=XML))
        site.route(
            "/maps/a.xml.gz",
            Reply(
                body=gzip.compress(urlset(site.url("/a1"), site.url("/a2"))),
                content_type="application/gzip",
            ),
        )
        site.route(
            "/maps/b.xml",
            Reply(body=urlset(site.url("/b1"), site.url("/private/b2")), content_type=XML),
        )
        site.page("/", html("Home", "<p>No links here.</p>"))
        for name in ("a1", "a2", "b1"):
            site.page(f"/{name}", html(name.upper(), f"<p>Page {name}.</p>"))
        async with run_crawler():
            request = await client.start([site.url("/")], max_pages=10)
            finished = await client.finished(request)
            again = await client.start([site.url("/")], max_pages=10)
            again_finished = await client.finished(again)
    crawled = {p.url.removeprefix(site.url("")) for p in finished.pages}
    assert crawled == {"/", "/a1", "/a2", "/b1"}
    assert finished.reason == "frontier_empty"
    assert finished.skipped["robots"] == 1  # /private/b2, listed but disallowed
    assert site.count("/private/b2") == 0
    assert {p.url for p in again_finished.pages} == {p.url for p in finished.pages}
    for path in ("/maps/index.xml", "/maps/a.xml.gz", "/maps/b.xml", "/sitemap.xml"):
        assert site.count(path) == 1, path  # the second job used the cached files
    # The site's profile is told what it lists once, not again for the second job.
    [mapped] = await client.mapped()
    assert mapped.site == site.url("").rstrip("/")
    assert {p.url.removeprefix(site.url("")) for p in mapped.pages} == {
        "/a1",
        "/a2",
        "/b1",
        "/private/b2",
    }


async def test_lastmod_decides_whether_a_fresh_page_is_read_again(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """Within the freshness window a page is read again only when its sitemap lastmod is newer
    than the read: an old lastmod leaves it skipped (fresh), a newer one has it fetched."""
    lastmod = {"value": "2020-01-01"}
    with SiteServer() as site:
        site.page("/", html("Home", links("/vpn")))
        site.page("/vpn", html("VPN", "<p>Reset the VPN password in the portal.</p>"))
        site.route(
            "/sitemap.xml",
            lambda _n: Reply(body=urlset((site.url("/vpn"), lastmod["value"])), content_type=XML),
        )
        async with run_crawler(freshness_s=600, sitemap_cache_s=1):
            first = await client.start([site.url("/")], question="vpn password")
            await client.finished(first)
            # The sitemap's cached copy expires (sitemap_cache_s=1), so each job reads it anew.
            await asyncio.sleep(1.1)
            unchanged = await client.start([site.url("/")], question="vpn password")
            unchanged_finished = await client.finished(unchanged)
            lastmod["value"] = datetime.now(UTC).isoformat()  # changed since it was read
            await asyncio.sleep(1.1)
            changed = await client.start([site.url("/")], question="vpn password")
            changed_finished = await client.finished(changed)
    assert site.count("/sitemap.xml") == 3
    assert unchanged_finished.skipped["fresh"] == 2
    assert unchanged_finished.pages == []
    assert changed_finished.skipped["fresh"] == 1  # the home page: not in the sitemap
    assert [p.url for p in changed_finished.pages] == [site.url("/vpn")]
    assert site.count("/vpn") == 2


async def test_a_sitemap_naming_another_host_is_mapped_only_when_configured(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """A staging site whose sitemap names production (a host that does not even resolve here):
    without a mapping its URLs are off the allowed domains and dropped; with one, their paths
    are read from the staging site."""
    with SiteServer() as site:
        help_site(site)
        site.route(
            "/sitemap.xml",
            Reply(
                body=urlset("https://help.prod.example/guides/tablet-pen-calibration"),
                content_type=XML,
            ),
        )
        async with run_crawler():
            unmapped = await client.start([site.url("/")], question=PEN_QUESTION, max_pages=5)
            unmapped_finished = await client.finished(unmapped)
        mapping = {"help.prod.example": f"127.0.0.1:{site.port}"}
        async with run_crawler(sitemap_host_map=mapping):
            mapped = await client.start(
                [site.url("/")], question=PEN_QUESTION, max_pages=2, concurrency=1
            )
            mapped_finished = await client.finished(mapped)
    target = site.url("/guides/tablet-pen-calibration")
    assert target not in {p.url for p in unmapped_finished.pages}
    assert unmapped_finished.skipped.get("blocked", 0) == 0  # never even tried
    assert [p.url for p in mapped_finished.pages] == [site.url("/"), target]


async def test_sitemaps_pointing_at_private_or_outside_hosts_are_never_fetched(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """robots.txt names a sitemap on an internal host (in the allowed domains, refused by the
    SSRF guard), one on a host outside the allowed domains and one robots.txt disallows; the
    site's own sitemap lists pages on both hosts. None of them is fetched; the job goes on."""
    with (
        SiteServer() as site,
        SiteServer() as other,
        internal_server("127.0.0.2") as internal,
    ):
        robots = (
            "User-agent: *\nDisallow: /private/\n"
            f"Sitemap: {internal.url('/sitemap.xml')}\n"
            f"Sitemap: {other.url('/sitemap.xml')}\n"
            "Sitemap: /private/sitemap.xml\n"
        )
        site.route("/robots.txt", Reply(body=robots.encode(), content_type="text/plain"))
        site.route(
            "/sitemap.xml",
            Reply(
                body=urlset(internal.url("/secret"), other.url("/elsewhere"), site.url("/ok")),
                content_type=XML,
            ),
        )
        site.page("/", html("Home", "<p>Home.</p>"))
        site.page("/ok", html("OK", "<p>Listed and allowed.</p>"))
        allowed = [f"127.0.0.1:{site.port}", "127.0.0.2"]
        async with run_crawler(allow_networks=[LOOPBACK_ONE]):
            request = await client.start([site.url("/")], allowed=allowed)
            finished = await client.finished(request)
    assert internal.hits == []
    assert other.hits == []
    assert site.count("/private/sitemap.xml") == 0
    assert {p.url for p in finished.pages} == {site.url("/"), site.url("/ok")}
    assert finished.skipped["blocked"] == 1  # /secret: in scope, refused when its task ran


async def test_an_oversized_or_broken_sitemap_leaves_the_crawl_going(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """A sitemap over CRAWLER_SITEMAP_MAX_BYTES is given up while downloading, also when the
    server compresses it on the wire (Content-Encoding: gzip, counted as decoded); one that breaks
    off keeps the pages listed before the break."""

    def endless() -> Iterator[bytes]:
        yield urlset(site.url("/big-first"))[:-9]
        for _ in range(4096):
            yield b"<url><loc>" + b"x" * 1000 + b"</loc></url>"

    with SiteServer() as site:
        site.route(
            "/robots.txt",
            Reply(
                body=b"User-agent: *\nSitemap: /huge.xml\nSitemap: /encoded.xml\n",
                content_type="text/plain",
            ),
        )
        site.route("/huge.xml", Reply(stream=endless, content_type=XML))
        wire_bomb = gzip.compress(urlset(site.url("/big-first"))[:-9] + b" " * (20 * 1024 * 1024))
        site.route(
            "/encoded.xml",
            Reply(body=wire_bomb, content_type=XML, headers={"Content-Encoding": "gzip"}),
        )
        broken = urlset(site.url("/listed"), site.url("/cut-off"))[:-30]
        site.route("/sitemap.xml", Reply(body=broken, content_type=XML))
        site.page("/", html("Home", "<p>Home.</p>"))
        site.page("/listed", html("Listed", "<p>Listed before the break.</p>"))
        async with run_crawler(sitemap_max_bytes=64 * 1024):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
    assert {p.url for p in finished.pages} == {site.url("/"), site.url("/listed")}
    assert site.count("/big-first") == 0  # the oversized files were not used at all
    assert site.count("/encoded.xml") == 1
    assert site.count("/cut-off") == 0


async def test_a_slow_sitemap_holds_the_crawl_no_longer_than_its_time_limit(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """Past CRAWLER_SITEMAP_TIMEOUT_S the job plans what it has read (the fast file's page) and
    goes on; it would otherwise wait for the slow file up to the page time limit (20 s here)."""
    with SiteServer() as site:
        robots = b"User-agent: *\nSitemap: /fast.xml\nSitemap: /slow.xml\n"
        site.route("/robots.txt", Reply(body=robots, content_type="text/plain"))
        site.route("/fast.xml", Reply(body=urlset(site.url("/a")), content_type=XML))
        site.route("/slow.xml", Reply(body=urlset(site.url("/b")), content_type=XML, delay_s=30))
        site.page("/", html("Home", "<p>Home.</p>"))
        site.page("/a", html("A", "<p>Listed in the fast sitemap.</p>"))
        site.page("/b", html("B", "<p>Listed in the slow sitemap.</p>"))
        async with run_crawler(sitemap_timeout_s=1.0, page_timeout_s=20):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
    assert finished.reason == "frontier_empty"
    assert {p.url for p in finished.pages} == {site.url("/"), site.url("/a")}
    assert site.count("/slow.xml") == 1
    assert finished.duration_s < 15  # 1 s and the pages, not the 20 s page limit (loaded CI)


async def test_the_configured_sites_sitemaps_are_read_with_no_question_asked(
    run_crawler: RunCrawler,
    crawler_settings: CrawlerSettings,
    fresh_redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seeds the orchestrator runs with are profiled from their sitemaps before anyone
    asks: one worker announces the pages they list, once per interval, and reads no page."""
    monkeypatch.setattr(crawler_app, "SITE_PROFILE_TICK_S", 0.2)
    redis = aioredis.from_url(fresh_redis_url)
    try:
        with SiteServer() as site:
            site.route(
                "/sitemap.xml",
                Reply(body=urlset(site.url("/printing"), site.url("/email")), content_type=XML),
            )
            site.page("/", html("Help", "<main><p>Start here.</p></main>"))
            await publish_defaults(
                redis,
                "orchestrator",
                {"crawl_seed_urls": [site.url("/")], "crawl_allowed_domains": ["127.0.0.1"]},
            )
            async with (
                run_crawler(redis_url=fresh_redis_url, site_profile_interval_s=60),
                run_crawler(redis_url=fresh_redis_url, site_profile_interval_s=60),
            ):
                stream = Topics.for_namespace(crawler_settings.namespace).mapped
                await wait_until(lambda: redis.xrange(stream), 30)
                lock = f"{crawler_settings.key_prefix}crawler:site-profile"
                assert 0 < await redis.ttl(lock) <= 60  # read once for the interval
                # The interval over, a worker reads the list again and finds it unchanged.
                origin = site.url("").rstrip("/")
                mapped = f"{crawler_settings.key_prefix}crawler:sitemap:{origin}:mapped"
                await redis.expire(mapped, 5)
                await redis.delete(lock)
                await wait_until(lambda: ttl_over(redis, mapped, 5), 30)
                entries = await redis.xrange(stream)
        [event] = [SiteMapped.model_validate(e) for e in decode_entries(entries)]
        assert event.site == site.url("").rstrip("/")
        assert sorted(p.url for p in event.pages) == [site.url("/email"), site.url("/printing")]
        assert site.count("/sitemap.xml") == 1
        assert site.count("/") == 0  # no page read: the profile is the sitemap's
    finally:
        await redis.aclose()


async def ttl_over(redis: aioredis.Redis, key: str, seconds: int) -> bool:
    return bool(await redis.ttl(key) > seconds)
