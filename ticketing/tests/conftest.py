"""Fixtures of the ticketing tests: the fake Jira (``tests/support/fake_jira.py``), both ticket
backends, and a fresh Redis database per test on the session's real valkey server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.support.fake_jira import FakeJira
from ticketing.backends.base import TicketBackend
from ticketing.backends.jira import JiraBackend
from ticketing.backends.local import LocalBackend
from ticketing.config import JiraConfig, LocalConfig, TicketingSettings


@pytest.fixture(scope="module")
def jira_server() -> Iterator[FakeJira]:
    with FakeJira() as server:
        yield server


@pytest.fixture
def fake_jira(jira_server: FakeJira) -> FakeJira:
    """The module's fake Jira, emptied: no issues, faults or recorded requests."""
    jira_server.reset()
    return jira_server


def jira_config(fake: FakeJira, **overrides: object) -> JiraConfig:
    values: dict[str, object] = {
        "base_url": fake.base_url,
        "email": fake.email,
        "api_token": fake.token,
        "project_key": fake.project_key,
        "timeout_s": 5.0,
    }
    values.update(overrides)
    return JiraConfig.model_validate(values)


@pytest.fixture(params=["local", "jira"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, fake_jira: FakeJira
) -> AsyncIterator[TicketBackend]:
    """Each backend in turn: the shared contract holds for both."""
    chosen: TicketBackend
    if request.param == "local":
        chosen = LocalBackend(LocalConfig(path=tmp_path / "tickets.sqlite3"))
    else:
        chosen = JiraBackend(jira_config(fake_jira))
    yield chosen
    await chosen.close()


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


def settings_for(tmp_path: Path, redis_url: str, **overrides: object) -> TicketingSettings:
    values: dict[str, object] = {
        "redis_url": redis_url,
        "data_dir": tmp_path / "data",
        "retry_backoff_s": 0.2,
        "retry_backoff_max_s": 1.0,
        "retry_interval_s": 0.1,
        "reclaim_idle_ms": 2000,
    }
    values.update(overrides)
    return TicketingSettings.model_validate(values)
