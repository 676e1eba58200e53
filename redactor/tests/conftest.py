"""Fixtures for the redactor's unit tests.

Loading the spaCy model takes seconds, so the analyzer is built once per test session and shared;
tests that need other settings build a cheap :class:`Redactor` around the same analyzer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from presidio_analyzer import AnalyzerEngine

from contracts.bus import Bus
from contracts.settings import ServiceSettings
from redactor import handlers
from redactor.config import RedactorSettings
from redactor.placeholders import ConversationPlaceholders
from redactor.service import Redactor, build_analyzer


@pytest.fixture(scope="session")
def settings() -> RedactorSettings:
    return RedactorSettings()


@pytest.fixture(scope="session")
def analyzer(settings: RedactorSettings) -> AnalyzerEngine:
    return build_analyzer(settings)


@pytest.fixture(scope="session")
def redactor(settings: RedactorSettings, analyzer: AnalyzerEngine) -> Redactor:
    return Redactor(settings, analyzer=analyzer)


@pytest.fixture
async def running(
    fresh_redis_url: str, redactor: Redactor
) -> AsyncIterator[tuple[Bus, aioredis.Redis]]:
    """The redactor's handlers on a bus of their own, and a client of the same database (one
    of its own: the raw topics have fixed names)."""
    url = fresh_redis_url
    client = aioredis.from_url(url)
    bus = Bus(ServiceSettings(redis_url=url, reclaim_idle_ms=500, graceful_timeout_s=5), "redactor")
    placeholders = ConversationPlaceholders(bus.redis, b"test-placeholder-key-0123", 3600)
    handlers.register(bus, redactor, placeholders, concurrency=1)
    await bus.start()
    try:
        yield bus, client
    finally:
        await bus.stop()
        await client.aclose()
