"""Pages read recently, shared by every worker and job: a page is not fetched again within
``CRAWLER_FRESHNESS_S``.

A follow-up question's crawl starts from the same seeds as the first; its pages are already in the
knowledge base (the indexer skips unchanged content anyway). Within the window a job takes such a
page's links from here, plans them against its own question, and moves on to pages it has not
read; the page counts as skipped (``fresh``) and is not published again.

``<ns>crawler:fresh:<sha1 of the URL>``: JSON of the URL, title, content hash, when it was read
and its links (URL, anchor, context), expiring with the window.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import redis.asyncio as aioredis

from crawler.extract import ExtractedPage, Link


@dataclass(frozen=True)
class FreshPage:
    url: str
    title: str
    content_hash: str
    read_at: float
    links: tuple[Link, ...]

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (now if now is not None else time.time()) - self.read_at)

    def as_extracted(self) -> ExtractedPage:
        """Enough of the page for the link planner: its title and links (no text is kept)."""
        return ExtractedPage(self.title, "", self.content_hash, self.links)


class FreshPages:
    def __init__(self, redis: aioredis.Redis, prefix: str, window_s: float) -> None:
        self.redis = redis
        self.prefix = prefix
        self.window_s = window_s

    def key(self, url: str) -> str:
        return f"{self.prefix}crawler:fresh:{hashlib.sha1(url.encode()).hexdigest()}"  # noqa: S324  # nosec B324

    async def get(self, url: str) -> FreshPage | None:
        """The page at ``url`` if it was read within the window (always None when it is 0)."""
        if self.window_s <= 0:
            return None
        raw = await self.redis.get(self.key(url))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return FreshPage(
                url=str(data["url"]),
                title=str(data["title"]),
                content_hash=str(data["content_hash"]),
                read_at=float(data["read_at"]),
                links=tuple(Link(str(u), str(a), str(c)) for u, a, c in data["links"]),
            )
        except (ValueError, KeyError, TypeError):
            return None  # written by another version: fetch the page again

    async def remember(self, url: str, page: ExtractedPage) -> None:
        if self.window_s <= 0:
            return
        record = {
            "url": url,
            "title": page.title,
            "content_hash": page.content_hash,
            "read_at": time.time(),
            "links": [[link.url, link.anchor, link.context] for link in page.links],
        }
        await self.redis.set(self.key(url), json.dumps(record), px=int(self.window_s * 1000))
