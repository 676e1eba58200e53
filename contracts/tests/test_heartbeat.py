"""contracts.heartbeat.Heartbeat against a real valkey: it beats, and stopping it always returns.

A worker's shutdown awaits ``Heartbeat.stop``; if that never returned, the process would ignore
SIGTERM until a supervisor killed it (and lose the graceful finish of in-flight messages).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from contracts.heartbeat import Heartbeat, heartbeat_key
from tests.support import unique_name, wait_until


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    connection = aioredis.from_url(redis_url)
    try:
        yield connection
    finally:
        await connection.aclose()


async def test_beats_with_its_probes_then_removes_its_key_on_stop(client: aioredis.Redis) -> None:
    async def healthy() -> bool:
        return True

    async def failing() -> bool:
        raise ConnectionError("chroma away")

    service = unique_name("svc")
    heartbeat = Heartbeat(client, service, "node", 0.1, {"chroma": failing, "model": healthy})
    heartbeat.start()
    key = heartbeat_key(service, "node", os.getpid())

    async def written() -> bool:
        return bool(await client.exists(key))

    await wait_until(written, 5)
    beat = json.loads(await client.get(key))
    assert beat["dependencies"] == {"chroma": False, "model": True}
    assert 0 < await client.pttl(key) <= 300

    await asyncio.wait_for(heartbeat.stop(), 5)
    assert not heartbeat.beating
    assert not await client.exists(key)


async def test_stop_returns_when_asked_the_moment_a_probe_completes(
    client: aioredis.Redis,
) -> None:
    """The stop request lands between a probe finishing and the beat resuming.

    Python 3.11's ``asyncio.wait_for`` then returns the probe's result and swallows a
    cancellation: a heartbeat stopped by cancelling its task kept beating for ever, and a worker
    given SIGTERM never exited (tests/test_bus.py's heartbeat test timed out on a busy machine).
    """
    probed = asyncio.Event()
    rounds = 0

    async def probe() -> bool:
        nonlocal rounds
        rounds += 1
        if rounds == 2:
            probed.set()  # wakes the stopper in the same loop iteration the probe returns
        return True

    service = unique_name("svc")
    heartbeat = Heartbeat(client, service, "node", 0.05, {"bus": probe})
    heartbeat.start()
    await probed.wait()
    stopping = asyncio.ensure_future(heartbeat.stop())
    done, _ = await asyncio.wait({stopping}, timeout=5)
    assert done, f"Heartbeat.stop() did not return; it beat {rounds} times meanwhile"
    assert not heartbeat.beating
    assert not await client.exists(heartbeat_key(service, "node", os.getpid()))
