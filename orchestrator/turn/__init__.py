"""One user turn as a list of named steps, from redacted question to reply.

Each step looks at the turn and either replies, with its reason, or lets the next step decide
(:class:`~orchestrator.turn.base.Step`). The first reply decides the turn, and
:func:`~orchestrator.turn.finish.carry_out` does what it asks: answer now, file a ticket, crawl
the help sites or read a ticket's status. Every decision is logged and audited with its reason.

The turn, in order (:data:`TURN_STEPS`):

===========  =============================================================================
checkpoint   a ticket status question, a request for a person or a ticket, a reply to a
             ticket offer, or anger: a ticket (or its status)
automation   an approved automation the message asks for (offered, then run on a yes)
incident     news of an ongoing incident the message is about
facts        notes the user's operating system, error codes, how technical they write
checklist    a report on the checklist step in progress moves it on ("that fixed it")
intent       reads the message; greets, thanks, asks targeted questions when too vague
retrieval    searches the knowledge base; declines what is outside IT support
routing      categories the assistant routes to technicians: a ticket in their queue
crawl        not covered: read the IT help sites first (the turn waits)
answer       not covered: an honest ``no_answer``; else which OS, a checklist or an answer
===========  =============================================================================

The first three are about the conversation (:attr:`Section.CONVERSATION`) and run once, when
the message arrives; the rest answer the question (:attr:`Section.QUESTION`) and run again
when a turn is decided anew: after its crawl, and for an automation's self-service article.
"""

from __future__ import annotations

from typing import Final

from orchestrator.turn.base import (
    CRAWL_STARTED,
    Answer,
    Background,
    CheckTicket,
    Crawl,
    Escalate,
    NoDecision,
    Reader,
    Reply,
    Section,
    Step,
    StepOrderError,
    Steps,
    Turn,
    answer_of,
    first_reply,
)
from orchestrator.turn.conversation import AutomationStep, CheckpointStep, IncidentStep
from orchestrator.turn.deps import (
    AuditNote,
    AuditTrail,
    CrawlFleet,
    NoAudit,
    Replies,
    RepliesWithRecords,
    TicketDesk,
    TurnDeps,
)
from orchestrator.turn.finish import audit, carry_out, finish, publish_notes
from orchestrator.turn.question import (
    AnswerStep,
    ChecklistStep,
    CrawlStep,
    FactsStep,
    IntentStep,
    RetrievalStep,
    RoutingStep,
)

TURN_STEPS: Final = Steps(
    (
        CheckpointStep(),
        AutomationStep(),
        IncidentStep(),
        FactsStep(),
        ChecklistStep(),
        IntentStep(),
        RetrievalStep(),
        RoutingStep(),
        CrawlStep(),
        AnswerStep(),
    )
)
"""The turn: asked in this order, the first reply decides."""

__all__ = [
    "CRAWL_STARTED",
    "TURN_STEPS",
    "Answer",
    "AnswerStep",
    "AuditNote",
    "AuditTrail",
    "AutomationStep",
    "Background",
    "CheckTicket",
    "ChecklistStep",
    "CheckpointStep",
    "Crawl",
    "CrawlFleet",
    "CrawlStep",
    "Escalate",
    "FactsStep",
    "IncidentStep",
    "IntentStep",
    "NoAudit",
    "NoDecision",
    "Reader",
    "Replies",
    "RepliesWithRecords",
    "Reply",
    "RetrievalStep",
    "RoutingStep",
    "Section",
    "Step",
    "StepOrderError",
    "Steps",
    "TicketDesk",
    "Turn",
    "TurnDeps",
    "answer_of",
    "audit",
    "carry_out",
    "finish",
    "first_reply",
    "publish_notes",
]
