"""Translate bus messages into orchestrator calls and results into reply events."""

from __future__ import annotations

import asyncio
import logging

from contracts.bus import Bus, Delivery
from contracts.events import (
    AnswerBody,
    AttachmentRedacted,
    AuditRecorded,
    ChunksIndexed,
    ContextInsufficient,
    ConversationPurged,
    CrawlFinished,
    CrawlStop,
    EscalationRequested,
    FeedbackRecorded,
    IncidentReported,
    QueryReceived,
    TicketEvent,
    TicketStatusRequested,
    TurnReply,
)
from contracts.topics import Group, Topic
from contracts.tracing import current_trace_id
from orchestrator.attachments import AttachmentStore
from orchestrator.embedding import one_embedding_per_text
from orchestrator.feedback import FeedbackBoosts
from orchestrator.incidents import IncidentStore
from orchestrator.service import Orchestrator
from orchestrator.state import TurnState, TurnStore
from orchestrator.turn.deps import AuditNote

log = logging.getLogger("deskpilot.orchestrator")

UNANSWERED_QUESTION_CHARS = 300


class BusReplies:
    """Sends a turn's progress and answer to the reply stream named in the turn."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        reply = _reply(turn, kind="progress", stage=stage, detail=detail)
        await self.bus.publish(turn.reply_to, reply)

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        await self.bus.publish(turn.reply_to, _reply(turn, kind="answer", body=body))


class BusFleet:
    """Crawl requests and early stops for the crawler fleet."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def request(self, request: ContextInsufficient) -> None:
        await self.bus.publish(Topic.CONTEXT_INSUFFICIENT, request)

    async def stop(self, turn: TurnState, job_id: str) -> None:
        stop = CrawlStop(
            correlation_id=turn.correlation_id,
            conversation_id=turn.conversation_id,
            job_id=job_id,
            reason="enough",
        )
        await self.bus.publish(Topic.CRAWL_STOP, stop)


class BusTicketDesk:
    """Ticket requests and status questions for the ticketing service."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def request(self, escalation: EscalationRequested) -> None:
        await self.bus.publish(Topic.ESCALATION_REQUESTED, escalation)

    async def status(self, request: TicketStatusRequested) -> None:
        await self.bus.publish(Topic.TICKET_STATUS_REQUESTED, request)


class BusAudit:
    """Agent actions on the durable audit stream, with the turn's trace id."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def record(self, turn: TurnState, *notes: AuditNote) -> None:
        trace_id = current_trace_id()
        async with self.bus.batch() as batch:
            for note in notes:
                await batch.publish(Topic.AUDIT, _audit_record(turn, note, trace_id))

    async def publish(self, record: AuditRecorded) -> None:
        await self.bus.publish(Topic.AUDIT, record)


def _audit_record(turn: TurnState, note: AuditNote, trace_id: str | None) -> AuditRecorded:
    details = dict(note.details)
    if note.action == "decision":
        # The redacted question: the analytics' unanswered topics and the indexer's gaps
        # (unanswered, escalated and badly rated questions) read it.
        details["question"] = turn.question.split("\n", 1)[0][:UNANSWERED_QUESTION_CHARS]
    return AuditRecorded.model_validate(
        {
            "correlation_id": turn.correlation_id,
            "conversation_id": turn.conversation_id,
            "service": "orchestrator",
            "action": note.action,
            "reason": note.reason,
            "trace_id": trace_id,
            "details": details,
        }
    )


def _reply(turn: TurnState, **fields: object) -> TurnReply:
    return TurnReply.model_validate(
        {"correlation_id": turn.correlation_id, "conversation_id": turn.conversation_id, **fields}
    )


def register(bus: Bus, orchestrator: Orchestrator, concurrency: int) -> BusReplies:
    replies = BusReplies(bus)

    async def on_query(event: QueryReceived, _: Delivery) -> None:
        with one_embedding_per_text():  # the question is embedded once for the whole turn
            await orchestrator.handle_query(event, replies)

    async def on_indexed(event: ChunksIndexed, _: Delivery) -> None:
        if event.job_id is None:
            # An upload: make it searchable here now (other replicas see it within seconds).
            await asyncio.to_thread(orchestrator.deps.retriever.refresh, force=True)
            return
        with one_embedding_per_text():
            await orchestrator.resume(event.correlation_id, replies, indexed=event)

    async def on_finished(event: CrawlFinished, _: Delivery) -> None:
        with one_embedding_per_text():
            await orchestrator.resume(event.correlation_id, replies, finished=len(event.pages))

    bus.subscribe(
        Topic.QUERY_RECEIVED,
        QueryReceived,
        on_query,
        group=Group.ORCHESTRATOR,
        concurrency=concurrency,
    )
    bus.subscribe(
        Topic.CHUNKS_INDEXED,
        ChunksIndexed,
        on_indexed,
        group=Group.ORCHESTRATOR,
        concurrency=concurrency,
    )
    bus.subscribe(Topic.CRAWL_FINISHED, CrawlFinished, on_finished, group=Group.ORCHESTRATOR)

    async def on_ticket(event: TicketEvent, _: Delivery) -> None:
        await orchestrator.on_ticket_event(event, replies)

    bus.subscribe(
        Topic.TICKET_EVENTS, TicketEvent, on_ticket, group=Group.ORCHESTRATOR, concurrency=2
    )

    async def on_purge(event: ConversationPurged, _: Delivery) -> None:
        deleted = await orchestrator.purge(event.conversation_id)
        await bus.publish(Topic.AUDIT, event.confirmation("orchestrator", keys=deleted))

    bus.subscribe(Topic.CONVERSATION_PURGED, ConversationPurged, on_purge, group=Group.ORCHESTRATOR)
    return replies


def register_attachments(bus: Bus, store: AttachmentStore) -> None:
    async def on_attachment(event: AttachmentRedacted, _: Delivery) -> None:
        await store.put(event)

    bus.subscribe(
        Topic.ATTACHMENT_REDACTED, AttachmentRedacted, on_attachment, group=Group.ORCHESTRATOR
    )


def register_incidents(bus: Bus, store: IncidentStore) -> None:
    async def on_incident(event: IncidentReported, _: Delivery) -> None:
        outcome = await store.apply(event)
        log.info("incident", extra={"incident_id": event.incident.id, "outcome": outcome})

    bus.subscribe(Topic.INCIDENT_REPORTED, IncidentReported, on_incident, group=Group.ORCHESTRATOR)


def register_feedback(bus: Bus, boosts: FeedbackBoosts, turns: TurnStore) -> None:
    async def on_feedback(event: FeedbackRecorded, _: Delivery) -> None:
        urls = event.cited_urls
        if not urls and event.action is None:
            # From a gateway that does not send the answer's context: the turn's own answer.
            turn = await turns.get(event.turn_id)
            urls = [c.url for c in turn.answer.citations] if turn and turn.answer else []
        await boosts.on_feedback(event, urls)

    bus.subscribe(Topic.FEEDBACK_RECORDED, FeedbackRecorded, on_feedback, group=Group.ORCHESTRATOR)
