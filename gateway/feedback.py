"""Ratings of answers: only the turn's own user rates it, and its comment is kept only redacted.

``POST /api/feedback`` rates a turn of the caller's (anyone else's, like an unknown one, is 404).
The rating is kept at once (``deskpilot:gateway:feedback:<turn id>``) with the context of the
answer the gateway stored for the turn (action, category, cited documents) and counted in the
analytics, but without its comment: the comment is user text, so it goes sealed on
``feedback.received`` to the redactor, which publishes the rating with the redacted comment on
``feedback.recorded``; the gateway reads that back and only then keeps the comment (a newer
rating of the turn meanwhile wins). The raw comment therefore touches no disk and is never sent
back, not even to its author.

One rating per turn (so per user and turn: only its user may rate it): rating again replaces the
earlier rating, here, in the analytics and in the orchestrator's counts. The rating expires with
the turn it rates (the rest of the turn record's time to live), and a purge of the conversation
deletes it with the turn (:class:`gateway.conversations.ConversationIndex`).
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import BaseModel, Field, ValidationError
from redis.exceptions import RedisError, WatchError

from contracts.bus import Bus, Delivery
from contracts.events import Action, FeedbackReceived, FeedbackRecorded
from contracts.topics import Group, Topic
from gateway.analytics import AnalyticsRecorder, RatingFacts
from gateway.conversations import FEEDBACK_PREFIX, TURN_PREFIX
from gateway.errors import ApiError, ErrorCode
from gateway.models import FeedbackCreate, FeedbackRead
from gateway.turns import TurnStore

log = logging.getLogger("deskpilot.gateway.feedback")

UNKNOWN_TURN = "No turn of yours has that id (or it expired)."
"""The one answer to a turn the caller may not rate, whether it exists or not."""


class CitedDocument(BaseModel):
    url: str
    title: str


class StoredRating(BaseModel):
    """A rating as stored: the score, what the rated answer was, and its redacted comment once
    the redactor has been through it."""

    turn_id: str
    score: int
    comment: str | None = Field(None, description="Redacted; None until the redactor's is in.")
    comment_pending: bool = Field(
        False, description="A comment was given and its redacted form has not arrived yet."
    )
    rating_id: str | None = Field(
        None,
        description="The `feedback.received` event of this rating (a re-rating has a new one).",
    )
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

    async def record(self, feedback: FeedbackCreate, owner: str | None) -> FeedbackRead:
        """Rate a turn of ``owner``'s (404 for anyone else's, an unknown or an expired one):
        keep the score, hand the comment to the redactor, never echo it."""
        turn = await self.turns.get_owned(feedback.turn_id, owner) if owner else None
        record = await self.turns.record(feedback.turn_id) if turn else None
        if turn is None or record is None:
            raise ApiError(ErrorCode.UNKNOWN_TURN, UNKNOWN_TURN)
        assert owner is not None  # nosec B101 # type narrowing: the dependency always gives one
        answer = turn.answer
        comment = (feedback.comment or "").strip() or None
        received = FeedbackReceived(
            correlation_id=feedback.turn_id,
            conversation_id=answer.conversation_id
            if answer
            else str(record.get("conversation_id") or "unknown"),
            turn_id=feedback.turn_id,
            user_id=owner,
            score=feedback.score,
            comment=comment,
            cited_urls=[c.url for c in answer.citations] if answer else [],
            action=answer.action if answer else None,
            category=answer.category if answer else None,
        )
        rating = StoredRating(
            turn_id=feedback.turn_id,
            score=feedback.score,
            comment_pending=comment is not None,
            rating_id=received.event_id,
            recorded_at=received.occurred_at.isoformat(),
            conversation_id=received.conversation_id,
            user_id=owner,
            action=received.action,
            category=received.category,
            cited=[CitedDocument(url=c.url, title=c.title) for c in answer.citations]
            if answer
            else [],
        )
        try:
            previous = await self._keep(rating)
            await self.analytics.on_rating(
                received.event_id, rating.facts(), previous.facts() if previous else None
            )
            # Sealed by the bus: the raw comment reaches Redis's files only as ciphertext.
            await self.bus.publish(Topic.FEEDBACK_RECEIVED, received)
        except (RedisError, OSError) as exc:
            log.warning("could not record a rating", extra={"error": type(exc).__name__})
            raise ApiError(
                ErrorCode.BUS_UNAVAILABLE,
                "Deskpilot is briefly unavailable; your rating was not sent. Try again.",
            ) from exc
        log.info(
            "rating recorded",
            extra={
                "score": rating.score,
                "rerated": previous is not None,
                "with_comment": comment is not None,
            },
        )
        return FeedbackRead(
            turn_id=rating.turn_id,
            score=rating.score,
            recorded_at=rating.recorded_at,
            comment_received=comment is not None,
        )

    async def _keep(self, rating: StoredRating) -> StoredRating | None:
        """Store ``rating`` for as long as its turn is kept; returns the rating it replaced."""
        turn_ttl_ms = await self.turns.client.pttl(TURN_PREFIX + rating.turn_id)
        ttl_ms = turn_ttl_ms if turn_ttl_ms > 0 else self.turns.ttl_s * 1000
        previous = await self.turns.client.set(
            FEEDBACK_PREFIX + rating.turn_id, rating.model_dump_json(), px=ttl_ms, get=True
        )
        return _stored(previous) if isinstance(previous, bytes | str) else None

    async def on_recorded(self, event: FeedbackRecorded) -> bool:
        """Keep the redacted comment of the rating ``event`` is (from the redactor); False when
        that rating is no longer the turn's (re-rated, expired, purged) or already has it."""
        key = FEEDBACK_PREFIX + event.turn_id
        for _ in range(5):
            async with self.turns.client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key)
                    stored = _stored(await pipe.get(key))
                    if (
                        stored is None
                        or stored.rating_id is None
                        or stored.rating_id != event.rating_id
                        or not stored.comment_pending
                    ):
                        return False
                    kept = stored.model_copy(
                        update={"comment": event.comment, "comment_pending": False}
                    )
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(key, kept.model_dump_json(), keepttl=True)
                    await pipe.execute()
                    return True
                except WatchError:
                    continue  # re-rated meanwhile: look again
        return False


def register(bus: Bus, feedback: FeedbackService) -> None:
    """Read the redacted ratings back (``feedback.recorded``) through the gateway's group."""

    async def on_recorded(event: FeedbackRecorded, _: Delivery) -> None:
        await feedback.on_recorded(event)

    bus.subscribe(Topic.FEEDBACK_RECORDED, FeedbackRecorded, on_recorded, group=Group.GATEWAY)


def _stored(raw: bytes | str | None) -> StoredRating | None:
    if not raw:
        return None
    try:
        return StoredRating.model_validate_json(raw)
    except ValidationError:
        return None  # an older record without the context: nothing to take back
