"""Fixtures of the orchestrator's tests: the local chat-completions server
(``tests/support/fake_openai.py``) and a provider talking to it, the query encoder (its model
loads once per session) and an empty Chroma collection. Helpers that are no fixtures live beside
this file: ``articles.py`` (a knowledge base written as the indexer writes it),
``stand_ins.py`` (what a turn talks to) and ``crawl_turns.py`` (an orchestrator whose turns may
wait on a crawl). Also here, for the modules that test those turns: the intent classifier, a
Redis database of the test's own, a recorder in the crawler fleet's place and a collection of
the test articles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr

from orchestrator.config import OrchestratorSettings
from orchestrator.embedding import QueryEncoder, seed_encoder
from orchestrator.intent import IntentClassifier
from orchestrator.llm import OpenAICompatible, OpenAICompatibleConfig
from orchestrator.tests.articles import ARTICLES, add, new_collection
from orchestrator.tests.stand_ins import RecordingFleet
from tests.support import vector_cache_dir
from tests.support.fake_openai import TEST_KEY, FakeOpenAI


@pytest.fixture(scope="session")
def encoder() -> QueryEncoder:
    """The service's query encoder; it holds nothing but the model, so tests share one."""
    return QueryEncoder()


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeOpenAI]:
    """One server per test module, on a free loopback port."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake(openai_server: FakeOpenAI) -> FakeOpenAI:
    """The module's server, with no scripted replies, no recorded requests and the test key."""
    openai_server.reset()
    return openai_server


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[OpenAICompatible]:
    """The OpenAI-compatible provider against the local server, one retry, short back-offs (a
    module may define its own ``llm`` with other settings)."""
    config = OpenAICompatibleConfig(
        base_url=fake.base_url,
        model="fake-model",
        api_key=SecretStr(TEST_KEY),
        read_timeout_s=5.0,
        max_retries=1,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
    )
    provider = OpenAICompatible(config)
    yield provider
    await provider.aclose()


@pytest.fixture
def collection(tmp_path: Path) -> Any:
    """An empty collection in a persistent Chroma under the test's folder."""
    return new_collection(tmp_path)


@pytest.fixture
def articles_collection(tmp_path: Path, encoder: QueryEncoder) -> Any:
    """A collection holding the test articles (``articles.ARTICLES``), embedded for real."""
    kb = new_collection(tmp_path)
    for url, title, section, body in ARTICLES:
        add(kb, encoder, url, title, section, body)
    return kb


@pytest.fixture(scope="module")
def intents(encoder: QueryEncoder) -> IntentClassifier:
    """The packaged classifier, its examples' vectors read from the test run's vector cache
    (as a service of a stack does: each module embedded them anew, 8 CPU-s a time)."""
    return IntentClassifier.from_settings(
        encoder, OrchestratorSettings(), seed_encoder(encoder, vector_cache_dir())
    )


@pytest.fixture
async def redis(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A database of the test's own: the crawl deadlines live under one fixed key."""
    client = aioredis.from_url(fresh_redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def fleet() -> RecordingFleet:
    return RecordingFleet()
