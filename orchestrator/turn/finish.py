"""The end of a turn: what its reply asks for (:func:`carry_out`). An answer is recorded and
sent (:func:`finish`); a ticket, a crawl or a ticket's status is asked for, and the turn waits
in Redis for the answer (or its deadline), holding no worker."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import assert_never

from contracts.events import (
    Action,
    AnswerBody,
    ContextInsufficient,
    CrawlBudget,
    EscalationReason,
    TicketStatusRequested,
)
from contracts.ids import derived_event_id
from orchestrator.dialogue import readable
from orchestrator.memory import Conversation
from orchestrator.state import TurnStatus
from orchestrator.tickets import build_escalation, problem_words, requester
from orchestrator.turn.base import CRAWL_STARTED, Answer, CheckTicket, Crawl, Escalate, Reply, Turn
from orchestrator.turn.deps import AuditDetail, RepliesWithRecords
from orchestrator.unanswered import unanswered, unsure

log = logging.getLogger("deskpilot.orchestrator")


async def carry_out(turn: Turn, reply: Reply) -> None:
    """Answer now, file a ticket, start a crawl or ask for a ticket's status."""
    match reply:
        case Answer():
            if reply.resolved is not None:
                await record_resolved(turn, reply.resolved)
            await finish(turn, reply.body, reply.reason, ticket_offer=reply.ticket_offer)
        case Escalate():
            await escalate(turn, reply)
        case Crawl():
            await start_crawl(turn, reply.reason)
        case CheckTicket():
            await check_ticket(turn, reply)
        case _:
            assert_never(reply)


async def finish(
    turn: Turn, body: AnswerBody, reason: str, *, ticket_offer: str | None = None
) -> None:
    """Record the turn as answered (with the conversation) and send the answer.

    A ``no_answer`` offers a ticket (and a "yes" files it), as does an answer with a
    ``ticket_offer`` or one the critique is unsure of; any other answer withdraws an earlier
    offer.
    """
    state, conversation = turn.state, turn.conversation
    body.redaction_notice = state.redaction_notice
    body.crawled = state.crawl_job_id is not None
    if state.attachment_note and body.action is not Action.REFUSE:
        body.answer = f"{state.attachment_note}\n\n{body.answer}"
    if body.incident is None and state.incident is not None:
        body.incident = state.incident
    if body.category is None and body.action not in (Action.REFUSE, Action.CLARIFY):
        body.category = conversation.category
    state.status, state.answer, state.reason = TurnStatus.ANSWERED, body, reason
    conversation.remember(
        state.question,
        body.action.value,
        body.citations[0].url if body.citations else None,
        body.answer,
    )
    settings, judged = turn.settings, turn.judged
    if ticket_offer is None and (
        body.action is Action.NO_ANSWER or unsure(judged, settings.critique_min_confidence)
    ):
        ticket_offer = reason
    conversation.ticket_offer = ticket_offer
    log.info("decided", extra={"action": body.action.value, "reason": reason})
    confidence = turn.retrieved.confidence if turn.retrieved is not None else None
    intent = turn.read_intent
    # A turn not answered has no topic, so no category on its answer: the intent's is the
    # one whose people hear about it (orchestrator.unanswered).
    category = body.category or (
        intent.category if intent is not None and not intent.conversational else None
    )
    turn.note(
        "decision",
        reason,
        outcome=body.action.value,
        category=category,
        confidence=None if confidence is None else round(confidence, 4),
        critique=None if judged is None else round(judged, 4),
        notice=unanswered(
            body.action,
            confidence,
            settings.notice_confidence,
            judged=judged,
            judged_threshold=settings.critique_min_confidence,
        ),
    )
    notes = list(turn.audit_notes)
    turn.audit_notes.clear()
    if isinstance(turn.replies, RepliesWithRecords):
        # Memory, turn state, audit trail and answer: one write, all or nothing.
        await turn.replies.answer_recorded(state, body, conversation, notes)
        return
    # Recorded (memory, turn state, audit trail) at once, then sent.
    await asyncio.gather(
        turn.deps.conversations.save(conversation),
        turn.deps.turns.save(state),
        turn.deps.audit.record(state, *notes),
    )
    await turn.replies.answer(state, body)


async def audit(turn: Turn, action: str, reason: str, **details: AuditDetail) -> None:
    """Record ``action`` in the audit trail, after what the turn's steps noted, in one write."""
    turn.note(action, reason, **details)
    await publish_notes(turn)


async def publish_notes(turn: Turn) -> None:
    """Publish the audit records the turn's steps noted and nothing published yet."""
    notes = list(turn.audit_notes)
    turn.audit_notes.clear()
    if notes:
        await turn.deps.audit.record(turn.state, *notes)


async def escalate(turn: Turn, reply: Escalate) -> None:
    """Ask the ticketing service for a ticket; the turn waits in Redis for its answer (or its
    deadline, after which the user is told a ticket will follow)."""
    deps, state, conversation = turn.deps, turn.state, turn.conversation
    desk, waits = deps.desk, deps.waits
    if desk is None or waits is None:
        raise RuntimeError("escalating needs the ticket desk and the waits store")
    if conversation.topic is None and problem_words(state.question):
        # A first message that says what is wrong besides asking for a person.
        intent = await asyncio.to_thread(deps.intents.classify, readable(state.question))
        conversation.new_topic(state.question, intent.category)
    queue = deps.intents.queues.get(conversation.category or "")
    sentiment = reply.sentiment
    escalation = build_escalation(
        state,
        conversation,
        reason=reply.cause,
        reason_detail=reply.reason,
        queue=queue,
        sentiment=None if sentiment is None else round(sentiment, 3),
        incident_id=state.incident.id if state.incident else conversation.incident_id,
    )
    state.status, state.ticket_queue = TurnStatus.ESCALATING, queue
    state.reason = f"escalated ({reply.cause.value}): {reply.reason}"
    conversation.ticket_offer = None
    await asyncio.gather(deps.conversations.save(conversation), deps.turns.save(state))
    await waits.wait(state.correlation_id, time.time() + turn.settings.ticket_wait_s)
    await desk.request(escalation)
    log.info("decided", extra={"action": Action.ESCALATED.value, "reason": state.reason})
    await audit(turn, "ticket", state.reason, queue=queue, topic=escalation.topic)
    await turn.replies.progress(state, "creating_ticket", "creating a ticket")


async def record_resolved(turn: Turn, resolved: Conversation) -> None:
    """A silent ticket for a conversation the assistant resolved (for analytics and as a
    future past case); the ticketing service files it only with TICKETING_SILENT_TICKETS."""
    desk, state = turn.deps.desk, turn.state
    if desk is None:
        return
    silent = build_escalation(
        state,
        resolved,
        reason=EscalationReason.RESOLVED,
        reason_detail="resolved by the assistant's checklist",
        queue=turn.deps.intents.queues.get(resolved.category or ""),
        sentiment=None,
        incident_id=resolved.incident_id,
    )
    silent.event_id = derived_event_id("resolved", state.correlation_id)
    silent.idempotency_key = f"resolved:{state.correlation_id}"
    silent.reply_to = None
    await desk.request(silent)


async def start_crawl(turn: Turn, reason: str) -> None:
    """Ask the fleet to read the help sites; the turn waits in Redis, no worker waits."""
    deps, settings, state = turn.deps, turn.settings, turn.state
    fleet, waits = deps.fleet, deps.waits
    if fleet is None or waits is None:
        raise RuntimeError("crawling needs a crawler fleet and the waits store")
    state.status, state.reason = TurnStatus.CRAWLING, reason
    state.crawl_job_id = state.correlation_id
    await deps.conversations.save(turn.conversation)
    await deps.turns.save(state)
    deadline = time.time() + settings.crawl_deadline_s + settings.crawl_grace_s
    await waits.wait(state.correlation_id, deadline)
    await fleet.request(
        ContextInsufficient(
            correlation_id=state.correlation_id,
            conversation_id=state.conversation_id,
            question=state.crawl_question or state.question,
            focus=state.crawl_focus,
            seed_urls=settings.crawl_seed_urls,
            allowed_domains=settings.crawl_allowed_domains,
            budget=CrawlBudget(
                max_pages=settings.crawl_max_pages,
                max_depth=settings.crawl_max_depth,
                deadline_s=settings.crawl_deadline_s,
                concurrency=settings.crawl_concurrency,
            ),
            job_id=state.crawl_job_id,
            reply_to=state.reply_to,
        )
    )
    log.info("decided", extra={"action": Action.CRAWL.value, "reason": reason})
    await audit(turn, "crawl_request", reason, seeds=len(settings.crawl_seed_urls))
    await turn.replies.progress(state, "crawling", CRAWL_STARTED)


async def check_ticket(turn: Turn, reply: CheckTicket) -> None:
    """Ask the ticketing service for the status of the ticket named (or the user's latest);
    the turn waits in Redis for the answer."""
    deps, state = turn.deps, turn.state
    desk, waits = deps.desk, deps.waits
    if desk is None or waits is None:
        raise RuntimeError("ticket status needs the ticket desk and the waits store")
    state.status, state.ticket_key_asked = TurnStatus.CHECKING_TICKET, reply.key
    state.reason = reply.reason
    await deps.turns.save(state)
    await waits.wait(state.correlation_id, time.time() + turn.settings.ticket_wait_s)
    await desk.status(
        TicketStatusRequested(
            event_id=state.correlation_id,
            correlation_id=state.correlation_id,
            conversation_id=state.conversation_id,
            user_id=requester(state),
            reply_to=state.reply_to,
            key=reply.key,
        )
    )
    await turn.replies.progress(state, "checking_ticket", "reading your ticket's status")
