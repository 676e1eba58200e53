"""Wires a crawler worker: the browser pool, the HTTP client, the embedding model and the job
store are created once per process; the handlers share them; a background sweep ends jobs whose
deadline passed while no page of theirs was completing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.periodic import every
from contracts.runtime import Worker
from contracts.runtime_config import RuntimeConfigReader, defaults_of, publish_defaults
from crawler import handlers
from crawler.browser import BrowserPool
from crawler.config import CrawlerSettings
from crawler.fetch import REDIRECT_STATUSES, Fetcher
from crawler.fresh import FreshPages
from crawler.guard import AddressGuard
from crawler.jobs import JobStore
from crawler.planner import Encoder, LinkPlanner
from crawler.ratelimit import HostLimiter
from crawler.rerank import build_reranker
from crawler.robots import MAX_ROBOTS_BYTES, RobotsCache
from crawler.service import CrawlService, Topics
from crawler.sitemaps import HostMap, SitemapReader
from crawler.urls import normalise

SERVICE = "crawler"
SITE_PROFILE_TICK_S = 30.0
"""How often a worker checks whether the help sites' sitemaps are due to be read again."""
ROBOTS_REDIRECTS = 5
log = logging.getLogger("deskpilot.crawler")


def create_worker(settings: CrawlerSettings | None = None) -> Worker:
    settings = settings or CrawlerSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        encoder: Encoder | None = None
        if settings.embeddings:
            from crawler.embedding import shared_encoder

            encoder = await asyncio.to_thread(shared_encoder, settings.torch_threads)
        pool = BrowserPool(settings)
        await pool.start()
        guard = AddressGuard(settings.allow_networks)
        fetcher = Fetcher(settings.user_agent, settings.page_timeout_s, guard)
        reranker = build_reranker(settings)

        async def fetch_robots(url: str) -> tuple[int, bytes]:
            for _ in range(ROBOTS_REDIRECTS + 1):
                await guard.check(url)
                response = await fetcher.get(
                    url, max_bytes=MAX_ROBOTS_BYTES, want_body=lambda status, _: status < 300
                )
                location = response.headers.get("location")
                if response.status in REDIRECT_STATUSES and location:
                    url = normalise(location, url) or url
                    continue
                return response.status, response.body
            return 404, b""  # a redirect loop: as if there were no robots.txt

        prefix = settings.key_prefix
        service = CrawlService(
            settings,
            jobs=JobStore(bus.redis, prefix, settings.job_ttl_s),
            pool=pool,
            fetcher=fetcher,
            robots=RobotsCache(
                bus.redis, fetch_robots, prefix=prefix, ttl_s=settings.robots_cache_s
            ),
            limiter=HostLimiter(
                bus.redis,
                prefix=prefix,
                concurrency=settings.domain_concurrency,
                requests_per_s=settings.domain_requests_per_s,
                lease_ms=int(settings.page_timeout_s * 1000) + 5_000,
            ),
            guard=guard,
            planner=LinkPlanner(encoder),
            publisher=bus,
            topics=Topics.for_namespace(settings.namespace),
            worker_id=bus.consumer,
            fresh=FreshPages(bus.redis, prefix, settings.freshness_s),
            reranker=reranker,
            runtime=RuntimeConfigReader(bus.redis),
            sitemaps=SitemapReader(
                bus.redis,
                prefix=prefix,
                ttl_s=settings.sitemap_cache_s,
                max_bytes=settings.sitemap_max_bytes,
                max_urls=settings.sitemap_max_urls,
                max_files=settings.sitemap_max_files,
                host_map=HostMap(settings.sitemap_host_map),
            )
            if settings.sitemaps
            else None,
        )
        # What the admin API shows as defaults; admins' overrides apply per request.
        await publish_defaults(bus.redis, SERVICE, defaults_of(settings, SERVICE))
        handlers.register(bus, service, concurrency=settings.contexts)

        async def browser() -> bool:
            return pool.healthy()

        try:
            # Jobs whose deadline passed end even when no task of theirs is left to notice it
            # (Redis away: the next round tries again).
            async with (
                every(settings.sweep_interval_s, service.sweep, name="deadline-sweep"),
                every(SITE_PROFILE_TICK_S, service.profile_sites, name="site-profile"),
            ):
                yield {"browser": browser}
        finally:
            await pool.close()
            await fetcher.close()
            await reranker.aclose()

    return Worker(bus, resources)
