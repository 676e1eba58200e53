"""Approved automations: actions the assistant performs for a user, such as resetting a password.

Pure orchestration, no bus and no Redis: the service wires it in and keeps the one piece of
state between two messages (:class:`PendingAutomation`) in the conversation's memory.

How a turn goes through it (:class:`AutomationRunner`):

1. ``runner.start(text, user, request_id)`` on a new message: the allow-listed automation whose
   trigger matches the (redacted) message answers with

   - :class:`Offer`: the question to ask ("shall I reset it?") and the :class:`PendingAutomation`
     to remember, when the user is authenticated;
   - :class:`SelfService`: how to do it oneself, when the user is not authenticated (the gateway
     did not verify who they are, so nothing is run on their word);
   - ``None``: no automation applies; handle the message as usual.

2. ``await runner.reply(pending, text, user, turn_id)`` on the next message while an offer is
   pending: an explicit yes in a *later* message (a different turn) from the same, still
   authenticated user, within ``ORCHESTRATOR_AUTOMATION_OFFER_TTL_S``, runs the executor:
   :class:`Done` or :class:`Failed`. An explicit no is :class:`Declined`; a yes after the offer
   lapsed is a fresh :class:`Offer`; anything else is ``None`` (the offer is dropped and the
   message handled as usual). Whatever comes back, the pending offer is spent: the service
   clears it, and keeps the new one of a fresh offer.

Every result carries the text to tell the user and an :data:`AuditEntry` (action, outcome,
reason, ids, HTTP status: never a secret, a password or user text) for the audit stream;
:func:`audit_event` wraps it in the contract's :class:`~contracts.events.AuditRecorded`.

Self-service is a pointer, decided here: :class:`SelfService` and :class:`Failed` carry the
knowledge-base article's URL (``ORCHESTRATOR_PASSWORD_RESET_ARTICLE_URL``) for the orchestrator
to answer from, with its steps cited like any other answer, so the steps are written once, in
the knowledge base; their ``text`` is a short lead-in that already holds the link, enough on its
own if the article cannot be found.

The parts: :mod:`~orchestrator.automations.settings` (what may run),
:mod:`~orchestrator.automations.outcomes` (the results and their audit entries),
:mod:`~orchestrator.automations.plugin` (what an automation provides),
:mod:`~orchestrator.automations.detection` (the password-reset trigger),
:mod:`~orchestrator.automations.webhook` (the password-reset executor and its webhook protocol)
and :mod:`~orchestrator.automations.runner` (the shared preconditions and the registry).
"""

from __future__ import annotations

from orchestrator.automations.detection import detect_password_reset
from orchestrator.automations.outcomes import (
    AuditEntry,
    Declined,
    Done,
    ExecutionResult,
    Failed,
    FailureReason,
    Offer,
    Outcome,
    PendingAutomation,
    ReplyResult,
    SelfService,
    StartResult,
    UserContext,
    audit_event,
)
from orchestrator.automations.plugin import Automation, ExecutionRequest, Trigger
from orchestrator.automations.runner import REGISTRY, AutomationRunner, read_confirmation
from orchestrator.automations.settings import (
    DEFAULT_ARTICLE_URL,
    MIN_SECRET_LENGTH,
    PASSWORD_RESET,
    AutomationSettings,
)
from orchestrator.automations.webhook import (
    IDEMPOTENCY_HEADER,
    NEUTRAL_DESTINATION,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    PasswordReset,
)

__all__ = [
    "DEFAULT_ARTICLE_URL",
    "IDEMPOTENCY_HEADER",
    "MIN_SECRET_LENGTH",
    "NEUTRAL_DESTINATION",
    "PASSWORD_RESET",
    "REGISTRY",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "AuditEntry",
    "Automation",
    "AutomationRunner",
    "AutomationSettings",
    "Declined",
    "Done",
    "ExecutionRequest",
    "ExecutionResult",
    "Failed",
    "FailureReason",
    "Offer",
    "Outcome",
    "PasswordReset",
    "PendingAutomation",
    "ReplyResult",
    "SelfService",
    "StartResult",
    "Trigger",
    "UserContext",
    "audit_event",
    "detect_password_reset",
    "read_confirmation",
]
