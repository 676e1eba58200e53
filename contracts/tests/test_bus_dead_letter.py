"""``Bus.dead_letter_event`` on a real valkey: a service that gives up on an event after its
message was acknowledged (ticketing, after its own retries) writes the dead letter the bus writes
when a handler fails for good, and ``deskpilot dlq replay`` puts it back as it came."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from contracts.bus import RAW_FIELD, WITHHELD_FIELD, Bus, Delivery
from contracts.events import Event, MessageReceived, new_id
from contracts.settings import ServiceSettings
from contracts.topics import Topic, dead_letter_stream
from deploy.cli.dlq import replay
from tests.support import unique_name, wait_until

SECRET = "my password is Gr3en-Marmot-77"


class Probe(Event):
    payload: str


def probe(payload: str) -> Probe:
    return Probe(correlation_id=new_id(), conversation_id=new_id(), payload=payload)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def buses(redis_url: str) -> AsyncIterator[Callable[..., Bus]]:
    made: list[Bus] = []

    def make(service: str = "dead-letter-test", url: str = redis_url) -> Bus:
        settings = ServiceSettings(
            redis_url=url, reclaim_idle_ms=300, max_deliveries=1, graceful_timeout_s=5
        )
        bus = Bus(settings, service)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        await bus.stop()


async def dead_letters(redis: aioredis.Redis, topic: str) -> dict[str, dict[bytes, bytes]]:
    """The topic's dead letters by entry id, oldest first."""
    entries: Any = await redis.xrange(dead_letter_stream(topic))
    return {entry_id.decode(): fields for entry_id, fields in entries}


async def test_a_dead_lettered_event_is_the_entry_the_bus_writes_for_a_failed_handler(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    topic, group = unique_name("dl"), unique_name("g")

    async def broken(event: Probe, delivery: Delivery) -> None:
        raise ValueError("backend down")

    failing = buses()
    failing.subscribe(topic, Probe, broken, group=group)
    await failing.start()
    await failing.publish(topic, probe("failed in a handler"))
    await wait_until(lambda: dead_letters(redis, topic))

    given_up = probe("given up later")
    service = buses("ticketing-like")
    entry_id = await service.dead_letter_event(topic, given_up, "BackendAuthError: 401", 4)

    letters = await dead_letters(redis, topic)
    [by_handler, by_service] = letters.values()
    assert set(by_service) == set(by_handler), "the same fields as the bus's own dead letter"
    assert by_service[b"error"] == b"BackendAuthError: 401"
    assert by_service[b"deliveries"] == b"4"
    assert by_service[b"group"] == b"ticketing-like"  # the service's own group by default
    assert by_service[b"consumer"] == service.consumer.encode()
    assert by_service[b"original_id"] == given_up.event_id.encode()
    assert list(letters)[-1] == entry_id
    # The entry is in the message format the bus publishes in, with the same headers.
    body, headers = service.broker.message_format.parse(by_service[RAW_FIELD])
    assert Probe.model_validate_json(body) == given_up
    _, handler_headers = failing.broker.message_format.parse(by_handler[RAW_FIELD])
    assert headers["correlation_id"] == given_up.correlation_id
    assert headers["content-type"] == handler_headers["content-type"] == "application/json"


async def test_deskpilot_dlq_replay_puts_a_dead_lettered_event_back_as_it_came(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    topic, group = unique_name("dl"), unique_name("g")
    event = probe("retry me once the backend is back")
    await buses().dead_letter_event(topic, event, "gave up", 3, group=group)

    received: list[Probe] = []

    async def handle(replayed: Probe, delivery: Delivery) -> None:
        received.append(replayed)

    consumer = buses()
    consumer.subscribe(topic, Probe, handle, group=group)
    await consumer.start()
    assert await replay(redis, topic, None) == 1
    await wait_until(lambda: received)
    assert received == [event], "the same event, same id: consumers de-duplicate on it"
    assert await dead_letters(redis, topic) == {}


async def test_a_raw_event_is_dead_lettered_without_its_content(
    buses: Callable[..., Bus], fresh_redis_url: str
) -> None:
    """Raw topics have fixed names: this test has a database of its own."""
    topic = Topic.MESSAGE_RECEIVED
    event = MessageReceived(
        correlation_id=new_id(),
        conversation_id=new_id(),
        user_id="anon:b-1",
        text=SECRET,
        reply_to="reply.test",
    )
    await buses(url=fresh_redis_url).dead_letter_event(topic, event, "ValueError", 5)
    client = aioredis.from_url(fresh_redis_url)
    try:
        [fields] = (await dead_letters(client, topic)).values()
        assert RAW_FIELD not in fields
        assert b"Gr3en-Marmot" not in b"".join(fields.values())
        kept = json.loads(fields[WITHHELD_FIELD])
        assert kept["event_id"] == event.event_id
        assert kept["reply_to"] == event.reply_to
        assert "text" not in kept
        assert await replay(client, topic, None) == 0, "nothing to replay: the user resends"
    finally:
        await client.aclose()
