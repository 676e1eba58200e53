"""A record read for the gateway's own work (a turn's, before its answer is sent) is one round trip
to Redis, and still nothing for a missing record or a key of another type."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection

from contracts.events import new_id
from gateway.conversations import TURN_PREFIX, OwnedRecords


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per write of a command or pipeline to Redis."""
    writes: list[int] = []
    original = AbstractConnection.send_packed_command

    async def counting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        writes.append(1)
        await original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    return writes


async def test_a_record_is_read_in_one_round_trip(
    redis: aioredis.Redis, round_trips: list[int]
) -> None:
    records = OwnedRecords(redis, TURN_PREFIX)
    kept, missing, other_type = new_id(), new_id(), new_id()
    await records.create(kept, "u-1", {"status": "pending"}, 60)
    await redis.set(TURN_PREFIX + other_type, "a string from before owners were kept", ex=60)
    await records.get(kept)  # the script is loaded once per client

    round_trips.clear()
    assert await records.get(kept) == {"status": "pending"}
    assert len(round_trips) == 1
    assert await records.get(missing) is None
    assert await records.get(other_type) is None
