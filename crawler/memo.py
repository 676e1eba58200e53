"""Per-process copies of what the fleet keeps in Redis (robots.txt, sitemaps), parsed once.

Each value is kept until its Redis copy expires, and loaded by one caller at a time per key, so
a hundred pages of one site asking at once cause one Redis read (or one download), not a hundred.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Memo(Generic[T]):
    """Values by key, each until its own expiry; at most ``max_entries`` (then it starts over)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._values: dict[str, tuple[float, T]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _fresh(self, key: str) -> tuple[float, T] | None:
        cached = self._values.get(key)
        return cached if cached is not None and cached[0] > time.monotonic() else None

    async def get(self, key: str, load: Callable[[], Awaitable[tuple[T, float]]]) -> T:
        """The value kept for ``key``, else ``load()``'s (value, seconds to keep it)."""
        if (cached := self._fresh(key)) is not None:
            return cached[1]
        async with self._locks.setdefault(key, asyncio.Lock()):
            if (cached := self._fresh(key)) is not None:
                return cached[1]
            started = time.monotonic()
            value, keep_s = await load()
            if len(self._values) >= self.max_entries:
                self._values.clear()
            self._values[key] = (started + keep_s, value)
            return value
