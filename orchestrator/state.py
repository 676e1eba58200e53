"""Turn state in Redis, keyed by correlation id, so any orchestrator replica can continue a turn.

Later steps (clarification, crawling, escalation) add fields; a turn already answered is never
answered twice, which makes a redelivered ``query.received`` harmless.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import redis.asyncio as aioredis
from pydantic import BaseModel, Field
from redis.asyncio.client import Pipeline

from contracts.events import AnswerBody, IncidentRef, utcnow

KEY_PREFIX = "deskpilot:orchestrator:turn:"


class TurnStatus(StrEnum):
    RECEIVED = "received"
    CRAWLING = "crawling"
    """Waiting for the crawler fleet; see :mod:`orchestrator.crawl`."""
    ESCALATING = "escalating"
    """Waiting for the ticketing service to file (or defer) the ticket."""
    CHECKING_TICKET = "checking_ticket"
    """Waiting for the ticketing service to read a ticket's status back."""
    ANSWERED = "answered"


class TurnState(BaseModel):
    correlation_id: str
    conversation_id: str
    user_id: str
    groups: list[str] = Field(
        default_factory=list, description="The user's groups, as `query.received` carried them."
    )
    authenticated: bool = Field(
        False, description="The gateway verified the user: only then do user id and groups count."
    )
    reply_to: str
    question: str = Field(description="The redacted question.")
    redaction_notice: str | None = Field(
        None, description="What the answer tells the user the redactor removed, if anything."
    )
    status: TurnStatus = TurnStatus.RECEIVED
    reason: str | None = Field(None, description="Why the decision was taken, for the logs.")
    answer: AnswerBody | None = None
    crawl_job_id: str | None = Field(None, description="The crawl job the turn waits on.")
    crawl_question: str | None = Field(
        None, description="What the crawl looks for: the question with its conversation's topic."
    )
    crawl_focus: list[str] = Field(
        default_factory=list,
        description="The question's key terms no similar article is about: what the crawl "
        "looks for first.",
    )
    crawl_urls: list[str] = Field(
        default_factory=list, description="Crawled pages indexed for this turn so far."
    )
    crawl_indexed: list[str] = Field(
        default_factory=list,
        description="The crawled-page events indexed so far (ids of `pages.crawled` events).",
    )
    crawl_published: int | None = Field(
        None, description="Pages the finished crawl published; None while it runs."
    )
    ticket_queue: str | None = Field(None, description="The queue an escalation goes to.")
    ticket_key_asked: str | None = Field(None, description="The ticket a status question names.")
    incident: IncidentRef | None = Field(None, description="The incident the turn matched.")
    attachment_note: str | None = Field(
        None, description="What was read from the turn's attachments, said first in its answer."
    )
    updated_at: datetime = Field(default_factory=utcnow)


class TurnStore:
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def get(self, correlation_id: str) -> TurnState | None:
        return self.parse(await self.client.get(KEY_PREFIX + correlation_id))

    def queue_get(self, pipe: Pipeline, correlation_id: str) -> None:
        """:meth:`get` as a command queued on ``pipe``; :meth:`parse` reads its result."""
        pipe.get(KEY_PREFIX + correlation_id)

    @staticmethod
    def parse(raw: bytes | str | None) -> TurnState | None:
        return TurnState.model_validate_json(raw) if raw else None

    async def save(self, state: TurnState) -> None:
        state.updated_at = utcnow()
        await self.client.set(
            KEY_PREFIX + state.correlation_id, state.model_dump_json(), ex=self.ttl_s
        )

    def queue_save(self, pipe: Pipeline, state: TurnState) -> None:
        """:meth:`save` as a command queued on ``pipe``, written with what else it holds."""
        state.updated_at = utcnow()
        pipe.set(KEY_PREFIX + state.correlation_id, state.model_dump_json(), ex=self.ttl_s)
