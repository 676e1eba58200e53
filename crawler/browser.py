"""The browser pool of one crawler worker: the system Chromium, driven by Playwright.

* One browser per worker, launched from ``CHROMIUM_PATH`` (headless, a fresh temporary profile,
  everything that phones home switched off) or attached over CDP (``CRAWLER_CDP_URL``). Nothing
  here downloads a browser.
* Chromium runs its sandbox unless it cannot: as root (Chromium refuses to sandbox itself there)
  or with ``CRAWLER_CHROMIUM_SANDBOX=false``; the image runs as an unprivileged user.
* ``CRAWLER_CONTEXTS`` browser contexts, each rendering one page at a time; a page borrows a
  context and gives it back with its cookies cleared.
* After ``CRAWLER_RECYCLE_AFTER_PAGES`` pages the browser is closed and launched anew once the
  pages in flight are done, so a long crawl does not grow the worker's memory.
* A crash (the browser process died or disconnected) fails the page in flight with
  :class:`BrowserCrashed`; the next render relaunches the browser. Closing a crashed browser
  through Playwright reaps its process group, so no zombie stays behind; the caller retries.

Chromium never touches the network itself. :meth:`BrowserPool.render` serves the document the
crawler already downloaded (with its redirect, size and address checks) to the page's navigation
through request routing, and every other request the page or its workers make is routed too:
images, media and fonts are aborted, and everything else is handed to the caller's
:data:`SubresourceFetch`, which fetches it with the crawler's own HTTP client (scope and SSRF guard
at every redirect hop, connections to the address the guard checked) and whose answer is
fulfilled to the page. WebSockets are closed as they open. Underneath, the browser is launched
with a host resolver that resolves nothing (``MAP * ~NOTFOUND``, IP literals included), so a
request that escapes routing, a worker's WebSocket or a preconnect fails instead of reaching a
host nobody checked. A browser attached over CDP must be started with that rule by its operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from playwright.async_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    Route,
    WebSocketRoute,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from crawler.config import CrawlerSettings

log = logging.getLogger("deskpilot.crawler.browser")

BLOCKED_RESOURCES = frozenset({"image", "media", "font", "imageset", "texttrack", "object"})

BASE_ARGS = (
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
"""Flags of every launch of the system Chromium, whatever it is for."""

RESOLVE_NOTHING = "--host-resolver-rules=MAP * ~NOTFOUND"
"""Chromium resolves no name and no IP literal: the crawler's pages reach the network only
through request routing."""


def running_as_root() -> bool:
    return os.geteuid() == 0


def sandbox_args(sandbox: bool = True) -> tuple[str, ...]:
    """``--no-sandbox`` where Chromium cannot sandbox itself (as root it refuses to start with
    its sandbox on) or where the operator turned the sandbox off; nothing otherwise."""
    return () if sandbox and not running_as_root() else ("--no-sandbox",)


CHROMIUM_ARGS = (*BASE_ARGS, *sandbox_args())
"""Flags for launching the system Chromium from this process (tests and tools use them too):
sandboxed unless running as root."""

_DROPPED_REQUEST_HEADERS = frozenset(
    {
        "host", "connection", "keep-alive", "content-length", "transfer-encoding", "upgrade",
        "te", "trailer", "proxy-authorization", "proxy-connection",
        # The crawler's client negotiates its own compression and decodes it.
        "accept-encoding",
        # A fulfilled response is always complete: no revalidation against Chromium's cache.
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range",
    }
)  # fmt: skip
_DROPPED_RESPONSE_HEADERS = frozenset(
    {"connection", "keep-alive", "content-length", "content-encoding", "transfer-encoding"}
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
    """Sub-requests and WebSockets the page refused: out of scope, refused by the SSRF guard,
    blocked types."""
    refusals: tuple[str, ...] = ()
    """Why each refused sub-request or WebSocket was refused (blocked types not listed)."""


class SubrequestRefused(Exception):
    """A sub-request (or one of its redirect hops) goes where the job may not: out of scope or
    refused by the SSRF guard. The page sees a blocked request."""


@dataclass(frozen=True)
class SubRequest:
    """A request a page (or one of its workers or frames) made, to be fetched by the crawler."""

    url: str
    method: str
    headers: dict[str, str]
    """What Chromium would send, without hop-by-hop, compression and revalidation headers."""
    body: bytes | None
    kind: str
    """Playwright's resource type: ``script``, ``stylesheet``, ``fetch``, ``document``, ..."""


@dataclass(frozen=True)
class Fulfilment:
    """What the page receives for a sub-request."""

    status: int
    headers: dict[str, str]
    body: bytes

    @classmethod
    def of(cls, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> Fulfilment:
        """A response as the crawler's client read it (decoded, complete): length and encoding
        headers go, repeated headers are joined (``Set-Cookie`` by lines, as Playwright wants)."""
        joined: dict[str, str] = {}
        for name, value in headers:
            key = name.lower()
            if key in _DROPPED_RESPONSE_HEADERS:
                continue
            separator = "\n" if key == "set-cookie" else ", "
            joined[key] = f"{joined[key]}{separator}{value}" if key in joined else value
        return cls(status, joined, body)


SubresourceFetch = Callable[[SubRequest], Awaitable[Fulfilment]]
"""Fetch a page's sub-request; raises :class:`SubrequestRefused` for a request the job may not
make (any other exception fails the request)."""


async def _fetch_nothing(request: SubRequest) -> Fulfilment:
    raise SubrequestRefused(request.url)


@dataclass
class _Slot:
    """One browser context with its one tab, reused page after page.

    The tab's request routing is installed once and reads what the current render set here: the
    document to serve and the job's fetch for everything else.
    """

    context: BrowserContext
    page: Page
    body: bytes = b""
    content_type: str = "text/html"
    fetch: SubresourceFetch = _fetch_nothing
    served: bool = True
    blocked: int = 0
    crashed: bool = False
    refusals: list[str] = field(default_factory=list)

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
            if request.resource_type in BLOCKED_RESOURCES:
                self.blocked += 1
                await route.abort("blockedbyclient")
                return
            headers = {
                name: value
                for name, value in request.headers.items()
                if name.lower() not in _DROPPED_REQUEST_HEADERS
            }
            sub = SubRequest(
                request.url, request.method, headers, request.post_data_buffer,
                request.resource_type,
            )  # fmt: skip
            try:
                fulfilment = await self.fetch(sub)
            except SubrequestRefused as refused:
                self.blocked += 1
                self.refusals.append(str(refused))
                await route.abort("blockedbyclient")
                return
            except Exception as exc:  # the network, a size limit: this request failed
                log.debug("sub-request failed", extra={"url": sub.url, "error": repr(exc)[:200]})
                await route.abort("failed")
                return
            await route.fulfill(
                status=fulfilment.status, headers=fulfilment.headers, body=fulfilment.body
            )
        except PlaywrightError:  # the tab moved on or closed meanwhile
            return

    async def refuse_socket(self, socket: WebSocketRoute) -> None:
        """WebSockets are not crawled: closed as they open, never connected."""
        self.blocked += 1
        self.refusals.append(f"WebSocket {socket.url}")
        with contextlib.suppress(PlaywrightError):
            await socket.close(code=1008, reason="not fetched by the crawler")


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

    def launch_args(self) -> list[str]:
        """Chromium's flags: the common ones, the sandbox unless it cannot run, no resolver."""
        unsandboxed = sandbox_args(self.settings.chromium_sandbox)
        if unsandboxed and self._launches == 0:
            log.warning(
                "Chromium runs without its sandbox",
                extra={
                    "why": "running as root"
                    if running_as_root()
                    else "CRAWLER_CHROMIUM_SANDBOX is false"
                },
            )
        return [*BASE_ARGS, *unsandboxed, RESOLVE_NOTHING]

    # -- lifecycle (called with the condition held) -------------------------------------------

    async def _launch(self) -> None:
        assert self._playwright is not None  # nosec B101 # type narrowing: start() set it
        chromium = self._playwright.chromium
        if self.settings.cdp_url:
            if self._launches == 0:
                log.warning(
                    "attached to a browser over CDP: its flags are its operator's; start it with "
                    f"{RESOLVE_NOTHING!r} so that nothing outside request routing reaches the "
                    "network"
                )
            browser = await chromium.connect_over_cdp(self.settings.cdp_url, timeout=30_000)
        else:
            browser = await chromium.launch(
                executable_path=str(self.settings.chromium_path),
                headless=True,
                args=self.launch_args(),
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
        await page.route_web_socket(lambda _url: True, slot.refuse_socket)
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
        slot.fetch, slot.body, slot.served = _fetch_nothing, b"", True
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
        fetch: SubresourceFetch,
    ) -> Rendered:
        """Load ``body`` as the document at ``url``, run its scripts (their requests fetched by
        ``fetch``), return the rendered DOM."""
        started = time.monotonic()
        async with self._slot() as slot:
            slot.body, slot.content_type, slot.fetch = body, content_type, fetch
            slot.served, slot.blocked, slot.refusals = False, 0, []
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
            return Rendered(str(html), slot.page.url, elapsed, slot.blocked, tuple(slot.refusals))


def _looks_closed(exc: PlaywrightError) -> bool:
    text = str(exc).lower()
    return "closed" in text or "crash" in text or "disconnected" in text
