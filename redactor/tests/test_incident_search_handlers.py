"""The redactor's side of incidents and searches callers type, on a real valkey: a sealed
``incident.received`` becomes ``incident.reported`` and a sealed ``search.received`` becomes
``search.requested``, each with every text redacted, and the raw entry is deleted."""

from __future__ import annotations

from datetime import timedelta

import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import (
    Incident,
    IncidentReceived,
    IncidentReported,
    MessageReceived,
    QueryReceived,
    SearchReceived,
    SearchRequested,
    utcnow,
)
from contracts.topics import Topic, dead_letter_stream
from tests.support import entry_gone, wait_until

EMAIL = "zq7731.leak@fastmail.com"
PHONE = "+44 20 7946 0958"
API_KEY = "sk_live_51HfQx2LkT9vB3nM8pR4sW6yZ0aC"


def reported(incident: Incident, source: str = "mcp") -> IncidentReceived:
    return IncidentReceived(
        correlation_id=incident.id,
        conversation_id=incident.id,
        occurred_at=utcnow() - timedelta(seconds=5),
        incident=incident,
        source=source,
    )


async def test_an_incidents_texts_are_redacted_and_the_raw_report_deleted(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running
    incident = Incident(
        id="inc-7",
        title=f"VPN down: write to {EMAIL}",
        status="investigating",
        affected_services=["VPN", f"call {PHONE}"],
        error_signatures=["0x800704CF"],
        latest_update=f"Rotated the gateway key {API_KEY}; call {PHONE} for news.",
        url=f"https://status.example/incidents/7?reporter={EMAIL}",
    )
    given = reported(incident)
    entry_id = await bus.publish(Topic.INCIDENT_RECEIVED, given)

    entries = await wait_until(lambda: client.xrange(Topic.INCIDENT_REPORTED), timeout_s=30)
    event = decode_entry(entries[0][1], IncidentReported)

    stored = b"".join(entries[0][1].values())
    for value in (EMAIL, PHONE, API_KEY, "7946", "sk_live"):
        assert value.encode() not in stored
    shown = event.incident
    assert shown.title == "VPN down: write to <EMAIL_ADDRESS_1>"
    assert shown.affected_services[0] == "VPN"
    assert "<PHONE_NUMBER_1>" in shown.affected_services[1]
    # One value, one placeholder, across the incident's fields.
    assert shown.latest_update is not None
    assert "<PHONE_NUMBER_1>" in shown.latest_update
    assert shown.error_signatures == ["0x800704CF"]  # what matching needs is left alone
    assert shown.url is None  # a link with a placeholder leads nowhere
    assert (shown.id, shown.status, event.source) == ("inc-7", "investigating", "mcp")
    # The order of an incident's reports is their callers' order, not the redactor's.
    assert event.occurred_at == given.occurred_at
    assert (event.correlation_id, event.conversation_id) == ("inc-7", "inc-7")
    await wait_until(lambda: entry_gone(client, Topic.INCIDENT_RECEIVED, entry_id), timeout_s=30)
    assert await client.xlen(dead_letter_stream(Topic.INCIDENT_RECEIVED)) == 0


async def test_a_redelivered_report_gives_the_same_event(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running
    given = reported(Incident(id="inc-8", title="Printers offline", status="identified"))
    await bus.publish(Topic.INCIDENT_RECEIVED, given)
    await bus.publish(Topic.INCIDENT_RECEIVED, given)

    entries = await wait_until(
        lambda: _count_at_least(client, Topic.INCIDENT_REPORTED, 2), timeout_s=30
    )
    ids = {decode_entry(fields, IncidentReported).event_id for _, fields in entries}
    assert len(ids) == 1  # consumers de-duplicate on it


async def _count_at_least(client: aioredis.Redis, topic: str, count: int) -> list[object]:
    entries = await client.xrange(topic)
    return entries if len(entries) >= count else []


async def test_a_status_link_is_kept_unless_something_else_is_in_it(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running
    link = "https://status.northwind.example/incidents/inc-2026-031"
    for incident_id, url in (("inc-8", link), ("inc-9", f"{link}?token={API_KEY}")):
        incident = Incident(id=incident_id, title="VPN down", status="investigating", url=url)
        await bus.publish(Topic.INCIDENT_RECEIVED, reported(incident))
    entries = await wait_until(lambda: _reported_count(client, 2), timeout_s=30)
    shown = {e.incident.id: e.incident.url for e in entries}
    assert shown == {"inc-8": link, "inc-9": None}


async def _reported_count(client: aioredis.Redis, n: int) -> list[IncidentReported] | None:
    entries = await client.xrange(Topic.INCIDENT_REPORTED)
    events = [decode_entry(fields, IncidentReported) for _, fields in entries]
    return events if len(events) >= n else None


async def test_an_incident_named_like_a_conversation_numbers_its_placeholders_apart(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    """An incident's id is its reporter's choice: named after someone's conversation, its
    placeholders must not be numbered in that conversation (a <EMAIL_ADDRESS_1> would confirm
    that a guessed address was the first one there), nor add to its numbering."""
    bus, client = running
    victim = "9f1c2e7a4b5d6c8e9f0a1b2c3d4e5f60"
    await bus.publish(
        Topic.MESSAGE_RECEIVED,
        MessageReceived(
            correlation_id="turn-1",
            conversation_id=victim,
            user_id="emp-1",
            text=f"my address is {EMAIL}",
            reply_to="reply.test",
        ),
    )
    await wait_until(lambda: client.xrange(Topic.QUERY_RECEIVED), timeout_s=30)
    guess = "other.person@example.org"
    incident = Incident(id=victim, title=f"VPN down for {guess}", status="investigating")
    await bus.publish(Topic.INCIDENT_RECEIVED, reported(incident))
    [event] = await wait_until(lambda: _reported_count(client, 1), timeout_s=30)
    assert event.incident.title == "VPN down for <EMAIL_ADDRESS_1>"  # not _2: its own numbering
    await bus.publish(
        Topic.MESSAGE_RECEIVED,
        MessageReceived(
            correlation_id="turn-2",
            conversation_id=victim,
            user_id="emp-1",
            text="or third.person@example.net",
            reply_to="reply.test",
        ),
    )
    queries = await wait_until(lambda: _queries_count(client, 2), timeout_s=30)
    assert queries[-1].text == "or <EMAIL_ADDRESS_2>"  # the conversation's numbering, untouched


async def _queries_count(client: aioredis.Redis, n: int) -> list[QueryReceived] | None:
    entries = await client.xrange(Topic.QUERY_RECEIVED)
    events = [decode_entry(fields, QueryReceived) for _, fields in entries]
    return events if len(events) >= n else None


async def test_a_search_is_redacted_and_keeps_who_asks_and_where_to_answer(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running
    given = SearchReceived(
        correlation_id="search-1",
        conversation_id="search-1",
        user_id="mcp:itsm",
        groups=["it-staff", "emea"],
        query=f"vpn fails for {EMAIL} with key {API_KEY}",
        limit=3,
        reply_to="reply.gw-1",
    )
    entry_id = await bus.publish(Topic.SEARCH_RECEIVED, given)

    entries = await wait_until(lambda: client.xrange(Topic.SEARCH_REQUESTED), timeout_s=30)
    request = decode_entry(entries[0][1], SearchRequested)

    assert EMAIL.encode() not in b"".join(entries[0][1].values())
    assert API_KEY not in request.query
    assert request.query.startswith("vpn fails for <EMAIL_ADDRESS_1> with key <")
    assert {c.entity_type for c in request.redactions} >= {"EMAIL_ADDRESS"}
    assert (request.user_id, request.groups, request.limit) == ("mcp:itsm", ["it-staff", "emea"], 3)
    assert (request.reply_to, request.correlation_id) == ("reply.gw-1", "search-1")
    await wait_until(lambda: entry_gone(client, Topic.SEARCH_RECEIVED, entry_id), timeout_s=30)
