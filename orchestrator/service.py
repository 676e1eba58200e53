"""The orchestrator: runs each user turn through its steps, and resumes turns that wait.

Knows nothing about the broker (:mod:`orchestrator.handlers` does). A turn is a list of named
steps (:data:`orchestrator.turn.TURN_STEPS`); the first to reply decides it, with its reason,
and the reply is carried out: answered now, or a ticket, a crawl or a ticket's status asked
for while the turn waits in Redis. Those waiting turns are answered here when the crawler
fleet or the ticketing service reports back, or when their deadline passes; a turn is answered
exactly once, whichever replica receives what.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace
from typing import Final

from contracts.events import (
    Action,
    AnswerBody,
    ChunksIndexed,
    QueryReceived,
    TicketChange,
    TicketEvent,
)
from contracts.runtime_config import StoredConfig
from orchestrator.attachments import StoredAttachment, describe, search_context
from orchestrator.compose import compose_text
from orchestrator.config import OrchestratorSettings
from orchestrator.escalation import EscalationCheckpoint, EscalationPolicy
from orchestrator.incidents import match, to_ref
from orchestrator.memory import KEY_PREFIX as CONVERSATION_PREFIX
from orchestrator.memory import Conversation
from orchestrator.notice import redaction_notice
from orchestrator.state import KEY_PREFIX as TURN_PREFIX
from orchestrator.state import TurnState, TurnStatus
from orchestrator.tickets import status_reply, ticket_reply
from orchestrator.turn import (
    TURN_STEPS,
    Answer,
    Background,
    Crawl,
    Reader,
    Replies,
    Section,
    Steps,
    Turn,
    TurnDeps,
    answer_of,
    carry_out,
    finish,
    first_reply,
    publish_notes,
)

log = logging.getLogger("deskpilot.orchestrator")

TICKET_STATUS_UNAVAILABLE = (
    "I can't reach the ticket system right now, so I can't read your ticket's status. "
    "Please ask again in a few minutes."
)
WAITING_STAGES = (TurnStatus.CRAWLING, TurnStatus.ESCALATING, TurnStatus.CHECKING_TICKET)
# Ends of a decision's reason, with an LLM configured: who read the message.
BY_LLM: Final = Reader.LLM.value
BY_CLASSIFIER: Final = Reader.FALLBACK.value


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


class Orchestrator:
    """Turns, from ``query.received`` to the answer, with ``deps`` and the settings given
    (overridden per turn by the admins' runtime configuration) through ``steps``."""

    def __init__(
        self, deps: TurnDeps, settings: OrchestratorSettings, *, steps: Steps = TURN_STEPS
    ) -> None:
        self.deps = deps
        self.steps = steps
        self.base_settings = settings
        self.settings = settings
        self._applied: StoredConfig | None = None
        self.checkpoint = EscalationCheckpoint(
            policy=EscalationPolicy(anger_threshold=settings.escalation_anger_threshold)
        )
        self.background = Background()

    async def use_current_config(self) -> None:
        """Apply the admins' runtime configuration (``contracts.runtime_config``, re-read at most
        every few seconds) over the environment's settings: thresholds, crawl budget and scope,
        clarification cap, anger threshold and category queues take effect from the next turn."""
        if self.deps.runtime is None:
            return
        config = await self.deps.runtime.current()
        if config is self._applied:
            return
        self._applied = config
        self.settings = config.overrides.apply(self.base_settings)
        self.checkpoint.policy = EscalationPolicy(
            anger_threshold=self.settings.escalation_anger_threshold
        )
        self.deps.intents.route(config.overrides.category_queues or {})

    def turn(
        self,
        state: TurnState,
        conversation: Conversation,
        replies: Replies,
        *,
        query: QueryReceived | None = None,
        allow_crawl: bool = False,
    ) -> Turn:
        """A turn in progress, with this orchestrator's dependencies and current settings."""
        return Turn(
            deps=self.deps,
            settings=self.settings,
            checkpoint=self.checkpoint,
            steps=self.steps,
            background=self.background,
            state=state,
            conversation=conversation,
            replies=replies,
            text=state.question,
            query=query,
            allow_crawl=allow_crawl,
        )

    # -- a new message -----------------------------------------------------------------------

    async def handle_query(self, query: QueryReceived, replies: Replies) -> None:
        """Answer a turn exactly once; a redelivered query re-sends the answer already given."""
        await self.use_current_config()
        turn = await self.begin(query, replies)
        if turn is None:
            return
        step, reply = await first_reply(turn, self.steps)
        if step.section is Section.QUESTION and turn.attached and isinstance(reply, Answer | Crawl):
            # What the files said opens the question's answer, now or after the crawl.
            turn.state.attachment_note = describe(turn.attached)
            reply = replace(
                reply, reason=f"{reply.reason}; {len(turn.attached)} attachment(s) read"
            )
        await carry_out(turn, reply)
        await publish_notes(turn)

    async def begin(self, query: QueryReceived, replies: Replies) -> Turn | None:
        """The new turn: its conversation, what its attachments say and the incident it is
        about (its state is saved once it is answered or waits). ``None`` when the query was
        delivered before: an answered turn gets its answer again, a waiting one is answered when
        its wait ends."""
        # Read in one round trip; the state is saved when the turn is answered or starts to wait
        # (a turn found unanswered and not waiting is simply taken again).
        state, conversation = await self.read_turn(query)
        if state is not None and state.status is TurnStatus.ANSWERED and state.answer is not None:
            log.info("turn already answered; sending the same answer again")
            await replies.answer(state, state.answer)
            return None
        if state is not None and state.status in WAITING_STAGES:
            log.info("turn already waits (%s); it is answered when that ends", state.status.value)
            return None
        state = TurnState(
            correlation_id=query.correlation_id,
            conversation_id=query.conversation_id,
            user_id=query.user_id,
            groups=query.groups,
            authenticated=query.authenticated,
            reply_to=query.reply_to,
            question=query.text,
            redaction_notice=redaction_notice(query.redactions),
        )
        turn = self.turn(state, conversation, replies, query=query, allow_crawl=True)
        turn.attached = await self.read_attachments(turn, query)
        if turn.attached:
            # What the files say is part of the question: searched, and kept for the crawl.
            context = " ".join(search_context(attachment) for attachment in turn.attached)
            state.question = turn.text = f"{query.text}\n{context}".strip()
        await self.match_incident(turn)
        return turn

    async def read_turn(self, query: QueryReceived) -> tuple[TurnState | None, Conversation]:
        """The turn's state (``None`` when new) and its conversation, read in one round trip
        with the turn's key noted for a purge of the conversation."""
        deps = self.deps
        async with deps.turns.client.pipeline(transaction=False) as pipe:
            deps.turns.queue_get(pipe, query.correlation_id)
            deps.conversations.queue_load(pipe, query.conversation_id)
            if deps.keys is not None:
                deps.keys.queue_add(pipe, query.conversation_id, TURN_PREFIX + query.correlation_id)
            raw_state, raw_conversation, *_ = await pipe.execute()
        return deps.turns.parse(raw_state), deps.conversations.parse(
            query.conversation_id, raw_conversation
        )

    async def read_attachments(self, turn: Turn, query: QueryReceived) -> list[StoredAttachment]:
        """The message's attachments (redacted), remembered in the conversation for a ticket."""
        store = self.deps.attachments
        if not query.attachments or store is None:
            return []
        await turn.replies.progress(turn.state, "reading_attachment", "reading the attachment")
        attached = await store.get_many(query.attachments, query.conversation_id)
        if len(attached) < len(query.attachments):
            log.warning(
                "attachments not found (expired or of another conversation)",
                extra={"missing": len(query.attachments) - len(attached)},
            )
        conversation = turn.conversation
        known = {summary.id for summary in conversation.attachments}
        conversation.attachments += [a.summary for a in attached if a.summary.id not in known]
        del conversation.attachments[:-5]
        return attached

    async def match_incident(self, turn: Turn) -> None:
        """Note the ongoing incident the turn is about, if any."""
        if self.deps.incidents is None:
            return
        active = await self.deps.incidents.active()
        if not active:
            return
        conversation = turn.conversation
        signatures = [s for a in turn.attached for s in a.summary.signatures]
        signatures += [s for a in conversation.attachments for s in a.signatures]
        found = match(active, turn.state.question, signatures, conversation.category)
        if found is None:
            return
        turn.incident = found.incident
        turn.state.incident = to_ref(found.incident)
        conversation.incident_id = found.incident.id
        log.info(
            "incident matched",
            extra={
                "incident_id": found.incident.id,
                "score": round(found.score, 2),
                "reason": found.reason,
            },
        )

    async def decide(
        self,
        text: str,
        conversation: Conversation,
        state: TurnState,
        replies: Replies,
        *,
        allow_crawl: bool = True,
    ) -> tuple[AnswerBody, str]:
        """The reply the question steps give to ``text``, and why; updates ``conversation`` in
        place. ``crawl`` (when ``allow_crawl``) means: not answered yet, read the help sites
        first."""
        turn = self.turn(state, conversation, replies, allow_crawl=allow_crawl)
        turn.text = text
        _, reply = await first_reply(turn, self.steps.question)
        await publish_notes(turn)
        return answer_of(reply), reply.reason

    async def purge(self, conversation_id: str) -> int:
        """Delete the conversation's memory, turn states and attachments."""
        if self.deps.keys is None:
            return int(await self.deps.turns.client.delete(CONVERSATION_PREFIX + conversation_id))
        return await self.deps.keys.purge(conversation_id, CONVERSATION_PREFIX + conversation_id)

    # -- turns waiting on a crawl ------------------------------------------------------------

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
        read_nothing: bool = False,
    ) -> None:
        """Search again for a turn waiting on a crawl; answer it once the knowledge base covers
        the question well :meth:`enough`, and in any case once the crawl is over: it
        ``finished`` (publishing that many pages) and the indexer indexed them all, or the
        turn's ``deadline`` passed. A crawl that ``read_nothing`` new settles its question for
        a while (:meth:`orchestrator.sites.SiteProfiles.settle`).

        Runs under the turn's lock, so exactly one handler answers; a turn no longer waiting
        is left alone, which makes redelivered events harmless.
        """
        deps = self.deps
        if deps.waits is None:
            return
        await self.use_current_config()
        async with deps.waits.lock(correlation_id):
            state = await deps.turns.get(correlation_id)
            if state is None or state.status is not TurnStatus.CRAWLING:
                await deps.waits.done(correlation_id)
                return
            if indexed is not None:
                source = indexed.source_event_id or indexed.event_id
                if source not in state.crawl_indexed:
                    state.crawl_indexed.append(source)
                if indexed.urls:
                    state.crawl_urls = list(dict.fromkeys([*state.crawl_urls, *indexed.urls]))
                    count = len(state.crawl_urls)
                    plural = "s" if count != 1 else ""
                    await replies.progress(
                        state, "indexed", f"{count} page{plural} read and indexed"
                    )
            if finished is not None:
                state.crawl_published = finished
                if read_nothing and deps.sites is not None and state.crawl_question:
                    # Asked again, the question is not crawled for nothing (see sites.py).
                    await deps.sites.settle(
                        self.settings.crawl_seed_urls,
                        state.crawl_question,
                        self.settings.crawl_settled_s,
                    )
            over = deadline or (
                state.crawl_published is not None
                and len(state.crawl_indexed) >= state.crawl_published
            )
            # The pages were just written: search them now, not after the next periodic check.
            await asyncio.to_thread(deps.retriever.refresh, force=True)
            conversation = await deps.conversations.load(state.conversation_id)
            turn = self.turn(state, conversation, replies)
            turn.crawling = not over
            _, reply = await first_reply(turn, self.steps.question)
            body = answer_of(reply)
            if not over and not self.enough(body):
                # Not enough yet: wait for more pages.
                await asyncio.gather(deps.turns.save(state), publish_notes(turn))
                return
            if state.crawl_published is None and deps.fleet is not None and state.crawl_job_id:
                await deps.fleet.stop(state, state.crawl_job_id)  # enough: end the crawl early
            if body.action is Action.NO_ANSWER and state.crawl_urls:
                body.answer = crawled_nothing(len(state.crawl_urls)) + " " + body.answer
            reason = f"{reply.reason}; after crawling {len(state.crawl_urls)} pages"
            await finish(turn, body, reason)
            await deps.waits.done(correlation_id)

    # -- turns waiting on the ticketing service ----------------------------------------------

    async def on_ticket_event(self, event: TicketEvent, replies: Replies) -> None:
        """The ticketing service answered a waiting turn: tell the user. Runs under the turn's
        lock; a turn no longer waiting is left alone (redeliveries, a late "created" after
        "deferred", events of other turns)."""
        deps = self.deps
        if deps.waits is None:
            return
        if event.change not in (
            TicketChange.CREATED,
            TicketChange.COMMENTED,
            TicketChange.DEFERRED,
            TicketChange.FAILED,
            TicketChange.STATUS,
        ):
            return
        async with deps.waits.lock(event.correlation_id):
            state = await deps.turns.get(event.correlation_id)
            if state is None:
                return
            if state.status is TurnStatus.ESCALATING and event.change is not TicketChange.STATUS:
                await self.answer_escalation(state, event, replies)
            elif state.status is TurnStatus.CHECKING_TICKET and event.change is TicketChange.STATUS:
                conversation = await deps.conversations.load(state.conversation_id)
                tickets = event.tickets or ([event.ticket] if event.ticket else [])
                body = compose_text(status_reply(event, state.ticket_key_asked), Action.ANSWER)
                body.ticket = tickets[0] if tickets else None
                turn = self.turn(state, conversation, replies)
                await finish(turn, body, state.reason or "status")
            else:
                return
            await deps.waits.done(event.correlation_id)

    async def answer_escalation(
        self, state: TurnState, event: TicketEvent, replies: Replies
    ) -> None:
        conversation = await self.deps.conversations.load(state.conversation_id)
        text = ticket_reply(event, state.ticket_queue, self.settings.support_email)
        body = AnswerBody(answer=text, action=Action.ESCALATED, ticket=event.ticket)
        if event.ticket is not None and event.ticket.key not in conversation.tickets:
            conversation.tickets.append(event.ticket.key)
        reason = f"{state.reason or 'escalated'}; ticket {event.change.value}"
        await finish(self.turn(state, conversation, replies), body, reason)

    async def on_deadline(self, correlation_id: str, replies: Replies) -> None:
        """A waiting turn's deadline passed: answer with what there is."""
        deps = self.deps
        state = await deps.turns.get(correlation_id)
        if state is None or state.status is TurnStatus.CRAWLING or deps.waits is None:
            await self.resume(correlation_id, replies, deadline=True)
            return
        async with deps.waits.lock(correlation_id):
            state = await deps.turns.get(correlation_id)
            if state is not None and state.status is TurnStatus.ESCALATING:
                late = TicketEvent(
                    correlation_id=correlation_id,
                    conversation_id=state.conversation_id,
                    change=TicketChange.DEFERRED,
                )
                await self.answer_escalation(state, late, replies)
            elif state is not None and state.status is TurnStatus.CHECKING_TICKET:
                conversation = await deps.conversations.load(state.conversation_id)
                body = compose_text(TICKET_STATUS_UNAVAILABLE, Action.ANSWER)
                turn = self.turn(state, conversation, replies)
                await finish(turn, body, "ticket status timed out")
            await deps.waits.done(correlation_id)
