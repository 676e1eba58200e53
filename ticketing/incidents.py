"""Incidents and the tickets they touch.

Incidents are kept in Redis as reported (latest version wins). So that a new incident finds the
open tickets it explains without searching the ticket system, every open Deskpilot ticket is
indexed in Redis under the facts incidents are matched on: affected service names (from the
escalation's environment and topic), error signatures (attachments, error codes) and category.
A match is confirmed against the backend (a ticket closed meanwhile is dropped from the index),
then commented on, labelled ``incident-<id>``, linked to the incident's own ticket when it has one,
and announced as ``TicketEvent(change=linked)``. When the incident is resolved, each linked ticket
gets a comment. Every step can be repeated safely: comments carry a marker that is checked first.
"""

from __future__ import annotations

import json
import logging
from typing import Protocol

import redis.asyncio as aioredis

from contracts.events import (
    Event,
    Incident,
    IncidentReported,
    TicketChange,
    TicketEvent,
    TicketRecord,
    TicketRef,
)
from contracts.ids import derived_event_id
from contracts.topics import Topic
from ticketing.backends.base import TicketBackend, TicketNotFound, incident_label
from ticketing.content import (
    TicketFacts,
    incident_comment,
    incident_resolved_comment,
    normalise,
)
from ticketing.conversations import TicketConversations

log = logging.getLogger("deskpilot.ticketing.incidents")

PREFIX = "deskpilot:ticketing:"
OPEN_TICKETS = f"{PREFIX}open"
"""Hash: ticket key -> its facts (JSON)."""


class Publisher(Protocol):
    async def publish(self, topic: str, event: Event) -> str: ...


def _incident_key(incident_id: str) -> str:
    return f"{PREFIX}incident:{incident_id}"


def _linked_key(incident_id: str) -> str:
    return f"{PREFIX}incident:{incident_id}:tickets"


def _by_key(kind: str, value: str) -> str:
    return f"{PREFIX}open-by:{kind}:{value}"


def linked_marker(incident_id: str) -> str:
    return f"[deskpilot-incident:{incident_id}]"


def resolved_marker(incident_id: str) -> str:
    return f"[deskpilot-incident-resolved:{incident_id}]"


def ticket_event_id(*parts: str) -> str:
    """Deterministic, so a repeated step publishes the same event id (consumers de-duplicate)."""
    return derived_event_id("deskpilot", "ticketing", *parts)


def ticket_ref(record: TicketRecord) -> TicketRef:
    return TicketRef(key=record.key, url=record.url, status=record.status)


class IncidentLinker:
    def __init__(self, redis: aioredis.Redis, backend: TicketBackend, publisher: Publisher) -> None:
        self.redis = redis
        self.backend = backend
        self.publisher = publisher
        self.conversations = TicketConversations(redis)

    # -- incidents -------------------------------------------------------------------------

    async def get(self, incident_id: str) -> Incident | None:
        raw = await self.redis.get(_incident_key(incident_id))
        return None if raw is None else Incident.model_validate_json(raw)

    async def linked(self, incident_id: str) -> set[str]:
        members = await self.redis.smembers(_linked_key(incident_id))
        return {m.decode() if isinstance(m, bytes) else str(m) for m in members}

    async def add_linked(self, incident_id: str, ticket_key: str) -> None:
        await self.redis.sadd(_linked_key(incident_id), ticket_key)

    # -- the open-ticket index -------------------------------------------------------------

    async def index_ticket(self, key: str, facts: TicketFacts) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(
            OPEN_TICKETS,
            key,
            json.dumps(
                {
                    "services": facts.services,
                    "signatures": facts.signatures,
                    "category": facts.category,
                }
            ),
        )
        for service in facts.services:
            pipe.sadd(_by_key("service", service), key)
        for signature in facts.signatures:
            pipe.sadd(_by_key("signature", signature), key)
        if facts.category:
            pipe.sadd(_by_key("category", normalise(facts.category)), key)
        await pipe.execute()

    async def forget_ticket(self, key: str) -> None:
        raw = await self.redis.hget(OPEN_TICKETS, key)
        if raw is None:
            return
        stored = json.loads(raw)
        pipe = self.redis.pipeline(transaction=True)
        for service in stored.get("services") or []:
            pipe.srem(_by_key("service", service), key)
        for signature in stored.get("signatures") or []:
            pipe.srem(_by_key("signature", signature), key)
        if stored.get("category"):
            pipe.srem(_by_key("category", normalise(stored["category"])), key)
        pipe.hdel(OPEN_TICKETS, key)
        await pipe.execute()

    async def matching(self, incident: Incident) -> list[str]:
        """Open tickets indexed under the incident's services, signatures or category."""
        keys = [_by_key("service", normalise(s)) for s in incident.affected_services]
        keys += [_by_key("signature", normalise(s)) for s in incident.error_signatures]
        if incident.category:
            keys.append(_by_key("category", normalise(incident.category)))
        keys = [k for k in keys if not k.endswith(":")]
        if not keys:
            return []
        members = await self.redis.sunion(keys)
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    # -- reacting to a report --------------------------------------------------------------

    async def on_incident(self, report: IncidentReported) -> int:
        """Keep the incident; link matching open tickets, or tell linked ones it is resolved.

        Returns how many tickets were linked or commented on. Backend errors propagate so the
        message is retried; every step already done is skipped on the retry.
        """
        incident = report.incident
        await self.redis.set(_incident_key(incident.id), incident.model_dump_json())
        if incident.resolved or incident.status == "resolved":
            return await self._announce_resolution(report)
        already = await self.linked(incident.id)
        touched = 0
        for key in await self.matching(incident):
            if key in already or key == incident.ticket_key:
                continue
            try:
                record = await self.backend.get(key)
            except TicketNotFound:
                await self.forget_ticket(key)
                continue
            if self.backend.is_done(record):
                await self.forget_ticket(key)
                continue
            if incident.ticket_key and incident.ticket_key not in record.links:
                await self.backend.link(key, incident.ticket_key)
            if incident_label(incident.id) not in record.labels:
                await self.backend.update(key, add_labels=[incident_label(incident.id)])
            marker = linked_marker(incident.id)
            if not any(marker in comment for comment in record.comments):
                await self.backend.comment(key, incident_comment(incident, marker))
            await self.add_linked(incident.id, key)
            record = await self.backend.get(key)
            await self._publish(report, record, TicketChange.LINKED)
            touched += 1
        log.info("incident matched", extra={"incident_id": incident.id, "tickets_linked": touched})
        return touched

    async def _announce_resolution(self, report: IncidentReported) -> int:
        incident = report.incident
        marker = resolved_marker(incident.id)
        touched = 0
        for key in sorted(await self.linked(incident.id)):
            try:
                record = await self.backend.get(key)
            except TicketNotFound:
                continue
            if not any(marker in comment for comment in record.comments):
                await self.backend.comment(key, incident_resolved_comment(incident, marker))
                record = await self.backend.get(key)
            await self._publish(report, record, TicketChange.COMMENTED)
            touched += 1
        log.info(
            "incident resolved", extra={"incident_id": incident.id, "tickets_commented": touched}
        )
        return touched

    async def _publish(
        self, report: IncidentReported, record: TicketRecord, change: TicketChange
    ) -> None:
        record = await self.conversations.attach(record)
        await self.publisher.publish(
            Topic.TICKET_EVENTS,
            TicketEvent(
                event_id=ticket_event_id(report.event_id, change.value, record.key),
                correlation_id=report.correlation_id,
                conversation_id=record.conversation_id or report.conversation_id,
                change=change,
                ticket=ticket_ref(record),
                record=record,
                user_id=record.user_id,
                incident_id=report.incident.id,
            ),
        )
