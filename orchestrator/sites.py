"""What the configured help sites are about: their profile, so their own subjects are in scope.

An assistant for a help site answers what the site covers. The scope model is trained on IT
support; a question about a product's documentation ("how do I run the tests for a plugin I
wrote?", "how often does Dispatch recalculate what an incident has cost us?") may score just
under its threshold. A question the model doubts (its scope score within
``ORCHESTRATOR_SCOPE_SITE_MARGIN`` under the threshold) that names a subject of a configured
site's profile is not refused: it is read from the site like any question the knowledge base
does not cover. Weather, recipes and trivia name none of a help site's subjects and score far
lower, so they stay refused.

A site's profile is what names its subjects, read without rendering: its seed URLs' words (the
product in ``/dispatch/``, ``docs.example-product.com``), and every page the fleet has read from
it, by its title and its URL's words (``/docs/contributing/plugins/testing``: contributing,
plugins, testing). The pages come with each ``crawl.finished`` event, so the profile grows as
the site is read and is shared by every replica; the pages its sitemaps list come on
``site.mapped`` when a crawl reads them (and again when they change), so their addresses' words
count before the pages are read.

Redis keys: ``deskpilot:orchestrator:site-profile:<site>`` (``<site>`` is scheme, host and
port): hash of page URL → title, kept :data:`PROFILE_TTL_S` after its last write and at most
:data:`MAX_PAGES` pages.

The profiles also remember which questions the sites have nothing new for: a crawl for a
question that read no new page (what its plan reached was read within the crawler's freshness
window: :func:`read_nothing_new`) *settles* it for ``ORCHESTRATOR_CRAWL_SETTLED_S``, and a turn
asking it again meanwhile is answered from what is indexed without a crawl that would read nothing
(``deskpilot:orchestrator:site-settled:<digest>``: a digest of the seeds and the question as
searched, the redacted text, never the text itself).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis

from contracts.events import CrawlFinished, CrawlPageSummary, SitemapPage
from orchestrator.sentiment import word_set
from orchestrator.sufficiency import close_forms, key_terms, stems

KEY_PREFIX = "deskpilot:orchestrator:site-profile:"
SETTLED_PREFIX = "deskpilot:orchestrator:site-settled:"
PROFILE_TTL_S = 7 * 24 * 3600
"""A site not read for a week is profiled afresh from its next crawl (and its seeds meanwhile)."""
MAX_PAGES = 5000
"""Pages a profile keeps: enough for a documentation site, bounded for any site."""
CACHE_S = 10.0
"""How long a replica answers from the profile it built before reading the pages again."""

# Words of URLs and host names that say nothing about a site's subject.
_URL_NOISE = word_set(
    "www docs doc documentation help support wiki kb en us gb html htm php aspx asp jsp index "
    "default home page pages com org net io co uk dev app apps site sites github gitlab "
    "localhost latest stable current master main"
)
_URL_SPLIT = re.compile(r"[\s/\-_.~+:%=?&]+|(?<=[a-z])(?=[A-Z])")


def site_of(url: str) -> str:
    """A URL's site: scheme, host and port, lower case ("http://127.0.0.1:8000")."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def url_words(url: str, *, host: bool = False) -> str:
    """The words of a URL's path (and host labels with ``host``), noise and numbers left out."""
    parts = urlsplit(url)
    text = unquote(parts.path)
    if host:
        text = f"{parts.hostname or ''} {text}"
    words = (w.lower() for w in _URL_SPLIT.split(text))
    return " ".join(w for w in words if w and w not in _URL_NOISE and not w.isdigit())


@dataclass(frozen=True, slots=True)
class SiteProfile:
    """The stems that name a help site's subjects (see the module's description)."""

    stems: frozenset[str]
    pages: int
    """Pages read from the site that it was built from (its seeds alone: 0)."""

    @classmethod
    def build(cls, seeds: Iterable[str], pages: Iterable[tuple[str, str]]) -> SiteProfile:
        """The profile of seed URLs and pages read, each as (URL, title)."""
        found: set[str] = set()
        for seed in seeds:
            found.update(stems(url_words(seed, host=True)))
        count = 0
        for url, title in pages:
            count += 1
            found.update(stems(f"{title} {url_words(url)}"))
        return cls(frozenset(found), count)

    def subjects_named(self, question: str) -> list[str]:
        """The question's key terms that name one of the site's subjects, in the question's
        words (:func:`orchestrator.sufficiency.key_terms`: asking and stop words never do)."""
        return [
            term.word
            for term in key_terms(question, None)
            if any(close_forms(term.stem, known) for known in self.stems)
        ]


class SiteProfiles:
    """The configured help sites' profiles, in Redis so every replica reads the same.

    A profile is built from every page read (up to :data:`MAX_PAGES`), so a replica keeps the one
    it built for :data:`CACHE_S`, or until it records pages itself: a doubted question does not
    read and stem thousands of titles each time, and another replica's crawl shows within
    seconds."""

    def __init__(self, client: aioredis.Redis, *, cache_s: float = CACHE_S) -> None:
        self.client = client
        self.cache_s = cache_s
        self._built: dict[tuple[str, ...], tuple[float, SiteProfile]] = {}

    async def record(self, pages: Sequence[CrawlPageSummary]) -> int:
        """Note the pages a crawl read (those served with success), each under its site;
        returns how many were noted."""
        read = [(page.url, page.title) for page in pages if 200 <= page.status < 300]
        await self._note(read, keep_titles=False)
        return len(read)

    async def record_listed(self, pages: Sequence[SitemapPage]) -> int:
        """Note the pages a site's sitemaps list (``site.mapped``), so their addresses' words
        name the site's subjects before they are read; a title noted from a read page stays
        where the sitemap has none. Returns how many were listed."""
        await self._note([(page.url, page.title) for page in pages], keep_titles=True)
        return len(pages)

    async def _note(self, pages: Sequence[tuple[str, str]], *, keep_titles: bool) -> None:
        if pages:
            self._built.clear()
        by_site: dict[str, dict[str, str]] = {}
        for url, title in pages:
            by_site.setdefault(site_of(url), {})[url] = title[:300]
        for site, titles in by_site.items():
            key = KEY_PREFIX + site
            if await self.client.hlen(key) >= MAX_PAGES:
                # Full: only pages it holds are noted again (one read for all of them).
                held = await self.client.hmget(key, list(titles))
                titles = {
                    url: title
                    for (url, title), was in zip(titles.items(), held, strict=True)
                    if was is not None
                }
            if not titles:
                continue
            titled = {url: title for url, title in titles.items() if title or not keep_titles}
            async with self.client.pipeline(transaction=False) as pipe:
                if titled:
                    pipe.hset(key, items=[part for pair in titled.items() for part in pair])
                for url in titles.keys() - titled.keys():
                    pipe.hsetnx(key, url, "")
                pipe.expire(key, PROFILE_TTL_S)
                await pipe.execute()

    async def profile(self, seeds: Sequence[str]) -> SiteProfile:
        """The profile of the seeds' sites: their seeds' words and every page read from them."""
        key = tuple(seeds)
        cached = self._built.get(key)
        if cached is not None and time.monotonic() - cached[0] < self.cache_s:
            return cached[1]
        pages: list[tuple[str, str]] = []
        for site in dict.fromkeys(site_of(seed) for seed in seeds):
            held = await self.client.hgetall(KEY_PREFIX + site)
            pages.extend((_text(url), _text(title)) for url, title in held.items())
        profile = SiteProfile.build(seeds, pages)
        self._built[key] = (time.monotonic(), profile)
        return profile

    async def settle(self, seeds: Sequence[str], question: str, ttl_s: float) -> None:
        """Note that a crawl of the seeds' sites for ``question`` read no new page."""
        if ttl_s > 0:
            await self.client.set(settled_key(seeds, question), "1", px=int(ttl_s * 1000))

    async def settled(self, seeds: Sequence[str], question: str) -> bool:
        """Whether a crawl for ``question`` read no new page lately (see :meth:`settle`)."""
        return bool(await self.client.exists(settled_key(seeds, question)))


def read_nothing_new(finished: CrawlFinished) -> bool:
    """Whether a crawl ran out of pages to read without reading one, because what its plan
    reached had been read lately: more of it skipped as fresh than failed (a site that is down
    fails what is not fresh, and is not settled by it; one broken link does not keep a site
    that has been read whole from settling)."""
    skipped = finished.skipped
    return (
        finished.reason == "frontier_empty"
        and not finished.pages
        and skipped.get("fresh", 0) > skipped.get("error", 0)
    )


def settled_key(seeds: Sequence[str], question: str) -> str:
    """The key of a settled question: the seeds and the question's words, hashed."""
    text = "\x1f".join([*sorted(seeds), " ".join(question.lower().split())])
    return SETTLED_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:32]


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
