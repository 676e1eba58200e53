"""The admin ticket read model on a real valkey: newest copy wins, idempotent, listed newest
first with filters. Each test works under its own key namespace."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio as aioredis

from contracts.events import TicketChange, TicketEvent, TicketRecord
from gateway.tickets import TicketReadModel

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def model(redis: aioredis.Redis) -> TicketReadModel:
    return TicketReadModel(redis, namespace=f"test:{uuid.uuid4().hex}")


def record(key: str, minutes: int, **fields: object) -> TicketRecord:
    values: dict[str, object] = {
        "key": key,
        "url": f"https://jira.northwind.example/browse/{key}",
        "status": "Open",
        "summary": f"VPN drops every hour ({key})",
        "user_id": "emp-1",
        "created_at": T0,
        "updated_at": T0 + timedelta(minutes=minutes),
    }
    values.update(fields)
    return TicketRecord.model_validate(values)


def event(ticket: TicketRecord | None, change: TicketChange = TicketChange.CREATED) -> TicketEvent:
    return TicketEvent(
        correlation_id="turn-1", conversation_id="conv-1", change=change, record=ticket
    )


async def test_a_ticket_event_is_kept_and_read_back(model: TicketReadModel) -> None:
    assert await model.apply(event(record("IT-1", 0, comments=["first"])))
    stored = await model.get("IT-1")
    assert stored is not None
    assert stored.summary == "VPN drops every hour (IT-1)"
    assert stored.comments == ["first"]
    assert stored.updated_at == T0
    assert stored.last_change is TicketChange.CREATED


async def test_redelivered_events_change_nothing(
    model: TicketReadModel, redis: aioredis.Redis
) -> None:
    created = event(record("IT-1", 0))
    assert await model.apply(created)
    keys_before = sorted(await redis.keys(f"{model.namespace}:*"))
    snapshot = {key: await redis.dump(key) for key in keys_before}
    assert await model.apply(created)  # the same event again: same state
    assert await model.apply(created)
    keys_after = sorted(await redis.keys(f"{model.namespace}:*"))
    assert keys_after == keys_before
    assert {key: await redis.dump(key) for key in keys_after} == snapshot
    assert [t.key for t in await model.list()] == ["IT-1"]


async def test_the_newest_update_wins_whatever_the_arrival_order(model: TicketReadModel) -> None:
    newer = event(record("IT-7", 30, status="In Progress"), TicketChange.COMMENTED)
    older = event(record("IT-7", 0, status="Open"), TicketChange.CREATED)
    assert await model.apply(newer)
    assert not await model.apply(older)  # late, stale: ignored
    stored = await model.get("IT-7")
    assert stored is not None
    assert stored.status == "In Progress"
    assert stored.last_change is TicketChange.COMMENTED
    assert [t.key for t in await model.list(status="open")] == []
    assert [t.key for t in await model.list(status="in progress")] == ["IT-7"]


async def test_a_status_change_moves_the_ticket_between_status_listings(
    model: TicketReadModel,
) -> None:
    await model.apply(event(record("IT-2", 0, status="Open")))
    await model.apply(event(record("IT-2", 5, status="Done"), TicketChange.STATUS))
    assert await model.list(status="Open") == []
    done = await model.list(status="DONE")
    assert [(t.key, t.status) for t in done] == [("IT-2", "Done")]
    assert len(await model.list()) == 1


async def test_on_equal_update_times_the_later_event_wins(model: TicketReadModel) -> None:
    first = event(record("IT-3", 0, comments=[]), TicketChange.CREATED)
    second = event(record("IT-3", 0, comments=["linked"]), TicketChange.LINKED)
    second = second.model_copy(update={"occurred_at": first.occurred_at + timedelta(seconds=1)})
    assert await model.apply(second)
    assert not await model.apply(first)
    stored = await model.get("IT-3")
    assert stored is not None
    assert stored.comments == ["linked"]


async def test_listings_are_newest_first_filtered_and_limited(model: TicketReadModel) -> None:
    await model.apply(event(record("IT-10", 10, user_id="emp-1", status="Open")))
    await model.apply(event(record("IT-11", 20, user_id="emp-2", status="Open")))
    await model.apply(event(record("IT-12", 30, user_id="emp-1", status="Done")))
    await model.apply(event(record("IT-13", 40, user_id=None, status="Open")))
    assert [t.key for t in await model.list()] == ["IT-13", "IT-12", "IT-11", "IT-10"]
    assert [t.key for t in await model.list(limit=2)] == ["IT-13", "IT-12"]
    assert [t.key for t in await model.list(user_id="emp-1")] == ["IT-12", "IT-10"]
    assert [t.key for t in await model.list(user_id="emp-1", status="open")] == ["IT-10"]
    assert [t.key for t in await model.list(status="Open", limit=2)] == ["IT-13", "IT-11"]
    assert await model.list(user_id="emp-404") == []


async def test_a_ticket_that_changes_owner_leaves_the_old_owners_listing(
    model: TicketReadModel,
) -> None:
    await model.apply(event(record("IT-20", 0, user_id="emp-1")))
    await model.apply(event(record("IT-20", 1, user_id="emp-2")))
    assert await model.list(user_id="emp-1") == []
    assert [t.key for t in await model.list(user_id="emp-2")] == ["IT-20"]


async def test_listing_pages_through_more_tickets_than_one_batch(model: TicketReadModel) -> None:
    for n in range(120):
        status = "Done" if n % 3 else "Open"
        await model.apply(event(record(f"IT-{n}", n, status=status)))
    every_open = await model.list(status="open", limit=500)
    assert [t.key for t in every_open] == [f"IT-{n}" for n in range(117, -1, -3)]
    assert len(await model.list(limit=500)) == 120


async def test_events_without_a_ticket_and_unknown_keys(model: TicketReadModel) -> None:
    assert not await model.apply(event(None, TicketChange.DEFERRED))
    assert await model.list() == []
    assert await model.get("IT-404") is None
    assert await model.get("../../etc") is None
    assert await model.get("") is None


async def test_a_ticket_without_timestamps_is_ordered_by_its_event(model: TicketReadModel) -> None:
    undated = event(record("IT-30", 0, created_at=None, updated_at=None))
    assert await model.apply(undated)
    stored = await model.get("IT-30")
    assert stored is not None
    assert stored.updated_at is None
