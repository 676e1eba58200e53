"""robots.txt, fetched once per site and shared by the fleet through Redis.

Rules follow RFC 9309 as parsed by protego (longest match wins, ``*`` and ``$`` wildcards, the
``Crawl-delay`` extension): a missing robots.txt (4xx) allows everything; a server error or an
unreachable site (5xx, time-out) disallows everything for a short while, then it is asked again.
The text is cached in Redis under ``<ns>crawler:robots:<scheme://host:port>`` for
``CRAWLER_ROBOTS_CACHE_S`` seconds (errors for a minute), and parsed once per process.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from protego import Protego

from crawler.memo import Memo
from crawler.urls import host_key

log = logging.getLogger("deskpilot.crawler.robots")

ERROR_CACHE_S = 60
MAX_ROBOTS_BYTES = 512 * 1024

ALLOW_ALL = "allow"
DISALLOW_ALL = "disallow"

# (status, body) of GET robots.txt; raises on network errors.
RobotsFetch = Callable[[str], Awaitable[tuple[int, bytes]]]


@dataclass(frozen=True)
class RobotsRules:
    """What one site's robots.txt says to this crawler."""

    parser: Protego | None
    mode: str = ""  # ALLOW_ALL, DISALLOW_ALL or "" (the parser decides)

    def allowed(self, url: str, agent: str) -> bool:
        if self.mode == ALLOW_ALL or self.parser is None:
            return self.mode != DISALLOW_ALL
        return bool(self.parser.can_fetch(url, agent))

    def sitemaps(self) -> list[str]:
        """The file's ``Sitemap:`` lines, as written (they apply to every agent)."""
        return [] if self.parser is None else [str(url) for url in self.parser.sitemaps]

    def crawl_delay(self, agent: str) -> float | None:
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(agent)
        return float(delay) if delay is not None else None


class RobotsCache:
    def __init__(
        self,
        redis: aioredis.Redis,
        fetch: RobotsFetch,
        *,
        prefix: str,
        ttl_s: int,
    ) -> None:
        self.redis = redis
        self.fetch = fetch
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._parsed: Memo[RobotsRules] = Memo()

    def key(self, site: str) -> str:
        return f"{self.prefix}crawler:robots:{site}"

    async def rules_for(self, url: str) -> RobotsRules:
        site = host_key(url)
        # One download per site and process, however many pages ask at once.
        return await self._parsed.get(site, lambda: self._load(site))

    async def _load(self, site: str) -> tuple[RobotsRules, float]:
        stored = await self.redis.get(self.key(site))
        raw = stored.encode() if isinstance(stored, str) else stored
        if raw is None:
            raw, ttl = await self._download(site)
            await self.redis.set(self.key(site), raw, ex=ttl)
        else:
            ttl = max(1, int(await self.redis.ttl(self.key(site))))
        return _parse(raw), min(ttl, self.ttl_s)

    async def _download(self, site: str) -> tuple[bytes, int]:
        try:
            status, body = await self.fetch(f"{site}/robots.txt")
        except Exception as exc:  # unreachable: RFC 9309 says assume complete disallow
            log.warning("robots.txt unreachable", extra={"site": site, "error": type(exc).__name__})
            return DISALLOW_ALL.encode() + b"\n", ERROR_CACHE_S
        if 400 <= status < 500:
            return ALLOW_ALL.encode() + b"\n", self.ttl_s
        if status >= 500:
            return DISALLOW_ALL.encode() + b"\n", ERROR_CACHE_S
        return b"=" + body[:MAX_ROBOTS_BYTES], self.ttl_s


def _parse(raw: bytes) -> RobotsRules:
    """Cached values are ``allow\\n``, ``disallow\\n`` or ``=`` followed by the file."""
    if raw.startswith(b"="):
        return RobotsRules(Protego.parse(raw[1:].decode("utf-8", errors="replace")))
    mode = raw.decode().strip()
    return RobotsRules(None, mode if mode in (ALLOW_ALL, DISALLOW_ALL) else ALLOW_ALL)
