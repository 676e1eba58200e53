"""Bus messages in, service calls out; and the bus as the service's outbox."""

from __future__ import annotations

from datetime import UTC, datetime

from faststream.redis.parser import BinaryMessageFormatV1

from contracts.bus import RAW_FIELD, Bus, Delivery
from contracts.events import (
    EscalationRequested,
    Event,
    IncidentReported,
    TicketStatusRequested,
)
from contracts.topics import Group, Topic, dead_letter_stream
from ticketing.incidents import IncidentLinker
from ticketing.service import TicketingService


class BusOutbox:
    """Publishes on the bus; dead letters go to ``escalation.requested.dlq`` in the bus's own
    entry format, so ``deskpilot dlq replay`` puts them back as they came."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def publish(self, topic: str, event: Event) -> str:
        return await self.bus.publish(topic, event)

    async def dead_letter(self, event: EscalationRequested, error: str, attempts: int) -> None:
        entry = await BinaryMessageFormatV1.encode(
            message=event.model_dump_json().encode(),
            reply_to=None,
            headers={"content-type": "application/json"},
            correlation_id=event.correlation_id,
        )
        await self.bus.redis.xadd(
            dead_letter_stream(Topic.ESCALATION_REQUESTED),
            {
                RAW_FIELD: entry,
                b"error": error.encode(),
                b"group": Group.TICKETING.value.encode(),
                b"consumer": self.bus.consumer.encode(),
                b"original_id": event.event_id.encode(),
                b"deliveries": str(attempts).encode(),
                b"failed_at": datetime.now(UTC).isoformat().encode(),
            },
            maxlen=self.bus.settings.stream_maxlen,
            approximate=True,
        )


def register(
    bus: Bus, service: TicketingService, incidents: IncidentLinker, concurrency: int
) -> None:
    async def on_escalation(event: EscalationRequested, delivery: Delivery) -> None:
        # Returns (and the bus acks) once the request is stored in Redis, filed or not.
        await service.escalate(event)

    async def on_status(event: TicketStatusRequested, delivery: Delivery) -> None:
        await service.status(event)

    async def on_incident(event: IncidentReported, delivery: Delivery) -> None:
        await incidents.on_incident(event)

    bus.subscribe(
        Topic.ESCALATION_REQUESTED,
        EscalationRequested,
        on_escalation,
        group=Group.TICKETING,
        concurrency=concurrency,
    )
    bus.subscribe(
        Topic.TICKET_STATUS_REQUESTED,
        TicketStatusRequested,
        on_status,
        group=Group.TICKETING,
        concurrency=concurrency,
    )
    bus.subscribe(Topic.INCIDENT_REPORTED, IncidentReported, on_incident, group=Group.TICKETING)
