"""What a crawler worker does with a job request, a task and a stop; no broker in here.

A job request creates the job and dispatches its seeds, then reads the seeds' sitemaps
(:mod:`crawler.sitemaps`, each file fetched under the rules of step 3) and queues the pages they
list as links of the seeds, planned against the question; until then nothing but the seeds is
dispatched, so the first plan sees the seeds' links and the sitemaps together.

The steps of one task (one URL of a job), in order, each able to end it with an outcome that the
job's counters record (``skipped`` in ``crawl.finished``):

1. claim the URL for this task entry (a duplicate entry or a finished job ends here);
2. scope: the URL is under an allowed domain (``off_domain``); a page read within
   ``CRAWLER_FRESHNESS_S`` is not fetched (``fresh``: its kept links are planned) unless its
   sitemap ``<lastmod>`` is newer than that read;
3. for the URL and every redirect hop: scope again, the SSRF guard (``blocked``), robots.txt
   (``robots``), the host's fleet-wide rate limit and crawl-delay, then one GET without following
   redirects; more than ``CRAWLER_MAX_REDIRECTS`` hops is ``redirects``; 429/503 back the host
   off (``Retry-After`` or doubling) and try again, up to ``CRAWLER_RETRY_ATTEMPTS``;
4. the document: 4xx/5xx is ``error``, a type other than HTML or PDF is ``non_html``, a body over
   ``CRAWLER_MAX_PAGE_BYTES`` is ``too_large``;
5. HTML is rendered in the browser pool when its served text is not enough (scripts run; every
   request they make is fetched here, each redirect hop in scope and through the SSRF guard, and
   handed to the page; WebSockets are refused); a rendered DOM over ``CRAWLER_MAX_PAGE_BYTES`` is
   ``too_large``, a document served as PDF that is not one is ``error``; a browser crash retries
   the page; the whole page must finish within ``CRAWLER_PAGE_TIMEOUT_S`` (``error`` otherwise);
6. content already published by the job (the same visible text, or the same PDF bytes) is
   ``duplicate``;
7. the page's links are scored by the planner;
8. the outcome is recorded, with a page's event (its outbox entry, see :mod:`crawler.jobs`) and
   its links queued; only then is the page published on ``pages.crawled`` (and kept as read for
   ``CRAWLER_FRESHNESS_S``), the next best URLs are dispatched as tasks, progress goes to the
   requester's reply stream, and if that was the job's last page, ``crawl.finished`` goes out.

The page's event carries its HTML as read (or a PDF's bytes, base64), not content extracted here:
the indexer extracts it as it does an uploaded file (:mod:`crawler.extract` says what the crawler
reads for itself).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol
from urllib.parse import urljoin, urlsplit

import httpx
from redis.exceptions import RedisError

from contracts.events import (
    MAX_MAPPED_PAGES,
    ContextInsufficient,
    CrawledPage,
    CrawlFinished,
    CrawlPageSummary,
    CrawlStop,
    CrawlTask,
    Event,
    PageLink,
    PagesCrawled,
    SitemapPage,
    SiteMapped,
    TurnReply,
)
from contracts.periodic import every
from contracts.runtime_config import RuntimeConfigReader, read_defaults
from contracts.topics import Topic
from crawler.browser import (
    BrowserCrashed,
    BrowserPool,
    Fulfilment,
    SubRequest,
    SubrequestRefused,
)
from crawler.config import CrawlerSettings
from crawler.extract import ExtractedPage, decode_html, is_pdf, read_html, read_pdf
from crawler.fetch import (
    HTML_TYPES,
    PDF_TYPES,
    REDIRECT_STATUSES,
    THROTTLE_STATUSES,
    Fetcher,
    TooLarge,
    retry_after_s,
)
from crawler.fresh import FreshPages
from crawler.guard import AddressGuard, AddressRefused
from crawler.jobs import Begin, Completion, Dispatched, JobStore, Queued
from crawler.planner import Candidate, LinkPlanner
from crawler.ratelimit import HostLimiter
from crawler.rerank import NoReranker, Reranker
from crawler.robots import RobotsCache
from crawler.sitemaps import SitemapEntry, SitemapReader, SitemapUnavailable, locations_for
from crawler.subresources import SubresourceCache
from crawler.urls import Scope, host_key, normalise, url_pattern

log = logging.getLogger("deskpilot.crawler")

SKIPPED_SUFFIXES = (
    ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".css", ".js", ".mjs", ".json",
    ".xml", ".zip", ".gz", ".tar", ".tgz", ".mp3", ".mp4", ".webm", ".woff", ".woff2", ".ttf",
    ".exe", ".dmg", ".iso",
)  # fmt: skip
"""Links that are obviously not pages are not even queued."""

PAGE_TYPES = HTML_TYPES | PDF_TYPES
"""What the crawler publishes; anything else it fetches as a page is ``non_html``."""

LEASE_MS = 3000
"""A task's hold on the URL it is fetching, renewed every second: a URL whose worker died is taken
over within this long of the bus handing its task to another worker."""


class Outcome(StrEnum):
    PAGE = "page"
    ROBOTS = "robots"
    OFF_DOMAIN = "off_domain"
    DUPLICATE = "duplicate"
    ERROR = "error"
    NON_HTML = "non_html"
    TOO_LARGE = "too_large"
    BLOCKED = "blocked"
    REDIRECTS = "redirects"
    CANCELLED = "cancelled"
    DEADLINE = "deadline"
    FRESH = "fresh"
    """Read within the freshness window: links planned from what was kept, not fetched."""


class Publisher(Protocol):
    async def publish(self, topic: str, event: Event) -> str: ...


@dataclass(frozen=True)
class Topics:
    """The streams the crawler reads and writes; a namespace prefixes all of them."""

    requests: str
    tasks: str
    stop: str
    pages: str
    finished: str
    mapped: str

    @classmethod
    def for_namespace(cls, namespace: str = "") -> Topics:
        prefix = f"{namespace}." if namespace else ""
        return cls(
            requests=f"{prefix}{Topic.CONTEXT_INSUFFICIENT}",
            tasks=f"{prefix}{Topic.CRAWL_TASKS}",
            stop=f"{prefix}{Topic.CRAWL_STOP}",
            pages=f"{prefix}{Topic.PAGES_CRAWLED}",
            finished=f"{prefix}{Topic.CRAWL_FINISHED}",
            mapped=f"{prefix}{Topic.SITE_MAPPED}",
        )


def stable_id(*parts: str) -> str:
    """An event id derived from what the event is about, so a republished event de-duplicates."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


class _Throttled(Exception):
    def __init__(self, site: str, wait_s: float | None) -> None:
        super().__init__(site)
        self.site = site
        self.wait_s = wait_s


@dataclass
class _Document:
    url: str
    """Normalised: the page's identity."""
    address: str
    """As fetched (after redirects): what relative links resolve against."""
    status: int
    content_type: str
    body: bytes
    ms: int
    charset: str | None = None


@dataclass
class _Result:
    outcome: Outcome
    page: CrawledPage | None = None
    links: list[Queued] = field(default_factory=list)
    detail: str = ""
    refused: list[str] = field(default_factory=list)
    """The addresses the SSRF guard refused (``blocked``)."""
    extracted: ExtractedPage | None = None
    """A page's content, kept as read (:mod:`crawler.fresh`) once its outcome is recorded."""


class CrawlService:
    def __init__(
        self,
        settings: CrawlerSettings,
        jobs: JobStore,
        pool: BrowserPool,
        fetcher: Fetcher,
        robots: RobotsCache,
        limiter: HostLimiter,
        guard: AddressGuard,
        planner: LinkPlanner,
        publisher: Publisher,
        topics: Topics,
        worker_id: str,
        fresh: FreshPages | None = None,
        reranker: Reranker | None = None,
        runtime: RuntimeConfigReader | None = None,
        sitemaps: SitemapReader | None = None,
    ) -> None:
        self.settings = settings
        self.runtime = runtime
        self.jobs = jobs
        self.pool = pool
        self.fetcher = fetcher
        self.robots = robots
        self.limiter = limiter
        self.guard = guard
        self.planner = planner
        self.publisher = publisher
        self.topics = topics
        self.worker_id = worker_id
        self.agent = settings.robots_agent
        self.fresh = fresh
        self.reranker = reranker or NoReranker()
        self.sitemaps = sitemaps
        self.subresources = SubresourceCache(settings.subresource_cache_bytes, settings.freshness_s)

    # -- jobs ------------------------------------------------------------------------------

    async def start_job(self, request: ContextInsufficient, dispatcher: str) -> None:
        """Create the job (once, whatever the redeliveries) and dispatch its first URLs."""
        seeds: list[Queued] = []
        for index, raw in enumerate(request.seed_urls):
            url = normalise(raw)
            if url is not None:
                seeds.append(Queued(url, 1.0 - index * 1e-3, 0, url_pattern(url)))
        sitemaps = self.sitemaps if seeds and request.budget.max_depth > 0 else None
        created, batch = await self.jobs.create(
            request, seeds, dispatcher, awaiting=sitemaps is not None
        )
        if created:
            log.info(
                "crawl job started",
                extra={
                    "job_id": request.job_id,
                    "seeds": [s.url for s in seeds],
                    "allowed": [
                        r.domain
                        for r in Scope.build(request.allowed_domains, [s.url for s in seeds]).rules
                    ],
                    "budget": request.budget.model_dump(),
                },
            )
        await self._publish_tasks(request, batch)
        if created and not seeds:
            await self._finish(request.job_id, "frontier_empty")
        if sitemaps is not None:
            # While the seeds are being fetched: a redelivered request replays this dispatch.
            found = await self._sitemap_links(sitemaps, request, seeds)
            batch, ended = await self.jobs.add_found(
                request.job_id, found, dispatcher=f"sitemaps:{dispatcher}"
            )
            await self._publish_tasks(request, batch)
            if ended:
                await self.announce(request.job_id)

    async def _sitemap_links(
        self, reader: SitemapReader, spec: ContextInsufficient, seeds: list[Queued]
    ) -> list[Queued]:
        """The pages the seeds' sites list in their sitemaps, planned against the question as
        links of the seeds (depth 1), best first; what was read within
        ``CRAWLER_SITEMAP_TIMEOUT_S`` if reading takes longer (crawling goes on meanwhile)."""
        scope = Scope.build(spec.allowed_domains, [seed.url for seed in seeds])
        locations, entries = await self._read_sitemaps(reader, spec.seed_urls, scope, spec.job_id)
        await self._announce_mapped(
            reader, entries, spec.correlation_id, spec.conversation_id, spec.job_id
        )
        fresh = await self.jobs.unseen(spec.job_id, [e.url for e in entries])
        entries = [entry for entry, new in zip(entries, fresh, strict=True) if new]
        candidates = self.planner.shortlist(
            spec.question,
            [
                Candidate(e.url, e.title, "", 1, url_pattern(e.url), source=e.source)
                for e in entries
            ],
            self.settings.max_links_per_page,
            spec.focus,
        )
        counts = await self.jobs.pattern_counts(spec.job_id, [c.pattern for c in candidates])
        planned = await asyncio.to_thread(
            self.planner.plan, spec.question, candidates, counts, spec.focus
        )
        log.info(
            "sitemap plan",
            extra={
                "job_id": spec.job_id,
                "locations": locations,
                "listed": len(entries),
                "candidates": len(planned),
                "top": [
                    {"url": p.candidate.url, "score": round(p.score, 3), "reason": p.reason}
                    for p in planned[:5]
                ],
            },
        )
        return [
            Queued(p.candidate.url, p.score, 1, p.candidate.pattern, parent=p.candidate.source)
            for p in planned
        ]

    async def _read_sitemaps(
        self, reader: SitemapReader, seed_urls: Sequence[str], scope: Scope, job: str
    ) -> tuple[list[str], list[SitemapEntry]]:
        """Where the seeds' sitemaps are (robots.txt's ``Sitemap:`` lines and the usual
        places) and the pages they list in ``scope``; what was read within
        ``CRAWLER_SITEMAP_TIMEOUT_S``. A sitemap that cannot be read lists nothing; Redis out
        of reach is raised."""
        locations: list[str] = []
        for raw in seed_urls:
            seed = raw.strip()
            if normalise(seed) is None or not scope.allows(seed):
                continue
            listed: list[str] = []
            if self.settings.respect_robots:
                with contextlib.suppress(RedisError):  # Redis away: no Sitemap: lines this time
                    listed = (await self.robots.rules_for(seed)).sitemaps()
            locations += locations_for(seed, listed)
        entries: list[SitemapEntry] = []

        async def fetch(url: str) -> tuple[int, bytes]:
            return await self._fetch_sitemap(url, scope)

        try:
            async with asyncio.timeout(self.settings.sitemap_timeout_s):
                await reader.read(locations, fetch, scope.allows, entries)
        except TimeoutError:
            log.info(
                "sitemaps read in part",
                extra={"job_id": job, "timeout_s": self.settings.sitemap_timeout_s},
            )
        except RedisError:
            raise  # the job's state is out of reach too: the request is delivered again
        except Exception as exc:  # a sitemap never stops the crawl: it goes on from the links
            log.warning(
                "sitemaps not read",
                extra={"job_id": job, "error": f"{type(exc).__name__}: {exc}"[:300]},
            )
        return locations, [e for e in entries if not e.url.lower().endswith(SKIPPED_SUFFIXES)]

    async def _announce_mapped(
        self,
        reader: SitemapReader,
        entries: list[SitemapEntry],
        correlation_id: str,
        conversation_id: str,
        job: str,
    ) -> int:
        """Tell the site profiles (``site.mapped``) what the sites list, when that changed;
        how many sites were announced."""
        changed = await reader.newly_mapped(entries)
        for site, listed in changed.items():
            pages = [SitemapPage(url=e.url, title=e.title) for e in listed[:MAX_MAPPED_PAGES]]
            mapped = SiteMapped(
                event_id=stable_id(job, "mapped", site),
                correlation_id=correlation_id,
                conversation_id=conversation_id,
                site=site,
                pages=pages,
            )
            await self.publisher.publish(self.topics.mapped, mapped)
            log.info("site mapped", extra={"job_id": job, "site": site, "pages": len(pages)})
        return len(changed)

    async def profile_sites(self) -> int:
        """Read the configured help sites' sitemaps with no question asked, so that their
        profiles (the orchestrator's scope, the redactor's site words) know the listed pages
        before the first question: the seeds and allowed domains the orchestrator runs with
        (``contracts.runtime_config``: an admin's overrides, else its published defaults),
        read as a job reads them. One worker of the fleet reads them once every
        ``CRAWLER_SITE_PROFILE_INTERVAL_S`` (a lock that long), whichever ticks first; a list is
        announced on ``site.mapped`` only when it changed. Returns how many sites were
        announced."""
        reader = self.sitemaps
        interval = self.settings.site_profile_interval_s
        if reader is None or interval <= 0:
            return 0
        config = (await self.runtime.current()).overrides if self.runtime is not None else None
        defaults = await read_defaults(reader.redis)
        seeds = (config.crawl_seed_urls if config else None) or defaults.get("crawl_seed_urls")
        allowed = (config.crawl_allowed_domains if config else None) or defaults.get(
            "crawl_allowed_domains"
        )
        seed_urls = [u for u in seeds or [] if isinstance(u, str) and normalise(u) is not None]
        if not seed_urls:
            return 0
        lock = f"{self.settings.key_prefix}crawler:site-profile"
        if not await reader.redis.set(lock, self.worker_id, nx=True, ex=max(int(interval), 1)):
            return 0  # read within the interval, by this worker or another
        job = f"site-profile:{int(time.time())}"
        scope = Scope.build([str(d) for d in allowed or []], seed_urls)
        _, entries = await self._read_sitemaps(reader, seed_urls, scope, job)
        return await self._announce_mapped(reader, entries, job, job, job)

    async def _fetch_sitemap(self, url: str, scope: Scope) -> tuple[int, bytes]:
        """A sitemap file fetched as a page is: scope, SSRF guard, robots.txt, rate limit and
        redirects hop by hop, within ``CRAWLER_SITEMAP_MAX_BYTES`` and the page time limit."""
        try:
            async with asyncio.timeout(self.settings.page_timeout_s):
                document = await self._download(
                    url, scope, kinds=None, max_bytes=self.settings.sitemap_max_bytes
                )
        except _Throttled as throttled:
            wait = throttled.wait_s if throttled.wait_s is not None else self.settings.backoff_s
            await self.limiter.back_off(throttled.site, min(wait, self.settings.max_retry_after_s))
            raise SitemapUnavailable(f"throttled by {throttled.site}") from None
        except (TimeoutError, TooLarge, AddressRefused, OSError, httpx.HTTPError) as exc:
            raise SitemapUnavailable(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
        if isinstance(document, _Result):
            raise SitemapUnavailable(f"{document.outcome}: {document.detail}")
        return document.status, document.body

    async def stop_job(self, stop: CrawlStop) -> None:
        await self.jobs.request_stop(stop.job_id)
        await self._finish(stop.job_id, "stopped")

    async def sweep(self) -> None:
        """End jobs past their deadline (and announce ends whose announcer died)."""
        now_ms = int(time.time() * 1000)
        for job_id in await self.jobs.due(now_ms):
            meta = await self.jobs.meta(job_id)
            if not meta:
                await self.jobs.settled(job_id)
                continue
            ended_now = await self.jobs.finish(job_id, "deadline", f"sweep:{self.worker_id}")
            # Finished a while ago yet still listed: whoever ended it died before announcing.
            orphaned = now_ms - int(meta.get("finished_ms", now_ms)) > 5_000
            if ended_now or orphaned:
                await self.announce(job_id)

    async def _finish(self, job_id: str, reason: str) -> None:
        if await self.jobs.finish(job_id, reason, self.worker_id):
            await self.announce(job_id)

    async def announce(self, job_id: str) -> None:
        """Publish ``crawl.finished`` for a finished job (same event id however often)."""
        spec = await self.jobs.spec(job_id)
        meta = await self.jobs.meta(job_id)
        if spec is None or meta.get("status") != "finished":
            return
        # Pages before the end: those whose worker died before publishing them go out first.
        for url, event in (await self.jobs.unsent(job_id)).items():
            await self._publish_page(job_id, url, event)
        pages = await self.jobs.pages(job_id)
        duration = max(0.0, (int(meta["finished_ms"]) - int(meta["started_ms"])) / 1000)
        skipped = {
            key.removeprefix("skip:"): int(value)
            for key, value in meta.items()
            if key.startswith("skip:") and int(value) > 0
        }
        for cause in ("robots", "off_domain", "duplicate", "error"):
            skipped.setdefault(cause, 0)
        finished = CrawlFinished(
            event_id=stable_id(job_id, "finished"),
            correlation_id=spec.correlation_id,
            conversation_id=spec.conversation_id,
            job_id=job_id,
            reason=meta["reason"],
            pages=pages,
            skipped=skipped,
            duration_s=round(duration, 3),
            pages_per_s=round(len(pages) / duration, 3) if duration > 0 else 0.0,
        )
        await self.publisher.publish(self.topics.finished, finished)
        await self.jobs.settled(job_id)
        log.info(
            "crawl job finished",
            extra={
                "job_id": job_id,
                "reason": meta["reason"],
                "pages": len(pages),
                "skipped": skipped,
            },
        )

    # -- tasks -----------------------------------------------------------------------------

    async def handle_task(self, task: CrawlTask, entry: str) -> None:
        spec = await self.jobs.spec(task.job_id)
        if spec is None:
            return  # the job expired: nothing to do
        # One holder per call: the bus may hand the same entry to a second call (in this process
        # or another) while the first is only slow; the lease makes the second wait.
        holder = f"{self.worker_id}:{uuid.uuid4().hex[:12]}"
        state = await self._claim(task, entry, holder)
        if state in ("gone", "duplicate"):
            return
        if state == "done":  # redelivered after its outcome was recorded: replay the rest
            completion = await self.jobs.complete(task.job_id, task.url, entry, Outcome.PAGE)
            if completion.unsent is not None:  # its worker died before publishing the page
                await self._publish_page(spec.job_id, task.url, completion.unsent)
            await self._after(spec, completion, None)
            return
        if state == "cancel":
            result = _Result(Outcome.CANCELLED)
        elif state == "late":
            result = _Result(Outcome.DEADLINE)
        else:
            async with self._leased(task, holder):
                result = await self._crawl(spec, task)
        summary = event = None
        if result.page is not None:
            page = result.page
            event = PagesCrawled(
                event_id=stable_id(spec.job_id, task.url, "page"),
                correlation_id=spec.correlation_id,
                conversation_id=spec.conversation_id,
                job_id=spec.job_id,
                pages=[page],
            )
            summary = CrawlPageSummary(
                url=page.url,
                status=page.status,
                depth=page.depth,
                title=page.title,
                bytes=page.bytes,
                ms=page.ms,
                rendered=page.rendered,
            )
        if result.outcome is not Outcome.PAGE:
            log.info(
                "url skipped",
                extra={
                    "job_id": spec.job_id,
                    "url": task.url,
                    "outcome": str(result.outcome),
                    "detail": result.detail,
                    "entry": entry,
                },
            )
        if result.outcome is Outcome.BLOCKED:  # kept before completing: the end may follow
            await self.jobs.note_refused(spec.job_id, task.url, result.detail, result.refused)
        completion = await self.jobs.complete(
            spec.job_id,
            task.url,
            entry,
            result.outcome,
            summary=summary,
            event=event,
            links=result.links,
            pattern_cap=self.settings.max_pages_per_pattern,
        )
        # Published only once recorded: a page whose outcome was not (this attempt's worker died,
        # or another attempt recorded another outcome) is never out, so no job has more pages
        # out than it counts (max_pages). Once recorded, it is out even if this worker dies here.
        if completion.state == "ok" and event is not None:
            await self._publish_page(spec.job_id, task.url, event)
            if self.fresh is not None and result.extracted is not None:
                await self.fresh.remember(task.url, result.extracted)
                if event.pages[0].url != task.url:  # redirected: the target was read too
                    await self.fresh.remember(event.pages[0].url, result.extracted)
        elif completion.unsent is not None:  # an earlier attempt recorded it, then died
            await self._publish_page(spec.job_id, task.url, completion.unsent)
        await self._after(spec, completion, result)

    async def _publish_page(self, job_id: str, url: str, event: PagesCrawled) -> None:
        """Publish a recorded page's event from the job's outbox, then take it out of there."""
        await self.publisher.publish(self.topics.pages, event)
        await self.jobs.sent(job_id, url)

    async def _claim(self, task: CrawlTask, entry: str, holder: str) -> Begin:
        while True:
            state = await self.jobs.begin(task.job_id, task.url, entry, holder, LEASE_MS)
            if state != "busy":
                return state
            await asyncio.sleep(LEASE_MS / 6000)  # until its holder completes it or dies

    @contextlib.asynccontextmanager
    async def _leased(self, task: CrawlTask, holder: str) -> AsyncIterator[None]:
        """Keep the URL's lease while the block fetches it (Redis away: the next round retries)."""

        async def renew() -> None:
            await self.jobs.renew(task.job_id, task.url, holder, LEASE_MS)

        async with every(LEASE_MS / 3000, renew, name=f"lease-{task.url}", errors=(RedisError,)):
            yield

    async def _after(
        self, spec: ContextInsufficient, completion: Completion, result: _Result | None
    ) -> None:
        await self._publish_tasks(spec, completion.dispatched)
        if (
            result is not None
            and result.page is not None
            and spec.reply_to
            and completion.state == "ok"
        ):
            await self.publisher.publish(
                spec.reply_to,
                TurnReply(
                    correlation_id=spec.correlation_id,
                    conversation_id=spec.conversation_id,
                    kind="progress",
                    stage="crawling",
                    detail=f"{completion.published}/{spec.budget.max_pages} pages",
                    count=completion.published,
                    total=spec.budget.max_pages,
                ),
            )
        if completion.finished:
            await self.announce(spec.job_id)

    async def _publish_tasks(self, spec: ContextInsufficient, batch: list[Dispatched]) -> None:
        for item in batch:
            await self.publisher.publish(
                self.topics.tasks,
                CrawlTask(
                    event_id=stable_id(spec.job_id, item.url, "task"),
                    correlation_id=spec.correlation_id,
                    conversation_id=spec.conversation_id,
                    job_id=spec.job_id,
                    url=item.url,
                    depth=item.depth,
                    parent_url=item.parent,
                    anchor=item.anchor,
                    score=item.score,
                ),
            )

    # -- one URL ---------------------------------------------------------------------------

    async def _crawl(self, spec: ContextInsufficient, task: CrawlTask) -> _Result:
        scope = Scope.build(spec.allowed_domains, spec.seed_urls)
        if not scope.allows(task.url):
            return _Result(Outcome.OFF_DOMAIN, detail="not under an allowed domain")
        if self.fresh is not None and (kept := await self.fresh.get(task.url)) is not None:
            changed = await self.sitemaps.lastmod(task.url) if self.sitemaps is not None else None
            if changed is None or changed <= kept.read_at:
                links = await self._plan(spec, task, kept.as_extracted(), scope)
                return _Result(Outcome.FRESH, links=links, detail=f"read {kept.age_s():.0f} s ago")
            log.info(
                "page read again: its sitemap lastmod is newer",
                extra={"url": task.url, "read_at": kept.read_at, "lastmod": changed},
            )
        attempts = self.settings.retry_attempts
        for attempt in range(1, attempts + 1):
            try:
                async with asyncio.timeout(self.settings.page_timeout_s):
                    return await self._fetch_page(spec, task, scope)
            except _Throttled as throttled:
                wait = throttled.wait_s
                if wait is None:
                    wait = self.settings.backoff_s * 2 ** (attempt - 1)
                if wait > self.settings.max_retry_after_s or attempt == attempts:
                    return _Result(Outcome.ERROR, detail=f"throttled (retry after {wait:g}s)")
                log.info(
                    "host throttled us; backing off",
                    extra={"site": throttled.site, "wait_s": wait, "attempt": attempt},
                )
                await self.limiter.back_off(throttled.site, wait)
            except BrowserCrashed as crash:
                log.warning(
                    "browser crashed; retrying the page",
                    extra={"url": task.url, "attempt": attempt, "error": str(crash)[:200]},
                )
                if attempt == attempts:
                    return _Result(Outcome.ERROR, detail="browser crashed")
            except TimeoutError:
                return _Result(
                    Outcome.ERROR, detail=f"page time limit ({self.settings.page_timeout_s:g}s)"
                )
            except TooLarge as exc:
                return _Result(Outcome.TOO_LARGE, detail=str(exc))
            except AddressRefused as exc:
                refused = [str(address) for address, _ in exc.refused]
                return _Result(Outcome.BLOCKED, detail=str(exc), refused=refused)
            except (OSError, ConnectionError) as exc:
                if attempt == attempts:
                    return _Result(Outcome.ERROR, detail=type(exc).__name__)
            except Exception as exc:  # httpx and Playwright errors: this URL failed
                if _is_transport_error(exc) and attempt < attempts:
                    continue
                return _Result(Outcome.ERROR, detail=f"{type(exc).__name__}: {str(exc)[:200]}")
        return _Result(Outcome.ERROR, detail="no attempts left")

    async def _fetch_page(
        self, spec: ContextInsufficient, task: CrawlTask, scope: Scope
    ) -> _Result:
        document = await self._download(task.url, scope)
        if isinstance(document, _Result):
            return document
        if document.status >= 400:
            return _Result(Outcome.ERROR, detail=f"HTTP {document.status}")
        started = time.monotonic()
        content_b64 = ""
        if document.content_type in PDF_TYPES:
            if not is_pdf(document.body):
                return _Result(Outcome.ERROR, detail="served as a PDF but is not one")
            extracted = await asyncio.to_thread(read_pdf, document.body, document.address)
            content_b64 = base64.b64encode(document.body).decode("ascii")
            rendered = False
        else:
            extracted, rendered = await self._read_html(document, scope)
        owner = await self.jobs.claim_content(spec.job_id, extracted.content_hash, document.url)
        if owner != document.url:
            return _Result(Outcome.DUPLICATE, detail=f"same content as {owner}")
        ms = document.ms + int((time.monotonic() - started) * 1000)
        page = CrawledPage(
            url=document.url,
            requested_url=task.url,
            title=extracted.title,
            content_hash=extracted.content_hash,
            html=extracted.html,
            content_b64=content_b64,
            links=[PageLink(url=link.url, text=link.anchor) for link in extracted.links],
            depth=task.depth,
            status=document.status,
            content_type=document.content_type,
            bytes=len(document.body),
            ms=ms,
            rendered=rendered,
        )
        try:
            links = await self._plan(spec, task, extracted, scope)
        except BaseException:
            # Planning failed or the page's time ran out (a cancellation): this URL will not
            # publish the content, so the same content under another URL must not be skipped
            # as its duplicate. Redis away too: the claim stays, as before.
            with contextlib.suppress(RedisError):
                await self.jobs.release_content(spec.job_id, extracted.content_hash, document.url)
            raise
        return _Result(Outcome.PAGE, page=page, links=links, extracted=extracted)

    async def _read_html(self, document: _Document, scope: Scope) -> tuple[ExtractedPage, bool]:
        """The page as read, and whether the browser had to run its scripts to get it.

        With ``render="auto"`` the served HTML is read first; most sites (server-rendered or
        static, Docusaurus among them) put their content there, and reading it takes
        milliseconds where Chromium takes a third of a second. A page whose HTML holds little
        text, or says it needs JavaScript, is rendered. A rendered DOM larger than
        ``CRAWLER_MAX_PAGE_BYTES`` raises :class:`TooLarge`, as a served document that size does.
        """
        settings = self.settings
        if settings.render == "auto":
            served = await asyncio.to_thread(
                _read_served, document, max_links=settings.max_links_per_page
            )
            if served.words >= settings.render_min_words and not served.asks_for_javascript:
                return served, False

        async def fetch(request: SubRequest) -> Fulfilment:
            return await self._subrequest(request, scope)

        rendered = await self.pool.render(
            document.address, document.body, document.content_type, fetch
        )
        if rendered.refusals:
            log.info(
                "page requests refused",
                extra={"url": document.url, "refused": list(rendered.refusals[:10])},
            )
        size = len(rendered.html.encode("utf-8"))
        if size > settings.max_page_bytes:
            raise TooLarge(
                f"the rendered page is {size} bytes, more than {settings.max_page_bytes} "
                "(CRAWLER_MAX_PAGE_BYTES)"
            )
        extracted = await asyncio.to_thread(
            read_html, rendered.html, document.address, max_links=settings.max_links_per_page
        )
        return extracted, True

    async def _subrequest(self, request: SubRequest, scope: Scope) -> Fulfilment:
        """Fetch what a rendered page asked for, following redirects here, one hop at a time:
        every hop must be in scope and pass the SSRF guard (the client connects to the address
        the guard checked), so the page never sees a response from anywhere else."""
        if not scope.allows(request.url):
            raise SubrequestRefused(f"{request.url} is not under an allowed domain")
        return await self.subresources.fetch(request, lambda: self._fetch_hops(request, scope))

    async def _fetch_hops(self, request: SubRequest, scope: Scope) -> tuple[Fulfilment, bool]:
        """``request`` fetched hop by hop (see :meth:`_subrequest`); and whether it redirected."""
        url, method, body = request.url, request.method, request.body
        headers = dict(request.headers)
        for hop in range(self.settings.max_redirects + 1):
            if not scope.allows(url):
                raise SubrequestRefused(f"{url} is not under an allowed domain")
            try:
                response = await self.fetcher.request(
                    method,
                    url,
                    headers=headers,
                    content=body,
                    max_bytes=self.settings.max_page_bytes,
                    want_body=lambda status, _kind: status not in REDIRECT_STATUSES,
                )
            except AddressRefused as refused:
                raise SubrequestRefused(f"{url}: {refused}") from refused
            location = response.headers.get("location")
            if response.status not in REDIRECT_STATUSES or not location:
                fulfilment = Fulfilment.of(
                    response.status, response.headers.multi_items(), response.body
                )
                return fulfilment, hop > 0
            target = urljoin(url, location.strip())
            if urlsplit(target).scheme not in ("http", "https"):
                raise SubrequestRefused(f"{url} redirects to {target}")
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = "GET", None  # as browsers do
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            if host_key(target) != host_key(url):  # credentials stay with their origin
                headers = {
                    k: v for k, v in headers.items() if k.lower() not in ("authorization", "cookie")
                }
            url = target
        raise SubrequestRefused(f"{request.url}: more than {self.settings.max_redirects} redirects")

    async def politeness(self) -> CrawlerSettings:
        """The settings with the admins' runtime overrides of the per-host rate limits and the
        crawl-delay cap (``contracts.runtime_config``, re-read at most every few seconds)."""
        if self.runtime is None:
            return self.settings
        return (await self.runtime.current()).overrides.apply(self.settings)

    async def _download(
        self,
        url: str,
        scope: Scope,
        *,
        kinds: frozenset[str] | None = PAGE_TYPES,
        max_bytes: int | None = None,
    ) -> _Document | _Result:
        """``url`` as fetched, redirects followed hop by hop under every rule, or the outcome
        that stopped it; a body of another media type than ``kinds`` (None: any) is
        ``non_html``, a body over ``max_bytes`` (default ``CRAWLER_MAX_PAGE_BYTES``) raises
        :class:`TooLarge`."""
        limit = self.settings.max_page_bytes if max_bytes is None else max_bytes
        current = url  # as requested: a server may redirect /docs to /docs/, both normalise alike
        hops = 0
        while True:
            if not scope.allows(current):
                return _Result(
                    Outcome.OFF_DOMAIN, detail=f"redirected off the allowed domains to {current}"
                )
            await self.guard.check(current)
            polite = await self.politeness()
            delay = 0.0
            if self.settings.respect_robots:
                rules = await self.robots.rules_for(current)
                if not rules.allowed(current, self.agent):
                    return _Result(Outcome.ROBOTS, detail=f"robots.txt disallows {current}")
                delay = min(rules.crawl_delay(self.agent) or 0.0, polite.max_crawl_delay_s)
            site = host_key(current)
            async with self.limiter.slot(
                site,
                delay,
                concurrency=polite.domain_concurrency,
                requests_per_s=polite.domain_requests_per_s,
            ):
                response = await self.fetcher.get(
                    current,
                    max_bytes=limit,
                    want_body=lambda status, kind: (
                        status < 300 and (kinds is None or kind in kinds)
                    ),
                )
            location = response.headers.get("location")
            if response.status in REDIRECT_STATUSES and location:
                hops += 1
                if hops > self.settings.max_redirects:
                    return _Result(
                        Outcome.REDIRECTS,
                        detail=f"more than {self.settings.max_redirects} redirects",
                    )
                target = urljoin(current, location.strip()).split("#", 1)[0]
                if normalise(target) is None:
                    return _Result(Outcome.ERROR, detail="redirect to an uncrawlable URL")
                current = target
                continue
            if response.status in THROTTLE_STATUSES:
                raise _Throttled(site, retry_after_s(response.headers.get("retry-after")))
            identity = normalise(current) or current
            if response.status >= 400:
                return _Document(
                    identity, current, response.status, response.content_type, b"", response.ms
                )
            if kinds is not None and response.content_type not in kinds:
                return _Result(Outcome.NON_HTML, detail=response.content_type or "no content type")
            return _Document(
                identity,
                current,
                response.status,
                response.content_type,
                response.body,
                response.ms,
                response.charset,
            )

    async def _plan(
        self, spec: ContextInsufficient, task: CrawlTask, page: ExtractedPage, scope: Scope
    ) -> list[Queued]:
        depth = task.depth + 1
        if depth > spec.budget.max_depth:
            return []
        outside = [link.url for link in page.links if not scope.allows(link.url)]
        if outside:
            await self.jobs.note_off_domain(spec.job_id, outside)
        links = [
            link
            for link in page.links
            if scope.allows(link.url) and not link.url.lower().endswith(SKIPPED_SUFFIXES)
        ]
        fresh = await self.jobs.unseen(spec.job_id, [link.url for link in links])
        links = [link for link, new in zip(links, fresh, strict=True) if new]
        if not links:
            return []
        candidates = [
            Candidate(link.url, link.anchor, link.context, depth, url_pattern(link.url))
            for link in links
        ]
        counts = await self.jobs.pattern_counts(spec.job_id, [c.pattern for c in candidates])
        planned = await asyncio.to_thread(
            self.planner.plan, spec.question, candidates, counts, spec.focus
        )
        planned = await self.reranker.rerank(spec.question, planned)
        here = url_pattern(task.url)
        log.info(
            "link plan",
            extra={
                "job_id": spec.job_id,
                "page": task.url,
                "candidates": len(planned),
                "top": [
                    {"url": p.candidate.url, "score": round(p.score, 3), "reason": p.reason}
                    for p in planned[:5]
                ],
            },
        )
        return [
            Queued(
                p.candidate.url,
                p.score,
                depth,
                p.candidate.pattern,
                parent=task.url,
                anchor=p.candidate.anchor,
                chained=p.candidate.pattern == here,
            )
            for p in planned
        ]


def _read_served(document: _Document, *, max_links: int) -> ExtractedPage:
    html = decode_html(document.body, document.charset)
    return read_html(html, document.address, max_links=max_links)


def _is_transport_error(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)
