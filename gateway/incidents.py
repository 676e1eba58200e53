"""Incidents reported over HTTP (status pages, monitoring) handed to the rest of the stack.

The gateway checks the report and publishes it as ``incident.reported``; the orchestrator tells
users whose problem matches it and the ticketing service links matching tickets. Both correlate
on the incident id (the event's correlation and conversation ids).

The event id is derived from the report's content, so a client that retries a request it did not
see answered publishes the same event again, which consumers de-duplicate; a changed report (a
new status, a new update) is a new event.
"""

from __future__ import annotations

import hashlib
import logging

from redis.exceptions import RedisError

from contracts.bus import Bus
from contracts.events import Incident, IncidentReported
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

    async def report(self, report: IncidentCreate) -> IncidentAccepted:
        incident = Incident.model_validate(report.model_dump())
        event = IncidentReported(
            event_id=report_event_id(incident),
            correlation_id=incident.id,
            conversation_id=incident.id,
            incident=incident,
            source=SOURCE,
        )
        try:
            await self.bus.publish(Topic.INCIDENT_REPORTED, event)
        except (RedisError, OSError) as exc:
            log.warning("could not queue an incident", extra={"error": type(exc).__name__})
            raise ApiError(
                ErrorCode.BUS_UNAVAILABLE,
                "Deskpilot is briefly unavailable; the incident was not recorded. Try again.",
            ) from exc
        log.info(
            "incident queued",
            extra={"incident_id": incident.id, "resolved": incident.resolved},
        )
        return IncidentAccepted(id=incident.id)
