"""The redactor's side of ratings on a real valkey: a sealed ``feedback.received`` becomes
``feedback.recorded`` with the comment redacted, the rating's time and id kept, and the raw
entry deleted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import Action, FeedbackReceived, FeedbackRecorded, utcnow
from contracts.topics import Topic, dead_letter_stream

COMMENT = (
    "Did not help. I'm Zebulon Quackenbush, zq7731.leak@fastmail.com, "
    "my password is Quokka!Tr0mb0ne#88"
)


async def eventually(check: Callable[[], Awaitable[Any]], timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (result := await check()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return result


def rating(comment: str | None) -> FeedbackReceived:
    return FeedbackReceived(
        correlation_id="turn-1",
        conversation_id="conv-1",
        occurred_at=utcnow() - timedelta(seconds=30),
        turn_id="turn-1",
        user_id="anon:u-1",
        score=2,
        comment=comment,
        cited_urls=["https://kb.example/vpn"],
        action=Action.ANSWER,
        category="connectivity",
    )


async def test_a_ratings_comment_is_redacted_on_its_way_on(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running
    given = rating(COMMENT)
    entry_id = await bus.publish(Topic.FEEDBACK_RECEIVED, given)

    entries = await eventually(lambda: client.xrange(Topic.FEEDBACK_RECORDED))
    recorded = decode_entry(entries[0][1], FeedbackRecorded)

    assert recorded.comment is not None
    for value in ("Zebulon", "Quackenbush", "zq7731.leak", "Tr0mb0ne"):
        assert value not in recorded.comment
        assert value.encode() not in b"".join(entries[0][1].values())
    assert recorded.comment.startswith("Did not help. I'm <PERSON_1>")
    assert "<EMAIL_ADDRESS_1>" in recorded.comment
    # The rating is what was given, when it was given: the newer of two ratings wins everywhere.
    assert recorded.occurred_at == given.occurred_at
    assert recorded.rating_id == given.event_id
    assert (recorded.turn_id, recorded.user_id, recorded.score) == ("turn-1", "anon:u-1", 2)
    assert recorded.cited_urls == given.cited_urls
    assert (recorded.action, recorded.category) == (Action.ANSWER, "connectivity")
    # The raw entry lives only until it is redacted.
    await eventually(
        lambda: _gone(client, Topic.FEEDBACK_RECEIVED, entry_id),
    )
    assert await client.xlen(dead_letter_stream(Topic.FEEDBACK_RECEIVED)) == 0


async def test_a_rating_without_a_comment_passes_as_it_is(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running
    await bus.publish(Topic.FEEDBACK_RECEIVED, rating("   "))

    entries = await eventually(lambda: client.xrange(Topic.FEEDBACK_RECORDED))

    assert decode_entry(entries[0][1], FeedbackRecorded).comment is None


async def _gone(client: aioredis.Redis, topic: str, entry_id: str) -> bool:
    return not await client.xrange(topic, min=entry_id, max=entry_id)
