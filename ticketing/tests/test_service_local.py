"""The service on the local backend and real Redis, events recorded instead of published; the
status-page watcher against the fake Statuspage; settings and ticket content."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from contracts.events import (
    EscalationReason,
    IncidentReported,
    TicketChange,
    TranscriptLine,
)
from tests.support.fake_statuspage import FakeStatusPage
from ticketing.backends.base import topic_label
from ticketing.backends.local import LocalBackend
from ticketing.config import TicketingSettings
from ticketing.content import MAX_DESCRIPTION, TRANSCRIPT_FILENAME, build_ticket, describe
from ticketing.service import PendingRequests, TicketingService, _lock_key
from ticketing.statuspage import StatusPageWatcher
from ticketing.tests.conftest import settings_for
from ticketing.tests.escalations import RecordingOutbox, escalation


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    backend = LocalBackend(TicketingSettings(data_dir=tmp_path).local_config())
    yield backend
    await backend.close()


def make_service(
    local: LocalBackend, redis: aioredis.Redis, tmp_path: Path, redis_url: str, **settings: Any
) -> tuple[TicketingService, RecordingOutbox]:
    outbox = RecordingOutbox()
    return (
        TicketingService(local, redis, settings_for(tmp_path, redis_url, **settings), outbox),
        outbox,
    )


async def test_the_same_users_open_ticket_on_the_topic_gets_a_comment_once(
    local: LocalBackend, redis: aioredis.Redis, tmp_path: Path, redis_url: str
) -> None:
    service, outbox = make_service(local, redis, tmp_path, redis_url)
    await service.escalate(escalation(1))
    again = escalation(1, idempotency_key="esc-1-again", reason=EscalationReason.ANGER)
    await service.escalate(again)
    await service.escalate(again)  # redelivered
    tickets = await local.search_all()
    assert len(tickets) == 1
    assert len(tickets[0].comments) == 1
    assert "frustrated" in tickets[0].comments[0]
    assert len(outbox.ticket_events(TicketChange.CREATED)) == 1
    assert len(outbox.ticket_events(TicketChange.COMMENTED)) == 2  # same event id twice
    assert len({e.event_id for e in outbox.ticket_events(TicketChange.COMMENTED)}) == 1
    # Once that ticket is done, the same topic files a new one.
    await local.resolve(tickets[0].key)
    await service.escalate(escalation(1, idempotency_key="esc-1-later"))
    assert len(await local.search_all()) == 2


async def test_silent_tickets_are_filed_resolved_only_when_allowed(
    local: LocalBackend, redis: aioredis.Redis, tmp_path: Path, redis_url: str
) -> None:
    resolved = escalation(1, reason=EscalationReason.RESOLVED)
    service, outbox = make_service(local, redis, tmp_path, redis_url)
    await service.escalate(resolved)
    assert await local.search_all() == []
    assert outbox.events == []
    service, outbox = make_service(local, redis, tmp_path, redis_url, silent_tickets=True)
    await service.escalate(resolved)
    [ticket] = await local.search_all()
    assert ticket.status == "Done"
    assert "dp-silent" in ticket.labels
    assert outbox.ticket_events(TicketChange.CREATED)[0].ticket is not None


async def test_an_escalation_naming_an_incident_links_to_its_ticket(
    local: LocalBackend, redis: aioredis.Redis, tmp_path: Path, redis_url: str
) -> None:
    service, outbox = make_service(local, redis, tmp_path, redis_url)
    await service.escalate(escalation(1, incident_id="inc-1"))
    incident_ticket = (await local.search_all())[0]
    report = IncidentReported.model_validate(
        {
            "correlation_id": "inc-2",
            "conversation_id": "inc-2",
            "incident": {
                "id": "inc-2",
                "title": "Mail down",
                "status": "identified",
                "ticket_key": incident_ticket.key,
            },
        }
    )
    await service.incidents.on_incident(report)
    await service.escalate(escalation(2, incident_id="inc-2", topic="account:mail"))
    created = outbox.ticket_events(TicketChange.CREATED)[-1]
    assert created.record is not None
    assert created.record.links == [incident_ticket.key]
    assert "incident-inc-2" in created.record.labels
    assert created.incident_id == "inc-2"


async def test_a_long_transcript_is_shortened_and_attached_whole(
    local: LocalBackend, redis: aioredis.Redis, tmp_path: Path, redis_url: str
) -> None:
    lines = [TranscriptLine(role="user", text=f"line {n} " + "x" * 200) for n in range(400)]
    event = escalation(1, transcript=lines)
    description, whole = describe(event)
    assert len(description) <= MAX_DESCRIPTION
    assert whole is not None
    assert "line 399" in description
    assert "line 0 " not in description
    service, _ = make_service(local, redis, tmp_path, redis_url)
    await service.escalate(event)
    [ticket] = await local.search_all()
    assert await local.attachments(ticket.key) == [(TRANSCRIPT_FILENAME, len(whole.encode()))]


def test_ticket_content_carries_the_whole_case() -> None:
    content = build_ticket(escalation(1, sentiment=0.9), TicketingSettings().category_routes)
    text = content.draft.description
    for heading in (
        "Problem",
        "Environment",
        "What was tried",
        "Answers given",
        "Links and citations",
        "Attachments",
        "Sentiment and escalation reason",
        "Transcript (redacted)",
    ):
        assert f"h3. {heading}" in text
    assert "Anger score at escalation: 0.90" in text
    assert content.draft.queue == "Network"
    assert "queue-network" in content.draft.labels
    assert topic_label("connectivity:vpn") in content.draft.labels
    assert content.transcript_attachment is None


def test_a_placeholder_jira_token_is_refused_in_production() -> None:
    jira = {
        "backend": "jira",
        "jira_base_url": "https://x.example",
        "jira_email": "a@x.example",
        "admin_token": "a-real-admin-token",
    }
    with pytest.raises(ValidationError, match="JIRA_API_TOKEN"):
        TicketingSettings.model_validate({**jira, "environment": "production"})
    with pytest.raises(ValidationError, match="JIRA_EMAIL"):
        TicketingSettings.model_validate({"backend": "jira", "jira_base_url": "https://x"})
    ok = TicketingSettings.model_validate(
        {**jira, "environment": "production", "jira_api_token": "real-token-123"}
    )
    assert ok.jira_config().api_token.get_secret_value() == "real-token-123"


async def test_the_watcher_reports_new_changed_and_vanished_incidents(
    redis: aioredis.Redis,
) -> None:
    outbox = RecordingOutbox()
    with FakeStatusPage() as page:
        async with httpx.AsyncClient(timeout=5) as client:
            watcher = StatusPageWatcher(page.base_url, redis, outbox, client)
            assert await watcher.poll() == 0
            incident_id = page.open_incident("VPN logins failing", ["VPN"], "Investigating.")
            assert await watcher.poll() == 1
            assert await watcher.poll() == 0  # unchanged: nothing new
            page.post_update(incident_id, "identified", "A certificate expired.")
            assert await watcher.poll() == 1
            page.resolve(incident_id)
            assert await watcher.poll() == 1
            assert await watcher.poll() == 0
            page.fail_next(1)
            with pytest.raises(httpx.HTTPStatusError):
                await watcher.poll()
    reports = [e for _, e in outbox.events if isinstance(e, IncidentReported)]
    assert [r.incident.status for r in reports] == ["investigating", "identified", "resolved"]
    assert reports[0].incident.affected_services == ["VPN"]
    assert reports[1].incident.latest_update == "A certificate expired."
    assert reports[2].incident.resolved
    assert {r.source for r in reports} == {"statuspage"}
    assert reports[0].correlation_id == incident_id


class _TakenRightAfter(aioredis.Redis):
    """A client on which, right after the next command that reads ``armed_key`` (the release's
    check), the lock expires and another process takes it: the window between a read and a
    delete that a non-atomic release leaves open."""

    armed_key: str | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        result = await super().execute_command(*args, **options)
        if self.armed_key and args[0] in ("GET", "EVAL", "EVALSHA") and self.armed_key in args:
            key, self.armed_key = self.armed_key, None
            await super().execute_command("SET", key, "another-holder")
        return result


async def test_releasing_the_lock_never_deletes_another_processs_lock(
    redis: aioredis.Redis, redis_url: str
) -> None:
    digest = uuid4().hex
    client = _TakenRightAfter.from_url(redis_url)
    try:
        pending = PendingRequests(client)
        async with pending.lock(digest) as held:
            assert held
            client.armed_key = _lock_key(digest)
        assert await redis.get(_lock_key(digest)) == b"another-holder"
        async with pending.lock(digest) as held:
            assert not held  # the other holder's lock stands, and is not released by us
        assert await redis.get(_lock_key(digest)) == b"another-holder"
    finally:
        await client.aclose()
