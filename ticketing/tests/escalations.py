"""What the ticketing service receives and sends, as its tests play it: an escalation as the
orchestrator requests one, and an outbox that records what the service publishes and
dead-letters in place of the bus."""

from __future__ import annotations

from typing import Any

from contracts.events import (
    EscalationReason,
    EscalationRequested,
    Event,
    TicketChange,
    TicketEvent,
    TranscriptLine,
    TriedStep,
)
from contracts.topics import Topic


def escalation(n: int = 1, **overrides: Any) -> EscalationRequested:
    """The ``n``-th user's VPN escalation (its own turn, conversation and idempotency key);
    ``overrides`` replace any field."""
    values: dict[str, Any] = {
        "correlation_id": f"turn-{n}",
        "conversation_id": f"conv-{n}",
        "user_id": f"user-{n}",
        "reply_to": "reply.gw-1",
        "reason": EscalationReason.LOW_CONFIDENCE,
        "reason_detail": "every checklist step failed",
        "summary": "VPN: cannot connect after password change (Windows)",
        "problem": "The VPN client fails with error 0x80070005 since <DATE_TIME_1>.",
        "topic": "connectivity:vpn",
        "category": "connectivity",
        "environment": {"os": "windows", "application": "VPN", "error_codes": "0x80070005"},
        "tried": [TriedStep(step="Restart the VPN client", outcome="failed")],
        "answers_given": ["Restart the client and sign in again [1]"],
        "transcript": [
            TranscriptLine(role="user", text="my vpn is broken"),
            TranscriptLine(role="assistant", text="Let's try restarting the client."),
        ],
        "idempotency_key": f"esc-{n}",
    }
    values.update(overrides)
    return EscalationRequested.model_validate(values)


class RecordingOutbox:
    """The bus as the service sees it: what it publishes and dead-letters, kept in lists."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Event]] = []
        self.dead: list[tuple[EscalationRequested, str, int]] = []

    async def publish(self, topic: str, event: Event) -> str:
        self.events.append((topic, event))
        return "0-1"

    async def dead_letter(self, event: EscalationRequested, error: str, attempts: int) -> None:
        self.dead.append((event, error, attempts))

    def ticket_events(self, change: TicketChange) -> list[TicketEvent]:
        return [
            e
            for topic, e in self.events
            if topic == Topic.TICKET_EVENTS and isinstance(e, TicketEvent) and e.change == change
        ]
