"""The status-page watcher: incidents of a Statuspage-compatible page become ``incident.reported``.

It polls ``/api/v2/summary.json`` (Atlassian Statuspage's public API: ``components`` with their
status, and the unresolved ``incidents`` with their ``incident_updates``, newest first). An
incident that is new, or whose status or latest update changed, is published as
``IncidentReported(source="statuspage")``; one that disappears from the unresolved list is
published once more as resolved. What was last published per incident is kept in Redis, so
replicas and restarts do not report the same change twice (replicas polling at the same moment
may; consumers handle incidents idempotently).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, Protocol

import httpx
import redis.asyncio as aioredis

from contracts.events import Event, Incident, IncidentReported
from contracts.topics import Topic
from ticketing.incidents import PREFIX, ticket_event_id

log = logging.getLogger("deskpilot.ticketing.statuspage")

SEEN = f"{PREFIX}statuspage:incidents"
"""Hash: incident id -> the last published Incident (JSON)."""
RESOLVED_STATUSES = frozenset({"resolved", "postmortem"})


class Publisher(Protocol):
    async def publish(self, topic: str, event: Event) -> str: ...


def summary_url(url: str) -> str:
    """The summary endpoint of a status page given its base URL or the endpoint itself."""
    if url.endswith(".json"):
        return url
    return url.rstrip("/") + "/api/v2/summary.json"


def _when(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def to_incident(raw: dict[str, Any]) -> Incident:
    """A Statuspage incident object as Deskpilot's :class:`Incident`."""
    updates = raw.get("incident_updates") or []
    latest = updates[0] if updates else {}
    services = [str(c["name"]) for c in raw.get("components") or [] if c.get("name")]
    for update in updates:
        services += [
            str(c["name"]) for c in update.get("affected_components") or [] if c.get("name")
        ]
    status = str(raw.get("status") or "investigating")
    return Incident(
        id=str(raw["id"]),
        title=str(raw.get("name") or "Incident"),
        status=status,
        affected_services=list(dict.fromkeys(services)),
        started_at=_when(raw.get("started_at") or raw.get("created_at")),
        updated_at=_when(raw.get("updated_at")),
        url=raw.get("shortlink"),
        latest_update=latest.get("body"),
        resolved=status in RESOLVED_STATUSES,
    )


def _fingerprint(incident: Incident) -> tuple[str, str | None, str | None, tuple[str, ...]]:
    return (
        incident.status,
        incident.latest_update,
        incident.updated_at.isoformat() if incident.updated_at else None,
        tuple(incident.affected_services),
    )


class StatusPageWatcher:
    def __init__(
        self, url: str, redis: aioredis.Redis, publisher: Publisher, client: httpx.AsyncClient
    ) -> None:
        self.url = summary_url(url)
        self.redis = redis
        self.publisher = publisher
        self.client = client

    async def poll(self) -> int:
        """One poll; returns how many incidents were published. HTTP errors propagate."""
        response = await self.client.get(self.url, headers={"Accept": "application/json"})
        response.raise_for_status()
        summary = response.json()
        current = {}
        for raw in summary.get("incidents") or []:
            if raw.get("id"):
                incident = to_incident(raw)
                current[incident.id] = incident
        seen_raw = await self.redis.hgetall(SEEN)
        seen = {
            (k.decode() if isinstance(k, bytes) else str(k)): Incident.model_validate_json(v)
            for k, v in seen_raw.items()
        }
        published = 0
        for incident_id, incident in current.items():
            before = seen.get(incident_id)
            if before is None or _fingerprint(before) != _fingerprint(incident):
                await self._publish(incident)
                published += 1
            if incident.resolved:
                await self.redis.hdel(SEEN, incident_id)
        for incident_id, before in seen.items():
            if incident_id not in current:
                gone = before.model_copy(update={"status": "resolved", "resolved": True})
                await self._publish(gone)
                await self.redis.hdel(SEEN, incident_id)
                published += 1
        if published:
            log.info("status page changed", extra={"incidents_published": published})
        return published

    async def _publish(self, incident: Incident) -> None:
        fingerprint = json.dumps(_fingerprint(incident), default=str)
        await self.publisher.publish(
            Topic.INCIDENT_REPORTED,
            IncidentReported(
                event_id=ticket_event_id("statuspage", incident.id, fingerprint),
                correlation_id=incident.id,
                conversation_id=incident.id,
                incident=incident,
                source="statuspage",
            ),
        )
        if not incident.resolved:
            await self.redis.hset(SEEN, incident.id, incident.model_dump_json())
