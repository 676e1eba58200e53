"""The browser pool of one crawler worker: the system Chromium, driven by Playwright.

* One browser per worker, launched from ``CHROMIUM_PATH`` (headless, a fresh temporary profile,
  everything that phones home switched off) or attached over CDP (``CRAWLER_CDP_URL``). Nothing
  here downloads a browser.
* ``CRAWLER_CONTEXTS`` browser contexts, each rendering one page at a time; a page borrows a
  context and gives it back with its cookies cleared.
* After ``CRAWLER_RECYCLE_AFTER_PAGES`` pages the browser is closed and launched anew once the
  pages in flight are done, so a long crawl does not grow the worker's memory.
* A crash (the browser process died or disconnected) fails the page in flight with
  :class:`BrowserCrashed`; the next render relaunches the browser. Closing a crashed browser
  through Playwright reaps its process group, so no zombie stays behind; the caller retries.

:meth:`BrowserPool.render` never lets the browser fetch the document itself: the crawler has
already downloaded it (with its redirect, size and address checks), and the pool serves those bytes
to the page's navigation through request routing. Every other request the page makes is routed
too: images, media and fonts are aborted, and so is anything whose URL is outside the job's
allowed domains or whose host the SSRF guard has not cleared; so a page never stalls on a host it
cannot reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from playwright.async_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    Route,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from crawler.config import CrawlerSettings

log = logging.getLogger("deskpilot.crawler.browser")

BLOCKED_RESOURCES = frozenset({"image", "media", "font", "imageset", "texttrack", "object"})

CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--metrics-recording-only",
    "--mute-audio",
)

# Installed in every document before its scripts run: remembers when the DOM last changed.
_WATCH_JS = """
(() => {
  window.__deskpilotLastChange = performance.now();
  new MutationObserver(() => { window.__deskpilotLastChange = performance.now(); })
    .observe(document, {subtree: true, childList: true, characterData: true});
})();
"""

# Resolves with the serialised DOM once it has been quiet for `quiet` ms with text in the body, or
# after `max` ms: a page that builds its content with scripts is read once the scripts are done.
_SETTLE_JS = """
async ({quiet, max}) => {
  const start = performance.now();
  while (true) {
    const now = performance.now();
    const last = window.__deskpilotLastChange || 0;
    const text = document.body ? document.body.innerText.trim().length : 0;
    if ((text > 0 && now - last >= quiet) || now - start >= max) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return document.documentElement ? document.documentElement.outerHTML : "";
}
"""


class BrowserCrashed(Exception):
    """The browser died or disconnected while rendering; the page may be retried."""


@dataclass(frozen=True)
class Rendered:
    html: str
    url: str
    ms: int
    blocked: int
    """Sub-requests the page made that were aborted (out of scope or blocked types)."""


RequestFilter = Callable[[str, str], Awaitable[bool]]
"""(url, resource type) → may the page load it."""


async def _allow_nothing(_url: str, _kind: str) -> bool:
    return False


@dataclass
class _Slot:
    """One browser context with its one tab, reused page after page.

    The tab's request routing is installed once and reads what the current render set here: the
    document to serve and the job's request filter.
    """

    context: BrowserContext
    page: Page
    body: bytes = b""
    content_type: str = "text/html"
    allow: RequestFilter = _allow_nothing
    served: bool = True
    blocked: int = 0
    crashed: bool = False

    async def route(self, route: Route) -> None:
        request = route.request
        try:
            if request.is_navigation_request() and request.frame == self.page.main_frame:
                if not self.served:
                    self.served = True
                    await route.fulfill(
                        status=200, headers={"content-type": self.content_type}, body=self.body
                    )
                else:  # scripts navigating away: the crawler decides where to go
                    self.blocked += 1
                    await route.abort("blockedbyclient")
                return
            if request.resource_type in BLOCKED_RESOURCES or not await self.allow(
                request.url, request.resource_type
            ):
                self.blocked += 1
                await route.abort("blockedbyclient")
                return
            await route.continue_()
        except PlaywrightError:  # the tab moved on or closed meanwhile
            return


class BrowserPool:
    def __init__(self, settings: CrawlerSettings) -> None:
        self.settings = settings
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._free: list[_Slot] = []
        self._cond = asyncio.Condition()
        self._busy = 0
        self._pages_since_launch = 0
        self._launches = 0
        self._closed = False

    @property
    def launches(self) -> int:
        """How many times a browser was started (recycling and crash recovery included)."""
        return self._launches

    async def start(self) -> None:
        self._playwright = await async_playwright().start()
        async with self._cond:
            await self._launch()

    async def close(self) -> None:
        async with self._cond:
            self._closed = True
            await self._shutdown_browser()
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    def healthy(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    # -- lifecycle (called with the condition held) -------------------------------------------

    async def _launch(self) -> None:
        assert self._playwright is not None
        chromium = self._playwright.chromium
        if self.settings.cdp_url:
            browser = await chromium.connect_over_cdp(self.settings.cdp_url, timeout=30_000)
        else:
            browser = await chromium.launch(
                executable_path=str(self.settings.chromium_path),
                headless=True,
                args=list(CHROMIUM_ARGS),
                timeout=30_000,
            )
        self._browser = browser
        self._free = [await self._new_slot(browser) for _ in range(self.settings.contexts)]
        self._pages_since_launch = 0
        self._launches += 1
        log.info("browser started", extra={"launches": self._launches, "contexts": len(self._free)})

    async def _new_slot(self, browser: Browser) -> _Slot:
        context = await browser.new_context(
            user_agent=self.settings.user_agent,
            accept_downloads=False,
            service_workers="block",
        )
        context.set_default_timeout(self.settings.page_timeout_s * 1000)
        await context.add_init_script(_WATCH_JS)
        page = await context.new_page()
        slot = _Slot(context, page)
        page.on("crash", lambda _: setattr(slot, "crashed", True))
        await page.route("**/*", slot.route)
        return slot

    async def _shutdown_browser(self) -> None:
        browser, self._browser = self._browser, None
        self._free = []
        if browser is None:
            return
        with contextlib.suppress(PlaywrightError, asyncio.TimeoutError):
            # Closing also reaps the process (group) when it has crashed already.
            await asyncio.wait_for(browser.close(), timeout=10)

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[_Slot]:
        async with self._cond:
            while True:
                if self._closed:
                    raise BrowserCrashed("the browser pool is closed")
                needs_launch = self._browser is None or not self._browser.is_connected()
                recycle = self._pages_since_launch >= self.settings.recycle_after_pages
                if needs_launch or recycle:
                    if self._busy > 0:  # let the pages in flight finish first
                        await self._cond.wait()
                        continue
                    if recycle and not needs_launch:
                        log.info("recycling the browser", extra={"pages": self._pages_since_launch})
                    await self._shutdown_browser()
                    await self._launch()
                    continue
                if not self._free:
                    await self._cond.wait()
                    continue
                break
            slot = self._free.pop()
            browser = self._browser
            self._busy += 1
            self._pages_since_launch += 1
        try:
            yield slot
        finally:
            async with self._cond:
                self._busy -= 1
                if browser is self._browser and browser is not None and browser.is_connected():
                    await self._give_back(browser, slot)
                self._cond.notify_all()

    async def _give_back(self, browser: Browser, slot: _Slot) -> None:
        slot.allow, slot.body, slot.served = _allow_nothing, b"", True
        try:
            if slot.crashed or slot.page.is_closed():  # a tab crash: a new tab, same browser
                with contextlib.suppress(PlaywrightError):
                    await slot.context.close()
                slot = await self._new_slot(browser)
            else:
                await slot.context.clear_cookies()
        except PlaywrightError:
            return  # the browser is going away; the next render relaunches it
        self._free.append(slot)

    # -- rendering -------------------------------------------------------------------------

    async def render(
        self,
        url: str,
        body: bytes,
        content_type: str,
        allow: RequestFilter,
    ) -> Rendered:
        """Load ``body`` as the document at ``url``, run its scripts, return the rendered DOM."""
        started = time.monotonic()
        async with self._slot() as slot:
            slot.body, slot.content_type, slot.allow = body, content_type, allow
            slot.served, slot.blocked = False, 0
            try:
                await slot.page.goto(
                    url, wait_until="load", timeout=self.settings.page_timeout_s * 1000
                )
                html = await slot.page.evaluate(
                    _SETTLE_JS,
                    {
                        "quiet": self.settings.render_quiet_ms,
                        "max": int(self.settings.render_timeout_s * 1000),
                    },
                )
            except PlaywrightError as exc:
                gone = self._browser is None or not self._browser.is_connected()
                if gone or slot.crashed or _looks_closed(exc):
                    raise BrowserCrashed(str(exc).splitlines()[0]) from exc
                raise
            if slot.crashed:
                raise BrowserCrashed("the tab crashed")
            elapsed = int((time.monotonic() - started) * 1000)
            return Rendered(str(html), slot.page.url, elapsed, slot.blocked)


def _looks_closed(exc: PlaywrightError) -> bool:
    text = str(exc).lower()
    return "closed" in text or "crash" in text or "disconnected" in text
