"""Per-host politeness shared by the whole fleet: concurrency, request spacing and back-off.

For each host (scheme, host and port) Redis keeps, under ``<ns>crawler:host:<site>``:

* ``...:slots``, a sorted set of leases (one per request in flight, scored by when it expires, so
  the lease of a worker that died frees itself after the page time limit);
* ``...:next``, the earliest time (Redis server clock, ms) the next request may start. Each
  request pushes it ``interval`` further (``1 / requests_per_s``, or the robots.txt crawl-delay if
  longer); a 429/503 pushes it past the back-off or ``Retry-After``.

One Lua script decides atomically whether a request may start now; if not, it says how long to
wait, and the worker waits that long and asks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import redis.asyncio as aioredis

_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local next_at = tonumber(redis.call('GET', KEYS[2]) or '0')
if next_at > now then
    return next_at - now
end
local limit = tonumber(ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= limit then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return math.max(10, math.min(100, tonumber(first[2]) - now))
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 1000)
redis.call('SET', KEYS[2], now + tonumber(ARGV[4]), 'PX', math.max(1000, tonumber(ARGV[4]) * 2))
return 0
"""

_BACKOFF = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_at = now + tonumber(ARGV[1])
local next_at = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_at > next_at then
    redis.call('SET', KEYS[1], until_at, 'PX', tonumber(ARGV[1]) + 1000)
end
return until_at
"""


class HostLimiter:
    """Fleet-wide per-host request slots; use :meth:`slot` around every request to a host."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        prefix: str,
        concurrency: int,
        requests_per_s: float,
        lease_ms: int,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.concurrency = concurrency
        self.interval_ms = int(1000 / requests_per_s)
        self.lease_ms = lease_ms
        self._acquire = redis.register_script(_ACQUIRE)
        self._backoff = redis.register_script(_BACKOFF)

    def _keys(self, site: str) -> tuple[str, str]:
        base = f"{self.prefix}crawler:host:{site}"
        return f"{base}:slots", f"{base}:next"

    @contextlib.asynccontextmanager
    async def slot(
        self,
        site: str,
        min_interval_s: float = 0.0,
        *,
        concurrency: int | None = None,
        requests_per_s: float | None = None,
    ) -> AsyncIterator[None]:
        """Wait until a request to ``site`` may start, hold a slot while it runs.
        ``concurrency`` and ``requests_per_s`` replace the limiter's own for this request (an
        admin's runtime configuration)."""
        slots, next_key = self._keys(site)
        lease = uuid.uuid4().hex
        base_ms = self.interval_ms if requests_per_s is None else int(1000 / requests_per_s)
        interval = max(base_ms, int(min_interval_s * 1000))
        limit = self.concurrency if concurrency is None else concurrency
        while True:
            wait_ms = int(
                await self._acquire(
                    keys=[slots, next_key],
                    args=[lease, self.lease_ms, limit, interval],
                )
            )
            if wait_ms <= 0:
                break
            await asyncio.sleep(wait_ms / 1000)
        try:
            yield
        finally:
            await self.redis.zrem(slots, lease)

    async def back_off(self, site: str, seconds: float) -> None:
        """No request to ``site`` from any worker for ``seconds``."""
        _, next_key = self._keys(site)
        await self._backoff(keys=[next_key], args=[int(seconds * 1000)])
