"""The gateway's incident board (the read model MCP lists) on a real valkey: how long it keeps
incidents, and what it does with a record it cannot read."""

from __future__ import annotations

import logging

import pytest
import redis.asyncio as aioredis

from contracts.events import (
    Incident,
    IncidentReported,
    TicketChange,
    TicketEvent,
    TicketRef,
)
from gateway.incidents import IncidentBoard


def reported(incident_id: str, status: str = "investigating") -> IncidentReported:
    incident = Incident(id=incident_id, title=f"Outage {incident_id}", status=status)
    return IncidentReported(
        correlation_id=incident_id, conversation_id=incident_id, incident=incident
    )


def ticket_linked(incident_id: str, key: str) -> TicketEvent:
    return TicketEvent(
        correlation_id=incident_id,
        conversation_id=f"conv-{key}",
        change=TicketChange.LINKED,
        ticket=TicketRef(key=key, url=f"https://jira.example/browse/{key}", status="Open"),
        incident_id=incident_id,
    )


async def test_the_board_keeps_incidents_as_long_as_it_is_told(redis: aioredis.Redis) -> None:
    board = IncidentBoard(redis, resolved_keep_s=120, stale_after_s=600)
    assert await board.apply(reported("inc-1"))
    assert await board.apply(reported("inc-2", status="resolved"))
    await board.on_ticket(ticket_linked("inc-1", "IT-7"))
    assert 590 < await redis.ttl(board.record_key("inc-1")) <= 600
    assert 110 < await redis.ttl(board.record_key("inc-2")) <= 120
    assert 590 < await redis.ttl(board.tickets_key("inc-1")) <= 600


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("incident", b'{"id": "inc-1"}'),  # no longer an incident (another version's shape)
        ("incident", b"not json"),
        ("incident", b"\xff\xfe"),  # no UTF-8
        ("first", b"yesterday"),
        ("first", b"9" * 40),  # a time no calendar holds
    ],
)
async def test_an_unreadable_record_is_skipped_and_logged_the_others_still_listed(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture, field: str, value: bytes
) -> None:
    board = IncidentBoard(redis)
    for incident_id in ("inc-1", "inc-2"):
        assert await board.apply(reported(incident_id))
    await redis.hset(board.record_key("inc-1"), field, value)  # type: ignore[misc]
    with caplog.at_level(logging.ERROR, logger="deskpilot.gateway.incidents"):
        listed = await board.listing()
        assert await board.get("inc-1") is None
    assert [known.incident.id for known in listed] == ["inc-2"]
    unreadable = [r for r in caplog.records if r.getMessage() == "unreadable incident record"]
    assert [getattr(r, "incident_id", None) for r in unreadable] == ["inc-1", "inc-1"]
    # Kept, not deleted: a gateway that reads it (the version that wrote it) still lists it.
    assert await redis.exists(board.record_key("inc-1"))
