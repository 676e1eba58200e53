"""Sitemaps: the pages a site lists for crawlers, read once per file and shared by the fleet.

Where a job looks (for each seed's site): the ``Sitemap:`` lines of its robots.txt, ``/sitemap.xml``
and ``sitemap.xml`` beside the seed (a documentation site under ``/project/``, as GitHub Pages
serves one, keeps it there). A sitemap index's sitemaps are followed, at most
:data:`MAX_INDEX_DEPTH` levels and ``CRAWLER_SITEMAP_MAX_FILES`` files per job. Every file is
fetched as a page is (scope, SSRF guard, robots.txt, the host's rate limit), by the function the
caller passes, so this module does no I/O but Redis.

How a file is read (:func:`parse_sitemap`), whatever its sender says:

* gzip is recognised by its magic bytes and decompressed as it is parsed, never past
  ``CRAWLER_SITEMAP_MAX_BYTES`` (a gzip bomb stops there, with what was read before);
* XML is parsed by defusedxml, streaming: a document type declaration is refused outright, so no
  entity is ever expanded (billion laughs, quadratic blow-up) or fetched (XXE); a file that breaks
  off keeps the entries read before the break; more than ``CRAWLER_SITEMAP_MAX_URLS`` entries keep
  the first ones;
* a file that is not XML is a text sitemap: one URL per line.

What a job gets (:meth:`SitemapReader.read`): each entry's URL normalised, mapped onto the
allowed host when ``CRAWLER_SITEMAP_HOST_MAP`` names its host (:class:`HostMap`), and kept only
when the job's scope allows it; with its ``<lastmod>`` (W3C datetime, as epoch seconds; a date
later than now is ignored) and a title when the entry carries one (news, image or video
extensions).

Redis keys (``<ns>`` is ``CRAWLER_NAMESPACE``; ``<site>`` is scheme, host and port):

* ``<ns>crawler:sitemap:<site>:<sha1 of the file's URL and the host map>``: JSON of the file as
  parsed (entries, an index's sitemaps, what went wrong), for ``CRAWLER_SITEMAP_CACHE_S``; a file
  that is not found is remembered as empty for as long, a server error or a refusal not at all;
* ``<ns>crawler:sitemap:<site>:lastmod``: hash of page URL → its ``<lastmod>``, written when a
  file is read, so any worker can tell (:meth:`SitemapReader.lastmod`) whether a page read within
  the freshness window has changed since;
* ``<ns>crawler:sitemap:<site>:mapped``: a digest of the pages the site's sitemaps listed when
  they were last announced on ``site.mapped`` (:meth:`SitemapReader.newly_mapped`), for
  ``CRAWLER_SITEMAP_CACHE_S``.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urljoin, urlsplit, urlunsplit

import redis.asyncio as aioredis
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, iterparse

from crawler.memo import Memo
from crawler.urls import host_key, normalise

if TYPE_CHECKING:
    # The element type only: every file is parsed by defusedxml.
    from xml.etree.ElementTree import Element  # nosec B405

log = logging.getLogger("deskpilot.crawler.sitemaps")

MAX_INDEX_DEPTH = 2
"""An index's sitemaps are read; an index inside those too (the protocol forbids it, some sites
do it), and no deeper."""

_GZIP_MAGIC = b"\x1f\x8b"
_READ_CHUNK = 64 * 1024

SitemapFetch = Callable[[str], Awaitable[tuple[int, bytes]]]
"""URL → (status, body) of a GET made as a page's is; raises :class:`SitemapUnavailable` when a
rule refuses it (scope, robots.txt, SSRF guard, size) or the site cannot be reached."""


class SitemapUnavailable(Exception):
    """The file could not be read: refused by a crawling rule, or the site failed to answer."""


class SitemapTooLarge(Exception):
    """The file is larger than ``CRAWLER_SITEMAP_MAX_BYTES`` once decompressed."""


@dataclass(frozen=True)
class SitemapEntry:
    url: str
    lastmod: float | None = None
    """``<lastmod>`` as epoch seconds."""
    title: str = ""
    source: str = ""
    """The sitemap file that listed it."""


@dataclass
class SitemapFile:
    """One file as parsed: a urlset's entries, or an index's sitemaps."""

    entries: list[SitemapEntry] = field(default_factory=list)
    sitemaps: list[str] = field(default_factory=list)
    error: str = ""
    """Why the file was not read whole (entries before the problem are kept), or refused."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "entries": [[e.url, e.lastmod, e.title] for e in self.entries],
                "sitemaps": self.sitemaps,
                "error": self.error,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes, source: str) -> SitemapFile:
        data = json.loads(raw)
        return cls(
            [SitemapEntry(str(u), m, str(t), source) for u, m, t in data["entries"]],
            [str(s) for s in data["sitemaps"]],
            str(data.get("error", "")),
        )


# -- reading one file ----------------------------------------------------------------------------


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Capped:
    """A stream that raises :class:`SitemapTooLarge` once more than ``cap`` bytes have come out
    of ``inner`` (for gzip: decompressed bytes, produced a chunk at a time), after handing out
    ``head`` (read earlier to tell the format) again."""

    def __init__(self, inner: _Readable, cap: int) -> None:
        self.inner = inner
        self.cap = cap
        self.total = 0
        self.head = b""

    def read(self, size: int = -1, /) -> bytes:
        if self.head:
            data, self.head = self.head, b""
            return data
        data = self.inner.read(_READ_CHUNK if size < 0 else min(size, _READ_CHUNK))
        self.total += len(data)
        if self.total > self.cap:
            raise SitemapTooLarge(f"more than {self.cap} bytes (CRAWLER_SITEMAP_MAX_BYTES)")
        return data

    def peek(self, size: int) -> bytes:
        """The first ``size`` bytes, handed out again by the next :meth:`read`."""
        self.head = self.read(size)
        return self.head


class _NotASitemap(Exception):
    pass


def _opened(body: bytes, max_bytes: int) -> _Capped:
    raw: _Readable = io.BytesIO(body)
    if body.startswith(_GZIP_MAGIC):
        raw = gzip.GzipFile(fileobj=io.BytesIO(body), mode="rb")
    return _Capped(raw, max_bytes)


def parse_lastmod(text: str, now: float | None = None) -> float | None:
    """A W3C datetime (``2026``, ``2026-11``, ``2026-11-27``, ``2026-11-27T04:40:00+00:00``...)
    as epoch seconds, UTC when no zone is given; None when it is not one or lies in the future
    (a date a site cannot mean would make a page look changed on every crawl)."""
    text = text.strip()
    if len(text) == 4 and text.isdigit():
        text += "-01-01"
    elif len(text) == 7 and text[4] == "-":
        text += "-01"
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamp = when.timestamp()
    return None if stamp > (now if now is not None else time.time()) else stamp


def _local(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1].lower()


def _child_text(element: Element, name: str) -> str:
    for child in element.iter():
        if child is not element and _local(child.tag) == name and child.text:
            return child.text.strip()
    return ""


def _xml_items(stream: _Readable) -> Iterator[Element]:
    """Each ``<url>`` of a urlset or ``<sitemap>`` of an index, cleared once handed out so
    memory stays flat however long the file; :class:`_NotASitemap` for any other root."""
    started = False
    for event, element in iterparse(
        stream, events=("start", "end"), forbid_dtd=True, forbid_entities=True
    ):
        if event == "start":
            if not started and _local(element.tag) not in ("urlset", "sitemapindex"):
                raise _NotASitemap(_local(element.tag))
            started = True
        elif _local(element.tag) in ("url", "sitemap"):
            yield element
            element.clear()


def parse_sitemap(
    body: bytes, *, max_bytes: int, max_urls: int, now: float | None = None
) -> SitemapFile:
    """Read one sitemap file (XML urlset or index, gzip or not, or text); never raises for bad
    input: what went wrong is in :attr:`SitemapFile.error`, with what was read before it."""
    found = SitemapFile()
    stream = _opened(body, max_bytes)
    try:
        if not stream.peek(512).lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
            _read_text(stream, found, max_urls)
            return found
        for element in _xml_items(stream):
            loc = _child_text(element, "loc")
            if not loc:
                continue
            if _local(element.tag) == "sitemap":
                found.sitemaps.append(loc)
                continue
            if len(found.entries) >= max_urls:
                found.error = f"more than {max_urls} URLs (CRAWLER_SITEMAP_MAX_URLS)"
                return found
            lastmod = parse_lastmod(_child_text(element, "lastmod"), now)
            found.entries.append(SitemapEntry(loc, lastmod, _child_text(element, "title")[:200]))
    except DefusedXmlException as exc:
        # Nothing of a file that declares entities is trusted: none of it is kept.
        return SitemapFile(error=f"refused: {type(exc).__name__} (no DTD or entity is read)")
    except _NotASitemap as exc:
        found.error = f"not a sitemap (the root element is <{exc}>)"
    except SitemapTooLarge as exc:
        found.error = str(exc)
    except (ParseError, OSError, EOFError, UnicodeDecodeError) as exc:
        found.error = f"malformed: {type(exc).__name__}: {exc}"[:300]
    return found


def _read_text(stream: _Readable, found: SitemapFile, max_urls: int) -> None:
    pending = b""
    while chunk := stream.read(_READ_CHUNK):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        if not _add_lines(lines, found, max_urls):
            return
    _add_lines([pending], found, max_urls)


def _add_lines(lines: Iterable[bytes], found: SitemapFile, max_urls: int) -> bool:
    for line in lines:
        url = line.decode("utf-8", errors="replace").strip().lstrip("\ufeff")
        if not url.lower().startswith(("http://", "https://")):
            continue
        if len(found.entries) >= max_urls:
            found.error = f"more than {max_urls} URLs (CRAWLER_SITEMAP_MAX_URLS)"
            return False
        found.entries.append(SitemapEntry(url))
    return True


# -- hosts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostMap:
    """``CRAWLER_SITEMAP_HOST_MAP``: a host a sitemap names → the host that serves its pages here.

    Keys are ``host`` or ``host:port`` (a key without a port maps the host on any port); values
    ``host[:port]`` (the scheme stays that of the file that named the URL) or an origin
    ``http(s)://host[:port]``.
    """

    hosts: Mapping[str, str] = field(default_factory=dict)

    def apply(self, url: str, read_from: str) -> str:
        """``url`` with its scheme and host replaced when the map names its host."""
        if not self.hosts:
            return url
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        try:
            named = f"{host}:{parts.port}" if parts.port else host
        except ValueError:
            return url
        target = self.hosts.get(named) or self.hosts.get(host)
        if target is None:
            return url
        scheme, _, netloc = target.rpartition("://")
        scheme = scheme or urlsplit(read_from).scheme or parts.scheme
        return urlunsplit((scheme, netloc, parts.path, parts.query, ""))

    def fingerprint(self) -> str:
        return json.dumps(dict(sorted(self.hosts.items())))


# -- the fleet's reader --------------------------------------------------------------------------


def locations_for(seed: str, robots_sitemaps: Iterable[str]) -> list[str]:
    """Where a seed's site keeps its sitemaps: robots.txt's ``Sitemap:`` lines (relative ones
    resolved against it), ``/sitemap.xml`` and ``sitemap.xml`` beside the seed."""
    site = host_key(seed)
    robots = f"{site}/robots.txt"
    found = [urljoin(robots, line.strip()) for line in robots_sitemaps if line.strip()]
    found += [f"{site}/sitemap.xml", urljoin(seed, "sitemap.xml")]
    return list(dict.fromkeys(found))


class SitemapReader:
    """Sitemap files cached in Redis (and parsed once per process), read for a job's scope."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        prefix: str,
        ttl_s: int,
        max_bytes: int,
        max_urls: int,
        max_files: int,
        host_map: HostMap | None = None,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self.max_urls = max_urls
        self.max_files = max_files
        self.host_map = host_map or HostMap()
        self._parsed: Memo[SitemapFile] = Memo(max_entries=256)

    def key(self, url: str) -> str:
        # A cache key, not a secret.
        digest = hashlib.sha1(  # noqa: S324  # nosec B324
            f"{url}\x1f{self.host_map.fingerprint()}".encode()
        ).hexdigest()
        return f"{self.prefix}crawler:sitemap:{host_key(url)}:{digest}"

    def lastmod_key(self, site: str) -> str:
        return f"{self.prefix}crawler:sitemap:{site}:lastmod"

    def mapped_key(self, site: str) -> str:
        return f"{self.prefix}crawler:sitemap:{site}:mapped"

    async def newly_mapped(self, entries: Iterable[SitemapEntry]) -> dict[str, list[SitemapEntry]]:
        """The entries of each site whose list of pages differs from the one last announced
        (within ``ttl_s``), by site; every worker of the fleet agrees which job announces a
        change, as each swaps the list's digest in Redis in one command."""
        by_site: dict[str, list[SitemapEntry]] = {}
        for entry in entries:
            by_site.setdefault(host_key(entry.url), []).append(entry)
        changed = {}
        for site, listed in by_site.items():
            # A fingerprint of the list, not a secret.
            digest = hashlib.sha1(  # noqa: S324  # nosec B324
                "\n".join(sorted(f"{e.url}\x1f{e.title}" for e in listed)).encode()
            ).hexdigest()
            before = await self.redis.set(self.mapped_key(site), digest, ex=self.ttl_s, get=True)
            if (before.decode() if isinstance(before, bytes) else before) != digest:
                changed[site] = listed
        return changed

    async def lastmod(self, url: str) -> float | None:
        """The page's ``<lastmod>`` from the sitemaps read lately, if one listed it."""
        raw = await self.redis.hget(self.lastmod_key(host_key(url)), url)
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None

    async def read(
        self,
        locations: Iterable[str],
        fetch: SitemapFetch,
        allows: Callable[[str], bool],
        found: list[SitemapEntry],
    ) -> None:
        """Append to ``found`` the entries of the sitemaps at ``locations`` (and of the indexes'
        sitemaps) that ``allows`` (the job's scope), each URL once, at most
        ``CRAWLER_SITEMAP_MAX_URLS``. ``found`` is filled as files are read, so a caller that
        stops waiting keeps what was read by then."""
        queue = [(url, 0) for url in self._usable(locations, "", allows)]
        done: set[str] = set()
        seen = {entry.url for entry in found}
        while queue and len(done) < self.max_files and len(found) < self.max_urls:
            url, depth = queue.pop(0)
            if url in done:
                continue
            done.add(url)
            sitemap = await self._file(url, fetch)
            if sitemap.error:
                log.info("sitemap read in part", extra={"url": url, "error": sitemap.error})
            if depth < MAX_INDEX_DEPTH:
                queue += [
                    (child, depth + 1) for child in self._usable(sitemap.sitemaps, url, allows)
                ]
            for entry in sitemap.entries:
                if entry.url not in seen and allows(entry.url):
                    seen.add(entry.url)
                    found.append(entry)
                    if len(found) >= self.max_urls:
                        break

    def _usable(self, urls: Iterable[str], base: str, allows: Callable[[str], bool]) -> list[str]:
        usable = []
        for raw in urls:
            url = normalise(self.host_map.apply(raw, base or raw), base or None)
            if url is not None and allows(url):
                usable.append(url)
        return list(dict.fromkeys(usable))

    async def _file(self, url: str, fetch: SitemapFetch) -> SitemapFile:
        key = self.key(url)

        async def load() -> tuple[SitemapFile, float]:
            stored = await self.redis.get(key)
            if stored is None:
                return await self._download(url, fetch)
            ttl = max(1, int(await self.redis.ttl(key)))
            return SitemapFile.from_json(stored, url), min(ttl, self.ttl_s)

        return await self._parsed.get(key, load)

    async def _download(self, url: str, fetch: SitemapFetch) -> tuple[SitemapFile, float]:
        try:
            status, body = await fetch(url)
        except SitemapUnavailable as exc:
            return SitemapFile(error=f"not read: {exc}"), 0
        if status >= 500:
            return SitemapFile(error=f"HTTP {status}"), 0
        if status >= 300:
            sitemap = SitemapFile(error=f"HTTP {status}")
        else:
            sitemap = await asyncio.to_thread(
                parse_sitemap, body, max_bytes=self.max_bytes, max_urls=self.max_urls
            )
        sitemap = self._mapped(sitemap, url)
        await self.redis.set(self.key(url), sitemap.to_json(), ex=self.ttl_s)
        await self._remember_lastmods(sitemap.entries)
        return sitemap, self.ttl_s

    def _mapped(self, sitemap: SitemapFile, url: str) -> SitemapFile:
        """Entries normalised (relative to the file) and mapped onto the allowed hosts."""
        entries = []
        for entry in sitemap.entries:
            mapped = normalise(self.host_map.apply(entry.url, url), url)
            if mapped is not None:
                entries.append(SitemapEntry(mapped, entry.lastmod, entry.title, url))
        return SitemapFile(entries, sitemap.sitemaps, sitemap.error)

    async def _remember_lastmods(self, entries: Iterable[SitemapEntry]) -> None:
        by_site: dict[str, dict[str, float]] = {}
        for entry in entries:
            if entry.lastmod is not None:
                by_site.setdefault(host_key(entry.url), {})[entry.url] = entry.lastmod
        for site, stamps in by_site.items():
            key = self.lastmod_key(site)
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hset(key, mapping=stamps)  # type: ignore[arg-type]
                pipe.expire(key, self.ttl_s)
                await pipe.execute()
