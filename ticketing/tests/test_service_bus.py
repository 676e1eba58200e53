"""The ticketing service as it runs: an in-process worker on the real valkey server, the fake
Jira over HTTP, events published onto the streams the way the bus writes them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis.asyncio as aioredis
from faststream.redis.parser import BinaryMessageFormatV1

from contracts.bus import RAW_FIELD
from contracts.events import (
    AuditRecorded,
    EscalationRequested,
    Event,
    Incident,
    IncidentReported,
    TicketChange,
    TicketEvent,
    TicketStatusRequested,
)
from contracts.topics import Group, Topic, dead_letter_stream
from tests.support import wait_until
from tests.support.fake_jira import FakeJira
from ticketing.app import create_worker
from ticketing.backends.base import TicketDraft, request_reference
from ticketing.backends.jira import JiraBackend
from ticketing.service import PENDING
from ticketing.tests.conftest import jira_config, settings_for
from ticketing.tests.escalations import escalation

E = TypeVar("E", bound=Event)
SUPPORT = "helpdesk@northwind.example"


async def publish(redis: aioredis.Redis, topic: str, event: Event) -> None:
    entry = await BinaryMessageFormatV1.encode(
        message=event.model_dump_json().encode(),
        reply_to=None,
        headers={"content-type": "application/json"},
        correlation_id=event.correlation_id,
    )
    await redis.xadd(topic, {RAW_FIELD: entry})


async def read(redis: aioredis.Redis, topic: str, model: type[E]) -> list[E]:
    entries = await redis.xrange(topic)
    return [
        model.model_validate_json(BinaryMessageFormatV1.parse(fields[RAW_FIELD])[0])
        for _, fields in entries
    ]


async def ticket_events(redis: aioredis.Redis, change: TicketChange) -> list[TicketEvent]:
    return [e for e in await read(redis, Topic.TICKET_EVENTS, TicketEvent) if e.change == change]


@contextlib.asynccontextmanager
async def running(settings: Any) -> AsyncIterator[None]:
    worker = create_worker(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.serve(stop))
    try:
        # The heartbeat is written once the bus consumes (groups created, subscribers running).
        await wait_until(lambda: worker.bus.redis.keys("deskpilot:heartbeat:ticketing:*"))
        yield
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 20) == 0


async def settled(redis: aioredis.Redis, topic: str) -> bool:
    """Every entry of ``topic`` delivered to the ticketing group and acknowledged."""
    groups = await redis.xinfo_groups(topic)
    group = next(g for g in groups if _text(g["name"]) == Group.TICKETING)
    return bool(group["pending"] == 0 and group.get("lag", 0) == 0)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.fixture
def jira_settings(tmp_path: Path, redis_url: str, fake_jira: FakeJira) -> Any:
    return settings_for(
        tmp_path,
        redis_url,
        backend="jira",
        jira_base_url=fake_jira.base_url,
        jira_email=fake_jira.email,
        jira_api_token=fake_jira.token,
        jira_project_key=fake_jira.project_key,
        support_email=SUPPORT,
        category_routes={"connectivity": {"component": "Network", "priority": "High"}},
    )


async def test_a_duplicate_delivery_files_one_ticket(
    redis: aioredis.Redis, fake_jira: FakeJira, jira_settings: Any
) -> None:
    async with running(jira_settings):
        event = escalation()
        await publish(redis, Topic.ESCALATION_REQUESTED, event)
        await publish(redis, Topic.ESCALATION_REQUESTED, event)  # redelivered by a producer
        await wait_until(lambda: settled(redis, Topic.ESCALATION_REQUESTED))
        await wait_until(lambda: ticket_events(redis, TicketChange.CREATED))
    assert len(fake_jira.issues) == 1
    assert len(fake_jira.calls("POST", r"/issue$")) == 1
    issue = next(iter(fake_jira.issues.values()))
    assert issue.fields["components"] == [{"name": "Network"}]
    assert (
        "h3. What was tried\n{noformat}\n* Restart the VPN client — failed\n{noformat}"
        in issue.fields["description"]
    )
    assert issue.properties["deskpilot"]["request"] == request_reference("esc-1")
    created = await ticket_events(redis, TicketChange.CREATED)
    # Both deliveries report the same ticket under the same event id: consumers de-duplicate.
    assert {e.event_id for e in created} == {created[0].event_id}
    assert created[0].ticket is not None
    assert created[0].ticket.key == issue.key
    assert created[0].reply_to == "reply.gw-1"
    assert created[0].user_id == "user-1"
    audits = await read(redis, Topic.AUDIT, AuditRecorded)
    assert audits
    assert audits[0].action == "ticket"
    assert audits[0].details["ticket"] == issue.key
    assert await redis.zcard(PENDING) == 0


async def test_jira_500_then_recovery_files_exactly_one_ticket(
    redis: aioredis.Redis, fake_jira: FakeJira, jira_settings: Any
) -> None:
    fake_jira.fail_next(3, status=500)
    async with running(jira_settings):
        await publish(redis, Topic.ESCALATION_REQUESTED, escalation())
        created = await wait_until(lambda: ticket_events(redis, TicketChange.CREATED))
    deferred = await ticket_events(redis, TicketChange.DEFERRED)
    assert len(deferred) == 1  # told once, however many retries
    assert deferred[0].detail is not None
    assert SUPPORT in deferred[0].detail
    assert len(fake_jira.issues) == 1
    assert created[0].ticket is not None
    assert created[0].ticket.key in fake_jira.issues
    assert sum(1 for r in fake_jira.requests if r.status == 500) == 3
    assert await redis.zcard(PENDING) == 0


async def test_jira_401_defers_with_the_support_address_and_tells_the_operator(
    redis: aioredis.Redis,
    fake_jira: FakeJira,
    jira_settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_jira.reject_credentials()
    caplog.set_level(logging.INFO)
    async with running(jira_settings):
        await publish(redis, Topic.ESCALATION_REQUESTED, escalation())
        deferred = await wait_until(lambda: ticket_events(redis, TicketChange.DEFERRED))
        # Acked once stored in Redis (the event is published just before the handler returns).
        assert await wait_until(lambda: settled(redis, Topic.ESCALATION_REQUESTED))
        assert await redis.zcard(PENDING) == 1
        # The operator fixes the token: the kept request is filed, nothing lost.
        fake_jira.reject_credentials(False)
        await wait_until(lambda: ticket_events(redis, TicketChange.CREATED))
    assert deferred[0].detail is not None
    assert SUPPORT in deferred[0].detail
    assert deferred[0].reply_to == "reply.gw-1"
    operator_lines = [
        r
        for r in caplog.records
        if r.name == "deskpilot.ticketing.jira" and r.levelno >= logging.ERROR
    ]
    assert operator_lines
    message = operator_lines[0].getMessage()
    assert "JIRA_API_TOKEN" in message
    assert "JIRA_EMAIL" in message
    everything = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert fake_jira.token not in everything
    assert "my vpn is broken" not in everything
    assert len(fake_jira.issues) == 1


async def test_given_up_requests_fail_visibly_and_are_dead_lettered(
    redis: aioredis.Redis, fake_jira: FakeJira, jira_settings: Any
) -> None:
    fake_jira.reject_credentials()
    settings = jira_settings.model_copy(update={"max_attempts": 2})
    async with running(settings):
        await publish(redis, Topic.ESCALATION_REQUESTED, escalation())
        failed = await wait_until(lambda: ticket_events(redis, TicketChange.FAILED))
    assert failed[0].detail is not None
    assert SUPPORT in failed[0].detail
    letters = await redis.xrange(dead_letter_stream(Topic.ESCALATION_REQUESTED))
    assert len(letters) == 1
    fields = letters[0][1]
    assert b"BackendAuthError" in fields[b"error"]
    body, _ = BinaryMessageFormatV1.parse(fields[RAW_FIELD])
    assert EscalationRequested.model_validate_json(body).idempotency_key == "esc-1"
    assert await redis.zcard(PENDING) == 0
    assert len(await ticket_events(redis, TicketChange.DEFERRED)) == 1


async def test_an_incident_comments_on_and_links_every_matching_open_ticket(
    redis: aioredis.Redis, fake_jira: FakeJira, jira_settings: Any
) -> None:
    backend = JiraBackend(jira_config(fake_jira))
    try:
        incident_ticket = await backend.create(
            TicketDraft(summary="Major incident: VPN outage", idempotency_key="incident-inc-9")
        )
    finally:
        await backend.close()
    async with running(jira_settings):
        for n in (1, 2, 3):
            await publish(redis, Topic.ESCALATION_REQUESTED, escalation(n))
        unrelated = escalation(
            4,
            topic="peripheral_question:printer",
            category="peripheral_question",
            environment={"application": "Printer"},
        )
        await publish(redis, Topic.ESCALATION_REQUESTED, unrelated)
        await wait_until(
            lambda: asyncio.sleep(0, result=len(fake_jira.issues) == 5)  # 4 + the incident's
        )
        await wait_until(lambda: settled(redis, Topic.ESCALATION_REQUESTED))
        incident = Incident(
            id="inc-9",
            title="VPN gateway outage",
            status="investigating",
            affected_services=["VPN"],
            ticket_key=incident_ticket.key,
            latest_update="We are investigating failed VPN logins.",
        )
        report = IncidentReported(
            correlation_id="inc-9", conversation_id="inc-9", incident=incident
        )
        await publish(redis, Topic.INCIDENT_REPORTED, report)
        await publish(redis, Topic.INCIDENT_REPORTED, report)  # redelivered: nothing twice
        linked = await wait_until(lambda: _at_least(ticket_events(redis, TicketChange.LINKED), 3))
        await wait_until(lambda: settled(redis, Topic.INCIDENT_REPORTED))
        resolved = incident.model_copy(update={"status": "resolved", "resolved": True})
        await publish(
            redis,
            Topic.INCIDENT_REPORTED,
            IncidentReported(correlation_id="inc-9", conversation_id="inc-9", incident=resolved),
        )
        await wait_until(lambda: settled(redis, Topic.INCIDENT_REPORTED))
    matching = {
        key
        for key, issue in fake_jira.issues.items()
        if issue.properties["deskpilot"].get("user_id") in {"user-1", "user-2", "user-3"}
    }
    assert len(matching) == 3
    assert {e.ticket.key for e in linked if e.ticket} == matching
    assert len({e.event_id for e in await ticket_events(redis, TicketChange.LINKED)}) == 3
    for key in matching:
        issue = fake_jira.issues[key]
        bodies = [c["body"] for c in issue.comments]
        assert len([b for b in bodies if "VPN gateway outage" in b and "resolved" not in b]) == 1
        assert len([b for b in bodies if "inc-9" in b and "is resolved" in b]) == 1
        assert [link["outwardIssue"]["key"] for link in issue.links] == [incident_ticket.key]
        assert "incident-inc-9" in issue.fields["labels"]
    printer = next(
        i for i in fake_jira.issues.values() if i.properties["deskpilot"].get("user_id") == "user-4"
    )
    assert printer.comments == []
    assert printer.links == []


async def _at_least(events: Awaitable[list[TicketEvent]], n: int) -> list[TicketEvent] | None:
    found = await events
    return found if len(found) >= n else None


async def test_status_request_reads_the_users_tickets_back(
    redis: aioredis.Redis, fake_jira: FakeJira, jira_settings: Any
) -> None:
    async with running(jira_settings):
        await publish(redis, Topic.ESCALATION_REQUESTED, escalation(1))
        created = await wait_until(lambda: ticket_events(redis, TicketChange.CREATED))
        key = created[0].ticket.key if created[0].ticket else ""
        fake_jira.set_status(key, "In Progress")
        await publish(
            redis,
            Topic.TICKET_STATUS_REQUESTED,
            TicketStatusRequested(
                correlation_id="turn-9",
                conversation_id="conv-1",
                user_id="user-1",
                reply_to="reply.gw-1",
            ),
        )
        await publish(
            redis,
            Topic.TICKET_STATUS_REQUESTED,
            TicketStatusRequested(
                correlation_id="turn-10", conversation_id="conv-2", user_id="user-2", key=key
            ),
        )
        answers = await wait_until(lambda: _at_least(ticket_events(redis, TicketChange.STATUS), 2))
    mine = next(a for a in answers if a.user_id == "user-1")
    assert [(t.key, t.status) for t in mine.tickets] == [(key, "In Progress")]
    assert mine.reply_to == "reply.gw-1"
    someone_else = next(a for a in answers if a.user_id == "user-2")
    assert someone_else.tickets == []  # a key is not a password: only one's own tickets
    assert someone_else.detail is not None
    assert key in someone_else.detail
