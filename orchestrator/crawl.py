"""Turns waiting on a crawl: what lets any orchestrator replica resume one, exactly once.

When the knowledge base cannot answer and crawling is configured, the orchestrator asks the
crawler fleet for pages (``context.insufficient``, job id = the turn's correlation id) and the
turn waits in Redis instead of holding a worker. Three things resume it, on whichever replica
receives them:

* ``chunks.indexed`` with the turn's correlation id: pages were indexed; search again and answer
  if the knowledge base now covers the question (then the crawl job is stopped early);
* ``crawl.finished``: the job ended; answer with what there is;
* the turn's deadline (the crawl budget's plus a grace period) passing with neither, say because
  no crawler runs: every replica sweeps the due turns once a second and answers them.

Every resumption takes the turn's lock first, so two replicas (or two events on one replica)
never answer one turn twice; the turn's status, saved in Redis, says whether it still waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import redis.asyncio as aioredis

log = logging.getLogger("deskpilot.orchestrator.crawl")

DEADLINES_KEY = "deskpilot:orchestrator:crawl-deadlines"
"""Sorted set: correlation id of each waiting turn, scored by when it must be answered."""
LOCK_PREFIX = "deskpilot:orchestrator:turn-lock:"

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class TurnBusy(RuntimeError):
    """Another handler kept the turn's lock for too long; the event is retried by the bus."""


class CrawlWaits:
    """The waiting turns' deadlines and locks in Redis."""

    def __init__(
        self, client: aioredis.Redis, *, lock_ttl_s: float = 60.0, lock_wait_s: float = 20.0
    ) -> None:
        self.client = client
        self.lock_ttl_s = lock_ttl_s
        self.lock_wait_s = lock_wait_s

    async def wait(self, correlation_id: str, deadline: float) -> None:
        """Record that the turn must be answered by ``deadline`` (seconds since the epoch)."""
        await self.client.zadd(DEADLINES_KEY, {correlation_id: deadline})

    async def done(self, correlation_id: str) -> None:
        await self.client.zrem(DEADLINES_KEY, correlation_id)

    async def due(self, now: float | None = None, limit: int = 20) -> list[str]:
        """Correlation ids of turns whose deadline has passed, oldest first."""
        now = time.time() if now is None else now
        raw = await self.client.zrangebyscore(DEADLINES_KEY, "-inf", now, start=0, num=limit)
        return [item.decode() if isinstance(item, bytes) else str(item) for item in raw]

    @contextlib.asynccontextmanager
    async def lock(self, correlation_id: str) -> AsyncIterator[None]:
        """Hold the turn's lock; waits up to ``lock_wait_s`` for another holder, then raises
        :class:`TurnBusy`. The lock expires after ``lock_ttl_s`` should its holder die."""
        key, token = LOCK_PREFIX + correlation_id, uuid.uuid4().hex
        give_up = time.monotonic() + self.lock_wait_s
        while not await self.client.set(key, token, nx=True, px=int(self.lock_ttl_s * 1000)):
            if time.monotonic() >= give_up:
                raise TurnBusy(f"turn {correlation_id} is locked by another handler")
            await asyncio.sleep(0.05)
        try:
            yield
        finally:
            await self.client.eval(_RELEASE, 1, key, token)


async def sweep_due(waits: CrawlWaits, resume: Callable[[str], Awaitable[None]]) -> None:
    """Resume the turns whose deadline passed (each orchestrator replica runs this every second).

    ``resume`` answers the turn and removes its deadline; a turn whose resumption fails stays
    due and is tried again on the next sweep.
    """
    for correlation_id in await waits.due():
        try:
            await resume(correlation_id)
        except Exception:
            log.exception("answering a turn past its crawl deadline failed")
