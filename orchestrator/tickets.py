"""What a technician gets when a conversation is escalated, and what the user is told.

Pure functions over the conversation's memory (everything in it is already redacted):
:func:`build_escalation` turns it into an ``escalation.requested`` event that needs no follow-up
questions (problem, environment, what was tried, answers and links given, attachments, the
reason and the sentiment, the transcript), and :func:`ticket_reply` words the ticketing
service's outcome for the user.
"""

from __future__ import annotations

import hashlib
import re

from contracts.events import (
    Citation,
    EscalationReason,
    EscalationRequested,
    TicketChange,
    TicketEvent,
    TranscriptLine,
    TriedStep,
)
from contracts.ids import derived_event_id
from orchestrator.dialogue import ERROR_CODE, subject_words
from orchestrator.memory import Conversation
from orchestrator.sentiment import word_set
from orchestrator.state import TurnState

SUMMARY_WORDS = 9
_QUESTION_WORDS = word_set(
    "how what where when why who which do does did can could would should is are am i my me we "
    "our you your please help hi hello hey the a an to for of on in with and or"
)
_KEY_CHARS = re.compile(r"[^a-z0-9]+")


def problem_words(text: str) -> list[str]:
    """The words that say what the problem is, in order, without question words or repeats."""
    words = [w for w in subject_words(text) if w not in _QUESTION_WORDS and len(w) > 1]
    return list(dict.fromkeys(words))


def topic_key(category: str | None, problem: str) -> str:
    """A stable key for "the same problem": the category and the problem's first few words,
    sorted, so "vpn keeps dropping" and "keeps dropping, the vpn" share one open ticket."""
    words = sorted(problem_words(problem)[:4])
    slug = _KEY_CHARS.sub("-", " ".join(words)).strip("-") or "general"
    return f"{_KEY_CHARS.sub('-', (category or 'other').lower()).strip('-')}:{slug}"


def summary_of(category: str | None, problem: str, facts: dict[str, str]) -> str:
    """One line for the ticket list: the category, the problem in a few words, and the error
    code and operating system when known; never the first message verbatim."""
    words = problem_words(problem)[:SUMMARY_WORDS]
    subject = " ".join(words) if words else "request for help"
    subject = subject[0].upper() + subject[1:]
    details = [value for key in ("error", "os") if (value := facts.get(key))]
    label = (category or "IT support").capitalize()
    line = f"{label}: {subject}"
    if details:
        line += f" ({', '.join(details)})"
    return line[:120]


def environment_of(conversation: Conversation, text: str) -> dict[str, str]:
    """The facts gathered: operating system, error codes from messages and attachments, ..."""
    environment = dict(conversation.facts)
    codes = list(dict.fromkeys(match.group(0) for match in ERROR_CODE.finditer(text)))
    for attachment in conversation.attachments:
        codes += [s for s in attachment.signatures if s not in codes]
    if codes:
        environment["error_codes"] = ", ".join(codes[:10])
    if conversation.category:
        environment.setdefault("category", conversation.category)
    return environment


def tried_steps(conversation: Conversation) -> list[TriedStep]:
    tried = [
        TriedStep(step=t.step, outcome="fixed" if t.outcome == "fixed" else "failed")
        for t in conversation.tried
    ]
    if conversation.checklist is not None:
        known = {t.step for t in tried}
        tried += [
            TriedStep(step=t.step, outcome="fixed" if t.outcome == "fixed" else "failed")
            for t in conversation.checklist.tried
            if t.step not in known
        ]
    return tried


def links_given(conversation: Conversation) -> list[Citation]:
    urls = list(dict.fromkeys(turn.url for turn in conversation.history if turn.url))
    return [Citation(n=n, url=url, title=url, snippet="") for n, url in enumerate(urls, 1)]


def requester(turn: TurnState) -> str:
    """Who the ticket is for: the user, or for anonymous users their conversation (two anonymous
    people must not share tickets, nor read each other's status). The conversation is named by a
    digest: the requester is written into the ticket, where every ticket reader sees it, and a
    conversation id would let a reader address the conversation."""
    if turn.user_id and turn.user_id != "anonymous":
        return turn.user_id
    digest = hashlib.sha256(f"deskpilot:requester:{turn.conversation_id}".encode()).hexdigest()
    return f"anonymous:{digest[:24]}"


def build_escalation(
    turn: TurnState,
    conversation: Conversation,
    *,
    reason: EscalationReason,
    reason_detail: str,
    queue: str | None,
    sentiment: float | None,
    incident_id: str | None = None,
) -> EscalationRequested:
    """The ticket request for ``turn``: idempotent per turn, so a retried turn files once."""
    problem = conversation.topic or turn.question
    transcript = [*conversation.transcript, TranscriptLine(role="user", text=turn.question)]
    return EscalationRequested(
        event_id=derived_event_id("escalation", turn.correlation_id),
        correlation_id=turn.correlation_id,
        conversation_id=turn.conversation_id,
        user_id=requester(turn),
        reply_to=turn.reply_to,
        reason=reason,
        reason_detail=reason_detail,
        summary=summary_of(conversation.category, problem, conversation.facts),
        problem=problem,
        topic=topic_key(conversation.category, problem),
        category=conversation.category,
        queue=queue,
        environment=environment_of(conversation, " ".join(t.text for t in transcript)),
        tried=tried_steps(conversation),
        answers_given=[
            f"{t.action}: {t.url}" if t.url else t.action
            for t in conversation.history
            if t.action in ("answer", "checklist", "no_answer")
        ],
        citations=links_given(conversation),
        attachments=list(conversation.attachments),
        sentiment=sentiment,
        transcript=transcript,
        incident_id=incident_id,
        idempotency_key=f"turn:{turn.correlation_id}",
    )


def ticket_reply(event: TicketEvent, queue: str | None, support_email: str) -> str:
    """What the user is told when the ticketing service answers."""
    ticket = event.ticket
    who = f"the {queue} team" if queue else "a technician"
    if event.change is TicketChange.CREATED and ticket is not None:
        return (
            f"I've created ticket {ticket.key} for you ({ticket.status}): {ticket.url}\n"
            f"{who.capitalize()} will pick it up. It already has our conversation, what we tried "
            "and the links I gave, so you won't be asked again."
        )
    if event.change is TicketChange.COMMENTED and ticket is not None:
        return (
            f"You already have an open ticket on this, {ticket.key} ({ticket.status}): "
            f"{ticket.url}\nI've added this conversation to it, so {who} sees the latest."
        )
    fallback = f" If it's urgent, e-mail {support_email}." if support_email else ""
    if event.change is TicketChange.DEFERRED:
        return (
            "I couldn't reach the ticket system just now. Your request is saved and a ticket "
            f"will follow automatically; you don't need to ask again.{fallback}"
        )
    return f"I couldn't create a ticket right now.{fallback or ' Please contact the IT desk.'}"


def status_reply(event: TicketEvent, asked_key: str | None) -> str:
    tickets = event.tickets or ([event.ticket] if event.ticket else [])
    if not tickets:
        if asked_key:
            return (
                f"I can't find a ticket {asked_key} of yours. Check the key, or ask me to "
                "create one."
            )
        return "You have no tickets with the IT desk that I can see."
    lines = [f"{t.key}: {t.status} — {t.url}" for t in tickets[:5]]
    head = "Here is your ticket:" if len(lines) == 1 else "Here are your latest tickets:"
    return "\n".join([head, *lines])
