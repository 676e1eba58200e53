"""A worker's memory of the scripts and stylesheets its rendered pages loaded.

Chromium never fetches anything itself (crawler/browser.py): every sub-request of a rendered page
is fetched by the crawler and fulfilled to the page, and Chromium does not cache what it is handed
that way. A documentation site's pages share the same few script bundles and stylesheets, so
without this cache every rendered page would download them again through the crawler.

What a caller can rely on:

* Only plain ``GET`` answers ``200`` to ``script`` and ``stylesheet`` requests that were not
  redirected, do not say ``no-store`` or ``private`` and set no cookie are kept: what any page of
  any job may be served. The job's scope is still checked by the caller before the cache is
  asked, so a URL a job may not reach is refused whatever another job fetched.
* Entries live at most ``ttl_s`` (the crawler's freshness window) and the cache holds at most
  ``max_bytes`` of bodies, the least recently used going first.
* Pages rendered at the same time that ask for the same script share one download: the others
  wait for it, and fetch for themselves only when it failed or may not be shared.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from crawler.browser import Fulfilment, SubRequest

CACHED_KINDS = frozenset({"script", "stylesheet"})

Download = Callable[[], Awaitable[tuple[Fulfilment, bool]]]
"""Fetch a sub-request for the page: its fulfilment, and whether it was redirected."""


@dataclass(frozen=True)
class _Entry:
    fulfilment: Fulfilment
    expires_at: float


class SubresourceCache:
    """Least-recently-used bodies of static sub-resources, bounded in bytes and age."""

    def __init__(self, max_bytes: int, ttl_s: float) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.bytes = 0
        self.hits = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._in_flight: dict[str, asyncio.Future[Fulfilment | None]] = {}

    async def fetch(self, request: SubRequest, download: Download) -> Fulfilment:
        """``request``'s answer from memory, from a download in progress, or from ``download``
        (whose answer is then kept when any page may be served it)."""
        cached = self.get(request)
        if cached is not None:
            return cached
        if not self.cacheable(request):
            return (await download())[0]
        waiting = self._in_flight.get(request.url)
        if waiting is not None:
            shared = await asyncio.shield(waiting)
            if shared is not None:
                self.hits += 1
                return shared
            return (await download())[0]  # that download failed or may not be shared
        future: asyncio.Future[Fulfilment | None] = asyncio.get_running_loop().create_future()
        self._in_flight[request.url] = future
        kept: Fulfilment | None = None
        try:
            fulfilment, redirected = await download()
            if self.put(request, fulfilment, redirected=redirected):
                kept = fulfilment
            return fulfilment
        finally:
            future.set_result(kept)
            del self._in_flight[request.url]

    @staticmethod
    def cacheable(request: SubRequest) -> bool:
        return request.method == "GET" and request.kind in CACHED_KINDS

    def get(self, request: SubRequest) -> Fulfilment | None:
        if not self.cacheable(request):
            return None
        entry = self._entries.get(request.url)
        if entry is None:
            return None
        if entry.expires_at <= time.monotonic():
            self._drop(request.url)
            return None
        self._entries.move_to_end(request.url)
        self.hits += 1
        return entry.fulfilment

    def put(self, request: SubRequest, fulfilment: Fulfilment, *, redirected: bool) -> bool:
        """Keep ``fulfilment`` when it is what any page may be served (see the module doc);
        False when it is not."""
        cache_control = fulfilment.headers.get("cache-control", "").lower()
        if (
            not self.cacheable(request)
            or redirected
            or fulfilment.status != 200
            or "no-store" in cache_control
            or "private" in cache_control
            or "set-cookie" in fulfilment.headers  # one visitor's cookie, not every page's
            or len(fulfilment.body) > self.max_bytes // 4
        ):
            return False
        self._drop(request.url)
        self._entries[request.url] = _Entry(fulfilment, time.monotonic() + self.ttl_s)
        self.bytes += len(fulfilment.body)
        while self.bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)
        return True

    def _drop(self, url: str) -> None:
        entry = self._entries.pop(url, None)
        if entry is not None:
            self.bytes -= len(entry.fulfilment.body)
