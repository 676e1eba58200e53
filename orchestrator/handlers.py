"""Translate bus messages into orchestrator calls and results into reply events."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Sequence

from contracts.bus import Batch, Bus, Delivery
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
    SearchRequested,
    SiteMapped,
    TicketEvent,
    TicketStatusRequested,
    TurnReply,
)
from contracts.ids import derived_event_id
from contracts.topics import REPLY_PREFIX, Group, Topic
from contracts.tracing import current_trace_id
from orchestrator import search
from orchestrator.attachments import AttachmentStore
from orchestrator.embedding import one_embedding_per_text
from orchestrator.feedback import FeedbackBoosts
from orchestrator.incidents import IncidentStore
from orchestrator.memory import Conversation, ConversationStore
from orchestrator.retrieval import Retriever
from orchestrator.service import Orchestrator
from orchestrator.sites import read_nothing_new
from orchestrator.state import TurnState, TurnStore
from orchestrator.turn.deps import AuditNote
from orchestrator.unanswered import notice_of

log = logging.getLogger("deskpilot.orchestrator")

UNANSWERED_QUESTION_CHARS = 300


class BusReplies:
    """Sends a turn's progress and answer to the reply stream named in the turn.

    Progress is not waited for: :meth:`progress` queues it and a task of the turn writes it
    while the turn goes on (the search, the composition). The answer comes after every progress
    of its turn: progress still queued goes in the answer's own write, progress being written is
    waited for first. A handler waits for its turns' progress (:meth:`drain`) before its message
    is acknowledged.
    """

    def __init__(
        self,
        bus: Bus,
        turns: TurnStore | None = None,
        conversations: ConversationStore | None = None,
    ) -> None:
        self.bus = bus
        self.turns = turns
        self.conversations = conversations
        self._queued: dict[str, list[TurnReply]] = {}
        self._writing: dict[str, asyncio.Task[None]] = {}
        self._asked_by: dict[str, Delivery] = {}

    @contextlib.contextmanager
    def acknowledging(self, correlation_id: str, delivery: Delivery) -> Iterator[None]:
        """Within the block, the turn's answer (:meth:`answer_recorded`) acknowledges
        ``delivery``, the message that asked for it, in the answer's own write: one round trip
        less, and the answer and the end of its question are written together."""
        self._asked_by[correlation_id] = delivery
        try:
            yield
        finally:
            self._asked_by.pop(correlation_id, None)

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        reply = _reply(turn, kind="progress", stage=stage, detail=detail)
        key = turn.correlation_id
        self._queued.setdefault(key, []).append(reply)
        if key not in self._writing:
            self._writing[key] = asyncio.create_task(self._write_progress(key, turn.reply_to))

    async def _write_progress(self, key: str, stream: str) -> None:
        try:
            while queued := self._queued.pop(key, None):
                async with self.bus.batch() as batch:
                    for reply in queued:
                        await batch.publish(stream, reply)
        except Exception as exc:  # the user misses a progress line; the answer still comes
            log.warning("progress not sent", extra={"error": type(exc).__name__})
        finally:
            del self._writing[key]

    async def _unwritten(self, key: str) -> list[TurnReply]:
        """The turn's progress not written yet, once the progress being written is written."""
        queued = self._queued.pop(key, [])
        if (writing := self._writing.get(key)) is not None:
            await asyncio.shield(writing)
        return queued

    async def drain(self, correlation_id: str) -> None:
        """Wait until the turn's progress is written."""
        while (writing := self._writing.get(correlation_id)) is not None:
            await asyncio.shield(writing)

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        queued = await self._unwritten(turn.correlation_id)
        async with self.bus.batch() as batch:
            for reply in [*queued, _reply(turn, kind="answer", body=body)]:
                await batch.publish(turn.reply_to, reply)

    async def answer_recorded(
        self,
        turn: TurnState,
        body: AnswerBody,
        conversation: Conversation,
        notes: Sequence[AuditNote],
    ) -> None:
        """The progress not written yet, the answer, the conversation, the turn's state and its
        audit records in one write, all or nothing (a crash before it leaves the turn to be taken
        again; after it, a redelivered query finds the turn answered). The replies come before
        the audit records, so the gateway's read of them is served first. Within
        :meth:`acknowledging`, the same write acknowledges the question's message."""
        if self.turns is None or self.conversations is None:
            raise RuntimeError("answer_recorded needs the turn and conversation stores")
        queued = await self._unwritten(turn.correlation_id)
        trace_id = current_trace_id()
        async with self.bus.batch(transaction=True) as batch:
            for reply in [*queued, _reply(turn, kind="answer", body=body)]:
                await batch.publish(turn.reply_to, reply)
            self.conversations.queue_save(batch.redis, conversation)
            self.turns.queue_save(batch.redis, turn)
            await _publish_records(batch, turn, notes, trace_id)
            if (asked_by := self._asked_by.pop(turn.correlation_id, None)) is not None:
                asked_by.ack_with(batch)


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
            await _publish_records(batch, turn, notes, trace_id)

    async def publish(self, record: AuditRecorded) -> None:
        await self.bus.publish(Topic.AUDIT, record)


async def _publish_records(
    batch: Batch, turn: TurnState, notes: Sequence[AuditNote], trace_id: str | None
) -> None:
    """The turn's audit records, each decision followed by the notice it calls for (a turn
    not answered, or answered with low confidence: :mod:`orchestrator.unanswered`)."""
    for note in notes:
        record = _audit_record(turn, note, trace_id)
        await batch.publish(Topic.AUDIT, record)
        if note.action == "decision":
            notice = notice_of(record.correlation_id, record.conversation_id, record.details)
            if notice is not None:
                await batch.publish(Topic.NOTICE_UNANSWERED, notice)


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
    replies = BusReplies(bus, orchestrator.deps.turns, orchestrator.deps.conversations)

    async def on_query(event: QueryReceived, delivery: Delivery) -> None:
        try:
            # The question is embedded once for the whole turn; its answer acknowledges it.
            with one_embedding_per_text(), replies.acknowledging(event.correlation_id, delivery):
                await orchestrator.handle_query(event, replies)
        finally:
            await replies.drain(event.correlation_id)

    async def on_indexed(event: ChunksIndexed, _: Delivery) -> None:
        if event.job_id is None:
            # An upload: make it searchable here now (other replicas see it within seconds).
            await asyncio.to_thread(orchestrator.deps.retriever.refresh, force=True)
            return
        try:
            with one_embedding_per_text():
                await orchestrator.resume(event.correlation_id, replies, indexed=event)
        finally:
            await replies.drain(event.correlation_id)

    async def on_finished(event: CrawlFinished, _: Delivery) -> None:
        if orchestrator.deps.sites is not None:
            await orchestrator.deps.sites.record(event.pages)
        try:
            with one_embedding_per_text():
                await orchestrator.resume(
                    event.correlation_id,
                    replies,
                    finished=len(event.pages),
                    read_nothing=read_nothing_new(event),
                )
        finally:
            await replies.drain(event.correlation_id)

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

    async def on_mapped(event: SiteMapped, _: Delivery) -> None:
        if orchestrator.deps.sites is not None:
            listed = await orchestrator.deps.sites.record_listed(event.pages)
            log.info("site profile mapped", extra={"site": event.site, "pages": listed})

    bus.subscribe(Topic.SITE_MAPPED, SiteMapped, on_mapped, group=Group.ORCHESTRATOR)

    async def on_ticket(event: TicketEvent, _: Delivery) -> None:
        try:
            await orchestrator.on_ticket_event(event, replies)
        finally:
            await replies.drain(event.correlation_id)

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


def register_search(bus: Bus, retriever: Retriever, concurrency: int) -> None:
    """Searches from other systems, answered on the asking gateway's reply stream."""

    async def on_search(event: SearchRequested, _: Delivery) -> None:
        if not event.reply_to.startswith(REPLY_PREFIX):
            # Answers go to a gateway's reply stream and nowhere else.
            log.warning("search without a reply stream dropped")
            return
        passages = await search.search(retriever, event)
        reply = TurnReply(
            event_id=derived_event_id("deskpilot", "search-reply", event.event_id),
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            kind="search",
            passages=passages,
        )
        await bus.publish(event.reply_to, reply)
        log.info("searched", extra={"passages": len(passages)})

    bus.subscribe(
        Topic.SEARCH_REQUESTED,
        SearchRequested,
        on_search,
        group=Group.ORCHESTRATOR,
        concurrency=concurrency,
    )
