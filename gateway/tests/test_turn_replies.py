"""The reply path of a turn inside the gateway, on a real valkey: an answer is stored, handed to
the turn's listener and counted, reading the turn's record once, and the listener is not kept
waiting for the analytics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from contracts.bus import Bus
from contracts.events import Action, AnswerBody, Citation, TurnReply
from gateway.analytics import AnalyticsRecorder, AnsweredTurn, day_of, key
from gateway.config import GatewaySettings
from gateway.conversations import TURN_PREFIX
from gateway.errors import ApiError
from gateway.turns import Submitted, TurnService, TurnStore

CITATION = Citation(n=1, url="https://kb.example/vpn", title="VPN", snippet="Open the client.")


class CountingStore(TurnStore):
    """Counts the reads of a turn's record."""

    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        super().__init__(client, ttl_s)
        self.reads = 0

    async def _record(self, turn_id: str) -> dict[str, object] | None:
        self.reads += 1
        return await super()._record(turn_id)


class WatchingAnalytics(AnalyticsRecorder):
    """Notes, when an answer is counted, whether its listener already had it."""

    def __init__(self, client: aioredis.Redis, queue: asyncio.Queue[TurnReply]) -> None:
        super().__init__(client, retention_days=1)
        self.queue = queue
        self.listener_had_it: list[bool] = []
        self.counted: list[AnsweredTurn] = []

    async def on_answer(self, turn: AnsweredTurn) -> bool:
        self.listener_had_it.append(not self.queue.empty())
        self.counted.append(turn)
        return await super().on_answer(turn)


@pytest.fixture
async def bus(settings: GatewaySettings) -> AsyncIterator[Bus]:
    made = Bus(settings, "gateway")
    try:
        yield made
    finally:
        await made.redis.aclose()


def answer_reply(turn_id: str) -> TurnReply:
    body = AnswerBody(answer="Open the client [1].", action=Action.ANSWER, citations=[CITATION])
    return TurnReply(correlation_id=turn_id, conversation_id="c-1", kind="answer", body=body)


async def test_an_answer_reaches_its_listener_with_one_read_of_the_record_and_is_counted_after(
    bus: Bus, redis: aioredis.Redis, settings: GatewaySettings
) -> None:
    store = CountingStore(redis, 600)
    turn_id = "turn-replies-1"
    await store.create(Submitted(turn_id, "c-1", "0af7651916cd43dd8448eb211c80319c"), "u-1")
    turns = TurnService(bus, store, settings)
    async with turns.listen(turn_id) as queue:
        analytics = WatchingAnalytics(redis, queue)
        turns.analytics = analytics
        store.reads = 0

        await turns.on_reply(answer_reply(turn_id))
        reply = queue.get_nowait()
        answer = await turns.answer_of(reply)

    assert answer.answer == "Open the client [1]."
    assert answer.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert answer.citations == [CITATION]
    # Read once for the trace id, the duplicate check and the latency; before, four times
    # (and a fifth for the listener).
    assert store.reads == 1
    # The user had the answer before it was counted.
    assert analytics.listener_had_it == [True]
    (counted,) = analytics.counted
    assert counted.latency_ms is not None
    assert counted.cited_urls == [CITATION.url]
    stored = await store.get(turn_id)
    assert stored is not None
    assert stored.answer == answer


async def test_a_redelivered_answer_is_counted_once_and_not_sent_again(
    bus: Bus, redis: aioredis.Redis, settings: GatewaySettings
) -> None:
    store = TurnStore(redis, 600)
    turn_id = "turn-replies-2"
    await store.create(Submitted(turn_id, "c-1", None), "u-1")
    turns = TurnService(bus, store, settings)
    async with turns.listen(turn_id) as queue:
        analytics = WatchingAnalytics(redis, queue)
        turns.analytics = analytics
        await turns.on_reply(answer_reply(turn_id))
        await turns.on_reply(answer_reply(turn_id))
        delivered: list[Any] = []
        while not queue.empty():
            delivered.append(queue.get_nowait())

    assert len(delivered) == 1
    # Both deliveries reach the analytics, whose marker counts the turn once.
    assert len(analytics.counted) == 2
    counters = await redis.hgetall(key("day", day_of(analytics.counted[0].at)))
    assert counters[b"turns"] == b"1"


async def test_an_answer_to_a_purged_turn_is_not_handed_over(
    bus: Bus, redis: aioredis.Redis, settings: GatewaySettings
) -> None:
    store = TurnStore(redis, 600)
    turns = TurnService(bus, store, settings)
    async with turns.listen("turn-gone") as queue:
        await turns.on_reply(answer_reply("turn-gone"))
        reply = queue.get_nowait()
        with pytest.raises(ApiError, match="expired"):
            await turns.answer_of(reply)


async def test_the_answer_to_a_turn_this_instance_submitted_is_stored_without_reading_it(
    bus: Bus, redis: aioredis.Redis, settings: GatewaySettings, round_trips: list[int]
) -> None:
    """The instance that submitted a turn, and still holds its listener, knows its record: the
    answer is stored (one round trip) and handed over without reading the record first."""
    store = CountingStore(redis, 600)
    turns = TurnService(bus, store, settings)
    await bus.start()
    try:
        # A first turn opens the connections and loads the scripts the second one uses.
        async with turns.listen("turn-warm-up"):
            await turns.submit("How do I reset my VPN?", "c-1", "u-1", "turn-warm-up")
            await turns.on_reply(answer_reply("turn-warm-up"))
        async with turns.listen("turn-submitted") as queue:
            submitted = await turns.submit("How do I reset my VPN?", "c-1", "u-1", "turn-submitted")
            round_trips.clear()
            await turns.on_reply(answer_reply("turn-submitted"))
            assert len(round_trips) == 1  # the answer stored; before, the record read first
            reply = queue.get_nowait()
            answer = await turns.answer_of(reply)
            # A redelivered answer is not handed over again.
            await turns.on_reply(answer_reply("turn-submitted"))
            assert queue.empty()
    finally:
        await bus.stop()

    assert store.reads == 0
    assert answer.trace_id == submitted.trace_id
    stored = await store.get("turn-submitted")
    assert stored is not None
    assert stored.status == "done"
    assert stored.answer == answer


async def test_an_answer_to_a_turn_purged_after_it_was_submitted_is_not_handed_over(
    bus: Bus, redis: aioredis.Redis, settings: GatewaySettings
) -> None:
    store = TurnStore(redis, 600)
    turns = TurnService(bus, store, settings)
    await bus.start()
    try:
        async with turns.listen("turn-purged") as queue:
            await turns.submit("How do I reset my VPN?", "c-1", "u-1", "turn-purged")
            await redis.delete(TURN_PREFIX + "turn-purged")
            await turns.on_reply(answer_reply("turn-purged"))
            reply = queue.get_nowait()
            with pytest.raises(ApiError, match="expired"):
                await turns.answer_of(reply)
    finally:
        await bus.stop()
    assert await store.get("turn-purged") is None


def progress(turn_id: str, stage: str, count: int | None = None) -> TurnReply:
    detail = f"{count}/8 pages" if count is not None else None
    return TurnReply(
        correlation_id=turn_id,
        conversation_id="c-1",
        kind="progress",
        stage=stage,
        detail=detail,
        count=count,
        total=8 if count is not None else None,
    )


async def test_a_turns_progress_is_shown_only_forwards(
    bus: Bus, redis: aioredis.Redis, settings: GatewaySettings
) -> None:
    """The gateway handles up to four replies at once, and crawler replicas count their pages
    together: a listener sees neither an older entry after a newer one nor a page count going
    back (before, "5/8 pages" was followed by "4/8 pages")."""
    turns = TurnService(bus, TurnStore(redis, 600), settings)
    async with turns.listen("turn-order") as queue:
        await turns.on_reply(progress("turn-order", "searching"), "1700000000000-0")
        await turns.on_reply(progress("turn-order", "crawling"), "1700000000005-0")
        # Handled after the entry above, though written before it.
        await turns.on_reply(progress("turn-order", "composing"), "1700000000004-9")
        await turns.on_reply(progress("turn-order", "crawling", 5), "1700000000006-0")
        # Written later by a replica that counted its page first.
        await turns.on_reply(progress("turn-order", "crawling", 4), "1700000000006-1")
        await turns.on_reply(progress("turn-order", "crawling", 5), "1700000000007-0")
        await turns.on_reply(progress("turn-order", "indexed", 1), "1700000000008-0")
        await turns.on_reply(progress("turn-order", "crawling", 6), "1700000000009-0")
        shown: list[tuple[str | None, str | None]] = []
        while not queue.empty():
            reply = queue.get_nowait()
            shown.append((reply.stage, reply.detail))

    assert shown == [
        ("searching", None),
        ("crawling", None),
        ("crawling", "5/8 pages"),
        ("indexed", "1/8 pages"),
        ("crawling", "6/8 pages"),
    ]
    # A listener of the same turn later starts afresh (a reconnected stream).
    async with turns.listen("turn-order") as queue:
        await turns.on_reply(progress("turn-order", "crawling", 2), "1700000000001-0")
        assert queue.get_nowait().detail == "2/8 pages"


async def test_an_answer_that_says_it_crawled_is_counted_as_a_crawl_whatever_came_first(
    bus: Bus, redis: aioredis.Redis, settings: GatewaySettings
) -> None:
    """The answer says whether the turn read the help sites: the count does not depend on its
    crawling progress having been handled first (it was, before)."""
    store = TurnStore(redis, 600)
    await store.create(Submitted("turn-crawled", "c-1", None), "u-1")
    turns = TurnService(bus, store, settings)
    async with turns.listen("turn-crawled") as queue:
        analytics = WatchingAnalytics(redis, queue)
        turns.analytics = analytics
        reply = answer_reply("turn-crawled")
        assert reply.body is not None
        reply.body.crawled = True
        await turns.on_reply(reply)
        # Its crawling progress, handled after the answer: nothing more is counted.
        await turns.on_reply(progress("turn-crawled", "crawling"))

    (counted,) = analytics.counted
    assert counted.crawled
    counters = await redis.hgetall(key("day", day_of(counted.at)))
    assert counters[b"crawl_turns"] == b"1"
    assert counters[b"crawl_hits"] == b"1"
