"""The steps before the knowledge base: what the conversation asks of the service desk rather
than of the knowledge base (a ticket, a person, an approved automation, news of an outage)."""

from __future__ import annotations

from dataclasses import replace

from contracts.events import Action, EscalationReason
from orchestrator.automations import (
    Failed,
    Offer,
    ReplyResult,
    SelfService,
    StartResult,
    UserContext,
    audit_event,
)
from orchestrator.compose import compose_text
from orchestrator.dialogue import checklist_feedback
from orchestrator.escalation import OfferReply, detect_status_question, read_offer_reply
from orchestrator.incidents import incident_notice
from orchestrator.sentiment import Trajectory
from orchestrator.turn.base import (
    Answer,
    CheckTicket,
    Escalate,
    Reply,
    Section,
    Step,
    Turn,
    first_reply,
)

NO_TICKET_TEXT = "Alright, no ticket. Is there anything else I can help with?"


class CheckpointStep(Step):
    """Ticket status questions, requests for a person or a ticket (in words or with the ticket
    button), the reply to a ticket offer, and anger (:mod:`orchestrator.escalation`). Needs the
    ticket desk."""

    name = "checkpoint"
    section = Section.CONVERSATION

    async def __call__(self, turn: Turn) -> Reply | None:
        query, conversation = turn.query, turn.conversation
        if turn.deps.desk is None or query is None:
            return None
        text = query.text
        if not query.request_ticket and (status := detect_status_question(text)):
            return CheckTicket(key=status.ticket_key)
        decision = turn.checkpoint.check(text, trajectory(turn, text))
        reason, detail = decision.reason, decision.reason_detail
        if query.request_ticket:
            reason, detail = EscalationReason.USER_REQUEST, "the user pressed the ticket button"
        if reason is None and (offer := conversation.ticket_offer):
            conversation.ticket_offer = None
            answer = read_offer_reply(text)
            if answer is OfferReply.ACCEPT:
                reason = EscalationReason.LOW_CONFIDENCE
                detail = f"accepted the ticket offered because: {offer}"
            elif answer is OfferReply.DECLINE:
                body = compose_text(NO_TICKET_TEXT, Action.ANSWER)
                return Answer(body=body, reason="ticket offer declined")
        if reason is None:
            return None
        return Escalate(cause=reason, reason=detail, sentiment=decision.anger.score)


def trajectory(turn: Turn, text: str) -> Trajectory:
    """How the conversation went so far, for the anger score."""
    conversation = turn.conversation
    checklist = conversation.checklist
    checklist_tried = checklist.tried if checklist else []
    failed = sum(1 for t in [*conversation.tried, *checklist_tried] if t.outcome == "failed")
    answering = (
        checklist is not None
        and checklist.current < len(checklist.steps)
        and checklist_feedback(text) is not None
    )
    return Trajectory(
        failed_steps=failed,
        # Answers to checklist steps are not questions asked again.
        previous_questions=tuple(
            said.question
            for said in conversation.history
            if checklist_feedback(said.question) is None
        ),
        clarify_cap_reached=conversation.clarify_rounds >= turn.settings.clarify_cap,
        answering_step=answering,
    )


class AutomationStep(Step):
    """An allow-listed automation the message asks for (offered, then run on an explicit yes
    from the same, authenticated user: :mod:`orchestrator.automations`), or the answer to a
    pending offer. Self-service answers quote the knowledge base's own article."""

    name = "automation"
    section = Section.CONVERSATION

    async def __call__(self, turn: Turn) -> Reply | None:
        runner, query, conversation = turn.deps.automations, turn.query, turn.conversation
        if runner is None or not runner.automations or query is None:
            return None
        user = UserContext(query.user_id, query.authenticated)
        result: StartResult | ReplyResult | None = None
        if (pending := conversation.pending_automation) is not None:
            conversation.pending_automation = None
            result = await runner.reply(pending, query.text, user, query.correlation_id)
        if result is None:
            result = runner.start(query.text, user, query.correlation_id)
        if result is None:
            return None
        state = turn.state
        await turn.deps.audit.publish(
            audit_event(result.audit, state.correlation_id, state.conversation_id)
        )
        reason = f"automation {result.action}: {result.audit['outcome']}"
        if isinstance(result, Offer):
            conversation.pending_automation = result.pending
        body = compose_text(result.text, Action.AUTOMATION)
        if isinstance(result, SelfService | Failed):
            # The knowledge base's own article, cited, rather than a bare link.
            _, article = await first_reply(replace(turn, allow_crawl=False), turn.steps.question)
            if isinstance(article, Answer) and article.body.action in (
                Action.ANSWER,
                Action.CHECKLIST,
            ):
                body = article.body
                body.answer = f"{result.text}\n\n{body.answer}"
                body.action = Action.ANSWER
                body.checklist = None
            reason = f"{reason}; {article.reason}"
        offer_ticket = isinstance(result, Failed) and result.offer_ticket
        return Answer(
            body=body,
            reason=reason,
            ticket_offer=f"automation {result.action} failed" if offer_ticket else None,
        )


class IncidentStep(Step):
    """A message about an ongoing incident the user was not told about yet: what is known,
    instead of troubleshooting; a "yes" to it files a ticket linked to the incident."""

    name = "incident"
    section = Section.CONVERSATION

    async def __call__(self, turn: Turn) -> Reply | None:
        incident = turn.incident
        if incident is None or incident.id in turn.conversation.incidents_told:
            return None
        turn.conversation.incidents_told.append(incident.id)
        body = compose_text(incident_notice(incident), Action.ANSWER)
        body.incident = turn.state.incident
        reason = f"ongoing incident {incident.id}"
        return Answer(body=body, reason=reason, ticket_offer=reason)
