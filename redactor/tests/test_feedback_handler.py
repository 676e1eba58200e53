"""The redactor's side of ratings on a real valkey: a sealed ``feedback.received`` becomes
``feedback.recorded`` with the comment redacted, the rating's time and id kept, and the raw
entry deleted."""

from __future__ import annotations

from datetime import timedelta

import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import Action, FeedbackReceived, FeedbackRecorded, utcnow
from contracts.topics import Topic, dead_letter_stream
from tests.support import entry_gone, wait_until

COMMENT = (
    "Did not help. I'm Zebulon Quackenbush, zq7731.leak@fastmail.com, "
    "my password is Quokka!Tr0mb0ne#88"
)


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

    entries = await wait_until(lambda: client.xrange(Topic.FEEDBACK_RECORDED), timeout_s=30)
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
    await wait_until(
        lambda: entry_gone(client, Topic.FEEDBACK_RECEIVED, entry_id),
        timeout_s=30,
    )
    assert await client.xlen(dead_letter_stream(Topic.FEEDBACK_RECEIVED)) == 0


async def test_a_rating_without_a_comment_passes_as_it_is(
    running: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running
    await bus.publish(Topic.FEEDBACK_RECEIVED, rating("   "))

    entries = await wait_until(lambda: client.xrange(Topic.FEEDBACK_RECORDED), timeout_s=30)

    assert decode_entry(entries[0][1], FeedbackRecorded).comment is None
