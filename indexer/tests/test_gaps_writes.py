"""What a decision record costs the gap window: every turn's record reaches the indexer (two or
more audit records a turn), so an answered turn's is handled in one round trip to Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from contracts.events import AuditRecorded, FeedbackRecorded, new_id
from indexer.gaps import GapWindow


def decision(question: str, outcome: str, turn_id: str, conversation_id: str) -> AuditRecorded:
    return AuditRecorded(
        correlation_id=turn_id,
        conversation_id=conversation_id,
        service="orchestrator",
        action="decision",
        reason="test",
        details={"outcome": outcome, "question": question},
    )


@pytest.fixture
async def client(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    redis_client = aioredis.from_url(fresh_redis_url)
    await redis_client.ping()  # connected before the writes are counted
    yield redis_client
    await redis_client.aclose()


async def test_an_answered_turns_decision_is_one_round_trip_and_still_meets_its_rating(
    client: aioredis.Redis, round_trips: list[int]
) -> None:
    window = GapWindow(client, window_days=7)
    conversation, answered, rated_first = new_id(), new_id(), new_id()

    assert (
        await window.on_audit(decision("outlook hangs", "answer", answered, conversation)) is None
    )
    assert len(round_trips) == 1

    # The rating after the decision finds the question; before it, the decision finds the rating.
    low = FeedbackRecorded(
        correlation_id=answered,
        conversation_id=conversation,
        turn_id=answered,
        user_id="anon:1",
        score=1,
    )
    kept = await window.on_feedback(low)
    assert kept is not None
    assert (kept.text, kept.signal) == ("outlook hangs", "low_rating")
    await window.on_feedback(low.model_copy(update={"turn_id": rated_first}))
    late = await window.on_audit(decision("teams is silent", "answer", rated_first, conversation))
    assert late is not None
    assert late.signal == "low_rating"
    # Both turns were noted under their conversation: a purge forgets them.
    assert await window.purge(conversation) == 2
    assert await window.questions(10) == []
