"""What a delivery and a publish cost besides the work, on a real valkey: no worker thread per
delivery (the handler still gets the event and the message: entry id, delivery count), and
events and commands written together in one round trip (:meth:`Bus.batch`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
import pytest
from redis.asyncio.connection import AbstractConnection

from contracts.bus import RAW_FIELD, Bus, Delivery, Handler
from contracts.events import Event, new_id
from contracts.settings import ServiceSettings
from contracts.topics import dead_letter_stream
from tests.support import unique_name, wait_until


class Probe(Event):
    payload: str


def probe(payload: str) -> Probe:
    return Probe(correlation_id=new_id(), conversation_id=new_id(), payload=payload)


@pytest.fixture
async def bus(redis_url: str) -> AsyncIterator[Bus]:
    made = Bus(ServiceSettings(redis_url=redis_url, graceful_timeout_s=5), "delivery-test")
    try:
        yield made
    finally:
        await made.stop()


@pytest.fixture
def worker_threads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every call handed to a worker thread through anyio (FastStream's dependency injection
    resolves a synchronous argument that way)."""
    handed: list[object] = []
    original: Callable[..., Awaitable[Any]] = anyio.to_thread.run_sync

    async def counting(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed.append(func)
        return await original(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return handed


async def test_a_delivery_reaches_its_handler_without_a_worker_thread(
    bus: Bus, worker_threads: list[object]
) -> None:
    topic = unique_name("delivery")
    seen: list[tuple[Probe, Delivery, int]] = []

    async def handle(event: Probe, delivery: Delivery) -> None:
        seen.append((event, delivery, threading.get_ident()))

    bus.subscribe(topic, Probe, handle, group=unique_name("g"))
    await bus.start()
    sent = [probe(f"message {n}") for n in range(3)]
    entry_ids = [await bus.publish(topic, event) for event in sent]
    await wait_until(lambda: len(seen) == 3)

    assert [event.payload for event, _, _ in seen] == [event.payload for event in sent]
    assert [delivery.message_id for _, delivery, _ in seen] == entry_ids
    assert {(delivery.topic, delivery.deliveries) for _, delivery, _ in seen} == {(topic, 1)}
    assert {thread for _, _, thread in seen} == {threading.get_ident()}
    # Before, FastStream handed every delivery to a worker thread to resolve the message
    # argument: a thread hop (and, on a busy host, a wait to be scheduled) per message.
    assert worker_threads == []


async def test_a_reclaimed_message_is_delivered_with_its_count(redis_url: str) -> None:
    settings = ServiceSettings(redis_url=redis_url, reclaim_idle_ms=300, graceful_timeout_s=5)
    bus = Bus(settings, "delivery-test")
    topic = unique_name("reclaimed")
    counts: list[int] = []

    async def fail_once(event: Probe, delivery: Delivery) -> None:
        counts.append(delivery.deliveries)
        if len(counts) == 1:
            raise RuntimeError("first delivery fails")

    bus.subscribe(topic, Probe, fail_once, group=unique_name("g"))
    await bus.start()
    try:
        await bus.publish(topic, probe("retried"))
        await wait_until(lambda: len(counts) >= 2, timeout_s=30)
        await asyncio.sleep(0.5)
        assert counts == [1, 2]
    finally:
        await bus.stop()


async def test_a_batch_writes_its_events_and_commands_in_one_round_trip_in_order(
    bus: Bus, round_trips: list[int]
) -> None:
    topic, key = unique_name("batch"), unique_name("batch-key")
    seen: list[str] = []

    async def handle(event: Probe, delivery: Delivery) -> None:
        seen.append(event.payload)

    bus.subscribe(topic, Probe, handle, group=unique_name("g"))
    await bus.start()
    round_trips.clear()
    async with bus.batch() as batch:
        await batch.publish(topic, probe("first"))
        batch.redis.set(key, "between", ex=60)
        await batch.publish(topic, probe("second"))
        assert round_trips == []  # nothing is written before the block ends
    assert len(round_trips) == 1
    await wait_until(lambda: len(seen) == 2)
    assert seen == ["first", "second"]
    assert await bus.redis.get(key) == b"between"
    entries: Any = await bus.redis.xrange(topic)
    # The entries are the ones Bus.publish writes: the event carries its trace context.
    assert all(b"traceparent" in fields[RAW_FIELD] for _, fields in entries)


async def test_a_batch_whose_block_fails_writes_nothing(bus: Bus) -> None:
    topic, key = unique_name("batch"), unique_name("batch-key")

    async def change_of_mind() -> None:
        async with bus.batch(transaction=True) as batch:
            await batch.publish(topic, probe("never"))
            batch.redis.set(key, "never", ex=60)
            raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError, match="changed my mind"):
        await change_of_mind()
    assert await bus.redis.xlen(topic) == 0
    assert await bus.redis.get(key) is None


async def test_a_read_block_longer_than_the_socket_timeout_still_delivers_at_once(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A read of new entries blocks read_block_ms in Redis; the client must not give up on it
    first. redis-py's socket timeout (5 s by default; 1 s here, set in the URL as an operator
    may) cut a longer block short: FastStream logged "Message fetch error" and read nothing for
    5 s, so an entry published then waited up to 5 s."""
    settings = ServiceSettings(
        redis_url=f"{redis_url}?socket_timeout=1", read_block_ms=3_000, graceful_timeout_s=5
    )
    bus = Bus(settings, "delivery-test")
    topic = unique_name("long-block")
    arrived = asyncio.Event()

    async def handle(event: Probe, delivery: Delivery) -> None:
        arrived.set()

    bus.subscribe(topic, Probe, handle, group=unique_name("g"))
    await bus.start()
    try:
        await asyncio.sleep(1.5)  # past the socket timeout, inside the first read's block
        publisher = Bus(settings, "delivery-test-publisher")
        try:
            await publisher.start()
            await publisher.publish(topic, probe("now"))
        finally:
            await publisher.stop()
        await asyncio.wait_for(arrived.wait(), 2.5)
    finally:
        await bus.stop()
    assert "Message fetch error" not in caplog.text


@pytest.fixture
def stream_commands(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The XREADGROUP and XACK commands this process sends (its subscribers' reads and acks)."""
    sent: list[bytes] = []
    original = AbstractConnection.send_packed_command

    async def recording(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        packed = b"".join(command) if isinstance(command, list) else bytes(command)
        if b"XREADGROUP" in packed or b"XACK" in packed:
            sent.append(packed)
        await original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", recording)
    return sent


async def test_a_lingering_subscription_handles_a_batch_later_with_one_read_and_one_ack(
    redis_url: str, stream_commands: list[bytes]
) -> None:
    """Entries written together reach a lingering subscription (the audit trail's readers) in
    one read, are handled one by one linger_ms later, in order, and acknowledged in one XACK;
    before, each entry was a read, a delivery and an ack of its own, at once."""
    bus = Bus(ServiceSettings(redis_url=redis_url, graceful_timeout_s=5), "delivery-test")
    topic, group = unique_name("lingering"), unique_name("g")
    handled: list[tuple[str, float]] = []

    async def handle(event: Probe, delivery: Delivery) -> None:
        handled.append((event.payload, time.monotonic()))

    bus.subscribe(topic, Probe, handle, group=group, linger_ms=300)
    await bus.start()
    try:
        await asyncio.sleep(0.2)  # the first read waits
        stream_commands.clear()
        written = time.monotonic()
        async with bus.batch(transaction=True) as batch:  # as a turn's audit records
            for payload in ("first", "second", "third"):
                await batch.publish(topic, probe(payload))
        await wait_until(lambda: len(handled) == 3)

        async def acknowledged() -> bool:
            summary: Any = await bus.redis.xpending(topic, group)
            return int(summary["pending"]) == 0

        await wait_until(acknowledged)
    finally:
        await bus.stop()

    assert [payload for payload, _ in handled] == ["first", "second", "third"]
    assert min(at for _, at in handled) - written >= 0.3 * 0.9
    acks = [c for c in stream_commands if b"XACK" in c and topic.encode() in c]
    assert len(acks) == 1, "one XACK for the batch"
    reads_with_entries = [c for c in stream_commands if b"XREADGROUP" in c and topic.encode() in c]
    assert len(reads_with_entries) <= 2  # the read that got the three, and the next one waiting


class Other(Event):
    """An event that is no Probe (it lacks the payload)."""


async def test_a_lingering_subscription_keeps_the_delivery_rules(redis_url: str) -> None:
    """In a batch, an entry that is not a valid event is dead-lettered and the others handled;
    a handler that fails leaves its entry pending, and the reclaimer delivers it again."""
    settings = ServiceSettings(redis_url=redis_url, reclaim_idle_ms=300, graceful_timeout_s=5)
    bus = Bus(settings, "delivery-test")
    topic, group = unique_name("lingering"), unique_name("g")
    attempts: list[tuple[str, int]] = []

    async def fail_once(event: Probe, delivery: Delivery) -> None:
        attempts.append((event.payload, delivery.deliveries))
        if len(attempts) == 1:
            raise RuntimeError("first delivery fails")

    bus.subscribe(topic, Probe, fail_once, group=group, linger_ms=50)
    await bus.start()
    try:
        async with bus.batch(transaction=True) as batch:
            await batch.publish(topic, Other(correlation_id=new_id(), conversation_id=new_id()))
            await batch.publish(topic, probe("retried"))
        await wait_until(lambda: len(attempts) >= 2, timeout_s=30)
        dead: Any = await bus.redis.xrange(dead_letter_stream(topic))
    finally:
        await bus.stop()

    assert attempts == [("retried", 1), ("retried", 2)]
    assert len(dead) == 1
    assert b"invalid Probe" in dead[0][1][b"error"]


async def test_a_lingering_batch_keeps_every_entry_claimed_until_it_is_handled(
    redis_url: str,
) -> None:
    """A batch's entries wait for the linger and for the entries before them: longer than
    reclaim_idle_ms here. A replica's reclaimer must not take them for abandoned meanwhile, so
    each is handled once (before, the second entry was handled by both consumers)."""
    settings = ServiceSettings(redis_url=redis_url, reclaim_idle_ms=1000, graceful_timeout_s=5)
    topic, group = unique_name("lingering"), unique_name("g")
    handled: list[tuple[str, str]] = []

    def handler(service: str) -> Handler[Probe]:
        async def handle(event: Probe, delivery: Delivery) -> None:
            handled.append((event.payload, service))
            if event.payload == "slow":
                await asyncio.sleep(2.5)  # longer than reclaim_idle_ms

        return handle

    first = Bus(settings, "lingering-first")
    first.subscribe(topic, Probe, handler("first"), group=group, linger_ms=1200)
    await first.start()
    replica = Bus(settings, "lingering-replica")
    try:
        await asyncio.sleep(0.2)  # the first bus's read waits; the replica starts after it
        async with first.batch(transaction=True) as batch:
            await batch.publish(topic, probe("slow"))
            await batch.publish(topic, probe("later"))
        replica.subscribe(topic, Probe, handler("replica"), group=group, linger_ms=1200)
        await replica.start()

        async def acknowledged() -> bool:
            summary: Any = await first.redis.xpending(topic, group)
            return len(handled) >= 2 and int(summary["pending"]) == 0

        await wait_until(acknowledged, timeout_s=30)
    finally:  # a stop waits for the handlers in flight: a reclaimed delivery would be counted
        await replica.stop()
        await first.stop()

    assert sorted(payload for payload, _ in handled) == ["later", "slow"], handled
