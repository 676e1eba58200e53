"""The escalation checkpoint: when a conversation goes to a technician, and why.

Pure functions over the user's (redacted) words; the orchestrator's service wires them in.

- :func:`detect_human_request`: the user asks for a person, a ticket or an escalation, in any of
  the usual phrasings ("can I speak to someone", "get me a real agent", "open a ticket",
  "connect me to the help desk", "I don't want to talk to a bot", "live agent please"). Read
  clause by clause with negation, so "I don't need a ticket", "how do I create a ticket in Jira
  for my team's project?" (a how-to question about a tool), "the ticket printer is broken",
  "should I open a ticket?" (advice) and "am I talking to a human?" (a question about the
  assistant) are not requests.
- :func:`read_offer_reply`: a reply to "shall I create a ticket?": accept, decline or neither.
- :func:`detect_status_question`: the user asks how their ticket is doing, with the ticket's key
  when they name one ("any update on IT-123?").
- :class:`EscalationCheckpoint`: the decision for one message, an explicit request or the anger
  score (:mod:`orchestrator.sentiment`) over the threshold, with the reasons to log and to put in
  the ticket.

The rules are written as phrase patterns over normalised clauses (see
:func:`orchestrator.sentiment.clauses`), with a small typo tolerance on the key nouns ("humna",
"incedent", "tiket").

The parts: :mod:`~orchestrator.escalation.human_request`, :mod:`~orchestrator.escalation.offer`,
:mod:`~orchestrator.escalation.status` and :mod:`~orchestrator.escalation.checkpoint`.
"""

from __future__ import annotations

from orchestrator.escalation.checkpoint import (
    DEFAULT_ANGER_THRESHOLD,
    EscalationCheckpoint,
    EscalationDecision,
    EscalationPolicy,
)
from orchestrator.escalation.human_request import HumanRequest, detect_human_request
from orchestrator.escalation.offer import OfferReply, read_offer_reply
from orchestrator.escalation.status import (
    StatusQuestion,
    detect_status_question,
    extract_ticket_key,
)

__all__ = [
    "DEFAULT_ANGER_THRESHOLD",
    "EscalationCheckpoint",
    "EscalationDecision",
    "EscalationPolicy",
    "HumanRequest",
    "OfferReply",
    "StatusQuestion",
    "detect_human_request",
    "detect_status_question",
    "extract_ticket_key",
    "read_offer_reply",
]
