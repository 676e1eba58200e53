"""Translate bus messages into crawler calls: job requests, per-URL tasks, stops."""

from __future__ import annotations

from contracts.bus import Bus, Delivery
from contracts.events import ContextInsufficient, CrawlStop, CrawlTask
from contracts.topics import Group
from crawler.service import CrawlService


def register(bus: Bus, service: CrawlService, concurrency: int) -> None:
    topics = service.topics

    async def on_request(event: ContextInsufficient, _: Delivery) -> None:
        await service.start_job(event, dispatcher=f"create:{event.event_id}")

    async def on_task(event: CrawlTask, delivery: Delivery) -> None:
        # The stream entry id names this delivery's claim on the URL (see crawler.jobs).
        await service.handle_task(event, delivery.message_id)

    async def on_stop(event: CrawlStop, _: Delivery) -> None:
        await service.stop_job(event)

    # A job's start reads its sites' sitemaps (seconds at most): other jobs start meanwhile.
    bus.subscribe(
        topics.requests,
        ContextInsufficient,
        on_request,
        group=Group.CRAWLER,
        concurrency=concurrency,
    )
    bus.subscribe(topics.tasks, CrawlTask, on_task, group=Group.CRAWLER, concurrency=concurrency)
    bus.subscribe(topics.stop, CrawlStop, on_stop, group=Group.CRAWLER)
