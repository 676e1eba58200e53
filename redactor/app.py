"""Wires the redactor: builds the Presidio analyzer once, registers the handler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.runtime import Worker
from redactor import handlers
from redactor.config import RedactorSettings
from redactor.names import given_names
from redactor.placeholders import ConversationPlaceholders
from redactor.service import Redactor
from redactor.site_terms import SiteTerms

SERVICE = "redactor"


def create_worker(settings: RedactorSettings | None = None) -> Worker:
    settings = settings or RedactorSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        redactor = await asyncio.to_thread(Redactor, settings)
        placeholders = ConversationPlaceholders(
            bus.redis,
            settings.placeholder_key.get_secret_value().encode(),
            settings.placeholder_ttl_s,
        )
        site_terms = (
            SiteTerms(bus.redis, (await asyncio.to_thread(given_names))[0])
            if settings.site_terms
            else None
        )
        handlers.register(bus, redactor, placeholders, settings.concurrency, site_terms)
        yield {}

    return Worker(bus, resources)
