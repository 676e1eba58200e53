"""Raw topics on a real valkey: what reaches Redis is sealed, handlers see plain events, a key
rotation loses nothing, an entry that does not open is dead-lettered at once without its
content (never retried, never a crash loop), and what replaces a raw entry is written with its
deletion in one MULTI/EXEC (as valkey's MONITOR shows)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr

from contracts.bus import Bus, Delivery, decode_entry
from contracts.events import MessageReceived, SealedEvent, new_id
from contracts.sealing import KeyRing, SealKeyMissing, UnknownSealKey, new_key_entry
from contracts.settings import ServiceSettings
from contracts.topics import Topic, dead_letter_stream

DB = 6
"""This module's own database (emptied per test): raw topics have fixed names."""
SECRET = "my password is Gr3en-Marmot-77"
OLD, NEW = new_key_entry("2026-05"), new_key_entry("2026-11")


@pytest.fixture
def db_url(redis_url: str) -> str:
    return f"{redis_url.rsplit('/', 1)[0]}/{DB}"


@pytest.fixture
async def redis(db_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(db_url)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def buses(db_url: str) -> AsyncIterator[Callable[..., Bus]]:
    made: list[Bus] = []

    def make(service: str, keys: str | None = None, **overrides: Any) -> Bus:
        settings = ServiceSettings(
            redis_url=db_url,
            reclaim_idle_ms=300,
            max_deliveries=3,
            graceful_timeout_s=5,
            seal_keys=SecretStr(keys) if keys else None,
            **overrides,
        )
        bus = Bus(settings, service)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        await bus.stop()


def message(text: str = SECRET) -> MessageReceived:
    return MessageReceived(
        correlation_id=new_id(), conversation_id=new_id(), user_id="anon:b-1", text=text,
        reply_to="reply.test",
    )  # fmt: skip


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def receiver(bus: Bus) -> list[MessageReceived]:
    received: list[MessageReceived] = []

    async def handle(event: MessageReceived, delivery: Delivery) -> None:
        received.append(event)
        await delivery.delete_entry()

    bus.subscribe(Topic.MESSAGE_RECEIVED, MessageReceived, handle, group="redactor")
    return received


async def test_a_raw_event_is_sealed_in_redis_and_plain_for_its_handler(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    publisher, consumer = buses("gateway", OLD), buses("redactor", OLD)
    received = receiver(consumer)
    await publisher.broker.connect()
    event = message()

    entry_id = await publisher.publish(Topic.MESSAGE_RECEIVED, event)

    [(_, fields)] = await redis.xrange(Topic.MESSAGE_RECEIVED, min=entry_id, max=entry_id)
    stored = b"".join(fields.values())
    assert b"Marmot" not in stored
    assert b"anon:b-1" not in stored
    assert event.event_id.encode() in stored  # the envelope stays readable
    assert decode_entry(fields, MessageReceived, KeyRing.parse(OLD)) == event.model_copy(
        update={"traceparent": decode_entry(fields, SealedEvent).traceparent}
    )

    await consumer.start()
    await eventually(lambda: asyncio.sleep(0, bool(received)))
    assert received[0].text == SECRET
    assert received[0].event_id == event.event_id


async def test_after_a_rotation_what_the_old_key_sealed_still_opens(
    buses: Callable[..., Bus],
) -> None:
    before_rotation = buses("gateway", OLD)
    await before_rotation.broker.connect()
    pending = message("sealed before the rotation")
    await before_rotation.publish(Topic.MESSAGE_RECEIVED, pending)

    after_rotation = buses("gateway", f"{NEW},{OLD}")
    await after_rotation.broker.connect()
    fresh = message("sealed after it")
    await after_rotation.publish(Topic.MESSAGE_RECEIVED, fresh)
    assert after_rotation.key_ring.sealing_key_id == "2026-11"

    consumer = buses("redactor", f"{NEW},{OLD}")
    received = receiver(consumer)
    await consumer.start()
    await eventually(lambda: asyncio.sleep(0, len(received) == 2))
    assert {e.text for e in received} == {"sealed before the rotation", "sealed after it"}


async def test_an_entry_sealed_with_an_unknown_key_is_dead_lettered_at_once_without_content(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    stranger = buses("gateway", new_key_entry("elsewhere"))
    publisher = buses("gateway", OLD)
    for bus in (stranger, publisher):
        await bus.broker.connect()
    consumer = buses("redactor", OLD)
    received = receiver(consumer)
    await consumer.start()

    unopenable = await stranger.publish(Topic.MESSAGE_RECEIVED, message())
    await publisher.publish(Topic.MESSAGE_RECEIVED, message("the next one"))

    dlq = dead_letter_stream(Topic.MESSAGE_RECEIVED)
    await eventually(lambda: redis.xlen(dlq))
    [(_, letter)] = await redis.xrange(dlq)
    error = letter[b"error"].decode()
    assert "cannot open the sealed MessageReceived" in error
    assert "'elsewhere'" in error
    assert letter[b"deliveries"] == b"1"  # dead-lettered on the first delivery, not retried
    assert b"withheld" in letter
    assert b"Marmot" not in b"".join(letter.values())
    assert b"sealed" not in letter[b"withheld"]  # not even the ciphertext is kept
    assert await redis.xrange(Topic.MESSAGE_RECEIVED, min=unopenable, max=unopenable) == []
    # The consumer goes on with the next message.
    await eventually(lambda: asyncio.sleep(0, bool(received)))
    assert [e.text for e in received] == ["the next one"]


async def test_an_altered_entry_is_dead_lettered_not_retried(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    consumer = buses("redactor", OLD)
    received = receiver(consumer)
    await consumer.start()
    publisher = buses("gateway", OLD)
    await publisher.broker.connect()
    first, second = message(), message("other")
    sealed_first = KeyRing.parse(OLD).seal(first.model_dump_json().encode(), b"x")
    # A sealed blob moved under another event's envelope (its id is the associated data).
    moved = SealedEvent(
        **second.model_dump(include={"event_id", "correlation_id", "conversation_id"}),
        sealed=sealed_first,
    )
    await publisher.broker.publish(moved.model_dump_json().encode(), stream=Topic.MESSAGE_RECEIVED)

    dlq = dead_letter_stream(Topic.MESSAGE_RECEIVED)
    await eventually(lambda: redis.xlen(dlq))
    [(_, letter)] = await redis.xrange(dlq)
    assert "sealed for another event" in letter[b"error"].decode()
    assert received == []


async def test_an_unsealed_entry_on_a_raw_topic_is_refused(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    consumer = buses("redactor", OLD)
    received = receiver(consumer)
    await consumer.start()
    plain = message()
    await consumer.broker.publish(plain.model_dump_json().encode(), stream=Topic.MESSAGE_RECEIVED)

    dlq = dead_letter_stream(Topic.MESSAGE_RECEIVED)
    await eventually(lambda: redis.xlen(dlq))
    [(_, letter)] = await redis.xrange(dlq)
    assert "invalid MessageReceived" in letter[b"error"].decode()
    assert "sealed" in letter[b"error"].decode()
    assert b"Marmot" not in b"".join(letter.values())
    assert received == []


async def test_production_refuses_to_start_a_raw_service_without_keys(
    buses: Callable[..., Bus],
) -> None:
    production = {"environment": "production", "admin_token": "a-real-admin-token-0123456789"}
    for service in ("gateway", "ocr", "redactor"):
        with pytest.raises(SealKeyMissing, match="DESKPILOT_SEAL_KEYS must be set"):
            await buses(service, None, **production).start()
    # A service that never sees raw content needs no key.
    orchestrator = buses("orchestrator", None, **production)
    await orchestrator.start()
    with pytest.raises(SealKeyMissing):
        orchestrator.key_ring  # noqa: B018 - it would need one only to touch raw content
    # The misconfigured key is named, the service does not start.
    with pytest.raises(ValueError, match="DESKPILOT_SEAL_KEYS: key 'k1' is not base64"):
        await buses("redactor", "k1:***", **production).start()


async def test_decode_entry_refuses_what_its_keys_do_not_open(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    publisher = buses("gateway", OLD)
    await publisher.broker.connect()
    entry_id = await publisher.publish(Topic.MESSAGE_RECEIVED, message())
    [(_, fields)] = await redis.xrange(Topic.MESSAGE_RECEIVED, min=entry_id, max=entry_id)
    with pytest.raises(UnknownSealKey):
        decode_entry(fields, MessageReceived, KeyRing.parse(NEW))


async def test_the_redacted_event_and_the_raw_entrys_deletion_are_one_write(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    publisher, consumer = buses("gateway", OLD), buses("redactor", OLD)
    await publisher.broker.connect()
    seen: list[tuple[int, int]] = []
    deliveries: list[int] = []

    async def redact(event: MessageReceived, delivery: Delivery) -> None:
        deliveries.append(delivery.deliveries)
        async with consumer.batch(transaction=True) as batch:
            await batch.publish("query.test", event.model_copy(update={"text": "[redacted]"}))
            delivery.delete_with(batch)
            if len(deliveries) == 1:
                raise RuntimeError("crashed before the write")  # nothing of the batch is written
        seen.append((await redis.xlen(Topic.MESSAGE_RECEIVED), await redis.xlen("query.test")))

    consumer.subscribe(Topic.MESSAGE_RECEIVED, MessageReceived, redact, group="redactor")
    await publisher.publish(Topic.MESSAGE_RECEIVED, message())
    await consumer.start()

    await eventually(lambda: asyncio.sleep(0, bool(seen)))
    # The first delivery wrote neither; the redelivery wrote both at once: one redacted event,
    # and the raw entry gone.
    assert seen == [(0, 1)]


async def test_publish_replacing_hands_on_every_event_and_deletes_the_raw_entry_at_once(
    buses: Callable[..., Bus], redis: aioredis.Redis
) -> None:
    # What valkey executed, as MONITOR reports it: the replacements' XADD, the raw entry's XDEL
    # and its XACK between one MULTI and its EXEC of one connection (a pipeline without a
    # transaction sends the same commands without MULTI/EXEC), and no XACK after it.
    publisher, consumer = buses("gateway", OLD), buses("redactor", OLD)
    await publisher.broker.connect()
    raw_ids: list[str] = []

    async def redact(event: MessageReceived, delivery: Delivery) -> None:
        raw_ids.append(delivery.message_id)
        plain = event.model_copy(update={"text": "[redacted]"})
        await consumer.publish_replacing(delivery, ("query.test", plain), ("reply.test", plain))

    async def next_command() -> tuple[str, list[str]]:
        while (seen := await monitor.next_command())["db"] != DB:
            pass
        words = seen["command"].split(" ")
        return seen["client_port"], [words[0].upper(), *words[1:]]

    consumer.subscribe(Topic.MESSAGE_RECEIVED, MessageReceived, redact, group="redactor")
    async with redis.monitor() as monitor:
        await publisher.publish(Topic.MESSAGE_RECEIVED, message())
        await consumer.start()
        executed: list[tuple[str, list[str]]] = []
        async with asyncio.timeout(10):  # until the raw entry's deletion
            while not executed or executed[-1][1][:2] != ["XDEL", Topic.MESSAGE_RECEIVED]:
                executed.append(await next_command())
        writer = executed[-1][0]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):  # and the writer's commands for two seconds more
                while True:
                    executed.append(await next_command())

    written = [words for client, words in executed if client == writer]
    end = max(i for i, words in enumerate(written) if words[0] == "EXEC")
    assert [words[:2] for words in written[end - 5 : end + 1]] == [
        ["MULTI"],
        ["XADD", "query.test"],
        ["XADD", "reply.test"],
        ["XDEL", Topic.MESSAGE_RECEIVED],
        ["XACK", Topic.MESSAGE_RECEIVED],
        ["EXEC"],
    ]
    assert written[end - 2][2:] == raw_ids
    assert written[end - 1][3:] == raw_ids
    acks = [words for _, words in executed if words[:2] == ["XACK", Topic.MESSAGE_RECEIVED]]
    assert len(acks) == 1, "acknowledged in the transaction, and only there"
    assert await redis.xlen(Topic.MESSAGE_RECEIVED) == 0
    assert await redis.xlen("query.test") == await redis.xlen("reply.test") == 1
