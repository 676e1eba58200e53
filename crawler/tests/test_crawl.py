"""Crawl jobs end to end in one process: real valkey, the system Chromium, loopback sites.

One test per scope and safety rule; each builds the little site it needs with
:class:`~crawler.tests.siteserver.SiteServer` and asserts on what the server saw.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import time
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from contracts.events import TurnReply
from crawler.extract import html_text
from crawler.tests.conftest import SITES, CrawlClient, RunCrawler, decode_entries, needs_chromium
from crawler.tests.siteserver import PROSE, Reply, SiteServer, html, links
from tests.support import wait_until
from tests.support.fake_openai import TEST_KEY, FakeOpenAI
from tests.support.fake_openai import Reply as LLMReply
from tests.support.pdf import build_pdf

pytestmark = needs_chromium


async def test_a_small_site_is_crawled_whole(client: CrawlClient, run_crawler: RunCrawler) -> None:
    """Normalised links (fragment, tracking, trailing slash) are fetched once; identical content
    under two URLs is published once; robots.txt's Disallow holds."""
    with SiteServer(SITES / "help") as site:
        site.page("/extra", html("Extra", links("/private/secret.html", "/vpn#steps", "/vpn/")))
        async with run_crawler():
            request = await client.start([site.url("/"), site.url("/extra")], max_pages=20)
            finished = await client.finished(request)
            pages = await client.pages(request)
    base = site.url("")
    assert finished.reason == "frontier_empty"
    expected = {"/", "/extra", "/vpn", "/vpn/portal.html", "/printing.html", "/legal.html"}
    assert {url.removeprefix(base) for url in pages} - {"/email.html", "/email-copy.html"} == (
        expected
    )
    assert finished.skipped["duplicate"] == 1
    assert finished.skipped["robots"] == 1
    assert site.count("/private/secret.html") == 0
    assert site.count("/robots.txt") == 1
    assert site.count("/printing.html") == 1  # linked with ?utm_source=...#top
    assert site.count("/vpn") + site.count("/vpn/") <= 2  # one fetch (and its slash redirect)
    vpn = pages[f"{base}/vpn"]
    assert vpn.title == "VPN and remote access"
    # The page as read, for the indexer to extract (its DOM: the HTML served has fewer words
    # than CRAWLER_RENDER_MIN_WORDS); the crawler writes no content of its own.
    assert vpn.rendered
    assert '<li>Open the <a href="/vpn/portal.html">self-service portal</a>.</li>' in vpn.html
    assert "<pre><code>vpnctl connect --profile office</code></pre>" in vpn.html
    assert (vpn.markdown, vpn.text, vpn.content_b64) == ("", "", "")
    assert vpn.depth == 1
    assert vpn.requested_url == f"{base}/vpn"
    assert any(link.url == f"{base}/vpn/portal.html" for link in vpn.links)
    summary = {p.url: p for p in finished.pages}
    assert summary[f"{base}/vpn"].status == 200
    assert summary[f"{base}/vpn"].bytes > 0


async def test_only_allowed_domains_are_fetched(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as other, SiteServer() as site:
        site.page("/", html("Home", links("/a", other.url("/elsewhere"))))
        site.page("/a", html("A", "<p>Allowed page.</p>"))
        other.page("/elsewhere", html("Elsewhere", "<p>Not allowed.</p>"))
        async with run_crawler():
            # 127.0.0.1 with a port pins the site; the other server differs only by port.
            request = await client.start([site.url("/")], allowed=[f"127.0.0.1:{site.port}"])
            finished = await client.finished(request)
            # An empty list means the seeds' own sites, with their ports.
            implicit = await client.start([site.url("/")])
            implicit_finished = await client.finished(implicit)
    assert len(finished.pages) == 2
    assert len(implicit_finished.pages) == 2
    assert other.count("/elsewhere") == 0


async def test_robots_crawl_delay_spaces_requests_and_is_cached(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as site:
        site.route(
            "/robots.txt",
            Reply(
                body=b"User-agent: *\nCrawl-delay: 0.4\nDisallow: /admin\n",
                content_type="text/plain",
            ),
        )
        site.page("/", html("Home", links("/p1", "/p2", "/p3", "/admin/panel")))
        for n in (1, 2, 3):
            site.page(f"/p{n}", html(f"P{n}", f"<p>Page number {n}.</p>"))
        async with run_crawler():
            request = await client.start([site.url("/")], concurrency=4)
            finished = await client.finished(request)
            second = await client.start([site.url("/p1")])
            await client.finished(second)
    assert len(finished.pages) == 4
    assert finished.skipped["robots"] == 1
    assert site.count("/admin/panel") == 0
    hits = sorted((h.at, h.path) for h in site.hits if h.path != "/robots.txt")
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(hits)]
    # The crawler spaces the starts of its requests by the delay; the server sees each one a
    # little later, by how long the request took to leave the crawler. On a loaded machine one
    # request can leave 0.2 s late (seen in CI), which shortens the gap before the next one and
    # lengthens the gap after the previous one, so one gap may be short by any amount and the
    # others by a little. Without the delay, the three pages the home page links to go out at
    # concurrency 4 within a few hundredths of a second of each other: two gaps near zero.
    short = [gap for gap in gaps if gap < 0.4 - 0.1]
    assert len(short) <= 1, hits
    assert hits[-1][0] - hits[0][0] >= 0.4 * len(gaps) - 0.5, hits
    assert site.count("/robots.txt") == 1  # the second job used the cached copy


async def test_robots_can_be_switched_off(client: CrawlClient, run_crawler: RunCrawler) -> None:
    with SiteServer() as site:
        site.route(
            "/robots.txt", Reply(body=b"User-agent: *\nDisallow: /\n", content_type="text/plain")
        )
        site.page("/", html("Home", "<p>Robots say no.</p>"))
        async with run_crawler(respect_robots=False):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
    assert len(finished.pages) == 1
    assert site.count("/robots.txt") == 0


async def test_per_host_concurrency_and_rate(client: CrawlClient, run_crawler: RunCrawler) -> None:
    with SiteServer() as site:
        site.page("/", html("Home", links(*(f"/slow{n}" for n in range(6)))))
        for n in range(6):
            site.page(f"/slow{n}", html(f"Slow {n}", f"<p>Slow page {n}.</p>"), delay_s=0.2)
        async with run_crawler(domain_concurrency=1, domain_requests_per_s=10, contexts=4):
            request = await client.start([site.url("/")], concurrency=4)
            finished = await client.finished(request)
    assert len(finished.pages) == 7
    assert site.max_in_flight == 1
    times = sorted(h.at for h in site.hits if h.path != "/robots.txt")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 0.09, gaps  # 10 requests per second at most


async def test_429_and_503_back_off_and_retry_after_is_respected(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    def busy(n: int) -> Reply:
        if n == 1:
            return Reply(429, b"slow down", headers={"Retry-After": "1"})
        return Reply(body=html("Busy", "<p>Served after the wait.</p>").encode())

    def flaky(n: int) -> Reply:
        if n == 1:
            return Reply(503, b"try later")
        return Reply(body=html("Flaky", "<p>Served on the second try.</p>").encode())

    with SiteServer() as site:
        site.page("/", html("Home", links("/busy", "/flaky")))
        site.route("/busy", busy)
        site.route("/flaky", flaky)
        async with run_crawler():
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
    assert {p.title for p in finished.pages} == {"Home", "Busy", "Flaky"}
    first, second = site.times("/busy")
    assert second - first >= 0.95
    assert site.count("/flaky") == 2


async def test_redirects_are_followed_limited_and_kept_on_domain(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as other, SiteServer() as site:
        for n in range(1, 8):
            site.route(f"/long{n}", Reply(302, headers={"Location": f"/long{n + 1}"}))
        site.route("/r1", Reply(301, headers={"Location": "/r2"}))
        site.route("/r2", Reply(302, headers={"Location": site.url("/r3")}))
        site.route("/r3", Reply(307, headers={"Location": "/final"}))
        site.page("/final", html("Final", "<p>The end of the chain.</p>"))
        site.route("/away", Reply(302, headers={"Location": other.url("/landing")}))
        other.page("/landing", html("Elsewhere", "<p>Off the allowed domains.</p>"))
        site.page("/", html("Home", links("/r1", "/long1", "/away")))
        async with run_crawler(max_redirects=4):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            pages = await client.pages(request)
    final = pages[site.url("/final")]
    assert final.requested_url == site.url("/r1")
    assert finished.skipped["redirects"] == 1
    assert site.count("/long6") == 0
    assert finished.skipped["off_domain"] == 1
    assert other.count("/landing") == 0


def twenty_megabytes() -> Iterator[bytes]:
    chunk = b"<p>" + b"x" * 65_536 + b"</p>"
    for _ in range(20 * 1024 * 1024 // len(chunk)):
        yield chunk


async def test_page_size_and_time_limits(client: CrawlClient, run_crawler: RunCrawler) -> None:
    size = str(20 * 1024 * 1024)
    with SiteServer() as site:
        site.page("/", html("Home", links("/big", "/big-stream", "/slow")))
        site.route("/big", Reply(stream=twenty_megabytes, headers={"Content-Length": size}))
        site.route("/big-stream", Reply(stream=twenty_megabytes))  # no length: counted as read
        # Limits far from what the machine's load can reach: reading 1 MiB takes milliseconds,
        # not 4 s (a 1 s limit was once hit first on a loaded CI machine, so the big pages
        # counted as errors), and the slow page would hold the crawl 30 s without its limit.
        site.page("/slow", html("Slow", "<p>Too slow.</p>"), delay_s=30)
        async with run_crawler(max_page_bytes=1024 * 1024, page_timeout_s=4.0):
            started = time.monotonic()
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            took = time.monotonic() - started
    assert finished.skipped["too_large"] == 2
    assert finished.skipped["error"] == 1  # the page time limit
    assert [p.title for p in finished.pages] == ["Home"]
    assert took < 20  # the slow page was given up after its limit, not waited for


BLOATING_SCRIPT = """<script>
  document.addEventListener('DOMContentLoaded', () => {
    document.querySelector('main').insertAdjacentHTML('beforeend', '<p>' + 'grows '.repeat(20000)
      + '</p>');
  });
</script>"""


async def test_an_oversized_rendered_page_or_pdf_is_too_large_and_the_job_goes_on(
    client: CrawlClient, run_crawler: RunCrawler, caplog: pytest.LogCaptureFixture
) -> None:
    """A page's HTML or a PDF travels whole on pages.crawled, so each is held to
    CRAWLER_MAX_PAGE_BYTES: a PDF as downloaded, and a page's DOM after its scripts ran even when
    the HTML served was small. Either is refused with its size, and the other pages go out."""
    limit = 64 * 1024
    big_pdf = build_pdf([[(11, "A large manual.")]]) + b"\n%" + b"x" * (2 * limit)
    with SiteServer() as site:
        site.page("/", html("Home", links("/bloat", "/manual.pdf", "/fine")))
        site.page(
            "/bloat", html("Bloat", "<main><p>Loading the answer...</p></main>", BLOATING_SCRIPT)
        )
        site.route("/manual.pdf", Reply(body=big_pdf, content_type="application/pdf"))
        site.page("/fine", html("Fine", "<p>Still crawled.</p>"))
        with caplog.at_level(logging.INFO, logger="deskpilot.crawler"):
            async with run_crawler(max_page_bytes=limit):
                request = await client.start([site.url("/")])
                finished = await client.finished(request)
                pages = await client.pages(request)
    assert finished.reason == "frontier_empty"
    assert finished.skipped["too_large"] == 2
    assert set(pages) == {site.url("/"), site.url("/fine")}
    assert {p.title for p in finished.pages} == {"Home", "Fine"}
    details = {
        getattr(record, "url", ""): getattr(record, "detail", "")
        for record in caplog.records
        if getattr(record, "outcome", None) == "too_large"
    }
    assert set(details) == {site.url("/bloat"), site.url("/manual.pdf")}
    assert details[site.url("/bloat")].startswith("the rendered page is ")
    assert details[site.url("/bloat")].endswith(f"more than {limit} (CRAWLER_MAX_PAGE_BYTES)")
    assert details[site.url("/manual.pdf")] in (
        f"{len(big_pdf)} bytes declared",
        f"more than {limit} bytes",
    )
    assert site.count("/bloat") == 1  # refused, not retried
    assert site.count("/manual.pdf") == 1


async def test_errors_are_counted_and_the_job_goes_on(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as site:
        site.page("/", html("Home", links("/missing", "/broken", "/fine")))
        site.route("/broken", Reply(500, b"oops"))
        site.page("/fine", html("Fine", "<p>Still crawled.</p>"))
        async with run_crawler():
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
    assert finished.reason == "frontier_empty"
    assert finished.skipped["error"] == 2
    assert {p.title for p in finished.pages} == {"Home", "Fine"}


async def test_non_html_is_skipped_except_pdf(client: CrawlClient, run_crawler: RunCrawler) -> None:
    pdf = build_pdf([[(18, "Printer setup guide"), (11, "Use the queue NW-PRINT-2.")]])
    with SiteServer() as site:
        site.page("/", html("Home", links("/export", "/guide", "/logo.png")))
        site.route("/export", Reply(body=b"a,b\n1,2\n", content_type="text/csv"))
        site.route("/guide", Reply(body=pdf, content_type="application/pdf"))
        async with run_crawler():
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            pages = await client.pages(request)
    assert finished.skipped["non_html"] == 1
    guide = pages[site.url("/guide")]
    assert guide.content_type == "application/pdf"
    assert base64.b64decode(guide.content_b64) == pdf  # the indexer reads it
    assert (guide.html, guide.title) == ("", "guide")
    assert site.count("/logo.png") == 0  # not even queued


async def test_ssrf_guard_refuses_private_addresses(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as site:
        site.page("/", html("Home", "<p>Loopback is not allowlisted in this test.</p>"))
        async with run_crawler(allow_networks=[]):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            metadata = await client.start(
                ["http://169.254.169.254/latest/meta-data/"], allowed=["169.254.169.254"]
            )
            metadata_finished = await client.finished(metadata)
    assert finished.skipped["blocked"] == 1
    assert site.count("/") == 0
    assert metadata_finished.skipped["blocked"] == 1


async def test_sub_requests_outside_the_scope_and_heavy_types_are_aborted(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as other, SiteServer() as site:
        head = (
            f'<script src="{other.url("/tracker.js")}"></script>'
            f'<link rel="stylesheet" href="{other.url("/fonts.css")}">'
            '<link rel="preload" href="/font.woff2" as="font" crossorigin>'
            '<script src="/app.js"></script>'
        )
        body = '<main><h1>Home</h1><img src="/photo.jpg"><video src="/clip.mp4"></video></main>'
        site.page("/", html("Home", body, head))
        site.route(
            "/app.js",
            Reply(
                body=b"document.addEventListener('DOMContentLoaded', () => {"
                b"document.querySelector('main').insertAdjacentHTML('beforeend',"
                b"'<p>Added by the site script.</p>')});",
                content_type="application/javascript",
            ),
        )
        async with run_crawler():
            request = await client.start([site.url("/")])
            await client.finished(request)
            pages = await client.pages(request)
    assert "Added by the site script." in html_text(pages[site.url("/")].html)
    assert site.count("/app.js") == 1
    assert other.paths() == []
    for heavy in ("/photo.jpg", "/clip.mp4", "/font.woff2"):
        assert site.count(heavy) == 0, heavy


async def test_javascript_only_content_is_rendered(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    script = """<script>
      setTimeout(() => fetch('/answer.json').then((r) => r.json()).then((data) => {
        document.body.innerHTML = '<main><h1>' + data.title + '</h1><p>' + data.text + '</p>'
          + '<a href="/next">' + data.link + '</a></main>';
      }), 300);
    </script>"""
    with SiteServer() as site:
        site.page("/", html("Loading", "", script))
        site.route(
            "/answer.json",
            Reply(
                body=b'{"title": "Rendered", "text": "Only scripts put this here.", '
                b'"link": "Next"}',
                content_type="application/json",
            ),
        )
        site.page("/next", html("Next", "<p>Found through a script-made link.</p>"))
        async with run_crawler():
            request = await client.start([site.url("/")])
            await client.finished(request)
            pages = await client.pages(request)
    assert "Only scripts put this here." in html_text(pages[site.url("/")].html)
    assert site.url("/next") in pages


async def test_pages_whose_html_has_the_content_are_read_without_the_browser(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """render=auto: the served HTML is enough for a server-rendered page (its scripts are never
    fetched); a thin page and a page that asks for JavaScript are rendered; always renders all."""
    script = '<script src="/app.js"></script>'
    with SiteServer() as site:
        static = f"<main><p>{PROSE}</p>{links('/thin', '/app')}</main>"
        site.page("/", html("Static", static, script))
        site.page("/thin", html("Thin", "<main><p>Loading the answer...</p></main>", script))
        site.page(
            "/app",
            html(
                "App",
                f"<noscript>You need to enable JavaScript to run this app.</noscript>"
                f"<main><p>{PROSE}</p></main>",
                script,
            ),
        )
        site.route(
            "/app.js",
            Reply(
                body=b"document.addEventListener('DOMContentLoaded', () => {"
                b"document.querySelector('main').insertAdjacentHTML('beforeend',"
                b"'<p>Added by the site script.</p>')});",
                content_type="application/javascript",
            ),
        )
        # The cache keeps scripts 600 s. Every render must run the page's script: a render cut
        # by the tests' 3 s limit on a loaded machine fetched it once less (3 == 4 on CI).
        async with run_crawler(freshness_s=600, render_timeout_s=30):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            pages = await client.pages(request)
        # Fetched for the thin page, then served to the app page from the worker's cache of
        # scripts and stylesheets (crawler/subresources.py); never for the static page.
        assert site.count("/app.js") == 1
        async with run_crawler(render="always", freshness_s=0, render_timeout_s=30):
            # One page at a time: two renders asking for the script at once share one fetch.
            again = await client.start([site.url("/")], concurrency=1)
            await client.finished(again)
            rendered_all = await client.pages(again)
        assert site.count("/app.js") == 4  # freshness 0: nothing is kept, every render fetches

    assert not pages[site.url("/")].rendered
    assert "Step 7" in html_text(pages[site.url("/")].html)
    assert "Added by the site script." not in pages[site.url("/")].html
    assert pages[site.url("/thin")].rendered
    assert "Added by the site script." in html_text(pages[site.url("/thin")].html)
    assert pages[site.url("/app")].rendered
    assert {p.url: p.rendered for p in finished.pages} == {
        site.url("/"): False,
        site.url("/thin"): True,
        site.url("/app"): True,
    }
    assert all(page.rendered for page in rendered_all.values())
    assert "Added by the site script." in html_text(rendered_all[site.url("/")].html)


async def test_a_page_read_within_the_freshness_window_is_not_fetched_again(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """A follow-up's crawl starts from the same seed: pages read are not fetched again, the
    seed's kept links are planned for the new question, and the crawl reads a page it had not."""
    with SiteServer() as site:
        site.page("/", html("Help", links("/vpn", "/printer")))
        site.page("/vpn", html("VPN", "<p>Reset the VPN password in the portal.</p>"))
        site.page("/printer", html("Printer", "<p>Add the printer NW-PRINT-2.</p>"))
        async with run_crawler(freshness_s=600):
            first = await client.start(
                [site.url("/")], max_pages=2, concurrency=1, question="vpn password"
            )
            first_finished = await client.finished(first)
            second = await client.start(
                [site.url("/")], max_pages=2, concurrency=1, question="add a printer"
            )
            second_finished = await client.finished(second)
            second_pages = await client.pages(second)
        async with run_crawler(freshness_s=0):
            third = await client.start([site.url("/")], max_pages=1)
            await client.finished(third)
    assert [p.url for p in first_finished.pages] == [site.url("/"), site.url("/vpn")]
    # Both pages of the first job are skipped (the budget counts pages read, so the job goes on
    # past them); only the printer page is read.
    assert second_finished.skipped["fresh"] == 2
    assert list(second_pages) == [site.url("/printer")]
    assert site.count("/") == 2  # the first job, and the third with the window off
    assert site.count("/vpn") == 1
    assert site.count("/printer") == 1


async def test_links_outside_the_allowed_domains_are_counted_once(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as other, SiteServer() as site:
        far, farther = other.url("/a"), other.url("/b")
        site.page("/", html("Home", links("/next", far, farther)))
        site.page("/next", html("Next", links(far)))
        async with run_crawler():
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
    assert len(finished.pages) == 2
    assert finished.skipped["off_domain"] == 2
    assert other.paths() == []


async def test_with_an_llm_configured_it_reorders_the_best_links(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    """The planner would read the VPN page first (its words match); the model knows better."""
    with SiteServer() as site, FakeOpenAI() as llm:
        site.page(
            "/",
            html(
                "Help",
                '<ul><li><a href="/vpn">VPN setup</a></li>'
                '<li><a href="/tunnel">Remote access tunnel</a></li></ul>',
            ),
        )
        site.page("/vpn", html("VPN", "<p>Install the VPN client.</p>"))
        site.page("/tunnel", html("Tunnel", "<p>The VPN drops every hour: renew the token.</p>"))
        llm.enqueue(LLMReply(json.dumps({"order": [2, 1]})))
        async with run_crawler(
            llm_base_url=llm.base_url, llm_model="fake-model", llm_api_key=SecretStr(TEST_KEY)
        ):
            request = await client.start(
                [site.url("/")], max_pages=2, concurrency=1, question="why does my vpn drop?"
            )
            finished = await client.finished(request)
    assert [p.url for p in finished.pages] == [site.url("/"), site.url("/tunnel")]
    assert site.count("/vpn") == 0
    assert len(llm.requests) == 1  # the seed's links; the tunnel page has none to rank


async def test_a_calendar_trap_does_not_hold_the_crawler(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as site:
        site.page("/", html("Home", links("/calendar/2031/1", "/about")))
        site.page("/about", html("About", "<p>About us.</p>"))
        for year in range(2020, 2040):
            for m in range(1, 13):
                nxt = f"/calendar/{year + (m == 12)}/{m % 12 + 1}"
                prev = f"/calendar/{year - (m == 1)}/{(m - 2) % 12 + 1}"
                site.page(
                    f"/calendar/{year}/{m}",
                    html(f"{year}-{m}", f"<p>Events of {year}-{m}.</p>" + links(prev, nxt)),
                )
        async with run_crawler(max_pages_per_pattern=5):
            request = await client.start([site.url("/")], max_pages=100, max_depth=100)
            finished = await client.finished(request)
    calendar = [p for p in finished.pages if "/calendar/" in p.url]
    assert finished.reason == "frontier_empty"
    assert len(calendar) == 1 + 5  # the month linked from home, then five of its chain
    assert finished.skipped["trap"] >= 1


async def test_stop_deadline_and_progress(client: CrawlClient, run_crawler: RunCrawler) -> None:
    with SiteServer() as site:
        site.page("/", html("Home", links(*(f"/p{n}" for n in range(30)))))
        for n in range(30):
            site.page(f"/p{n}", html(f"P{n}", f"<p>Page {n}.</p>"), delay_s=1.0)
        async with run_crawler():
            reply_to = f"{client.settings.namespace}.reply.gw"
            stopped = await client.start([site.url("/")], concurrency=1, reply_to=reply_to)
            await wait_until(lambda: client.redis.xlen(reply_to), 20)  # a page is in
            await client.stop(stopped)
            stop_finished = await client.finished(stopped)
            late = await client.start([site.url("/")], concurrency=2, deadline_s=1.5)
            started = time.monotonic()
            late_finished = await client.finished(late)
            took = time.monotonic() - started
            replies = [
                TurnReply.model_validate(e)
                for e in decode_entries(await client.redis.xrange(reply_to))
            ]
    assert stop_finished.reason == "stopped"
    assert len(stop_finished.pages) < 5
    assert late_finished.reason == "deadline"
    assert took < 10  # the 1.5 s deadline, not the 15 s the pages would take (loaded-CI margin)
    assert replies
    assert all(r.kind == "progress" and r.stage == "crawling" for r in replies)
    assert all(r.correlation_id == stopped.correlation_id for r in replies)
    assert [r.detail for r in replies][:2] == ["1/10 pages", "2/10 pages"][: len(replies)]
