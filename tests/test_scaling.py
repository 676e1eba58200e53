"""What an autoscaler sees on a real Redis-protocol server, and whether added replicas get work.

KEDA's ``redis-streams`` trigger with ``lagCount`` (deploy/k8s/keda.yaml) scales a Deployment on
its consumer group's lag: entries no consumer of the group has read yet. That number only tells
the truth, and new replicas only get work, if a consumer reads no more than it can handle at once
and leaves the rest of a backlog in the stream.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from contracts.bus import Bus, Delivery, create_group
from contracts.settings import ServiceSettings
from tests.support import unique_name, wait_until
from tests.support.bus_worker import ProbeEvent

TIMEOUT_S = 20.0
BACKLOG = 30
CONCURRENCY = 2


@pytest.fixture
async def buses(bus_settings: ServiceSettings) -> AsyncIterator[list[Bus]]:
    """Started buses are stopped at teardown. Reclaim is slow here, so that nothing is shared
    through XAUTOCLAIM: work reaches the second replica only through the stream itself."""
    created: list[Bus] = []
    yield created
    for bus in created:
        await bus.stop()


async def group_info(redis: aioredis.Redis, topic: str, group: str) -> dict[str, Any]:
    for info in await redis.xinfo_groups(topic):
        if info["name"] in (group, group.encode()):
            return info
    raise AssertionError(f"no group {group!r} on {topic!r}")


async def test_a_backlog_stays_in_the_lag_and_a_new_replica_takes_part_of_it(
    bus_settings: ServiceSettings, redis: aioredis.Redis, buses: list[Bus]
) -> None:
    topic, group = unique_name(), unique_name("g")
    settings = bus_settings.model_copy(update={"reclaim_idle_ms": 120_000})
    await create_group(redis, topic, group)

    producer = Bus(settings, "producer")
    buses.append(producer)
    await producer.start()
    for number in range(BACKLOG):
        await producer.publish(
            topic, ProbeEvent(correlation_id=f"c{number}", conversation_id="c", payload=str(number))
        )

    release = asyncio.Event()
    handled: Counter[str] = Counter()
    by_replica: Counter[str] = Counter()
    in_flight: list[str] = []

    def handler_of(replica: str, *, held: bool) -> Any:
        async def handle(event: ProbeEvent, delivery: Delivery) -> None:
            in_flight.append(replica)
            if held:
                await release.wait()
            handled[event.payload] += 1
            by_replica[replica] += 1

        return handle

    first = Bus(settings, "replica-a")
    buses.append(first)
    first.subscribe(
        topic, ProbeEvent, handler_of("a", held=True), group=group, concurrency=CONCURRENCY
    )
    await first.start()
    await wait_until(lambda: in_flight.count("a") == CONCURRENCY, TIMEOUT_S)

    # The busy replica holds what it works on (plus at most one read waiting for a free slot);
    # everything else is still undelivered, so the group's lag shows the backlog.
    info = await group_info(redis, topic, group)
    assert info["pending"] <= 2 * CONCURRENCY, info
    assert info["lag"] >= BACKLOG - 2 * CONCURRENCY, info

    second = Bus(settings, "replica-b")
    buses.append(second)
    second.subscribe(
        topic, ProbeEvent, handler_of("b", held=False), group=group, concurrency=CONCURRENCY
    )
    await second.start()
    await wait_until(lambda: by_replica["b"] >= BACKLOG - 2 * CONCURRENCY, TIMEOUT_S)

    release.set()
    await wait_until(lambda: sum(handled.values()) == BACKLOG, TIMEOUT_S)
    assert set(handled.values()) == {1}, f"handled more than once: {handled}"
    assert by_replica["a"] <= 2 * CONCURRENCY, by_replica

    async def drained() -> bool:
        info = await group_info(redis, topic, group)
        return bool(info["pending"] == 0 and info["lag"] == 0)

    await wait_until(drained, TIMEOUT_S)
