"""What a turn depends on, in one object (:class:`TurnDeps`), and the interfaces of the services
it talks to through the bus (:class:`Replies`, :class:`CrawlFleet`, :class:`TicketDesk`,
:class:`AuditTrail`). :mod:`orchestrator.app` builds it; tests build it with stand-ins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from contracts.events import (
    AnswerBody,
    AuditRecorded,
    ContextInsufficient,
    EscalationRequested,
    TicketStatusRequested,
)
from contracts.runtime_config import RuntimeConfigReader
from orchestrator.attachments import AttachmentStore, ConversationKeys
from orchestrator.automations import AutomationRunner
from orchestrator.cases import CaseRetriever
from orchestrator.config import OrchestratorSettings
from orchestrator.crawl import CrawlWaits
from orchestrator.incidents import IncidentStore
from orchestrator.intent import IntentClassifier
from orchestrator.llm import LLMProvider, NoLLM
from orchestrator.memory import Conversation, ConversationStore
from orchestrator.retrieval import Retriever
from orchestrator.sites import SiteProfiles
from orchestrator.state import TurnState, TurnStore


class Replies(Protocol):
    """Where a turn's progress and answer go (the gateway instance holding the user).

    Stages: ``searching``, ``composing``, and with an LLM ``writing``, whose ``detail`` is the
    whole answer written so far (not a delta), at most once per
    ``ORCHESTRATOR_LLM_STREAM_INTERVAL_S``. The answer replaces it, and may differ: the
    extractive answer when the model failed along the way.
    """

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None: ...

    async def answer(self, turn: TurnState, body: AnswerBody) -> None: ...


@runtime_checkable
class RepliesWithRecords(Protocol):
    """Replies that also write what an answered turn leaves behind, with the answer.

    :mod:`orchestrator.handlers`' replies over the bus are such: the conversation, the turn's
    state, its audit records and its answer (after any progress not written yet) go to Redis in
    one write, all or nothing, instead of the writes first and then the answer."""

    async def answer_recorded(
        self,
        turn: TurnState,
        body: AnswerBody,
        conversation: Conversation,
        notes: Sequence[AuditNote],
    ) -> None: ...


class CrawlFleet(Protocol):
    """Where crawl requests go (the crawler fleet, through the bus)."""

    async def request(self, request: ContextInsufficient) -> None: ...

    async def stop(self, turn: TurnState, job_id: str) -> None: ...


class TicketDesk(Protocol):
    """Where ticket requests go (the ticketing service, through the bus)."""

    async def request(self, escalation: EscalationRequested) -> None: ...

    async def status(self, request: TicketStatusRequested) -> None: ...


AuditDetail = str | int | float | None


@dataclass(frozen=True)
class AuditNote:
    """One audit record of a turn, before it is published: the action, why, and its details."""

    action: str
    reason: str
    details: dict[str, AuditDetail] = field(default_factory=dict)


class AuditTrail(Protocol):
    """The durable, redacted record of every agent action (the ``audit.log`` stream)."""

    async def record(self, turn: TurnState, *notes: AuditNote) -> None:
        """Publish ``notes`` as records of ``turn``, in order and together (one write)."""
        ...

    async def publish(self, record: AuditRecorded) -> None: ...


class NoAudit:
    """No audit trail (tests of the turn's logic)."""

    async def record(self, turn: TurnState, *notes: AuditNote) -> None:
        return None

    async def publish(self, record: AuditRecorded) -> None:
        return None


@dataclass(frozen=True, kw_only=True)
class TurnDeps:
    """Everything a turn uses besides its settings: the stores, the models, and the services it
    asks for crawls, tickets and audit records. What is ``None`` is not configured, and the
    steps that need it let the turn pass (no ticket desk: no escalation; no fleet: no crawl)."""

    retriever: Retriever
    intents: IntentClassifier
    turns: TurnStore
    conversations: ConversationStore
    llm: LLMProvider = field(default_factory=NoLLM)
    cases: CaseRetriever | None = None
    fleet: CrawlFleet | None = None
    waits: CrawlWaits | None = None
    attachments: AttachmentStore | None = None
    keys: ConversationKeys | None = None
    desk: TicketDesk | None = None
    audit: AuditTrail = field(default_factory=NoAudit)
    incidents: IncidentStore | None = None
    automations: AutomationRunner | None = None
    runtime: RuntimeConfigReader | None = None
    sites: SiteProfiles | None = None

    def may_crawl(self, settings: OrchestratorSettings) -> bool:
        """Whether a turn the knowledge base does not cover may wait on a crawl."""
        return self.fleet is not None and self.waits is not None and settings.crawl_configured
