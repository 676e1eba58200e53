"""The gateway's writes and reads on a turn's way: a turn is submitted (its record, its place in
the conversation and its message) in one round trip to Redis, and a record read for the gateway's
own work (a turn's, before its answer is sent) is one round trip, still nothing for a missing
record or a key of another type."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import MessageReceived, new_id
from contracts.topics import Topic
from gateway.config import GatewaySettings
from gateway.conversations import INDEX_PREFIX, TURN_PREFIX, OwnedRecords
from gateway.turns import TurnService, TurnStore


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


async def test_a_turn_is_submitted_in_one_round_trip_with_its_record_and_index(
    redis: aioredis.Redis, settings: GatewaySettings, round_trips: list[int]
) -> None:
    bus = Bus(settings, "gateway")
    try:
        store = TurnStore(bus.redis, 600)
        turns = TurnService(bus, store, settings)
        conversation, turn_id = new_id(), new_id()
        await bus.start()  # connected before the writes are counted

        round_trips.clear()
        await turns.submit("How do I reset my VPN password?", conversation, "u-1", turn_id)
        assert len(round_trips) == 1

        record = await store.get_owned(turn_id, "u-1")
        assert record is not None
        assert record.status == "pending"
        assert await turns.index.owns(conversation, "u-1")
        assert f"turn:{turn_id}".encode() in await redis.smembers(INDEX_PREFIX + conversation)
        entries: Any = await redis.xrange(Topic.MESSAGE_RECEIVED)
        sealed = [decode_entry(fields, MessageReceived) for _, fields in entries]
        assert [(m.correlation_id, m.text) for m in sealed] == [
            (turn_id, "How do I reset my VPN password?")
        ]
    finally:
        await bus.stop()
