"""What a delivery costs besides the handler, on a real valkey: no worker thread, and the
handler still gets the event and the message (entry id, delivery count) it needs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
import pytest

from contracts.bus import Bus, Delivery
from contracts.events import Event, new_id
from contracts.settings import ServiceSettings
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
