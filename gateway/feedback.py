"""Ratings of answers, stored with what was rated and published for the other services.

A rating is kept (``deskpilot:gateway:feedback:<turn id>``, never expiring, deleted with its
conversation by a purge) with the context of the answer the gateway stored for the turn: its
action, category and the documents it cited. The same context travels on ``feedback.recorded``,
so the orchestrator can rank the cited documents by how users rate them without looking the turn
up. Rating a turn again replaces the earlier rating, here, in the analytics and in the
orchestrator's counts.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import BaseModel, Field, ValidationError

from contracts.bus import Bus
from contracts.events import Action, FeedbackRecorded, new_id, utcnow
from contracts.topics import Topic
from gateway.analytics import AnalyticsRecorder, RatingFacts
from gateway.conversations import FEEDBACK_PREFIX
from gateway.errors import ApiError, ErrorCode
from gateway.models import FeedbackCreate, FeedbackRead
from gateway.service import TurnStore

log = logging.getLogger("deskpilot.gateway.feedback")


class CitedDocument(BaseModel):
    url: str
    title: str


class StoredRating(BaseModel):
    """A rating as stored: the score, and what the rated answer was."""

    turn_id: str
    score: int
    comment: str | None
    recorded_at: str
    conversation_id: str
    user_id: str
    action: Action | None = Field(None, description="None when the turn had no answer yet.")
    category: str | None = None
    cited: list[CitedDocument] = Field(default_factory=list)

    @property
    def cited_urls(self) -> list[str]:
        return [document.url for document in self.cited]

    def facts(self) -> RatingFacts:
        return RatingFacts(
            score=self.score,
            at=datetime.fromisoformat(self.recorded_at),
            cited_urls=self.cited_urls,
        )


class FeedbackService:
    def __init__(self, bus: Bus, turns: TurnStore, analytics: AnalyticsRecorder) -> None:
        self.bus = bus
        self.turns = turns
        self.analytics = analytics

    async def record(self, feedback: FeedbackCreate) -> FeedbackRead:
        """Store and publish a rating of a known turn (404 for an unknown or expired one)."""
        record = await self.turns.record(feedback.turn_id)
        turn = await self.turns.get(feedback.turn_id)
        if record is None or turn is None:
            raise ApiError(ErrorCode.UNKNOWN_TURN, f"No turn {feedback.turn_id!r} is known.")
        answer = turn.answer
        user_id = record.get("user_id")
        rating = StoredRating(
            turn_id=feedback.turn_id,
            score=feedback.score,
            comment=feedback.comment,
            recorded_at=utcnow().isoformat(),
            conversation_id=answer.conversation_id
            if answer
            else str(record.get("conversation_id") or "unknown"),
            user_id=user_id if isinstance(user_id, str) else "anonymous",
            action=answer.action if answer else None,
            category=answer.category if answer else None,
            cited=[CitedDocument(url=c.url, title=c.title) for c in answer.citations]
            if answer
            else [],
        )
        key = FEEDBACK_PREFIX + feedback.turn_id
        previous = _stored(await self.turns.client.getset(key, rating.model_dump_json()))
        await self.analytics.on_rating(
            new_id(), rating.facts(), previous.facts() if previous else None
        )
        await self.bus.publish(
            Topic.FEEDBACK_RECORDED,
            FeedbackRecorded(
                correlation_id=feedback.turn_id,
                conversation_id=rating.conversation_id,
                turn_id=feedback.turn_id,
                user_id=rating.user_id,
                score=rating.score,
                comment=rating.comment,
                cited_urls=rating.cited_urls,
                action=rating.action,
                category=rating.category,
            ),
        )
        log.info(
            "rating recorded",
            extra={"score": rating.score, "rerated": previous is not None},
        )
        return FeedbackRead(
            turn_id=rating.turn_id,
            score=rating.score,
            comment=rating.comment,
            recorded_at=rating.recorded_at,
        )


def _stored(raw: bytes | str | None) -> StoredRating | None:
    if not raw:
        return None
    try:
        return StoredRating.model_validate_json(raw)
    except ValidationError:
        return None  # an older record without the context: nothing to take back
