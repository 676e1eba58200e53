"""Filing tickets for escalations: idempotent, durable across backend outages, never lost.

What a caller can rely on:

* **One ticket per idempotency key.** A redelivered or retried escalation finds what the first
  attempt did (a record in Redis, else the backend's search by the key's label) and reports it
  again with the same event id; it never files a second ticket. An open ticket of the same user
  on the same topic gets a comment instead of a new ticket (also at most once: comments carry a
  marker of the request).
* **Durable before acknowledged.** :meth:`TicketingService.escalate` stores the request in Redis
  (a hash per request and a sorted set of next attempt times) before it tries the backend; the
  handler returns (and the bus acks) only after that.
* **Fallback, retry, dead letter.** When the backend is down or refuses, the user is told once per
  request (``TicketEvent(change=deferred)`` with the support address) and the request is retried
  with doubling back-off by :meth:`TicketingService.retry_due`, which any replica runs
  periodically; a per-request lock keeps two replicas from working on the same request. After
  ``max_attempts`` it is given up visibly: ``TicketEvent(change=failed)`` and an entry in
  ``escalation.requested.dlq``.

This module never touches the bus: events leave through the :class:`Outbox` it is given.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio as aioredis

from contracts.events import (
    AuditRecorded,
    EscalationReason,
    EscalationRequested,
    Event,
    TicketChange,
    TicketEvent,
    TicketRecord,
    TicketStatusRequested,
)
from contracts.topics import Topic
from ticketing.backends.base import (
    BackendAuthError,
    BackendError,
    BackendRejected,
    BackendUnavailable,
    TicketBackend,
    TicketNotFound,
    TicketQuery,
    requester_key,
    topic_label,
    user_label,
)
from ticketing.config import TicketingSettings
from ticketing.content import (
    TRANSCRIPT_FILENAME,
    build_ticket,
    facts,
    follow_up_comment,
    request_marker,
)
from ticketing.incidents import PREFIX, IncidentLinker, ticket_event_id, ticket_ref

log = logging.getLogger("deskpilot.ticketing")

PENDING = f"{PREFIX}pending"
"""Sorted set: request digest -> time of its next attempt (epoch seconds)."""
DONE_TTL_S = 30 * 24 * 3600
LOCK_TTL_MS = 120_000
SERVICE = "ticketing"


class Outbox(Protocol):
    """Where the service's events go (the bus, in the running service)."""

    async def publish(self, topic: str, event: Event) -> str: ...

    async def dead_letter(self, event: EscalationRequested, error: str, attempts: int) -> None:
        """Keep a request that is given up for good where operators look (``<topic>.dlq``)."""


def request_digest(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def _request_key(digest: str) -> str:
    return f"{PREFIX}request:{digest}"


def _done_key(digest: str) -> str:
    return f"{PREFIX}done:{digest}"


RELEASE_IF_OURS = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""
"""Deletes a lock only while it still holds this holder's token."""


def _lock_key(digest: str) -> str:
    return f"{PREFIX}lock:{digest}"


@dataclass
class PendingRequest:
    event: EscalationRequested
    attempts: int
    deferred_sent: bool


class PendingRequests:
    """Escalations not yet filed, in Redis: nothing acknowledged is ever only in memory."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._release = redis.register_script(RELEASE_IF_OURS)

    async def keep(self, event: EscalationRequested, digest: str) -> None:
        """Store the request once (a redelivery keeps the first copy and its attempt count)."""
        key = _request_key(digest)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hsetnx(key, "event", event.model_dump_json())
        pipe.hsetnx(key, "attempts", 0)
        pipe.zadd(PENDING, {digest: time.time()}, nx=True)
        await pipe.execute()

    async def load(self, digest: str) -> PendingRequest | None:
        raw = await self.redis.hgetall(_request_key(digest))
        fields = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }
        if "event" not in fields:
            return None
        return PendingRequest(
            event=EscalationRequested.model_validate_json(fields["event"]),
            attempts=int(fields.get("attempts") or 0),
            deferred_sent=fields.get("deferred") == "1",
        )

    async def due(self, limit: int = 20) -> list[str]:
        members = await self.redis.zrangebyscore(PENDING, 0, time.time(), start=0, num=limit)
        return [m.decode() if isinstance(m, bytes) else str(m) for m in members]

    async def failed(self, digest: str, attempts: int, next_at: float, error: str) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(_request_key(digest), mapping={"attempts": attempts, "last_error": error})
        pipe.zadd(PENDING, {digest: next_at})
        await pipe.execute()

    async def mark_deferred(self, digest: str) -> bool:
        """True only the first time: the user is told once per request."""
        return bool(await self.redis.hsetnx(_request_key(digest), "deferred", "1"))

    async def finish(self, digest: str, outcome: str | None) -> None:
        pipe = self.redis.pipeline(transaction=True)
        if outcome is not None:
            pipe.set(_done_key(digest), outcome, ex=DONE_TTL_S)
        pipe.zrem(PENDING, digest)
        pipe.delete(_request_key(digest))
        await pipe.execute()

    async def outcome(self, digest: str) -> tuple[TicketChange, str] | None:
        raw = await self.redis.get(_done_key(digest))
        if raw is None:
            return None
        change, _, key = (raw.decode() if isinstance(raw, bytes) else str(raw)).partition(" ")
        return TicketChange(change), key

    async def record_outcome(self, digest: str, change: TicketChange, key: str) -> None:
        await self.redis.set(_done_key(digest), f"{change.value} {key}", ex=DONE_TTL_S)

    @contextlib.asynccontextmanager
    async def lock(self, digest: str) -> AsyncIterator[bool]:
        """Yields whether this process holds the request's lock (released on exit)."""
        token = uuid.uuid4().hex
        held = bool(await self.redis.set(_lock_key(digest), token, nx=True, px=LOCK_TTL_MS))
        try:
            yield held
        finally:
            if held:
                # Compared and deleted in one step on the server: with a GET then a DEL, a lock
                # that expired in between and was taken by another process would be deleted.
                await self._release(keys=[_lock_key(digest)], args=[token])

    async def count(self) -> int:
        return int(await self.redis.zcard(PENDING))


@dataclass
class Filed:
    change: TicketChange
    record: TicketRecord


class TicketingService:
    def __init__(
        self,
        backend: TicketBackend,
        redis: aioredis.Redis,
        settings: TicketingSettings,
        outbox: Outbox,
        incidents: IncidentLinker | None = None,
    ) -> None:
        self.backend = backend
        self.settings = settings
        self.outbox = outbox
        self.pending = PendingRequests(redis)
        self.incidents = incidents or IncidentLinker(redis, backend, outbox)
        self.conversations = self.incidents.conversations

    # -- escalations -----------------------------------------------------------------------

    async def escalate(self, event: EscalationRequested) -> None:
        """Store the request durably, then try to file it at once."""
        if event.reason == EscalationReason.RESOLVED and not self.settings.silent_tickets:
            log.info("silent ticket skipped (TICKETING_SILENT_TICKETS is off)")
            return
        digest = request_digest(event.idempotency_key)
        await self.pending.keep(event, digest)
        await self._attempt(digest)

    async def retry_due(self) -> int:
        """Try every request whose next attempt is due; returns how many were tried."""
        digests = await self.pending.due()
        for digest in digests:
            await self._attempt(digest)
        return len(digests)

    async def _attempt(self, digest: str) -> None:
        async with self.pending.lock(digest) as held:
            if not held:
                return  # another worker is on it; the request stays stored
            pending = await self.pending.load(digest)
            if pending is None:
                await self.pending.finish(digest, None)  # finished meanwhile
                return
            event = pending.event
            try:
                filed = await self._file(event, digest)
            except BackendError as exc:
                await self._failed(digest, pending, exc)
                return
            await self._announce(event, filed)
            await self.pending.finish(digest, f"{filed.change.value} {filed.record.key}")

    async def _file(self, event: EscalationRequested, digest: str) -> Filed:
        done = await self.pending.outcome(digest)
        if done is not None:
            return Filed(done[0], await self.backend.get(done[1]))
        silent = event.reason == EscalationReason.RESOLVED
        record = await self.backend.find_by_idempotency_key(event.idempotency_key)
        if record is None and not silent:
            same_topic = await self.backend.search(
                TicketQuery(
                    labels=[user_label(requester_key(event.user_id)), topic_label(event.topic)],
                    open_only=True,
                    limit=1,
                )
            )
            if same_topic:
                return await self._comment(event, digest, same_topic[0])
        content = build_ticket(event, self.settings.category_routes, silent=silent)
        if record is None:
            record = await self.backend.create(content.draft)
            log.info(
                "ticket created",
                extra={"ticket": record.key, "backend": self.backend.name, "silent": silent},
            )
        await self.conversations.remember(record.key, event.conversation_id)
        await self.pending.record_outcome(digest, TicketChange.CREATED, record.key)
        # Follow-up steps, each safe to repeat after a failure.
        if content.transcript_attachment is not None:
            names = [name for name, _ in await self.backend.attachments(record.key)]
            if TRANSCRIPT_FILENAME not in names:
                await self.backend.add_attachment(
                    record.key, TRANSCRIPT_FILENAME, content.transcript_attachment.encode()
                )
        if event.incident_id:
            incident = await self.incidents.get(event.incident_id)
            if incident and incident.ticket_key and incident.ticket_key not in record.links:
                await self.backend.link(record.key, incident.ticket_key)
            await self.incidents.add_linked(event.incident_id, record.key)
        if silent:
            if not self.backend.is_done(record):
                record = await self.backend.resolve(record.key)
        else:
            await self.incidents.index_ticket(record.key, facts(event))
        return Filed(TicketChange.CREATED, await self.backend.get(record.key))

    async def _comment(
        self, event: EscalationRequested, digest: str, open_ticket: TicketRecord
    ) -> Filed:
        marker = request_marker(event.idempotency_key)
        if not any(marker in comment for comment in open_ticket.comments):
            await self.backend.comment(open_ticket.key, follow_up_comment(event))
            log.info("open ticket commented", extra={"ticket": open_ticket.key})
        await self.pending.record_outcome(digest, TicketChange.COMMENTED, open_ticket.key)
        return Filed(TicketChange.COMMENTED, await self.backend.get(open_ticket.key))

    async def _failed(self, digest: str, pending: PendingRequest, exc: BackendError) -> None:
        event = pending.event
        attempts = pending.attempts + 1
        error = _describe(exc)
        if attempts >= self.settings.max_attempts:
            log.error(
                "ticket request given up; dead-lettered",
                extra={"attempts": attempts, "error": error, "backend": self.backend.name},
            )
            await self.outbox.publish(
                Topic.TICKET_EVENTS,
                self._ticket_event(
                    event,
                    TicketChange.FAILED,
                    detail="The ticket could not be filed; operators were alerted. "
                    f"Please write to {self.settings.support_email}.",
                ),
            )
            await self.outbox.dead_letter(event, error, attempts)
            await self.pending.finish(digest, None)
            return
        delay = min(
            self.settings.retry_backoff_max_s,
            self.settings.retry_backoff_s * 2 ** (attempts - 1),
        )
        if isinstance(exc, BackendUnavailable) and exc.retry_after_s:
            delay = max(delay, min(exc.retry_after_s, self.settings.retry_backoff_max_s))
        delay *= random.uniform(0.9, 1.1)  # noqa: S311 (jitter, not security)  # nosec B311
        await self.pending.failed(digest, attempts, time.time() + delay, error)
        log.warning(
            "ticket backend failed; request kept for a retry",
            extra={
                "attempts": attempts,
                "error": error,
                "retry_in_s": round(delay, 1),
                "backend": self.backend.name,
            },
        )
        if await self.pending.mark_deferred(digest):
            await self.outbox.publish(
                Topic.TICKET_EVENTS,
                self._ticket_event(
                    event,
                    TicketChange.DEFERRED,
                    detail="The ticket system is not reachable right now: a ticket will follow. "
                    f"If it is urgent, write to {self.settings.support_email}.",
                ),
            )

    async def _announce(self, event: EscalationRequested, filed: Filed) -> None:
        record = await self.conversations.attach(filed.record)
        await self.outbox.publish(
            Topic.TICKET_EVENTS, self._ticket_event(event, filed.change, record=record)
        )
        await self.outbox.publish(
            Topic.AUDIT,
            AuditRecorded(
                event_id=ticket_event_id(event.idempotency_key, "audit", filed.change.value),
                correlation_id=event.correlation_id,
                conversation_id=event.conversation_id,
                service=SERVICE,
                action="ticket",
                reason=f"{filed.change.value}: {event.reason.value}",
                details={
                    "ticket": filed.record.key,
                    "backend": self.backend.name,
                    "category": event.category,
                    "incident_id": event.incident_id,
                    "idempotency_key": event.idempotency_key,
                },
            ),
        )

    def _ticket_event(
        self,
        event: EscalationRequested,
        change: TicketChange,
        *,
        record: TicketRecord | None = None,
        detail: str | None = None,
    ) -> TicketEvent:
        return TicketEvent(
            event_id=ticket_event_id(event.idempotency_key, change.value),
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            change=change,
            ticket=ticket_ref(record) if record else None,
            record=record,
            user_id=event.user_id,
            reply_to=event.reply_to,
            idempotency_key=event.idempotency_key,
            incident_id=event.incident_id,
            detail=detail,
        )

    # -- status questions ------------------------------------------------------------------

    async def status(self, request: TicketStatusRequested) -> None:
        """Read the user's ticket (or latest tickets) back from the backend and publish it."""
        detail: str | None = None
        records: list[TicketRecord] = []
        try:
            if request.key:
                record = await self.backend.get(request.key)
                # Only the requester's own tickets: a key is not a password.
                if record.user_id in (request.user_id, requester_key(request.user_id)):
                    records = [record]
                else:
                    detail = f"No ticket {request.key} of yours was found."
            else:
                records = await self.backend.search(
                    TicketQuery(labels=[user_label(requester_key(request.user_id))], limit=5)
                )
        except TicketNotFound:
            detail = f"No ticket {request.key} of yours was found."
        except BackendError as exc:
            log.warning("ticket status unavailable", extra={"error": _describe(exc)})
            detail = (
                "The ticket system is not reachable right now; please ask again later or write "
                f"to {self.settings.support_email}."
            )
        if detail is None and not records:
            detail = "You have no tickets yet."
        for record in records:
            if self.backend.is_done(record):
                await self.incidents.forget_ticket(record.key)
        records = [await self.conversations.attach(record) for record in records]
        await self.outbox.publish(
            Topic.TICKET_EVENTS,
            TicketEvent(
                event_id=ticket_event_id(request.event_id, "status"),
                correlation_id=request.correlation_id,
                conversation_id=request.conversation_id,
                change=TicketChange.STATUS,
                ticket=ticket_ref(records[0]) if len(records) == 1 else None,
                record=records[0] if len(records) == 1 else None,
                tickets=[ticket_ref(r) for r in records],
                user_id=request.user_id,
                reply_to=request.reply_to,
                detail=detail,
            ),
        )


def _describe(exc: BackendError) -> str:
    """Type and our own message (never vendor text, which may quote the ticket)."""
    kind = type(exc).__name__
    if isinstance(exc, BackendRejected):
        fields = ",".join(sorted(exc.errors)) or "-"
        return f"{kind}: {exc} (fields: {fields})"
    if isinstance(exc, BackendAuthError):
        return f"{kind}: credentials refused"
    return f"{kind}: {exc}"
