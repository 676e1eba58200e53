"""Wires the ticketing service: the backend the settings select, the handlers, the retry loop of
waiting ticket requests and, when a status page is configured, its watcher."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.periodic import every
from contracts.runtime import Worker
from ticketing import handlers
from ticketing.backends import build_backend
from ticketing.config import TicketingSettings
from ticketing.incidents import IncidentLinker
from ticketing.notify.email import EmailChannel
from ticketing.notify.service import Notifier
from ticketing.notify.slack import SlackWebhookChannel
from ticketing.service import TicketingService
from ticketing.statuspage import StatusPageWatcher

SERVICE = "ticketing"


def create_worker(settings: TicketingSettings | None = None) -> Worker:
    settings = settings or TicketingSettings()
    bus = Bus(settings, SERVICE)

    @contextlib.asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        backend = build_backend(settings)
        outbox = handlers.BusOutbox(bus)
        incidents = IncidentLinker(bus.redis, backend, outbox)
        service = TicketingService(backend, bus.redis, settings, outbox, incidents)
        handlers.register(bus, service, incidents, settings.concurrency)
        async with contextlib.AsyncExitStack() as stack:
            # Waiting requests are retried by every replica; a per-request lock keeps two from
            # working on the same one. Backend and Redis errors are retried next round.
            await stack.enter_async_context(
                every(settings.retry_interval_s, service.retry_due, name="ticket-retries")
            )
            notify_client = await stack.enter_async_context(
                httpx.AsyncClient(timeout=settings.notify_timeout_s, follow_redirects=False)
            )
            handlers.register_notices(bus, build_notifier(settings, bus, notify_client))
            if settings.statuspage_url:
                client = await stack.enter_async_context(
                    httpx.AsyncClient(timeout=settings.statuspage_timeout_s)
                )
                watcher = StatusPageWatcher(settings.statuspage_url, bus.redis, outbox, client)
                await stack.enter_async_context(
                    every(settings.statuspage_interval_s, watcher.poll, name="statuspage")
                )
            try:
                yield {"tickets": backend.check}
            finally:
                await stack.aclose()
                await backend.close()

    return Worker(bus, resources)


def build_notifier(settings: TicketingSettings, bus: Bus, client: httpx.AsyncClient) -> Notifier:
    """Unanswered-question notices as the settings describe them (no routes: none go out)."""
    smtp = settings.smtp_config()
    return Notifier(
        bus.redis,
        settings.notify_routes,
        bus.publish,
        email=EmailChannel(smtp) if smtp else None,
        slack=SlackWebhookChannel(client),
        admin_url=str(settings.notify_admin_url) if settings.notify_admin_url else None,
        dedup_s=settings.notify_dedup_s,
        max_per_hour=settings.notify_max_per_hour,
    )
