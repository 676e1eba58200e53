"""Conversation memory in Redis, so any replica can continue a conversation.

It holds what a helpful colleague would remember between messages: the topic being discussed,
facts the user already gave (operating system, device, application, error text), how many
clarification rounds were spent, the checklist in progress and what was tried. It expires with
the conversation (``ORCHESTRATOR_CONVERSATION_TTL_S``). Only redacted text is ever stored.
"""

from __future__ import annotations

from datetime import datetime

import redis.asyncio as aioredis
from pydantic import BaseModel, Field
from redis.asyncio.client import Pipeline

from contracts.events import AttachmentSummary, TranscriptLine, utcnow
from orchestrator.automations import PendingAutomation

KEY_PREFIX = "deskpilot:orchestrator:conversation:"


class StepOutcome(BaseModel):
    step: str
    outcome: str = Field(description="'failed' or 'fixed'.")


class ChecklistState(BaseModel):
    """A checklist being worked through, and what was tried (a ticket will want it)."""

    url: str
    title: str
    steps: list[str]
    current: int = 0
    citation_snippet: str = ""
    tried: list[StepOutcome] = Field(default_factory=list)


class TurnSummary(BaseModel):
    question: str
    action: str
    url: str | None = None


class Conversation(BaseModel):
    conversation_id: str
    topic: str | None = Field(None, description="The standalone question being discussed.")
    category: str | None = None
    facts: dict[str, str] = Field(
        default_factory=dict, description="What the user told us: os, device, application, error."
    )
    clarify_rounds: int = 0
    asked: list[str] = Field(default_factory=list, description="Facts asked for in this topic.")
    checklist: ChecklistState | None = None
    technical: bool = False
    history: list[TurnSummary] = Field(default_factory=list)
    attachments: list[AttachmentSummary] = Field(
        default_factory=list, description="Files the user attached (redacted), newest last."
    )
    tried: list[StepOutcome] = Field(
        default_factory=list,
        description="Checklist steps tried in earlier topics too (a ticket wants them all).",
    )
    transcript: list[TranscriptLine] = Field(
        default_factory=list, description="The redacted conversation, newest last (bounded)."
    )
    ticket_offer: str | None = Field(
        None, description="Why a ticket was just offered; a 'yes' to it files one."
    )
    tickets: list[str] = Field(default_factory=list, description="Keys of tickets filed.")
    incident_id: str | None = Field(
        None, description="The ongoing incident the conversation matched; tickets link to it."
    )
    pending_automation: PendingAutomation | None = Field(
        None, description="An automation offer awaiting the user's explicit yes."
    )
    incidents_told: list[str] = Field(
        default_factory=list, description="Incidents the user was already told about."
    )
    updated_at: datetime = Field(default_factory=utcnow)

    def remember(
        self,
        question: str,
        action: str,
        url: str | None,
        answer: str = "",
        keep: int = 12,
        transcript_chars: int = 800,
    ) -> None:
        self.history.append(TurnSummary(question=question, action=action, url=url))
        del self.history[:-keep]
        self.transcript.append(TranscriptLine(role="user", text=question))
        if answer:
            short = answer if len(answer) <= transcript_chars else answer[:transcript_chars] + " …"
            self.transcript.append(TranscriptLine(role="assistant", text=short))
        del self.transcript[: -2 * keep]

    def new_topic(self, topic: str, category: str | None) -> None:
        """Start over on a new subject; facts about the user's setup stay."""
        self.topic = topic
        self.category = category
        self.clarify_rounds = 0
        self.asked = []
        if self.checklist is not None:
            self.tried += self.checklist.tried
        self.checklist = None


class ConversationStore:
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def load(self, conversation_id: str) -> Conversation:
        return self.parse(conversation_id, await self.client.get(KEY_PREFIX + conversation_id))

    def queue_load(self, pipe: Pipeline, conversation_id: str) -> None:
        """:meth:`load` as a command queued on ``pipe``; :meth:`parse` reads its result."""
        pipe.get(KEY_PREFIX + conversation_id)

    @staticmethod
    def parse(conversation_id: str, raw: bytes | str | None) -> Conversation:
        if raw:
            return Conversation.model_validate_json(raw)
        return Conversation(conversation_id=conversation_id)

    async def save(self, conversation: Conversation) -> None:
        conversation.updated_at = utcnow()
        await self.client.set(
            KEY_PREFIX + conversation.conversation_id,
            conversation.model_dump_json(),
            ex=self.ttl_s,
        )

    def queue_save(self, pipe: Pipeline, conversation: Conversation) -> None:
        """:meth:`save` as a command queued on ``pipe``, written with what else it holds."""
        conversation.updated_at = utcnow()
        pipe.set(
            KEY_PREFIX + conversation.conversation_id,
            conversation.model_dump_json(),
            ex=self.ttl_s,
        )
