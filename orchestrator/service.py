"""One user turn, from redacted question to reply. Knows nothing about the broker.

Per turn the agent decides among ``answer``, ``clarify``, ``checklist``, ``refuse`` and
``no_answer`` from the message, its learned intent, retrieval confidence and the conversation so
far, and logs each decision with its reason:

1. a report on the checklist step in progress ("done, still broken", "that fixed it") moves it on;
2. a greeting gets a greeting; a question outside IT support is declined politely;
3. a message too vague to search ("it's not working") gets targeted questions, at most
   ``clarify_cap`` rounds per topic, then a ticket offer;
4. otherwise the knowledge base is searched (a follow-up such as "im on linux" together with the
   active topic); below the relevance threshold the answer is an honest ``no_answer``;
5. when the best article has separate steps per operating system and the user's is unknown, the
   assistant asks for it once;
6. a troubleshooting request with a procedure of three or more steps becomes a checklist;
   anything else is answered by quoting the article's steps with citations.

With an LLM configured, the model reads the message in one call (scope, kind, category, asks for
a person: :func:`orchestrator.llm.read_message`) while the knowledge base is searched, and that
reading takes the learned classifier's place in the steps above; when the model fails, times out
or replies with anything but a valid reading, the classifier decides as it does without a model.
The reason logged says which one did. The model also words the answer from the retrieved
passages, and the user sees it being written (``writing`` progress).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

from contracts.events import (
    Action,
    AnswerBody,
    AuditRecorded,
    ChunksIndexed,
    Citation,
    ContextInsufficient,
    CrawlBudget,
    EscalationReason,
    EscalationRequested,
    QueryReceived,
    SimilarCase,
    TicketChange,
    TicketEvent,
    TicketStatusRequested,
)
from contracts.runtime_config import RuntimeConfigReader, StoredConfig
from orchestrator.attachments import (
    AttachmentStore,
    ConversationKeys,
    StoredAttachment,
    describe,
    search_context,
)
from orchestrator.automations import (
    AutomationRunner,
    Failed,
    Offer,
    ReplyResult,
    SelfService,
    StartResult,
    UserContext,
    audit_event,
)
from orchestrator.cases import CaseRetriever
from orchestrator.compose import (
    CAP_TEXT,
    GREETING_TEXT,
    MAX_CHECKLIST_STEPS,
    REFUSE_TEXT,
    choose_passage,
    compose_answer,
    compose_checklist,
    compose_checklist_step,
    compose_clarify,
    compose_text,
    os_sections,
    section_os,
    snippet,
    steps_of,
    whole_section,
)
from orchestrator.config import OrchestratorSettings
from orchestrator.crawl import CrawlWaits
from orchestrator.dialogue import (
    checklist_feedback,
    detect_facts,
    is_follow_up,
    is_greeting,
    is_technical,
    is_vague,
    readable,
    search_text,
)
from orchestrator.escalation import (
    EscalationCheckpoint,
    EscalationPolicy,
    OfferReply,
    detect_status_question,
    read_offer_reply,
)
from orchestrator.incidents import IncidentStore, incident_notice, match, to_ref
from orchestrator.intent import Intent, IntentClassifier
from orchestrator.llm import LLMProvider, NoLLM, generate_answer, read_message
from orchestrator.memory import KEY_PREFIX as CONVERSATION_PREFIX
from orchestrator.memory import ChecklistState, Conversation, ConversationStore, StepOutcome
from orchestrator.notice import redaction_notice
from orchestrator.retrieval import Retrieval, Retriever
from orchestrator.sentiment import Trajectory
from orchestrator.state import KEY_PREFIX as TURN_PREFIX
from orchestrator.state import TurnState, TurnStatus, TurnStore
from orchestrator.tickets import (
    build_escalation,
    problem_words,
    requester,
    status_reply,
    ticket_reply,
)

log = logging.getLogger("deskpilot.orchestrator")
T = TypeVar("T")

VAGUE_QUESTIONS = (
    "What are you trying to do, and which device or application is affected?",
    "What happens instead? If there is an error message, please copy its text.",
)
OS_QUESTION = "Which operating system are you on: Windows, macOS or Linux?"
OS_MATCH_MARGIN = 0.05
WHAT_DO_YOU_NEED = "What do you need help with?"
ANYTHING_ELSE = "Is there anything else I can help with?"
CRAWL_STARTED = "That isn't in the knowledge base yet, so I'm reading the IT help site for it."
NO_TICKET_TEXT = "Alright, no ticket. Is there anything else I can help with?"
TICKET_STATUS_UNAVAILABLE = (
    "I can't reach the ticket system right now, so I can't read your ticket's status. "
    "Please ask again in a few minutes."
)
FIXED: Final = "fixed"
"""The reason of a turn whose checklist step fixed the problem."""
WAITING_STAGES = (TurnStatus.CRAWLING, TurnStatus.ESCALATING, TurnStatus.CHECKING_TICKET)


def crawled_nothing(pages: int) -> str:
    plural = "s" if pages != 1 else ""
    return f"I also read {pages} page{plural} of the IT help site without finding it."


_MARKER = re.compile(r"\[\d+\]")
_WORD = re.compile(r"\w+")


def answer_words(text: str) -> int:
    """Words an answer quotes, without its source line ("From “…” [1]:") and citation marks."""
    lines = text.splitlines()
    if lines and lines[0].startswith("From "):
        lines = lines[1:]
    return len(_WORD.findall(_MARKER.sub(" ", "\n".join(lines))))


THANKS = re.compile(r"\b(thanks?|thank you|thx|cheers)\b", re.IGNORECASE)
# Ends of a decision's reason, with an LLM configured: who read the message.
BY_LLM: Final = "; intent by the LLM"
BY_CLASSIFIER: Final = "; intent by the classifier (no valid LLM reading)"


class Replies(Protocol):
    """Where a turn's progress and answer go (the gateway instance holding the user).

    Stages: ``searching``, ``composing``, and with an LLM ``writing``, whose ``detail`` is the
    whole answer written so far (not a delta), at most once per
    ``ORCHESTRATOR_LLM_STREAM_INTERVAL_S``. The answer replaces it, and may differ: the
    extractive answer when the model failed along the way.
    """

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None: ...

    async def answer(self, turn: TurnState, body: AnswerBody) -> None: ...


class CrawlFleet(Protocol):
    """Where crawl requests go (the crawler fleet, through the bus)."""

    async def request(self, request: ContextInsufficient) -> None: ...

    async def stop(self, turn: TurnState, job_id: str) -> None: ...


class TicketDesk(Protocol):
    """Where ticket requests go (the ticketing service, through the bus)."""

    async def request(self, escalation: EscalationRequested) -> None: ...

    async def status(self, request: TicketStatusRequested) -> None: ...


class AuditTrail(Protocol):
    """The durable, redacted record of every agent action (the ``audit.log`` stream)."""

    async def record(
        self, turn: TurnState, action: str, reason: str, **details: str | int | float | None
    ) -> None: ...

    async def publish(self, record: AuditRecorded) -> None: ...


class NoAudit:
    async def record(
        self, turn: TurnState, action: str, reason: str, **details: str | int | float | None
    ) -> None:
        return None

    async def publish(self, record: AuditRecorded) -> None:
        return None


class Orchestrator:
    def __init__(
        self,
        retriever: Retriever,
        intents: IntentClassifier,
        store: TurnStore,
        conversations: ConversationStore,
        settings: OrchestratorSettings,
        llm: LLMProvider | None = None,
        cases: CaseRetriever | None = None,
        fleet: CrawlFleet | None = None,
        waits: CrawlWaits | None = None,
        attachments: AttachmentStore | None = None,
        keys: ConversationKeys | None = None,
        desk: TicketDesk | None = None,
        audit: AuditTrail | None = None,
        incidents: IncidentStore | None = None,
        automations: AutomationRunner | None = None,
        runtime: RuntimeConfigReader | None = None,
    ) -> None:
        self.runtime = runtime
        self.base_settings = settings
        self._applied: StoredConfig | None = None
        self.automations = automations
        self.incidents = incidents
        self.desk = desk
        self.audit = audit or NoAudit()
        self.checkpoint = EscalationCheckpoint(
            policy=EscalationPolicy(anger_threshold=settings.escalation_anger_threshold)
        )
        self.attachments = attachments
        self.keys = keys
        self.llm = llm or NoLLM()
        self.cases = cases
        self.fleet = fleet
        self.waits = waits
        self.retriever = retriever
        self.intents = intents
        self.store = store
        self.conversations = conversations
        self.settings = settings
        self._early: set[asyncio.Task[Any]] = set()

    async def use_current_config(self) -> None:
        """Apply the admins' runtime configuration (``contracts.runtime_config``, re-read at most
        every few seconds) over the environment's settings: thresholds, crawl budget and scope,
        clarification cap, anger threshold and category queues take effect from the next turn."""
        if self.runtime is None:
            return
        config = await self.runtime.current()
        if config is self._applied:
            return
        self._applied = config
        self.settings = config.overrides.apply(self.base_settings)
        self.checkpoint.policy = EscalationPolicy(
            anger_threshold=self.settings.escalation_anger_threshold
        )
        self.intents.route(config.overrides.category_queues or {})

    async def handle_query(self, query: QueryReceived, replies: Replies) -> None:
        """Answer a turn exactly once; a redelivered query re-sends the answer already given."""
        await self.use_current_config()
        turn = await self.store.get(query.correlation_id)
        if turn is not None and turn.status is TurnStatus.ANSWERED and turn.answer is not None:
            log.info("turn already answered; sending the same answer again")
            await replies.answer(turn, turn.answer)
            return
        if turn is not None and turn.status in WAITING_STAGES:
            log.info("turn already waits (%s); it is answered when that ends", turn.status.value)
            return
        turn = TurnState(
            correlation_id=query.correlation_id,
            conversation_id=query.conversation_id,
            user_id=query.user_id,
            reply_to=query.reply_to,
            question=query.text,
            redaction_notice=redaction_notice(query.redactions),
        )
        _, conversation, _ = await asyncio.gather(
            self.store.save(turn),
            self.conversations.load(query.conversation_id),
            self.remember_keys(query.conversation_id, query.correlation_id),
        )
        attached = await self.read_attachments(query, turn, conversation, replies)
        if attached:
            # What the files say is part of the question: searched, and kept for the crawl.
            context = " ".join(search_context(attachment) for attachment in attached)
            turn.question = f"{query.text}\n{context}".strip()
        await self.match_incident(turn, conversation, attached)
        if await self.triage(query, turn, conversation, replies):
            return
        if await self.automate(query, turn, conversation, replies):
            return
        if turn.incident is not None and turn.incident.id not in conversation.incidents_told:
            # Known outage: say what is known instead of troubleshooting; "yes" files a ticket
            # linked to it.
            await self.tell_incident(turn, conversation, replies)
            return
        topic = {"topic": conversation.topic, "category": conversation.category}
        body, reason = await self.decide(turn.question, conversation, turn, replies)
        if reason == FIXED:  # the topic is closed now: the ticket describes the one fixed
            await self.record_resolved(turn, conversation.model_copy(update=topic))
        if body.action is Action.ESCALATED:  # a category the assistant routes to technicians
            await self.escalate(turn, conversation, EscalationReason.ROUTING, reason, None, replies)
            return
        if attached:
            # Said in whatever answer the turn gets, now or after a crawl or a ticket.
            turn.attachment_note = describe(attached)
            reason = f"{reason}; {len(attached)} attachment(s) read"
        if body.action is Action.CRAWL:
            await self.start_crawl(turn, conversation, replies, reason)
            return
        await self.finish(turn, conversation, body, reason, replies)

    async def match_incident(
        self, turn: TurnState, conversation: Conversation, attached: list[StoredAttachment]
    ) -> None:
        """Set ``turn.incident`` when the turn is about an ongoing incident."""
        if self.incidents is None:
            return
        active = await self.incidents.active()
        if not active:
            return
        signatures = [s for a in attached for s in a.summary.signatures]
        signatures += [s for a in conversation.attachments for s in a.signatures]
        found = match(active, turn.question, signatures, conversation.category)
        if found is None:
            return
        turn.incident = to_ref(found.incident)
        conversation.incident_id = found.incident.id
        log.info(
            "incident matched",
            extra={
                "incident_id": found.incident.id,
                "score": round(found.score, 2),
                "reason": found.reason,
            },
        )

    async def tell_incident(
        self, turn: TurnState, conversation: Conversation, replies: Replies
    ) -> None:
        incidents = await self.incidents.active() if self.incidents else []
        incident = next(i for i in incidents if turn.incident and i.id == turn.incident.id)
        conversation.incidents_told.append(incident.id)
        body = compose_text(incident_notice(incident), Action.ANSWER)
        body.incident = turn.incident
        reason = f"ongoing incident {incident.id}"
        await self.finish(turn, conversation, body, reason, replies)
        # After the notice, a "yes" files a ticket linked to the incident.
        conversation.ticket_offer = reason
        await self.conversations.save(conversation)

    async def remember_keys(self, conversation_id: str, correlation_id: str) -> None:
        if self.keys is not None:
            await self.keys.add(conversation_id, TURN_PREFIX + correlation_id)

    async def read_attachments(
        self,
        query: QueryReceived,
        turn: TurnState,
        conversation: Conversation,
        replies: Replies,
    ) -> list[StoredAttachment]:
        """The message's attachments (redacted), remembered in the conversation for a ticket."""
        if not query.attachments or self.attachments is None:
            return []
        await replies.progress(turn, "reading_attachment", "reading the attachment")
        attached = await self.attachments.get_many(query.attachments, query.conversation_id)
        if len(attached) < len(query.attachments):
            log.warning(
                "attachments not found (expired or of another conversation)",
                extra={"missing": len(query.attachments) - len(attached)},
            )
        known = {summary.id for summary in conversation.attachments}
        conversation.attachments += [a.summary for a in attached if a.summary.id not in known]
        del conversation.attachments[:-5]
        return attached

    async def purge(self, conversation_id: str) -> int:
        """Delete the conversation's memory, turn states and attachments."""
        if self.keys is None:
            return int(await self.store.client.delete(CONVERSATION_PREFIX + conversation_id))
        return await self.keys.purge(conversation_id, CONVERSATION_PREFIX + conversation_id)

    async def finish(
        self,
        turn: TurnState,
        conversation: Conversation,
        body: AnswerBody,
        reason: str,
        replies: Replies,
    ) -> None:
        """Record the turn as answered (with the conversation) and send the answer."""
        body.redaction_notice = turn.redaction_notice
        if turn.attachment_note and body.action is not Action.REFUSE:
            body.answer = f"{turn.attachment_note}\n\n{body.answer}"
        if body.incident is None and turn.incident is not None:
            body.incident = turn.incident
        if body.category is None and body.action not in (Action.REFUSE, Action.CLARIFY):
            body.category = conversation.category
        turn.status, turn.answer, turn.reason = TurnStatus.ANSWERED, body, reason
        conversation.remember(
            turn.question,
            body.action.value,
            body.citations[0].url if body.citations else None,
            body.answer,
        )
        # No answer (or nothing left to try): a ticket is offered, and a "yes" files it.
        conversation.ticket_offer = reason if body.action is Action.NO_ANSWER else None
        await asyncio.gather(self.conversations.save(conversation), self.store.save(turn))
        log.info("decided", extra={"action": body.action.value, "reason": reason})
        await self.audit.record(turn, "decision", reason, outcome=body.action.value)
        await replies.answer(turn, body)

    # -- escalation ----------------------------------------------------------------------------

    def trajectory(self, conversation: Conversation, text: str) -> Trajectory:
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
                turn.question
                for turn in conversation.history
                if checklist_feedback(turn.question) is None
            ),
            clarify_cap_reached=conversation.clarify_rounds >= self.settings.clarify_cap,
            answering_step=answering,
        )

    async def triage(
        self,
        query: QueryReceived,
        turn: TurnState,
        conversation: Conversation,
        replies: Replies,
    ) -> bool:
        """Before the knowledge base: status questions, ticket requests (words or the ticket
        button), a reply to a ticket offer, and anger. True when the turn is handled."""
        if self.desk is None:
            return False
        text = query.text
        if not query.request_ticket and (status := detect_status_question(text)):
            await self.check_ticket(turn, conversation, status.ticket_key, replies)
            return True
        decision = self.checkpoint.check(text, self.trajectory(conversation, text))
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
                await self.finish(turn, conversation, body, "ticket offer declined", replies)
                return True
        if reason is None:
            return False
        await self.escalate(turn, conversation, reason, detail, decision.anger.score, replies)
        return True

    async def escalate(
        self,
        turn: TurnState,
        conversation: Conversation,
        reason: EscalationReason,
        detail: str,
        sentiment: float | None,
        replies: Replies,
    ) -> None:
        """Ask the ticketing service for a ticket; the turn waits in Redis for its answer (or
        its deadline, after which the user is told a ticket will follow)."""
        desk, waits = self.desk, self.waits
        if desk is None or waits is None:
            raise RuntimeError("escalating needs the ticket desk and the waits store")
        if conversation.topic is None and problem_words(turn.question):
            # A first message that says what is wrong besides asking for a person.
            intent = await asyncio.to_thread(self.intents.classify, readable(turn.question))
            conversation.new_topic(turn.question, intent.category)
        queue = self.intents.queues.get(conversation.category or "")
        escalation = build_escalation(
            turn,
            conversation,
            reason=reason,
            reason_detail=detail,
            queue=queue,
            sentiment=None if sentiment is None else round(sentiment, 3),
            incident_id=turn.incident.id if turn.incident else conversation.incident_id,
        )
        turn.status, turn.ticket_queue = TurnStatus.ESCALATING, queue
        turn.reason = f"escalated ({reason.value}): {detail}"
        conversation.ticket_offer = None
        await asyncio.gather(self.conversations.save(conversation), self.store.save(turn))
        await waits.wait(turn.correlation_id, time.time() + self.settings.ticket_wait_s)
        await desk.request(escalation)
        log.info("decided", extra={"action": Action.ESCALATED.value, "reason": turn.reason})
        await self.audit.record(turn, "ticket", turn.reason, queue=queue, topic=escalation.topic)
        await replies.progress(turn, "creating_ticket", "creating a ticket")

    # -- approved automations ------------------------------------------------------------------

    async def automate(
        self,
        query: QueryReceived,
        turn: TurnState,
        conversation: Conversation,
        replies: Replies,
    ) -> bool:
        """An allow-listed automation the message asks for (offered, then run on an explicit
        yes from the same, authenticated user), or the answer to a pending offer."""
        runner = self.automations
        if runner is None or not runner.automations:
            return False
        user = UserContext(query.user_id, query.authenticated)
        result: StartResult | ReplyResult | None = None
        if (pending := conversation.pending_automation) is not None:
            conversation.pending_automation = None
            result = await runner.reply(pending, query.text, user, query.correlation_id)
        if result is None:
            result = runner.start(query.text, user, query.correlation_id)
        if result is None:
            return False
        await self.audit.publish(
            audit_event(result.audit, turn.correlation_id, turn.conversation_id)
        )
        reason = f"automation {result.action}: {result.audit['outcome']}"
        if isinstance(result, Offer):
            conversation.pending_automation = result.pending
        if isinstance(result, SelfService | Failed):
            # The knowledge base's own article, cited, rather than a bare link.
            body, why = await self.decide(
                turn.question, conversation, turn, replies, allow_crawl=False
            )
            if body.action in (Action.ANSWER, Action.CHECKLIST):
                body.answer = f"{result.text}\n\n{body.answer}"
                body.action = Action.ANSWER
                body.checklist = None
            else:
                body = compose_text(result.text, Action.AUTOMATION)
            reason = f"{reason}; {why}"
        else:
            body = compose_text(result.text, Action.AUTOMATION)
        await self.finish(turn, conversation, body, reason, replies)
        if isinstance(result, Failed) and result.offer_ticket:
            conversation.ticket_offer = f"automation {result.action} failed"
            await self.conversations.save(conversation)
        return True

    async def record_resolved(self, turn: TurnState, conversation: Conversation) -> None:
        """A silent ticket for a conversation the assistant resolved (for analytics and as a
        future past case); the ticketing service files it only with TICKETING_SILENT_TICKETS."""
        if self.desk is None:
            return
        silent = build_escalation(
            turn,
            conversation,
            reason=EscalationReason.RESOLVED,
            reason_detail="resolved by the assistant's checklist",
            queue=self.intents.queues.get(conversation.category or ""),
            sentiment=None,
            incident_id=conversation.incident_id,
        )
        silent.event_id = uuid.uuid5(uuid.NAMESPACE_URL, f"resolved:{turn.correlation_id}").hex
        silent.idempotency_key = f"resolved:{turn.correlation_id}"
        silent.reply_to = None
        await self.desk.request(silent)

    async def check_ticket(
        self, turn: TurnState, conversation: Conversation, key: str | None, replies: Replies
    ) -> None:
        desk, waits = self.desk, self.waits
        if desk is None or waits is None:
            raise RuntimeError("ticket status needs the ticket desk and the waits store")
        turn.status, turn.ticket_key_asked = TurnStatus.CHECKING_TICKET, key
        turn.reason = f"ticket status question ({key or 'latest tickets'})"
        await self.store.save(turn)
        await waits.wait(turn.correlation_id, time.time() + self.settings.ticket_wait_s)
        await desk.status(
            TicketStatusRequested(
                event_id=turn.correlation_id,
                correlation_id=turn.correlation_id,
                conversation_id=turn.conversation_id,
                user_id=requester(turn),
                reply_to=turn.reply_to,
                key=key,
            )
        )
        await replies.progress(turn, "checking_ticket", "reading your ticket's status")

    async def on_ticket_event(self, event: TicketEvent, replies: Replies) -> None:
        """The ticketing service answered a waiting turn: tell the user. Runs under the turn's
        lock; a turn no longer waiting is left alone (redeliveries, a late "created" after
        "deferred", events of other turns)."""
        if self.waits is None:
            return
        if event.change not in (
            TicketChange.CREATED,
            TicketChange.COMMENTED,
            TicketChange.DEFERRED,
            TicketChange.FAILED,
            TicketChange.STATUS,
        ):
            return
        async with self.waits.lock(event.correlation_id):
            turn = await self.store.get(event.correlation_id)
            if turn is None:
                return
            if turn.status is TurnStatus.ESCALATING and event.change is not TicketChange.STATUS:
                await self.answer_escalation(turn, event, replies)
            elif turn.status is TurnStatus.CHECKING_TICKET and event.change is TicketChange.STATUS:
                conversation = await self.conversations.load(turn.conversation_id)
                tickets = event.tickets or ([event.ticket] if event.ticket else [])
                body = compose_text(status_reply(event, turn.ticket_key_asked), Action.ANSWER)
                body.ticket = tickets[0] if tickets else None
                await self.finish(turn, conversation, body, turn.reason or "status", replies)
            else:
                return
            await self.waits.done(event.correlation_id)

    async def answer_escalation(
        self, turn: TurnState, event: TicketEvent, replies: Replies
    ) -> None:
        conversation = await self.conversations.load(turn.conversation_id)
        text = ticket_reply(event, turn.ticket_queue, self.settings.support_email)
        body = AnswerBody(answer=text, action=Action.ESCALATED, ticket=event.ticket)
        if event.ticket is not None and event.ticket.key not in conversation.tickets:
            conversation.tickets.append(event.ticket.key)
        reason = f"{turn.reason or 'escalated'}; ticket {event.change.value}"
        await self.finish(turn, conversation, body, reason, replies)

    async def on_deadline(self, correlation_id: str, replies: Replies) -> None:
        """A waiting turn's deadline passed: answer with what there is."""
        turn = await self.store.get(correlation_id)
        if turn is None or turn.status is TurnStatus.CRAWLING or self.waits is None:
            await self.resume(correlation_id, replies, deadline=True)
            return
        async with self.waits.lock(correlation_id):
            turn = await self.store.get(correlation_id)
            if turn is not None and turn.status is TurnStatus.ESCALATING:
                late = TicketEvent(
                    correlation_id=correlation_id,
                    conversation_id=turn.conversation_id,
                    change=TicketChange.DEFERRED,
                )
                await self.answer_escalation(turn, late, replies)
            elif turn is not None and turn.status is TurnStatus.CHECKING_TICKET:
                conversation = await self.conversations.load(turn.conversation_id)
                body = compose_text(TICKET_STATUS_UNAVAILABLE, Action.ANSWER)
                await self.finish(turn, conversation, body, "ticket status timed out", replies)
            await self.waits.done(correlation_id)

    # -- crawling ------------------------------------------------------------------------------

    def may_crawl(self) -> bool:
        return self.fleet is not None and self.waits is not None and self.settings.crawl_configured

    async def start_crawl(
        self, turn: TurnState, conversation: Conversation, replies: Replies, reason: str
    ) -> None:
        """Ask the fleet to read the help sites; the turn waits in Redis, no worker waits."""
        fleet, waits, settings = self.fleet, self.waits, self.settings
        if fleet is None or waits is None:
            raise RuntimeError("crawling needs a crawler fleet and the waits store")
        turn.status, turn.reason = TurnStatus.CRAWLING, reason
        turn.crawl_job_id = turn.correlation_id
        await self.conversations.save(conversation)
        await self.store.save(turn)
        deadline = time.time() + settings.crawl_deadline_s + settings.crawl_grace_s
        await waits.wait(turn.correlation_id, deadline)
        await fleet.request(
            ContextInsufficient(
                correlation_id=turn.correlation_id,
                conversation_id=turn.conversation_id,
                question=turn.crawl_question or turn.question,
                seed_urls=settings.crawl_seed_urls,
                allowed_domains=settings.crawl_allowed_domains,
                budget=CrawlBudget(
                    max_pages=settings.crawl_max_pages,
                    max_depth=settings.crawl_max_depth,
                    deadline_s=settings.crawl_deadline_s,
                    concurrency=settings.crawl_concurrency,
                ),
                job_id=turn.crawl_job_id,
                reply_to=turn.reply_to,
            )
        )
        log.info("decided", extra={"action": Action.CRAWL.value, "reason": reason})
        await self.audit.record(turn, "crawl_request", reason, seeds=len(settings.crawl_seed_urls))
        await replies.progress(turn, "crawling", CRAWL_STARTED)

    def enough(self, body: AnswerBody) -> bool:
        """Whether an answer found while the crawl runs is worth ending it for: a checklist, or
        an answer that says something. A page that only names the topic (a hub page, a heading
        with a line under it) is covered by the threshold yet answers nothing; a better page is
        usually a link away, and the crawl goes on to it."""
        if body.action is Action.CHECKLIST:
            return True
        if body.action is not Action.ANSWER:
            return False
        return answer_words(body.answer) >= self.settings.crawl_enough_words

    async def resume(
        self,
        correlation_id: str,
        replies: Replies,
        *,
        indexed: ChunksIndexed | None = None,
        finished: int | None = None,
        deadline: bool = False,
    ) -> None:
        """Search again for a turn waiting on a crawl; answer it once the knowledge base covers
        the question well :meth:`enough`, and in any case once the crawl is over: it
        ``finished`` (publishing that many pages) and the indexer indexed them all, or the
        turn's ``deadline`` passed.

        Runs under the turn's lock, so exactly one handler answers; a turn no longer waiting
        is left alone, which makes redelivered events harmless.
        """
        if self.waits is None:
            return
        await self.use_current_config()
        async with self.waits.lock(correlation_id):
            turn = await self.store.get(correlation_id)
            if turn is None or turn.status is not TurnStatus.CRAWLING:
                await self.waits.done(correlation_id)
                return
            if indexed is not None:
                source = indexed.source_event_id or indexed.event_id
                if source not in turn.crawl_indexed:
                    turn.crawl_indexed.append(source)
                if indexed.urls:
                    turn.crawl_urls = list(dict.fromkeys([*turn.crawl_urls, *indexed.urls]))
                    count = len(turn.crawl_urls)
                    plural = "s" if count != 1 else ""
                    await replies.progress(
                        turn, "indexed", f"{count} page{plural} read and indexed"
                    )
            if finished is not None:
                turn.crawl_published = finished
            over = deadline or (
                turn.crawl_published is not None and len(turn.crawl_indexed) >= turn.crawl_published
            )
            # The pages were just written: search them now, not after the next periodic check.
            await asyncio.to_thread(self.retriever.refresh, force=True)
            conversation = await self.conversations.load(turn.conversation_id)
            body, reason = await self.decide(
                turn.question, conversation, turn, replies, allow_crawl=False
            )
            if not over and not self.enough(body):
                await self.store.save(turn)  # not enough yet: wait for more pages
                return
            if turn.crawl_published is None and self.fleet is not None and turn.crawl_job_id:
                await self.fleet.stop(turn, turn.crawl_job_id)  # enough: end the crawl early
            if body.action is Action.NO_ANSWER and turn.crawl_urls:
                body.answer = crawled_nothing(len(turn.crawl_urls)) + " " + body.answer
            reason = f"{reason}; after crawling {len(turn.crawl_urls)} pages"
            await self.finish(turn, conversation, body, reason, replies)
            await self.waits.done(correlation_id)

    async def decide(
        self,
        text: str,
        conversation: Conversation,
        turn: TurnState,
        replies: Replies,
        *,
        allow_crawl: bool = True,
    ) -> tuple[AnswerBody, str]:
        """The reply to ``text`` and why; updates ``conversation`` in place. ``crawl`` (when
        ``allow_crawl``) means: not answered yet, read the help sites first."""
        conversation.facts.update(detect_facts(text))
        conversation.technical = conversation.technical or is_technical(text)
        checklist = conversation.checklist

        if (
            checklist is not None
            and checklist.current < len(checklist.steps)
            and (feedback := checklist_feedback(text))
        ):
            return self.advance_checklist(conversation, checklist, feedback)
        follow_up = is_follow_up(text, conversation)
        query_text = readable(search_text(text, conversation))
        early: asyncio.Task[Retrieval] | None = None
        if self.llm.enabled:
            # The model's reading is the slow step: search meanwhile (most messages are searched).
            early = self.search_early(query_text, conversation.facts.get("os"))
            intent, by = await self.read_intent(text, conversation)
        else:
            intent, by = await asyncio.to_thread(self.intents.classify, readable(text)), ""
        if is_greeting(text) or (intent.conversational and not follow_up):
            if THANKS.search(text):
                return compose_clarify([ANYTHING_ELSE], "You're welcome!"), "thanks" + by
            return compose_clarify([WHAT_DO_YOU_NEED], GREETING_TEXT), "greeting" + by
        off_topic = not follow_up and not intent.in_scope
        cap = self.settings.clarify_cap
        if not follow_up and not off_topic and is_vague(text):
            if conversation.clarify_rounds >= cap:
                return compose_text(CAP_TEXT, Action.NO_ANSWER), "still vague after the cap" + by
            conversation.clarify_rounds += 1
            questions = [
                q for q in VAGUE_QUESTIONS if "error" not in conversation.facts or "error" not in q
            ]
            return compose_clarify(questions), "too vague to search" + by

        await replies.progress(turn, "searching")
        os_name = conversation.facts.get("os")
        cases = self.cases_early(query_text)
        if early is not None:
            retrieval = await early
        else:
            retrieval = await asyncio.to_thread(
                self.retriever.retrieve, query_text, self.settings.top_k, os=os_name
            )
        best = retrieval.confidence
        confidence = f"best similarity {best:.3f}" if best is not None else "no hits"
        await self.audit.record(
            turn,
            "retrieval",
            confidence,
            hits=len(retrieval.hits),
            best=None if best is None else round(best, 4),
            top_url=retrieval.hits[0].url if retrieval.hits else None,
        )
        covered = best is not None and best >= self.settings.relevance_threshold
        # The classifier says off topic and the knowledge base agrees: decline. A strong match
        # in the company's own articles (its product names, its jargon) outweighs the classifier.
        if off_topic and not covered:
            reason = f"outside IT support (scope score {intent.scope_score:.2f}; {confidence})"
            return compose_text(REFUSE_TEXT, Action.REFUSE), reason + by
        if follow_up and by != BY_LLM:
            # A follow-up ("im on linux") is the topic's kind of request, not a request of its own.
            # (The model read it with the topic already.)
            intent = await asyncio.to_thread(self.intents.classify, query_text)
        if (
            not follow_up
            and intent.category in self.settings.route_categories
            and self.desk is not None
        ):
            conversation.new_topic(text, intent.category)
            reason = f"{intent.category} requests go to the {intent.queue} queue"
            return compose_text("", Action.ESCALATED), reason + by
        if not covered and allow_crawl and self.may_crawl():
            turn.crawl_question = query_text
            reason = f"{confidence} below threshold {self.settings.relevance_threshold}"
            return compose_text(CRAWL_STARTED, Action.CRAWL), f"{reason}; crawling" + by
        if not covered:
            body = compose_answer(
                retrieval,
                threshold=self.settings.relevance_threshold,
                see_also_margin=self.settings.see_also_margin,
                max_citations=self.settings.max_citations,
            )
            return body, f"{confidence} below threshold {self.settings.relevance_threshold}" + by
        if not follow_up:
            conversation.new_topic(text, intent.category)

        document = retrieval.best_document or retrieval.hits[:1]
        # One OS's variant of the steps matches about as well as anything: which one applies
        # is worth asking.
        top = max(hit.score for hit in document)
        if (
            any(section_os(hit) and hit.score >= top - OS_MATCH_MARGIN for hit in document)
            and len(os_sections(document)) >= 2
            and not os_name
            and "os" not in conversation.asked
            and conversation.clarify_rounds < cap
        ):
            conversation.asked.append("os")
            conversation.clarify_rounds += 1
            return compose_clarify([OS_QUESTION]), "the steps differ per operating system" + by

        await replies.progress(turn, "composing")
        passage = choose_passage(document, margin=0.15, os=os_name) or retrieval.hits[0]
        passage = whole_section(document, passage)
        steps = steps_of(passage.text)[:MAX_CHECKLIST_STEPS]
        if intent.kind == "troubleshooting" and len(steps) >= 3:
            conversation.checklist = ChecklistState(
                url=passage.url,
                title=passage.title,
                steps=steps,
                citation_snippet=snippet(passage.text),
            )
            reason = f"troubleshooting, {len(steps)} steps; {confidence}"
            return compose_checklist(passage, steps, 0), reason + by

        body = compose_answer(
            retrieval,
            threshold=self.settings.relevance_threshold,
            see_also_margin=self.settings.see_also_margin,
            max_citations=self.settings.max_citations,
            os=os_name,
            technical=conversation.technical,
        )
        if self.llm.enabled:
            # Grounded in the same passages; any failure falls back to the extractive answer.
            context = {hit.chunk_id: hit for hit in [passage, *retrieval.hits] if hit.score > 0}

            async def writing(so_far: str) -> None:
                await replies.progress(turn, "writing", so_far)

            body = await generate_answer(
                self.llm,
                text,
                list(context.values()),
                body,
                on_text=writing,
                interval_s=self.settings.llm_stream_interval_s,
            )
        if cases is not None:
            # After the knowledge base, and only when a resolved ticket is really alike.
            body.similar_cases = await cases
        return body, f"{intent.kind} {intent.category}; {confidence}" + by

    async def read_intent(self, text: str, conversation: Conversation) -> tuple[Intent, str]:
        """The model's reading of ``text`` if it gives a valid one, else the classifier's; and
        the end of the decision's reason that says which (:data:`BY_LLM`, :data:`BY_CLASSIFIER`).
        """
        reading = await read_message(
            self.llm, text, list(self.intents.queues), topic=conversation.topic
        )
        if reading is not None:
            return reading.as_intent(self.intents.queues), BY_LLM
        intent = await asyncio.to_thread(self.intents.classify, readable(text))
        return intent, BY_CLASSIFIER

    def search_early(self, query_text: str, os_name: str | None) -> asyncio.Task[Retrieval]:
        """Start retrieving now; a turn that turns out to need no search just drops the task."""
        return self._soon(self.retriever.retrieve, query_text, self.settings.top_k, os=os_name)

    def cases_early(self, query_text: str) -> asyncio.Task[list[SimilarCase]] | None:
        """Start looking for similar resolved cases beside the knowledge-base search (a Chroma
        round trip of its own); only an answer uses them."""
        if self.cases is None or not self.settings.cases_max:
            return None
        return self._soon(
            self.cases.similar,
            query_text,
            self.settings.cases_max,
            self.settings.cases_min_score,
        )

    def _soon(self, work: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Task[T]:
        """``work`` in a worker thread, started now; awaited or dropped by the turn."""
        task = asyncio.create_task(asyncio.to_thread(work, *args, **kwargs))
        # Held until done (the loop keeps only weak references); an error nobody awaited is
        # consumed here rather than reported as "never retrieved".
        self._early.add(task)
        task.add_done_callback(self._early.discard)
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        return task

    def advance_checklist(
        self, conversation: Conversation, checklist: ChecklistState, feedback: str
    ) -> tuple[AnswerBody, str]:
        step = checklist.steps[checklist.current]
        checklist.tried.append(StepOutcome(step=step, outcome=feedback))
        source = Citation(
            n=1, url=checklist.url, title=checklist.title, snippet=checklist.citation_snippet
        )
        if feedback == "fixed":
            conversation.tried += checklist.tried
            conversation.checklist = None
            conversation.topic = None
            text = (
                f"Great, glad that fixed it. For next time, the steps are in “{checklist.title}” "
                "[1]. Is there anything else I can help with?"
            )
            return AnswerBody(answer=text, action=Action.ANSWER, citations=[source]), FIXED
        checklist.current += 1
        if checklist.current < len(checklist.steps):
            body = compose_checklist_step(
                checklist.title,
                checklist.url,
                checklist.citation_snippet,
                checklist.steps,
                checklist.current,
            )
            return body, f"step {checklist.current} failed; next step"
        text = (
            f"I'm sorry: none of the {len(checklist.steps)} steps from “{checklist.title}” [1] "
            "fixed it, so this needs a technician. Shall I create a ticket with what we tried? "
            'Reply "yes" and I\'ll pass it all on.'
        )
        body = AnswerBody(answer=text, action=Action.NO_ANSWER, citations=[source])
        return body, "every checklist step failed"
