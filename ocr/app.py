"""Wires the ocr service: builds the EasyOCR reader once, registers the handler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.runtime import Worker
from ocr import handlers
from ocr.config import OcrSettings
from ocr.images import ScreenReader
from ocr.service import AttachmentReader

SERVICE = "ocr"


def create_worker(
    settings: OcrSettings | None = None, screens: ScreenReader | None = None
) -> Worker:
    """The ocr worker; ``screens`` lets tests share one already-built reader."""
    settings = settings or OcrSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        # Loaded before the bus starts: a missing model fails the start, not the first message.
        reader = screens if screens is not None else await asyncio.to_thread(ScreenReader, settings)
        handlers.register(
            bus, AttachmentReader(settings, reader), settings.concurrency, settings.max_deliveries
        )
        yield {}

    return Worker(bus, resources)
