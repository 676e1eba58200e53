"""The reference crawlers of ``deskpilot bench crawl``: crawl4ai's BFS deep crawl, or a plain
Playwright BFS where crawl4ai is not installed.

``python -m deploy.bench.crawl_baseline {crawl4ai,playwright} --url URL --concurrency C
--max-pages N --max-depth D --out FILE`` runs in a process of its own, so the benchmark measures
its memory (this process, its Playwright driver and its Chromium) apart from the fleet's, and
crawl4ai is imported nowhere else.

Both use the system Chromium (``CHROMIUM_PATH``) with the fleet's own browser flags, and never a
downloaded browser: crawl4ai attaches over CDP to a Chromium started here (left alone, it would
launch Playwright's downloaded build), Playwright launches it directly. That Chromium resolves no
host but loopback (``--host-resolver-rules``), so no page stalls on a lookup of a font or
analytics host that this offline machine cannot reach: the fleet's request routing spares its own
pages the same wait. Neither waits between requests (crawl4ai's per-domain delay is set to 0),
since the benchmark lifts the fleet's politeness limits too, and crawl4ai runs in ``text_mode``
(no images), as the fleet blocks images, media and fonts.

FILE gets JSON: ``kind`` (with the version), ``duration_s`` (from the browser being ready to the
last page) and ``pages`` (``url``, ``status``, ``ok``,
``depth``, ``ms`` and the page's ``text``: crawl4ai's raw Markdown, or the body's innerText).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlsplit

LOOPBACK_ONLY = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"
_DEVTOOLS = re.compile(r"DevTools listening on (ws://\S+)")


def _chromium_args() -> list[str]:
    from crawler.browser import CHROMIUM_ARGS

    return [*CHROMIUM_ARGS, LOOPBACK_ONLY]


def _chromium_path() -> str:
    from crawler.config import CrawlerSettings

    return str(CrawlerSettings().chromium_path)


@contextmanager
def chromium_with_cdp(timeout_s: float = 30.0) -> Iterator[str]:
    """Start the system Chromium with a DevTools port; yield its CDP websocket URL."""
    # Chromium's helpers may still write the profile while it exits: cleaning up is best effort.
    with tempfile.TemporaryDirectory(
        prefix="bench-chromium-", ignore_cleanup_errors=True
    ) as profile:
        log_path = Path(profile) / "stderr.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(  # nosec B603 # our own services, argv list, no shell
                [
                    _chromium_path(),
                    "--headless=new",
                    "--remote-debugging-port=0",
                    "--remote-debugging-address=127.0.0.1",
                    f"--user-data-dir={profile}/data",
                    *_chromium_args(),
                    "about:blank",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                found = _DEVTOOLS.search(log_path.read_text(errors="replace"))
                if found:
                    break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Chromium gave no DevTools URL: {log_path.read_text()}")
                time.sleep(0.05)
            yield found.group(1)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


async def crawl4ai_bfs(url: str, concurrency: int, max_pages: int, max_depth: int) -> list[Any]:
    from importlib.metadata import version

    from crawl4ai import AsyncWebCrawler, BrowserConfig, CacheMode, CrawlerRunConfig
    from crawl4ai.deep_crawling import BFSDeepCrawlStrategy

    pages: list[dict[str, Any]] = []
    with chromium_with_cdp() as cdp_url:
        browser = BrowserConfig(cdp_url=cdp_url, headless=True, verbose=False, text_mode=True)
        run = CrawlerRunConfig(
            deep_crawl_strategy=BFSDeepCrawlStrategy(
                max_depth=max_depth, include_external=False, max_pages=max_pages
            ),
            cache_mode=CacheMode.BYPASS,
            semaphore_count=concurrency,
            mean_delay=0.0,
            max_range=0.0,
            stream=True,
            verbose=False,
        )
        async with AsyncWebCrawler(config=browser) as crawler:
            started = time.perf_counter()  # the browser is up, as the fleet's is before a job
            async for result in await crawler.arun(url, config=run):
                timing = getattr(result, "dispatch_result", None)
                markdown = result.markdown.raw_markdown if result.markdown else ""
                pages.append(
                    {
                        "url": result.url,
                        "status": result.status_code,
                        "ok": bool(result.success),
                        "depth": (result.metadata or {}).get("depth"),
                        "ms": round((timing.end_time - timing.start_time) * 1000) if timing else 0,
                        "text": markdown,
                    }
                )
            duration = time.perf_counter() - started
    return [f"crawl4ai {version('crawl4ai')} BFSDeepCrawlStrategy", pages, duration]


async def playwright_bfs(url: str, concurrency: int, max_pages: int, max_depth: int) -> list[Any]:
    from importlib.metadata import version

    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import async_playwright

    site = urlsplit(url).netloc
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    queue.put_nowait((url, 0))
    seen = {url}
    pages: list[dict[str, Any]] = []

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=_chromium_path(), headless=True, args=_chromium_args()
        )

        async def worker() -> None:
            context = await browser.new_context(service_workers="block")
            page = await context.new_page()
            while True:
                address, depth = await queue.get()
                try:
                    if len(pages) >= max_pages:
                        continue
                    started = time.perf_counter()
                    record: dict[str, Any] = {"url": address, "depth": depth, "text": ""}
                    try:
                        response = await page.goto(address, wait_until="load", timeout=20_000)
                        record["status"] = response.status if response else None
                        record["ok"] = bool(response and response.ok)
                        record["text"] = await page.inner_text("body")
                        links: list[str] = await page.eval_on_selector_all(
                            "a[href]", "anchors => anchors.map(a => a.href)"
                        )
                    except PlaywrightError:
                        record.update(status=None, ok=False)
                        links = []
                    record["ms"] = round((time.perf_counter() - started) * 1000)
                    pages.append(record)
                    for link in links:
                        target = urldefrag(link).url
                        parts = urlsplit(target)
                        fresh = parts.scheme in ("http", "https") and parts.netloc == site
                        if fresh and target not in seen and depth < max_depth:
                            seen.add(target)
                            queue.put_nowait((target, depth + 1))
                finally:
                    queue.task_done()

        started = time.perf_counter()
        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await queue.join()
        duration = time.perf_counter() - started
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await browser.close()
    return [f"plain Playwright {version('playwright')} BFS", pages, duration]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.bench.crawl_baseline")
    parser.add_argument("kind", choices=("crawl4ai", "playwright"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-pages", type=int, default=1000)
    parser.add_argument("--max-depth", type=int, default=50)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    crawl = crawl4ai_bfs if args.kind == "crawl4ai" else playwright_bfs
    name, pages, duration = asyncio.run(
        crawl(args.url, args.concurrency, args.max_pages, args.max_depth)
    )
    args.out.write_text(
        json.dumps({"kind": name, "duration_s": round(duration, 3), "pages": pages})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
