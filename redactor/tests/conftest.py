"""Fixtures for the redactor's unit tests.

Loading the spaCy model takes seconds, so the analyzer is built once per test session and shared;
tests that need other settings build a cheap :class:`Redactor` around the same analyzer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import redis.asyncio as aioredis
from presidio_analyzer import AnalyzerEngine

from contracts.bus import Bus
from contracts.settings import ServiceSettings
from redactor import handlers
from redactor.config import RedactorSettings
from redactor.names import given_names
from redactor.placeholders import ConversationPlaceholders
from redactor.service import Redactor, build_analyzer
from redactor.site_terms import SiteTerms


@pytest.fixture(scope="session")
def settings() -> RedactorSettings:
    return RedactorSettings()


@pytest.fixture(scope="session")
def analyzer(settings: RedactorSettings) -> AnalyzerEngine:
    return build_analyzer(settings)


@pytest.fixture(scope="session")
def redactor(settings: RedactorSettings, analyzer: AnalyzerEngine) -> Redactor:
    return Redactor(settings, analyzer=analyzer)


@asynccontextmanager
async def redactor_on_a_bus(
    url: str, redactor: Redactor, *, site_terms: bool = False
) -> AsyncIterator[tuple[Bus, aioredis.Redis]]:
    """The redactor's handlers on a bus of their own, and a client of the same database;
    with ``site_terms``, learning the help sites' words as the service does."""
    client = aioredis.from_url(url)
    bus = Bus(ServiceSettings(redis_url=url, reclaim_idle_ms=500, graceful_timeout_s=5), "redactor")
    placeholders = ConversationPlaceholders(bus.redis, b"test-placeholder-key-0123", 3600)
    terms = SiteTerms(bus.redis, given_names()[0]) if site_terms else None
    handlers.register(bus, redactor, placeholders, 1, terms)
    await bus.start()
    try:
        yield bus, client
    finally:
        await bus.stop()
        await client.aclose()


@pytest.fixture
async def running(
    fresh_redis_url: str, redactor: Redactor
) -> AsyncIterator[tuple[Bus, aioredis.Redis]]:
    """The redactor's handlers on a bus (a database of its own: the raw topics have fixed
    names), without the help sites' words."""
    async with redactor_on_a_bus(fresh_redis_url, redactor) as running:
        yield running


@pytest.fixture
async def running_with_sites(
    fresh_redis_url: str, redactor: Redactor
) -> AsyncIterator[tuple[Bus, aioredis.Redis]]:
    """:func:`running`, learning the help sites' words from ``crawl.finished``."""
    async with redactor_on_a_bus(fresh_redis_url, redactor, site_terms=True) as running:
        yield running
