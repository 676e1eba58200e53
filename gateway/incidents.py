"""Incidents: those callers report (REST, MCP) handed to the redactor, and those on the bus kept
for reading back.

Reporting. :class:`IncidentService` checks the report and publishes it on ``incident.received``,
a raw topic: the bus seals it, the redactor publishes it redacted on ``incident.reported`` and
deletes it, so nothing the caller typed reaches a stream, a log or an audit record in clear. The
orchestrator tells users whose problem matches it and the ticketing service links matching
tickets; both correlate on the incident id (the event's correlation and conversation ids).
The event id is derived from the report's content, so a client that retries a request it did not
see answered publishes the same event again, which consumers de-duplicate; a changed report (a
new status, a new update) is a new event.

Reading. :class:`IncidentBoard` is the gateway's read model of ``incident.reported`` (its own
consumer group) and of the ticket events that link a ticket to an incident: the newest version
of each incident (its ``updated_at``, else the report's time; at the same time a resolution
wins), so redelivered or late older reports change nothing. Ongoing incidents are forgotten
after ``GATEWAY_INCIDENT_STALE_AFTER_S`` without news, resolved ones kept
``GATEWAY_INCIDENT_RESOLVED_KEEP_S``: the orchestrator's two settings of the same meaning share
their defaults (contracts.events), and an operator who changes those changes these alike. A
record that no longer reads as an incident is skipped and logged, as the orchestrator does.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from contracts.bus import Bus
from contracts.events import (
    INCIDENT_RESOLVED_KEEP_S,
    INCIDENT_STALE_AFTER_S,
    Incident,
    IncidentReceived,
    IncidentReported,
    TicketEvent,
)
from contracts.ids import derived_event_id
from contracts.topics import Topic
from gateway.errors import ApiError, ErrorCode
from gateway.models import IncidentAccepted, IncidentCreate

log = logging.getLogger("deskpilot.gateway.incidents")

SOURCE = "api"


def report_event_id(incident: Incident) -> str:
    """The same report gives the same event id; any change gives another."""
    digest = hashlib.sha256(incident.model_dump_json().encode()).hexdigest()
    return derived_event_id("deskpilot-incident", incident.id, digest)


class IncidentService:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def report(self, report: IncidentCreate, source: str = SOURCE) -> IncidentAccepted:
        """Queue the report for the redactor (sealed); 503 when the bus is unavailable."""
        incident = Incident.model_validate(report.model_dump())
        event = IncidentReceived(
            event_id=report_event_id(incident),
            correlation_id=incident.id,
            conversation_id=incident.id,
            incident=incident,
            source=source,
        )
        try:
            await self.bus.publish(Topic.INCIDENT_RECEIVED, event)
        except (RedisError, OSError) as exc:
            log.warning("could not queue an incident", extra={"error": type(exc).__name__})
            raise ApiError(
                ErrorCode.BUS_UNAVAILABLE,
                "Deskpilot is briefly unavailable; the incident was not recorded. Try again.",
            ) from exc
        log.info(
            "incident queued",
            extra={"incident_id": incident.id, "resolved": incident.resolved, "source": source},
        )
        return IncidentAccepted(id=incident.id)


# -- the read model -----------------------------------------------------------------------------

NAMESPACE = "deskpilot:gateway:{incidents}"
"""One hash tag for every key: the apply script writes a record and the index together, which a
Redis cluster allows within one slot only. Incidents are few."""
LISTED_AT_MOST = 200

# KEYS: the incident's record (hash), the index (sorted set of ids by version).
# ARGV: id, version (ms), over (1/0), incident JSON, time to keep it (ms). ``first`` keeps the
# version of the first report kept: when the gateway heard of it.
# Returns 1 when stored, 0 when the stored version is newer (or, at the same time, resolved).
_APPLY = """
local have = redis.call('HMGET', KEYS[1], 'version', 'over')
if have[1] then
  local stored, given = tonumber(have[1]), tonumber(ARGV[2])
  if stored > given or (stored == given and have[2] == '1' and ARGV[3] == '0') then
    return 0
  end
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'over', ARGV[3], 'incident', ARGV[4])
redis.call('HSETNX', KEYS[1], 'first', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class KnownIncident:
    """An incident as the gateway keeps it, with the keys of the tickets linked to it."""

    incident: Incident
    linked_tickets: frozenset[str]
    first_reported: datetime
    """The time of the first report of it the gateway kept (its ``updated_at``, else when it
    was reported)."""

    @property
    def since(self) -> datetime:
        """When it started: as reported, else when it was first reported."""
        return self.incident.started_at or self.first_reported


def _version_ms(event: IncidentReported) -> int:
    moment = event.incident.updated_at or event.occurred_at
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    return int(moment.timestamp() * 1000)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class IncidentBoard:
    """The incidents on the bus, newest version of each, for the MCP tools."""

    def __init__(
        self,
        client: aioredis.Redis,
        namespace: str = NAMESPACE,
        *,
        resolved_keep_s: int = INCIDENT_RESOLVED_KEEP_S,
        stale_after_s: int = INCIDENT_STALE_AFTER_S,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.resolved_keep_s = resolved_keep_s
        self.stale_after_s = stale_after_s
        self.index = f"{namespace}:index"
        self._apply = client.register_script(_APPLY)

    def record_key(self, incident_id: str) -> str:
        return f"{self.namespace}:record:{incident_id}"

    def tickets_key(self, incident_id: str) -> str:
        return f"{self.namespace}:tickets:{incident_id}"

    async def apply(self, event: IncidentReported) -> bool:
        """Keep the report if it is the newest of its incident; False for a stale one."""
        incident = event.incident
        keep_s = self.resolved_keep_s if incident.over else self.stale_after_s
        stored = await self._apply(
            keys=[self.record_key(incident.id), self.index],
            args=[
                incident.id,
                _version_ms(event),
                "1" if incident.over else "0",
                incident.model_dump_json(),
                keep_s * 1000,
            ],
        )
        log.info("incident kept", extra={"incident_id": incident.id, "stored": bool(stored)})
        return bool(stored)

    async def on_ticket(self, event: TicketEvent) -> None:
        """A ticket event that names an incident links its ticket to it."""
        ticket = event.ticket or event.record
        if event.incident_id is None or ticket is None:
            return
        key = self.tickets_key(event.incident_id)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.sadd(key, ticket.key)
            pipe.expire(key, self.stale_after_s)
            await pipe.execute()

    async def get(self, incident_id: str) -> KnownIncident | None:
        """The incident, ongoing or recently resolved; None when unknown or forgotten."""
        found = await self._read([incident_id])
        return found[0] if found else None

    async def listing(self, *, resolved: bool = False) -> list[KnownIncident]:
        """Ongoing incidents (with ``resolved``, the recently resolved too), most recently
        updated first."""
        newest: Any = await self.client.zrevrange(self.index, 0, LISTED_AT_MOST - 1)
        ids = [_text(member) for member in newest]
        found = await self._read(ids)
        return [known for known in found if resolved or not known.incident.over]

    async def _read(self, ids: list[str]) -> list[KnownIncident]:
        if not ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for incident_id in ids:
            pipe.hmget(self.record_key(incident_id), ["incident", "first"])
            pipe.smembers(self.tickets_key(incident_id))
        rows = await pipe.execute()
        found: list[KnownIncident] = []
        gone: list[str] = []
        for incident_id, (raw, first), tickets in zip(ids, rows[::2], rows[1::2], strict=True):
            if raw is None:
                gone.append(incident_id)  # expired: stale, or resolved long ago
                continue
            try:
                incident = Incident.model_validate_json(_text(raw))
                first_reported = datetime.fromtimestamp(int(_text(first or b"0")) / 1000, UTC)
            except (ValueError, OverflowError) as exc:  # not an incident, no UTF-8, a bad time
                # Written by another version of the gateway, or damaged: the others still list.
                log.error(
                    "unreadable incident record",
                    extra={"incident_id": incident_id, "error_type": type(exc).__name__},
                )
                continue
            linked = frozenset(_text(t) for t in tickets)
            found.append(KnownIncident(incident, linked, first_reported))
        if gone:
            await self.client.zrem(self.index, *gone)
        return found
