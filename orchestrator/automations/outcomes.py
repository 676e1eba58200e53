"""What an automation step comes to: the results the runner returns, each with its audit entry."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TypedDict

from pydantic import BaseModel, Field

from contracts.events import AuditRecorded
from contracts.ids import derived_event_id


class Outcome(StrEnum):
    OFFERED = "offered"
    SELF_SERVICE = "self_service"
    DECLINED = "declined"
    DONE = "done"
    FAILED = "failed"


class FailureReason(StrEnum):
    """Why an executor failed; the orchestrator offers self-service and a ticket for each."""

    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    UNAUTHORIZED = "unauthorized"
    """The endpoint refused our signature (wrong secret, clock skew): an operator's problem."""
    UNKNOWN_USER = "unknown_user"
    CONFLICT = "conflict"
    """The same request is still being processed by the endpoint."""
    RATE_LIMITED = "rate_limited"
    REJECTED = "rejected"
    SERVER_ERROR = "server_error"
    INVALID_RESPONSE = "invalid_response"
    """A success status with an answer that is not the documented JSON: the reset may have
    happened, but where the password went is unknown."""


class AuditEntry(TypedDict):
    """What happened, for the audit stream: ids, names and codes only."""

    action: str
    outcome: str
    reason: str
    user_id: str
    request_id: str | None
    http_status: int | None
    attempts: int
    destination_withheld: bool


def audit_entry(
    action: str,
    outcome: Outcome,
    reason: str,
    user: UserContext,
    request_id: str | None,
    http_status: int | None = None,
    attempts: int = 0,
    destination_withheld: bool = False,
) -> AuditEntry:
    return AuditEntry(
        action=action,
        outcome=outcome.value,
        reason=reason,
        user_id=user.user_id,
        request_id=request_id,
        http_status=http_status,
        attempts=attempts,
        destination_withheld=destination_withheld,
    )


class PendingAutomation(BaseModel):
    """An offer waiting for the user's yes; the service keeps it in the conversation's memory."""

    action: str = Field(description="The automation's name.")
    request_id: str = Field(
        description="The offering turn's correlation id; the executor's idempotency key, so one "
        "offer resets at most once however often its yes is delivered."
    )
    user_id: str = Field(description="Only this user's yes counts.")
    offered_at: datetime


@dataclass(frozen=True)
class UserContext:
    user_id: str
    authenticated: bool = False
    """The gateway verified who the user is (``QueryReceived.authenticated``)."""


@dataclass(frozen=True)
class Offer:
    """Ask the user to confirm; remember ``pending`` until the next message."""

    action: str
    question: str
    pending: PendingAutomation
    audit: AuditEntry

    @property
    def text(self) -> str:
        return self.question


@dataclass(frozen=True)
class SelfService:
    """The user must do it themselves: answer from the article at ``article_url``."""

    action: str
    reason: str
    article_url: str
    text: str
    audit: AuditEntry


@dataclass(frozen=True)
class Declined:
    """The user said no; nothing was run."""

    action: str
    text: str
    audit: AuditEntry


@dataclass(frozen=True)
class Done:
    """It ran. ``delivered_to`` says where the new password went (never the password)."""

    action: str
    delivered_to: str
    text: str
    audit: AuditEntry


@dataclass(frozen=True)
class Failed:
    """It did not run (or could not be confirmed): tell the user, point to self-service
    (``article_url``) and offer a ticket."""

    action: str
    reason: FailureReason
    text: str
    article_url: str
    audit: AuditEntry
    offer_ticket: bool = True


StartResult = Offer | SelfService
ReplyResult = Offer | SelfService | Declined | Done | Failed
ExecutionResult = Done | Failed


def audit_event(
    entry: AuditEntry, correlation_id: str, conversation_id: str, trace_id: str | None = None
) -> AuditRecorded:
    """The audit-stream event of one step; its id is derived from the request and outcome, so a
    redelivered turn records it once."""
    return AuditRecorded(
        event_id=derived_event_id(
            "automation",
            entry["action"],
            entry["request_id"] or correlation_id,
            entry["outcome"],
        ),
        correlation_id=correlation_id,
        conversation_id=conversation_id,
        service="orchestrator",
        action="automation",
        reason=f"{entry['action']} {entry['outcome']}: {entry['reason']}",
        trace_id=trace_id,
        details=dict(entry),
    )
