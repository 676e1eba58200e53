"""The bus's delivery guarantees, proven against a real Redis-protocol server (valkey).

Each guarantee that :mod:`contracts.bus` documents has a test here: ack after success, retry of a
failed handler through reclaim, dead-lettering after ``max_deliveries`` and of invalid payloads,
groups created ahead from id 0, approximate MAXLEN, reclaim from a consumer that died between its
side effect and its ack, graceful shutdown on SIGTERM, host-and-process-unique consumer names, and
heartbeats. In-process tests drive :class:`contracts.bus.Bus` directly; the crash, signal and
heartbeat tests run :mod:`tests.support.bus_worker` as real subprocesses.

Every test uses fresh stream and group names, so tests share one server without sharing state.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from contracts import bus as bus_module
from contracts.bus import RAW_FIELD, WITHHELD_FIELD, Bus, Delivery, create_group, ensure_groups
from contracts.events import MessageReceived, new_id
from contracts.heartbeat import heartbeat_key
from contracts.settings import ServiceSettings
from contracts.topics import SUBSCRIPTIONS, dead_letter_stream
from tests.support import REPO_ROOT, Child, Children, unique_name, wait_until
from tests.support.bus_worker import (
    CRASH_EXIT_CODE,
    ProbeEvent,
    count_key,
    deliveries_key,
    effect_key,
)
from tests.support.redis_proxy import SlowPingProxy

TIMEOUT_S = 20.0
"""Upper bound for anything a test waits on; the happy path takes a fraction of it."""
FASTSTREAM_PING_WAIT_S = 3.0
"""How long FastStream's stream subscriber waits for its first PING when the broker starts
(``faststream.redis.subscriber.usecases.basic.LogicSubscriber.start``)."""
EXIT_TIMEOUT_S = 60.0
"""Upper bound for a worker's exit after SIGTERM. On a quiet machine it takes about a second;
on a machine loaded twenty times over its two cores it took up to 17 s (CPU starvation)."""


# -- helpers -----------------------------------------------------------------------------------


def new_event(payload: str = "hello") -> ProbeEvent:
    return ProbeEvent(correlation_id=new_id(), conversation_id=new_id(), payload=payload)


async def pending_count(redis: aioredis.Redis, topic: str, group: str) -> int:
    """How many entries the group's PEL holds (delivered, not acknowledged)."""
    summary = await redis.xpending(topic, group)
    return int(summary["pending"])


async def pel_is(redis: aioredis.Redis, topic: str, group: str, count: int) -> bool:
    return await pending_count(redis, topic, group) == count


async def dlq_entries(redis: aioredis.Redis, topic: str) -> list[tuple[str, dict[bytes, bytes]]]:
    entries = await redis.xrange(dead_letter_stream(topic))
    return [(entry_id.decode(), fields) for entry_id, fields in entries]


async def group_info(redis: aioredis.Redis, topic: str, group: str) -> dict[str, Any]:
    for info in await redis.xinfo_groups(topic):
        if _text(info["name"]) == group:
            return {key: _text(value) for key, value in info.items()}
    raise AssertionError(f"group {group!r} does not exist on {topic!r}")


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


async def settle(settings: ServiceSettings) -> None:
    """Let time pass before a negative check ("nothing else is delivered").

    Not a readiness wait: the only way to show that a wrongful redelivery does not happen is to
    give it the time it would need, i.e. a few reclaim intervals.
    """
    await asyncio.sleep(3 * settings.reclaim_idle_ms / 1000 + 0.3)


class MakeBus(Protocol):
    def __call__(self, service: str = ..., **overrides: Any) -> Bus: ...


@pytest.fixture
async def make_bus(bus_settings: ServiceSettings) -> AsyncIterator[MakeBus]:
    """Build in-process buses (settings overridable per bus); all are stopped at teardown."""
    created: list[Bus] = []

    def make(service: str = "bus-test", **overrides: Any) -> Bus:
        settings = bus_settings.model_copy(update=overrides) if overrides else bus_settings
        bus = Bus(settings, service)
        created.append(bus)
        return bus

    yield make
    for bus in created:
        await bus.stop()


@pytest.fixture
async def producer(make_bus: MakeBus) -> Bus:
    """A started bus with no subscriptions, for publishing."""
    bus = make_bus("producer")
    await bus.start()
    return bus


StartWorker = Callable[..., Child]


@pytest.fixture
def start_worker(children: Children, service_env: dict[str, str]) -> StartWorker:
    """Start ``python -m tests.support.bus_worker`` with the test's bus settings."""

    def start(
        topic: str,
        mode: str = "normal",
        *,
        service: str,
        group: str | None = None,
        seconds: float | None = None,
    ) -> Child:
        args = ["--topic", topic, "--mode", mode, "--service", service]
        if group is not None:
            args += ["--group", group]
        if seconds is not None:
            args += ["--seconds", str(seconds)]
        return children.start_module(
            "tests.support.bus_worker", *args, env=service_env, name=f"worker-{mode}"
        )

    return start


async def wait_ready(
    redis: aioredis.Redis, child: Child, service: str, settings: ServiceSettings
) -> str:
    """Wait for a worker's heartbeat (written once its bus consumes) and return its key."""
    key = heartbeat_key(service, settings.node_name, child.pid)

    async def heartbeat_written() -> bool:
        if not child.running():
            raise AssertionError(
                f"{child.name} exited with {child.returncode} before it was ready:\n"
                f"{child.log_tail()}"
            )
        return bool(await redis.exists(key))

    await wait_until(heartbeat_written, TIMEOUT_S, message=child.log_tail)
    return key


async def heartbeat_check(service: str, env: dict[str, str]) -> tuple[int, str]:
    """Run ``python -m contracts.heartbeat check SERVICE`` the way a container health check does."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "contracts.heartbeat",
        "check",
        service,
        cwd=REPO_ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


# -- 1. ack after success ----------------------------------------------------------------------


async def test_handled_message_is_acked_once(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    topic, group = unique_name(), unique_name("g")
    seen: list[tuple[ProbeEvent, Delivery]] = []

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        seen.append((event, delivery))

    bus = make_bus()
    bus.subscribe(topic, ProbeEvent, handle, group=group)
    await bus.start()
    event = new_event("ack me")
    entry_id = await bus.publish(topic, event)

    await wait_until(lambda: seen, TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    await settle(bus_settings)

    assert len(seen) == 1
    handled, delivery = seen[0]
    assert handled.event_id == event.event_id
    assert handled.payload == "ack me"
    assert delivery.topic == topic
    assert delivery.message_id == entry_id, "Delivery.message_id is the stream entry id"
    assert delivery.deliveries == 1
    assert await redis.xpending(topic, group) == {
        "pending": 0,
        "min": None,
        "max": None,
        "consumers": [],
    }
    info = await group_info(redis, topic, group)
    assert info["last-delivered-id"] == entry_id
    assert await dlq_entries(redis, topic) == []


async def xacks_sent(redis: aioredis.Redis, topic: str, run: Callable[[], Any]) -> list[str]:
    """The commands of the connection that acknowledged ``topic``'s entries while ``run`` ran
    (as MONITOR reports them, from the first to the last of them), and how many XACKs of
    ``topic`` every connection sent; for checking what went into one write."""
    seen: list[tuple[str, str]] = []
    async with redis.monitor() as monitor:
        task = asyncio.ensure_future(run())
        try:
            async with asyncio.timeout(TIMEOUT_S):
                while not task.done() or not any(f"XACK {topic}" in c for _, c in seen):
                    try:
                        async with asyncio.timeout(0.5):
                            command = await monitor.next_command()
                    except TimeoutError:
                        continue
                    seen.append((command["client_port"], command["command"]))
        finally:
            await task
    return [f"{port} {command}" for port, command in seen]


async def test_a_handler_acknowledges_its_entry_with_its_last_write(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    """``Delivery.ack_with``: the entry's XACK goes in the handler's transaction, between its
    MULTI and EXEC, and the bus does not acknowledge it again afterwards."""
    topic, group, out = unique_name(), unique_name("g"), unique_name("out")
    handled: list[str] = []

    bus = make_bus()

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        async with bus.batch(transaction=True) as batch:
            await batch.publish(out, event)
            delivery.ack_with(batch)
        handled.append(delivery.message_id)

    bus.subscribe(topic, ProbeEvent, handle, group=group)
    await bus.start()

    async def publish_and_wait() -> None:
        await bus.publish(topic, new_event())
        await wait_until(lambda: handled, TIMEOUT_S)
        await asyncio.sleep(0.5)  # time for an acknowledgement the bus would send after it

    commands = await xacks_sent(redis, topic, publish_and_wait)
    acks = [c for c in commands if f"XACK {topic}" in c]
    assert len(acks) == 1, commands
    writer = acks[0].split(" ", 1)[0]
    own = [c.split(" ", 2)[1] for c in commands if c.startswith(writer + " ")]
    assert own[-4:] == ["MULTI", "XADD", "XACK", "EXEC"], own
    assert handled[0] in acks[0]
    await settle(bus_settings)
    assert handled == handled[:1], "delivered once"
    assert await pending_count(redis, topic, group) == 0
    assert await redis.xlen(out) == 1


async def test_a_handler_failing_after_its_acknowledging_write_is_not_delivered_again(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    topic, group = unique_name(), unique_name("g")
    attempts: list[int] = []

    bus = make_bus()

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        attempts.append(delivery.deliveries)
        async with bus.batch() as batch:
            delivery.ack_with(batch)
        raise RuntimeError("after the last write")

    bus.subscribe(topic, ProbeEvent, handle, group=group)
    await bus.start()
    await bus.publish(topic, new_event())
    await wait_until(lambda: attempts, TIMEOUT_S)
    await settle(bus_settings)
    assert attempts == [1]
    assert await pending_count(redis, topic, group) == 0
    assert await dlq_entries(redis, topic) == [], "done, not dead: its write was made"


async def test_an_acknowledging_write_that_fails_leaves_the_entry_to_be_delivered_again(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    """A batch that raises writes nothing, its XACK included: the entry is retried."""
    topic, group, out = unique_name(), unique_name("g"), unique_name("out")
    attempts: list[int] = []

    bus = make_bus()

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        attempts.append(delivery.deliveries)
        async with bus.batch(transaction=True) as batch:
            await batch.publish(out, event)
            delivery.ack_with(batch)
            if len(attempts) == 1:
                raise RuntimeError("crashed before the write")

    bus.subscribe(topic, ProbeEvent, handle, group=group)
    await bus.start()
    await bus.publish(topic, new_event())
    await wait_until(lambda: len(attempts) == 2, TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    await settle(bus_settings)
    assert attempts == [1, 2]
    assert await redis.xlen(out) == 1


async def test_a_long_read_block_still_delivers_an_entry_as_it_arrives(make_bus: MakeBus) -> None:
    """An idle subscription waits read_block_ms per read; an entry published during that wait is
    delivered at once, not when the wait runs out (the block only sets how often idle reads ask)."""
    topic, group = unique_name(), unique_name("g")
    block_s = 30.0
    arrived = asyncio.Event()

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        arrived.set()

    consumer = make_bus(read_block_ms=int(block_s * 1000))
    consumer.subscribe(topic, ProbeEvent, handle, group=group)
    await consumer.start()
    await asyncio.sleep(1.0)  # the first blocking read is waiting now
    producer = make_bus("bus-test-producer")
    await producer.start()
    await producer.publish(topic, new_event("now"))
    await asyncio.wait_for(arrived.wait(), block_s / 3)
    stopping = time.monotonic()
    await consumer.stop()
    assert time.monotonic() - stopping < block_s / 3, "stop does not wait for a read's block"


# -- 2. a failed handler is retried through reclaim --------------------------------------------


async def test_failed_handler_is_retried_after_reclaim_idle(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    topic, group = unique_name(), unique_name("g")
    attempts: list[tuple[float, int]] = []
    effects: dict[str, int] = {}

    async def flaky(event: ProbeEvent, delivery: Delivery) -> None:
        attempts.append((time.monotonic(), delivery.deliveries))
        if len(attempts) == 1:
            raise RuntimeError("transient failure")
        effects[event.event_id] = effects.get(event.event_id, 0) + 1

    bus = make_bus()
    bus.subscribe(topic, ProbeEvent, flaky, group=group)
    await bus.start()
    event = new_event()
    await bus.publish(topic, event)

    await wait_until(lambda: effects, TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    await settle(bus_settings)

    assert effects == {event.event_id: 1}
    assert [deliveries for _, deliveries in attempts] == [1, 2]
    retry_after_s = attempts[1][0] - attempts[0][0]
    assert retry_after_s >= bus_settings.reclaim_idle_ms / 1000 * 0.9, (
        "retried only once the entry had been idle for reclaim_idle_ms"
    )
    assert await pending_count(redis, topic, group) == 0
    assert await dlq_entries(redis, topic) == []


# -- 3. a handler that always fails ends in the DLQ --------------------------------------------


async def test_always_failing_handler_is_dead_lettered_after_max_deliveries(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    topic, group = unique_name(), unique_name("g")
    calls: list[int] = []

    async def broken(event: ProbeEvent, delivery: Delivery) -> None:
        calls.append(delivery.deliveries)
        raise ValueError(f"cannot handle {event.payload}")

    bus = make_bus()
    bus.subscribe(topic, ProbeEvent, broken, group=group)
    await bus.start()
    event = new_event("poison")
    entry_id = await bus.publish(topic, event)

    await wait_until(lambda: dlq_entries(redis, topic), TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    await settle(bus_settings)

    assert calls == [1, 2, 3], "called exactly max_deliveries times"
    assert len(calls) == bus_settings.max_deliveries
    assert await pending_count(redis, topic, group) == 0
    [(_, fields)] = await dlq_entries(redis, topic)
    assert "ValueError" in fields[b"error"].decode()
    assert "cannot handle poison" in fields[b"error"].decode()
    assert fields[b"original_id"].decode() == entry_id
    assert fields[b"group"].decode() == group
    assert fields[b"deliveries"].decode() == str(bus_settings.max_deliveries)
    assert fields[b"consumer"].decode() == bus.consumer

    # The original entry is kept in FastStream's binary envelope; decode it the way FastStream's
    # stream parser does, with the broker's message format.
    body, headers = bus.broker.message_format.parse(fields[RAW_FIELD])
    recovered = ProbeEvent.model_validate_json(body)
    assert recovered.event_id == event.event_id
    assert recovered.payload == "poison"
    assert recovered.model_dump(exclude={"traceparent", "tracestate"}) == event.model_dump(
        exclude={"traceparent", "tracestate"}
    )
    assert headers["correlation_id"] == event.correlation_id


async def test_raw_content_is_never_dead_lettered_and_its_entry_is_deleted(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    """On a raw topic (un-redacted user text) a message that fails for good leaves no trace of
    its content: the dead letter keeps the event's ids and the exception's type, not its message
    (which quotes the text here), and the raw entry is deleted from the topic."""
    topic, group = "message.received", unique_name("g")
    await redis.delete(topic, dead_letter_stream(topic))

    async def broken(event: MessageReceived, delivery: Delivery) -> None:
        raise ValueError(f"cannot handle {event.text}")

    bus = make_bus()
    bus.subscribe(topic, MessageReceived, broken, group=group)
    await bus.start()
    event = MessageReceived(
        correlation_id=new_id(),
        conversation_id=new_id(),
        user_id="u-1",
        text="my password is Gr3en-Marmot-77",
        reply_to="reply.test",
    )
    entry_id = await bus.publish(topic, event)

    await wait_until(lambda: dlq_entries(redis, topic), TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    await settle(bus_settings)

    [(_, fields)] = await dlq_entries(redis, topic)
    assert RAW_FIELD not in fields
    withheld = json.loads(fields[WITHHELD_FIELD])
    assert "text" not in withheld
    assert {k: withheld[k] for k in ("event_id", "correlation_id", "user_id", "reply_to")} == {
        "event_id": event.event_id,
        "correlation_id": event.correlation_id,
        "user_id": "u-1",
        "reply_to": "reply.test",
    }
    assert fields[b"error"] == b"ValueError"
    assert fields[b"original_id"].decode() == entry_id
    assert await redis.xrange(topic, min=entry_id, max=entry_id) == []
    everything = b"".join(
        b"".join(f.values()) for _, f in await redis.xrange(dead_letter_stream(topic))
    )
    assert b"Marmot" not in everything
    await redis.delete(topic, dead_letter_stream(topic))


# -- 4. an invalid payload goes to the DLQ at once ---------------------------------------------


async def test_invalid_payload_is_dead_lettered_without_calling_the_handler(
    make_bus: MakeBus, redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    topic, group = unique_name(), unique_name("g")
    calls: list[ProbeEvent] = []

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        calls.append(event)

    bus = make_bus()
    bus.subscribe(topic, ProbeEvent, handle, group=group)
    await bus.start()
    raw_id = await bus.broker.publish(b"this is not an event", stream=topic)
    entry_id = raw_id.decode()

    await wait_until(lambda: dlq_entries(redis, topic), TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    await settle(bus_settings)

    assert calls == []
    [(_, fields)] = await dlq_entries(redis, topic)
    error = fields[b"error"].decode()
    assert error.startswith("invalid ProbeEvent"), error
    assert fields[b"deliveries"].decode() == "1", "dead-lettered on the first delivery"
    assert fields[b"original_id"].decode() == entry_id
    body, _ = bus.broker.message_format.parse(fields[RAW_FIELD])
    assert body == b"this is not an event"


# -- 5. groups created ahead -------------------------------------------------------------------


async def test_group_created_ahead_receives_the_backlog(
    make_bus: MakeBus, producer: Bus, redis: aioredis.Redis
) -> None:
    topic, group, other = unique_name(), unique_name("g"), unique_name("g")

    assert await create_group(redis, topic, group) is True
    assert await create_group(redis, topic, group) is False, "BUSYGROUP is not an error"
    await ensure_groups(redis, [(topic, group), (topic, other)])
    assert (await group_info(redis, topic, group))["last-delivered-id"] == "0-0"
    assert (await group_info(redis, topic, other))["last-delivered-id"] == "0-0"
    # One round trip for them all, yet an answer other than "exists already" is still raised.
    not_a_stream = unique_name()
    await redis.set(not_a_stream, "a string")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await ensure_groups(redis, [(topic, group), (not_a_stream, group)])

    backlog = [new_event(f"early {i}") for i in range(5)]
    for event in backlog:
        await producer.publish(topic, event)

    received: list[str] = []

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        received.append(event.event_id)

    consumer = make_bus("late-consumer")
    consumer.subscribe(topic, ProbeEvent, handle, group=group)
    await consumer.start()

    await wait_until(lambda: len(received) >= len(backlog), TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    assert received == [event.event_id for event in backlog]
    # The other group was not consumed: it still holds the whole backlog for its own service.
    assert int((await group_info(redis, topic, other))["lag"]) == len(backlog)


async def test_bus_start_creates_known_groups_from_id_zero(
    make_bus: MakeBus, redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic, group = unique_name(), unique_name("g")
    # A topic of our own among the real subscriptions, so the test does not depend on whether
    # another test already created the real ones.
    monkeypatch.setitem(SUBSCRIPTIONS, topic, (group,))  # type: ignore[arg-type]
    assert bus_module.SUBSCRIPTIONS is SUBSCRIPTIONS
    assert not await redis.exists(topic)

    publisher = make_bus("some-other-service")  # subscribes to nothing itself
    await publisher.start()

    assert (await group_info(redis, topic, group))["last-delivered-id"] == "0-0"
    for known_topic, groups in SUBSCRIPTIONS.items():
        for known_group in groups:
            await group_info(redis, str(known_topic), str(known_group))

    backlog = [new_event(f"before consumer {i}") for i in range(5)]
    for event in backlog:
        await publisher.publish(topic, event)

    received: list[str] = []

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        received.append(event.event_id)

    consumer = make_bus(group)
    consumer.subscribe(topic, ProbeEvent, handle, group=group)
    await consumer.start()

    await wait_until(lambda: len(received) >= len(backlog), TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    assert received == [event.event_id for event in backlog]


async def test_subscriber_group_is_created_from_id_zero_on_an_existing_stream(
    make_bus: MakeBus, producer: Bus, redis: aioredis.Redis
) -> None:
    """A service deployed after its topic already has events still reads all of them."""
    topic, group = unique_name(), unique_name("g")
    backlog = [new_event(f"old {i}") for i in range(3)]
    for event in backlog:
        await producer.publish(topic, event)

    received: list[str] = []

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        received.append(event.event_id)

    consumer = make_bus("new-service")
    consumer.subscribe(topic, ProbeEvent, handle, group=group)
    await consumer.start()

    await wait_until(lambda: len(received) >= len(backlog), TIMEOUT_S)
    assert received == [event.event_id for event in backlog]


async def test_the_bus_starts_when_the_first_ping_is_slower_than_faststreams_wait(
    bus_settings: ServiceSettings, redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """FastStream gives each stream subscriber 3 s for its first PING; on a loaded machine that
    ran out and the service failed to start. Behind a proxy that answers the first PING late,
    the bus stops the half-started broker, starts it again and delivers through it."""
    topic, group = unique_name(), unique_name("g")
    handled: list[str] = []

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        handled.append(event.payload)

    upstream = urlsplit(bus_settings.redis_url)
    assert upstream.hostname is not None
    assert upstream.port is not None
    async with SlowPingProxy(
        upstream.hostname,
        upstream.port,
        client=b"faststream",
        delay_s=FASTSTREAM_PING_WAIT_S + 0.5,
        slow_pings=1,
    ) as proxy:
        url = urlunsplit(upstream._replace(netloc=f"127.0.0.1:{proxy.port}"))
        bus = Bus(bus_settings.model_copy(update={"redis_url": url}), "bus-test")
        bus.subscribe(topic, ProbeEvent, handle, group=group)
        try:
            with caplog.at_level(logging.WARNING, logger=bus_module.log.name):
                await bus.start()
            assert proxy.delayed == 1, "the first PING was answered late"
            assert all(sub.running for sub in bus.broker.subscribers)
            await bus.publish(topic, new_event("through the proxy"))
            await wait_until(lambda: handled, TIMEOUT_S)
            await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
            await settle(bus_settings)
        finally:
            await bus.stop()
    assert handled == ["through the proxy"]
    retries = [r for r in caplog.records if r.name == bus_module.log.name]
    assert [r.getMessage() for r in retries] == ["the broker did not start in time; retrying"]


async def test_a_start_that_fails_midway_leaves_nothing_reading(
    make_bus: MakeBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subscriber fails to start after others have: the start fails with its error, and no
    subscriber is left reading (a read task left behind kept an app's event loop from closing,
    and its test from ending)."""
    bus = make_bus("half-started")
    for _ in range(3):
        bus.subscribe(unique_name(), ProbeEvent, handle_nothing, group=unique_name("g"))
    last = list(bus.broker.subscribers)[-1]

    async def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("this subscriber cannot start")

    monkeypatch.setattr(last, "start", refuse)

    def reading() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if "_consume" in repr(t.get_coro())]

    with pytest.raises(RuntimeError, match="cannot start"):
        await bus.start()
    await wait_until(lambda: not reading(), TIMEOUT_S)
    assert not any(sub.running for sub in bus.broker.subscribers)


async def handle_nothing(event: ProbeEvent, delivery: Delivery) -> None:
    """A handler for subscriptions whose events are never published."""


# -- 6. approximate MAXLEN ---------------------------------------------------------------------


async def test_publish_trims_the_stream_approximately(
    make_bus: MakeBus, redis: aioredis.Redis
) -> None:
    topic = unique_name()
    bus = make_bus(stream_maxlen=100)
    await bus.start()

    for i in range(1_000):
        await bus.publish(topic, new_event(f"event {i}"))

    length = await redis.xlen(topic)
    assert 100 <= length < 300, length
    # Trimming drops the oldest entries: the newest one is still there.
    [(_, fields)] = await redis.xrevrange(topic, count=1)
    body, _ = bus.broker.message_format.parse(fields[RAW_FIELD])
    assert ProbeEvent.model_validate_json(body).payload == "event 999"


# -- 7. a consumer killed between its side effect and its ack ----------------------------------


async def test_message_of_a_crashed_consumer_is_reclaimed_and_effect_happens_once(
    start_worker: StartWorker,
    producer: Bus,
    redis: aioredis.Redis,
    bus_settings: ServiceSettings,
    children: Children,
) -> None:
    topic, service = unique_name(), unique_name("svc")
    node = bus_settings.node_name

    crashing = start_worker(topic, "effect-then-crash", service=service)
    await wait_ready(redis, crashing, service, bus_settings)
    event = new_event("crash after effect")
    entry_id = await producer.publish(topic, event)

    assert await crashing.wait_exit(TIMEOUT_S) == CRASH_EXIT_CODE, crashing.log_tail()
    assert await redis.get(effect_key(event.event_id)) == str(crashing.pid).encode()
    [stuck] = await redis.xpending_range(topic, service, min="-", max="+", count=10)
    assert stuck["message_id"].decode() == entry_id
    assert stuck["consumer"].decode() == f"{service}-{node}-{crashing.pid}", "not acked"

    survivor = start_worker(topic, "normal", service=service)
    await wait_until(lambda: pel_is(redis, topic, service, 0), TIMEOUT_S, message=children.logs)

    assert await redis.get(count_key(topic)) == b"1", "the effect happened exactly once"
    handled_by = await redis.lrange(deliveries_key(topic), 0, -1)
    assert handled_by == [
        f"{crashing.pid}:{event.event_id}".encode(),
        f"{survivor.pid}:{event.event_id}".encode(),
    ]
    assert survivor.running(), survivor.log_tail()
    assert await dlq_entries(redis, topic) == []


# -- 8. SIGTERM while a message is in flight ---------------------------------------------------


async def test_sigterm_finishes_and_acks_the_message_in_flight(
    start_worker: StartWorker,
    producer: Bus,
    redis: aioredis.Redis,
    bus_settings: ServiceSettings,
) -> None:
    topic, service = unique_name(), unique_name("svc")
    worker = start_worker(topic, "slow", service=service, seconds=2)
    await wait_ready(redis, worker, service, bus_settings)
    event = new_event("slow one")
    await producer.publish(topic, event)

    async def in_handler() -> bool:
        # Delivered (pending) and the handler has begun: it records each call first thing.
        return await pel_is(redis, topic, service, 1) and bool(
            await redis.llen(deliveries_key(topic))
        )

    await wait_until(in_handler, TIMEOUT_S, message=worker.log_tail)
    assert await redis.get(count_key(topic)) is None, "still in the handler"
    signalled_at = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    # Published during shutdown: a stopping worker must leave it for the next consumer.
    late = new_event("published during shutdown")
    await producer.publish(topic, late)

    code = await worker.wait_exit(EXIT_TIMEOUT_S)
    assert code == 0, worker.log_tail()
    assert time.monotonic() - signalled_at < bus_settings.graceful_timeout_s
    assert await redis.get(count_key(topic)) == b"1", "the in-flight handler ran to the end"
    assert await pending_count(redis, topic, service) == 0, "acked before the process exited"
    assert await redis.lrange(deliveries_key(topic), 0, -1) == [
        f"{worker.pid}:{event.event_id}".encode()
    ]
    info = await group_info(redis, topic, service)
    assert int(info["lag"]) == 1, "the late event was not read, so nothing is lost or stuck"


# -- 9. consumer names -------------------------------------------------------------------------


async def test_consumer_names_are_unique_per_host_and_process(
    make_bus: MakeBus,
    start_worker: StartWorker,
    redis: aioredis.Redis,
    bus_settings: ServiceSettings,
    children: Children,
) -> None:
    node = bus_settings.node_name
    assert make_bus("svc").consumer == f"svc-{node}-{os.getpid()}"

    topic, service = unique_name(), unique_name("svc")
    replicas = [start_worker(topic, service=service) for _ in range(2)]
    for replica in replicas:
        await wait_ready(redis, replica, service, bus_settings)

    async def both_registered() -> set[str] | None:
        names = {_text(c["name"]) for c in await redis.xinfo_consumers(topic, service)}
        return names if len(names) >= len(replicas) else None

    names = await wait_until(both_registered, TIMEOUT_S, message=children.logs)
    assert names == {f"{service}-{node}-{replica.pid}" for replica in replicas}


# -- 10. heartbeats ----------------------------------------------------------------------------


async def test_heartbeat_reflects_a_running_worker(
    start_worker: StartWorker,
    redis: aioredis.Redis,
    bus_settings: ServiceSettings,
    service_env: dict[str, str],
) -> None:
    topic, service = unique_name(), unique_name("svc")
    worker = start_worker(topic, service=service)
    key = await wait_ready(redis, worker, service, bus_settings)
    assert key == f"deskpilot:heartbeat:{service}:{bus_settings.node_name}:{worker.pid}"

    beat = json.loads(await redis.get(key))
    assert beat["service"] == service
    assert beat["node"] == bus_settings.node_name
    assert beat["pid"] == worker.pid
    assert 0 < await redis.pttl(key) <= bus_settings.heartbeat_interval_s * 3000

    code, output = await heartbeat_check(service, service_env)
    assert code == 0, output

    worker.send_signal(signal.SIGTERM)
    assert await worker.wait_exit(EXIT_TIMEOUT_S) == 0, worker.log_tail()
    assert not await redis.exists(key), "a stopped worker removes its heartbeat"
    code, output = await heartbeat_check(service, service_env)
    assert code != 0
    assert service in output


async def test_heartbeat_of_a_killed_worker_expires(
    start_worker: StartWorker,
    redis: aioredis.Redis,
    bus_settings: ServiceSettings,
    service_env: dict[str, str],
) -> None:
    topic, service = unique_name(), unique_name("svc")
    worker = start_worker(topic, service=service)
    key = await wait_ready(redis, worker, service, bus_settings)
    code, output = await heartbeat_check(service, service_env)
    assert code == 0, output

    worker.send_signal(signal.SIGKILL)
    assert await worker.wait_exit(TIMEOUT_S) == -signal.SIGKILL

    async def heartbeat_expired() -> bool:
        return not await redis.exists(key)

    await wait_until(heartbeat_expired, TIMEOUT_S)
    code, output = await heartbeat_check(service, service_env)
    assert code != 0, output


# -- a slow handler is not taken over while it runs --------------------------------------------


@pytest.mark.parametrize("renewals", ["on time", "late", "slow to acknowledge"])
async def test_handler_slower_than_reclaim_idle_is_not_redelivered_meanwhile(
    make_bus: MakeBus,
    redis: aioredis.Redis,
    bus_settings: ServiceSettings,
    renewals: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A live consumer's long handler is not treated as a dead consumer's stuck message.

    On a busy machine the renewal of a live handler's entries can come after the reclaimer
    found them idle ("late"): the process's own reclaimer leaves an entry its handler still has
    (before, the handler ran a second time beside the first; seen on the full suite on 2
    cores). Nor is an entry whose handler has ended taken before it is acknowledged ("slow to
    acknowledge"; before, it was handled again, seen on a fresh clone's run)."""
    topic, group = unique_name(), unique_name("g")
    handler_s = 5 * bus_settings.reclaim_idle_ms / 1000
    calls: list[int] = []
    done: list[str] = []

    async def slow(event: ProbeEvent, delivery: Delivery) -> None:
        calls.append(delivery.deliveries)
        await asyncio.sleep(handler_s)
        done.append(event.event_id)

    bus = make_bus()
    if renewals == "late":

        async def late() -> None:  # every renewal comes too late
            return

        bus._renew_claims = late  # type: ignore[method-assign]
    if renewals == "slow to acknowledge":
        xack = aioredis.Redis.xack

        async def slow_xack(self: aioredis.Redis, *args: Any) -> Any:
            # The handler has ended; its entry, not yet acknowledged, must not look idle.
            await asyncio.sleep(3 * bus_settings.reclaim_idle_ms / 1000)
            return await xack(self, *args)

        monkeypatch.setattr(aioredis.Redis, "xack", slow_xack)
    bus.subscribe(topic, ProbeEvent, slow, group=group)
    await bus.start()
    event = new_event("takes a while")
    await bus.publish(topic, event)

    await wait_until(lambda: done, TIMEOUT_S)
    await wait_until(lambda: pel_is(redis, topic, group, 0), TIMEOUT_S)
    await settle(bus_settings)

    assert calls == [1]
    assert done == [event.event_id]
    assert await dlq_entries(redis, topic) == []
