"""Request and response models of the gateway's API, all of them in one place.

What a client sends and reads is defined here (a test holds every model of the OpenAPI document
to it); what the gateway stores or computes internally (stored ratings, turn records, analytics
facts) stays with the module that keeps it.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.events import (
    AnswerBody,
    AttachmentSummary,
    AuditRecorded,
    GapSignal,
    Incident,
    ProposalSource,
    ProposedQuestion,
    TicketChange,
    TicketRecord,
)
from contracts.ids import ConversationId
from contracts.runtime_config import RuntimeOverrides


class ChatCreate(BaseModel):
    """A user's message."""

    text: str = Field(examples=["How do I reset my VPN password?"])
    conversation_id: ConversationId | None = Field(
        None,
        description="A conversation of the caller's, from an earlier answer; leave it out to "
        "start one.",
    )
    user_id: str | None = Field(
        None,
        max_length=4096,
        description="The caller's anonymous token (POST /api/anonymous), when it is not sent as "
        "the bearer token; ignored with a user token. Anything else here identifies nobody.",
    )
    attachments: list[str] = Field(
        default_factory=list,
        max_length=5,
        description="Ids from POST /api/attachments, uploaded in the same conversation.",
    )
    request_ticket: bool = Field(
        False, description="Hand the conversation to a technician (the chat's ticket button)."
    )


class ChatRead(AnswerBody):
    """The assistant's reply to one message."""

    conversation_id: str
    turn_id: str
    trace_id: str | None


class FeedbackCreate(BaseModel):
    """A 1 to 5 rating of one answered turn of the caller's."""

    turn_id: str = Field(max_length=128)
    score: int = Field(ge=1, le=5, strict=True)
    comment: str | None = Field(
        None,
        max_length=2000,
        description="Kept only after redaction (personal and secret data removed); never sent "
        "back.",
    )
    user_id: str | None = Field(
        None,
        max_length=4096,
        description="The caller's anonymous token, when it is not sent as the bearer token; "
        "ignored with a user token. Anything else here identifies nobody.",
    )


class FeedbackRead(BaseModel):
    """A recorded rating: never its comment, which is kept only once redacted."""

    turn_id: str
    score: int
    recorded_at: str
    comment_received: bool = Field(
        description="A comment came with the rating; it is kept once the redactor has removed "
        "personal and secret data from it."
    )


class AnonymousRead(BaseModel):
    """A new anonymous user and the token that proves it."""

    anonymous_token: str = Field(description="Send as `Authorization: Bearer <token>`.")
    user_id: str = Field(examples=["anon:3q2-7wEa1k9oXb4nT0Zc8g"])
    expires_at: int = Field(description="When the token expires (epoch seconds).")


class TurnRead(BaseModel):
    """A turn as the client can fetch it after a disconnect."""

    turn_id: str
    status: Literal["pending", "done"]
    answer: ChatRead | None = None


class HealthRead(BaseModel):
    """Dependencies and service heartbeats; 503 when any is down."""

    status: Literal["ok", "degraded"]
    dependencies: dict[str, bool]
    services: dict[str, int] = Field(description="Live processes per service.")
    problems: list[str]


DocumentState = Literal["queued", "indexed", "failed", "deleted"]


class DocumentAccepted(BaseModel):
    """An upload or a deletion was accepted; the indexer works on it in the background."""

    id: str = Field(description="The document's id; poll GET /api/documents/{id}.")
    status: Literal["queued"] = "queued"


class DocumentRead(BaseModel):
    """Where an uploaded document stands."""

    id: str
    status: DocumentState = Field(
        description="queued (waiting for the indexer), indexed, failed or deleted."
    )
    chunks: int = Field(0, description="Chunks of the document in the index.")
    detail: str | None = Field(None, description="Why it failed, or what was done last.")


class AttachmentRead(AttachmentSummary):
    """An attachment as read and redacted: reference its id in a chat message."""

    conversation_id: str
    status: Literal["pending", "ready"] = Field(
        description="ready once read and redacted; pending while the ocr service reads it."
    )


class SyncAccepted(BaseModel):
    """A source sync was queued; one indexer replica runs it."""

    request_id: str = Field(
        description="Correlation id of the request: its `source.sync.completed` event and audit "
        "record carry it."
    )


class PurgeAccepted(BaseModel):
    """A purge was queued; every service deletes what it keeps of the conversation.

    The conversation id is not repeated: an answer never echoes what the caller sent."""

    purge_id: str = Field(
        description="Correlation id of the purge: each service's confirmation on the audit "
        "stream carries it."
    )
    status: Literal["queued"] = "queued"


class TicketRead(TicketRecord):
    """A ticket as the ticketing service last reported it."""

    last_change: TicketChange | None = Field(
        None, description="What the ticketing service last did to it (created, commented...)."
    )


INCIDENT_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
"""An incident's id: stable per incident, letters, digits and ``_.:-`` (the MCP tools check
ids against it before they look one up)."""


class IncidentCreate(Incident):
    """An incident reported by a status page or monitoring system."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        min_length=1,
        max_length=128,
        pattern=INCIDENT_ID_PATTERN,
        examples=["inc-2026-031"],
        description="Stable per incident: later reports with the same id update it.",
    )
    title: str = Field(min_length=1, max_length=500)
    status: str = Field(
        min_length=1,
        max_length=64,
        examples=["investigating", "identified", "monitoring", "resolved"],
    )
    affected_services: list[str] = Field(
        default_factory=list, max_length=50, examples=[["VPN", "GlobalProtect"]]
    )
    error_signatures: list[str] = Field(default_factory=list, max_length=50)
    latest_update: str | None = Field(None, max_length=4000)


class IncidentAccepted(BaseModel):
    """The incident was queued for the orchestrator and the ticketing service."""

    id: str
    status: Literal["queued"] = "queued"


class AuditEntryRead(BaseModel):
    """One recorded agent action (already redacted by the service that recorded it)."""

    entry_id: str = Field(description="The audit stream's entry id; orders the records.")
    event_id: str
    occurred_at: datetime
    conversation_id: str
    correlation_id: str = Field(description="The turn (or request) the action belongs to.")
    trace_id: str | None
    service: str
    action: str = Field(examples=["retrieval", "decision", "ticket", "purge"])
    reason: str
    details: dict[str, str | int | float | bool | None]

    @classmethod
    def of(cls, entry_id: str, record: AuditRecorded) -> AuditEntryRead:
        return cls(
            entry_id=entry_id,
            event_id=record.event_id,
            occurred_at=record.occurred_at,
            conversation_id=record.conversation_id,
            correlation_id=record.correlation_id,
            trace_id=record.trace_id,
            service=record.service,
            action=record.action,
            reason=record.reason,
            details=record.details,
        )


class AuditRead(BaseModel):
    """A conversation's audit records, oldest first."""

    conversation_id: str
    records: list[AuditEntryRead]
    scanned: int = Field(description="Audit entries read, newest first, to find them.")
    complete: bool = Field(
        description="False when the scan stopped at GATEWAY_AUDIT_SCAN entries or at `limit` "
        "records before reaching the oldest entry: older records may exist."
    )


ProposalStatus = Literal["pending", "approving", "approved", "rejected"]


DraftStatus = Literal["requested", "created", "failed"]


class ProposalDraftRead(BaseModel):
    """The approved article written as a draft into a knowledge source (never published)."""

    source: str = Field(description="The configured source it goes to.", examples=["it-wiki"])
    status: DraftStatus = Field(
        description="requested: the indexer is writing it (a source that is down is retried); "
        "created: `url` opens it; failed: `error` says why."
    )
    url: str | None = Field(None, description="Where a person reviews and publishes the draft.")
    error: str | None = None
    missing_permission: str | None = Field(
        None,
        description="What the source's account or app lacks, when it refused (HTTP 403).",
        examples=["Sites.ReadWrite.All"],
    )
    requested_at: datetime
    completed_at: datetime | None = None


class ProposalDraftCreate(BaseModel):
    """Where to write an approved proposal as a draft."""

    target: str = Field(
        description="A configured knowledge source (GET /api/admin/sources), Confluence or "
        "SharePoint: the article becomes a draft page there, for a person to publish.",
        examples=["it-wiki"],
        max_length=63,
    )


class ProposalApprove(BaseModel):
    """Optional choices of an approval."""

    target: str | None = Field(
        None,
        description="A configured knowledge source to also write the article into as a draft "
        "(see ProposalDraftCreate); none: the knowledge base only.",
        examples=["it-wiki"],
        max_length=63,
    )


class ProposalSummary(BaseModel):
    """A knowledge-base update proposal in the review queue."""

    id: str
    title: str
    status: ProposalStatus
    revision: int = Field(description="Grows each time the gap's questions changed.")
    questions: int = Field(description="How many questions the gap holds.")
    signals: dict[GapSignal, int] = Field(description="Questions by what made them a gap.")
    affected_article_url: str | None = None
    drafted_at: datetime


class ProposalList(BaseModel):
    """Proposals, most recently drafted first."""

    proposals: list[ProposalSummary]


class ProposalRead(BaseModel):
    """A proposal with its questions, proposed article, sources and the review decision."""

    id: str
    title: str
    status: ProposalStatus
    revision: int
    questions: list[ProposedQuestion]
    article_markdown: str
    sources: list[ProposalSource]
    affected_article_url: str | None = None
    affected_article_title: str | None = None
    drafted_at: datetime
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str | None = Field(None, description="Why it was rejected.")
    document_id: str | None = Field(
        None, description="The knowledge-base document an approval created (GET /api/documents)."
    )
    draft: ProposalDraftRead | None = Field(
        None, description="The draft written into a knowledge source, when one was asked for."
    )


class ProposalReject(BaseModel):
    """Why a proposal is dismissed."""

    reason: str = Field(min_length=1, max_length=500, examples=["Covered by the VPN article."])


# -- analytics (GET /api/admin/analytics) ----------------------------------------------------------


class Count(BaseModel):
    """A name and how often it occurred."""

    name: str
    count: int


class DeflectionRead(BaseModel):
    rate: float | None = Field(description="deflected / support_turns; null without turns.")
    deflected: int
    support_turns: int
    definition: str


class EscalationRead(BaseModel):
    rate: float | None
    escalated: int
    reasons: list[Count] = Field(description="By EscalationReason, most frequent first.")
    definition: str


class CsatRead(BaseModel):
    average: float | None = Field(description="Average rating 1-5; null without ratings.")
    ratings: int
    distribution: dict[str, int] = Field(description='Ratings per score, "1" to "5".')
    definition: str


class UnansweredTopic(BaseModel):
    topic: str = Field(description="The group: content words of the questions.")
    count: int
    example: str = Field(description="The latest question of the group, redacted.")


class CrawlRead(BaseModel):
    jobs: int
    pages: int
    endings: list[Count] = Field(description="Why jobs ended: max_pages, deadline, ...")
    crawl_turns: int = Field(description="Turns that had the help sites read for them.")
    answered: int = Field(description="Of those, turns then answered (answer or checklist).")
    hit_rate: float | None
    definition: str


class LatencyRead(BaseModel):
    answers: int
    p50_ms: float | None
    p95_ms: float | None
    definition: str


class CitedDocumentRead(BaseModel):
    """A document answers cited: how often, and how users rated the answers that cited it."""

    url: str
    cited: int
    ratings: int
    average: float | None


class GroupLag(BaseModel):
    group: str
    lag: int | None = Field(description="Entries not yet read by the group (null: unknown).")
    pending: int = Field(description="Read but not acknowledged.")
    consumers: int


class StreamRead(BaseModel):
    stream: str
    length: int
    groups: list[GroupLag]


class DeadLetterRead(BaseModel):
    stream: str
    depth: int


class BusRead(BaseModel):
    streams: list[StreamRead]
    dead_letters: list[DeadLetterRead] = Field(description="Only dead-letter streams not empty.")
    dead_letter_total: int
    definition: str


class DayRead(BaseModel):
    day: date
    turns: int
    support_turns: int
    deflected: int
    deflection_rate: float | None
    escalated: int
    no_answer: int
    ratings: int
    csat_average: float | None
    p50_ms: float | None
    p95_ms: float | None


class AnalyticsRead(BaseModel):
    """Support analytics of a period of whole UTC days."""

    model_config = ConfigDict(populate_by_name=True)

    from_: date = Field(alias="from", serialization_alias="from")
    to: date
    generated_at: datetime
    turns: int = Field(description="Every answered turn, whatever its action.")
    support_turns: int
    deflection: DeflectionRead
    escalation: EscalationRead
    csat: CsatRead
    intents: list[Count] = Field(description="Turns per action the assistant took.")
    categories: list[Count]
    unanswered: list[UnansweredTopic]
    crawl: CrawlRead
    latency: LatencyRead
    documents: list[CitedDocumentRead] = Field(description="Most cited documents, with ratings.")
    bus: BusRead
    daily: list[DayRead] = Field(description="One entry per day of the period, oldest first.")
    definitions: dict[str, str]


# -- runtime configuration (/api/admin/config) -----------------------------------------------------


class ConfigFieldRead(BaseModel):
    """One editable setting: its effective value, its default and how to edit it."""

    name: str = Field(examples=["relevance_threshold"])
    service: str = Field(description="The service it tunes.", examples=["orchestrator"])
    kind: str = Field(description="int, float, urls, domains or queues.", examples=["float"])
    description: str
    minimum: float | None = Field(None, description="Smallest value allowed, when bounded.")
    maximum: float | None = Field(None, description="Largest value allowed, when bounded.")
    value: Any = Field(description="In force now (the override, else the default).")
    default: Any = Field(
        description="The service's own setting; null when the service never started."
    )
    overridden: bool


class ConfigRead(BaseModel):
    """The runtime configuration: effective values, defaults and what admins overrode."""

    version: int = Field(description="Send it back with a change; 0 before the first change.")
    updated_at: datetime | None
    updated_by: str | None
    values: dict[str, Any] = Field(description="Every setting's value in force.")
    overridden: list[str] = Field(description="Settings an admin changed from the default.")
    fields: list[ConfigFieldRead]


class ConfigUpdate(BaseModel):
    """A partial change: only the settings named in ``changes`` change; null restores the
    service's default."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=0, description="The version the change is based on (from GET).")
    changes: RuntimeOverrides = Field(
        examples=[{"relevance_threshold": 0.5, "clarify_cap": None}],
    )
