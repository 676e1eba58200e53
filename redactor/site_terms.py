"""The words the company's help sites are about, kept when NER calls them a person or a place.

spaCy's small model reads a documentation site's product names as people and places: "what
does Dispatch need to read them?" came out as "what does <PERSON_2> need...", "We use
Opsgenie for on-call rotas" as "We use <PERSON_1>...", and the question lost the very word the
orchestrator searches and crawls for. The admin's allow-list (``REDACTOR_ALLOW_LIST``) names
IT products; a help site's own products are named by the site. So the redactor keeps the words
of the configured help sites as well:

* the words of the help sites' seed URLs (``/dispatch/`` -> "dispatch",
  ``docs.opsgenie.example`` -> "opsgenie"), as the orchestrator publishes its settings and an
  admin overrides them (:mod:`contracts.runtime_config`);
* the title and URL words of every page the crawler fleet reads from them, from each
  ``crawl.finished`` event ("Configuring Opsgenie" at ``.../plugins/configuring-opsgenie``), and
  of every page their sitemaps list (``site.mapped``), before it is read.

What keeps personal data from going through with them:

* Only the spans NER and the person and address cues report as a person or a place
  (:data:`redactor.recognizers.NER_ENTITIES`) are weighed against site words: an e-mail
  address, a phone number, an id or a secret is redacted whatever it spells.
* A span is kept only when every word in it is a site word, a filler word or an ordinary
  English word, and at least one is a site word, as with the admin's allow-list: "Jane from
  Dispatch" is redacted whole.
* A word the name gazetteer knows as a given name never becomes a site word, even in a page
  title ("Meet Jane, our new service desk lead").
* The fleet reads only the allowed domains an admin configured, so only the company's chosen
  sites add words.

What is left: a family name that is also a word of a help page's title or address (a page
``/team/okafor``) would be kept where NER finds it alone. ``REDACTOR_SITE_TERMS=false`` turns
the site words off.

Redis key: ``deskpilot:redactor:site-terms``, a hash of word -> when a page last named it (Unix
seconds), kept :data:`TTL_S` after its last write and at most :data:`MAX_TERMS` words; every
replica reads it at most every :data:`CACHE_S` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from contracts.runtime_config import RuntimeConfigReader, read_defaults
from redactor.names import fold

log = logging.getLogger("deskpilot.redactor")

KEY = "deskpilot:redactor:site-terms"
TTL_S = 30 * 24 * 3600
"""Words of sites not read for a month are forgotten (the seeds' words stay while configured)."""
MAX_TERMS = 50_000
"""Words kept: a documentation site of thousands of pages names far fewer."""
CACHE_S = 10.0
"""How long a replica uses the words it read before reading them again."""
MIN_CHARS = 3
MAX_CHARS = 40

# Words of addresses and file names that name nothing.
_NOISE = frozenset(
    {"www", "html", "htm", "php", "aspx", "asp", "jsp", "index", "default"}
    | {"com", "org", "net", "io", "co", "uk", "localhost"}
)


def words_of(text: str) -> list[str]:
    """The words of ``text``, folded ("Opsgenie" -> "opsgenie"), in order: letters only, split
    at anything else."""
    return [fold(part) for part in re.split(r"[\W_\d]+", text) if part]


def url_words(url: str) -> list[str]:
    """The words of a URL's host and path, without its scheme, port, query or fragment."""
    parts = urlsplit(url)
    return words_of(f"{parts.hostname or ''} {unquote(parts.path)}")


def site_words(texts: Iterable[Sequence[str]], given_names: frozenset[str]) -> list[str]:
    """The words of titles and addresses (each a sequence of folded words) that may name a
    site's subject: 3 to 40 letters, no given name, and no word that is beside one in any of
    them, which is likely a family name ("Meet Jane Okafor", ``/team/jane-okafor``: neither
    "jane" nor "okafor")."""
    texts = [list(words) for words in texts]
    beside_names = {
        word
        for words in texts
        for i, word in enumerate(words)
        if any(w in given_names for w in words[max(i - 1, 0) : i + 2])
    }
    kept = {
        word: None
        for words in texts
        for word in words
        if MIN_CHARS <= len(word) <= MAX_CHARS
        and word.isalpha()
        and word not in _NOISE
        and word not in beside_names
    }
    return list(kept)


def page_words(url: str, title: str, given_names: frozenset[str]) -> list[str]:
    """A page's title and URL words that may name the site's subject."""
    return site_words([words_of(title), url_words(url)], given_names)


class SiteTerms:
    """The help sites' words as every redactor replica sees them: learnt from each crawl,
    shared in Redis, read at most every ``cache_s`` seconds, never failing a message."""

    def __init__(
        self,
        client: aioredis.Redis,
        given_names: Iterable[str],
        *,
        cache_s: float = CACHE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.given_names = frozenset(given_names)
        self.cache_s = cache_s
        self.clock = clock
        self._config = RuntimeConfigReader(client, clock=clock)
        self._words: frozenset[str] = frozenset()
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    async def learn(self, pages: Iterable[tuple[str, str]]) -> int:
        """Record the words of pages (URL and title) a crawl read or a sitemap listed; how
        many were new."""
        now = int(time.time())
        words = {
            word: now for url, title in pages for word in page_words(url, title, self.given_names)
        }
        if not words:
            return 0
        held = await self.client.hlen(KEY)
        if held >= MAX_TERMS:
            known = await self.client.hmget(KEY, list(words))
            words = {word: at for (word, at), was in zip(words.items(), known, strict=True) if was}
            if not words:
                log.warning("site words full; new words not kept", extra={"held": held})
                return 0
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hset(KEY, items=[part for pair in words.items() for part in pair])
            pipe.expire(KEY, TTL_S)
            added, _ = await pipe.execute()
        self._read_at = None  # this replica sees them at once
        return int(added)

    async def words(self) -> frozenset[str]:
        """The words in force: the seeds' and every read page's, cached for ``cache_s``."""
        if self._fresh():
            return self._words
        async with self._lock:
            if self._fresh():
                return self._words
            try:
                self._words = await self._read()
            except RedisError as exc:
                error = type(exc).__name__
                log.warning("site words not read; keeping the last ones", extra={"error": error})
            self._read_at = self.clock()
        return self._words

    def _fresh(self) -> bool:
        return self._read_at is not None and self.clock() - self._read_at < self.cache_s

    async def _read(self) -> frozenset[str]:
        stored = await self.client.hkeys(KEY)
        overrides = (await self._config.current()).overrides.crawl_seed_urls
        published = (await read_defaults(self.client)).get("crawl_seed_urls")
        seeds = overrides or (published if isinstance(published, list) else [])
        seed_words = site_words(
            [url_words(seed) for seed in seeds if isinstance(seed, str)], self.given_names
        )
        learnt = (w.decode() if isinstance(w, bytes) else str(w) for w in stored)
        return frozenset([*learnt, *seed_words])
