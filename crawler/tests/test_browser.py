"""The browser pool: recycling after K pages, recovery from a browser crash, no process left."""

from __future__ import annotations

import os
import signal

import psutil

from crawler.browser import BrowserPool, Fulfilment, SubRequest, SubrequestRefused
from crawler.config import CrawlerSettings
from crawler.tests.conftest import CrawlClient, RunCrawler, needs_chromium
from crawler.tests.siteserver import Reply, SiteServer

pytestmark = needs_chromium


def browser_processes() -> list[psutil.Process]:
    """Chromium processes descended from this test process (through Playwright's driver)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "chrom" in child.name():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def zombies() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.NoSuchProcess:
            continue
    return out


def main_browser_process() -> psutil.Process:
    """The browser process itself: the Chromium whose parent is not a Chromium."""
    for process in browser_processes():
        if "chrom" not in process.parent().name():
            return process
    raise AssertionError("no browser process found")


async def fetch_nothing(request: SubRequest) -> Fulfilment:
    raise SubrequestRefused(request.url)


async def test_the_browser_is_recycled_after_k_pages(crawler_settings: CrawlerSettings) -> None:
    settings = crawler_settings.model_copy(update={"recycle_after_pages": 2, "contexts": 1})
    pool = BrowserPool(settings)
    await pool.start()
    try:
        for n in range(5):
            body = f"<html><body><p>Page {n}</p></body></html>".encode()
            url = f"http://127.0.0.1:9/{n}"
            rendered = await pool.render(url, body, "text/html", fetch_nothing)
            assert f"Page {n}" in rendered.html
        assert pool.launches == 3  # pages 1-2, 3-4, 5
        assert len([p for p in browser_processes() if "chrom" not in p.parent().name()]) == 1
    finally:
        await pool.close()
    assert browser_processes() == []
    assert zombies() == []


async def test_a_browser_crash_is_recovered_and_the_page_retried(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    killed: list[int] = []

    def hang(n: int) -> Reply:
        # The first time the page asks for its script, the browser dies under it.
        if n == 1:
            victim = main_browser_process()
            killed.append(victim.pid)
            os.kill(victim.pid, signal.SIGKILL)
            return Reply(delay_s=1.0, content_type="application/javascript")
        return Reply(body=b"document.body.append('script ran');", content_type="text/javascript")

    with SiteServer() as site:
        page = '<html><head><title>Home</title><script src="/app.js" defer></script></head>'
        site.page("/", page + "<body><p>Hello.</p></body></html>")
        site.route("/app.js", hang)
        async with run_crawler(contexts=1):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            pages = await client.pages(request)
            assert zombies() == []
            assert killed
            assert not psutil.pid_exists(killed[0]) or (
                psutil.Process(killed[0]).status() != psutil.STATUS_ZOMBIE
            )
    assert [p.title for p in finished.pages] == ["Home"]
    assert "script ran" in pages[site.url("/")].text
    assert site.count("/") == 2  # the page was fetched again after the crash
    assert browser_processes() == []
    assert zombies() == []
