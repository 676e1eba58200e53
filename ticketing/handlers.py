"""Bus messages in, service calls out; and the bus as the service's outbox."""

from __future__ import annotations

from contracts.bus import Bus, Delivery
from contracts.events import (
    EscalationRequested,
    Event,
    IncidentReported,
    TicketStatusRequested,
    UnansweredNotice,
)
from contracts.topics import Group, Topic
from ticketing.incidents import IncidentLinker
from ticketing.notify.service import Notifier
from ticketing.service import TicketingService


class BusOutbox:
    """Publishes on the bus; a request given up goes to ``escalation.requested.dlq`` through the
    bus (:meth:`contracts.bus.Bus.dead_letter_event`), so ``deskpilot dlq replay`` puts it back
    as it came."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def publish(self, topic: str, event: Event) -> str:
        return await self.bus.publish(topic, event)

    async def dead_letter(self, event: EscalationRequested, error: str, attempts: int) -> None:
        await self.bus.dead_letter_event(
            Topic.ESCALATION_REQUESTED, event, error, attempts, group=Group.TICKETING
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


def register_notices(bus: Bus, notifier: Notifier) -> None:
    """Unanswered questions for the people responsible: a channel that cannot take one now
    (TryLater) leaves it to the bus, which delivers it again; the last attempt records why."""

    async def on_notice(event: UnansweredNotice, delivery: Delivery) -> None:
        last = delivery.deliveries >= bus.settings.max_deliveries
        await notifier.on_notice(event, last_attempt=last)

    bus.subscribe(Topic.NOTICE_UNANSWERED, UnansweredNotice, on_notice, group=Group.TICKETING)
