"""What a turn writes on its way to the answer: its audit records together (one write, before the
answer), its state once, and the search announced while it runs.

The orchestrator runs on the session's real Redis with the stand-ins of ``stand_ins.py`` for
the models, and recording stand-ins for the services it talks to.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection

from contracts.bus import RAW_FIELD, Bus, decode_entry
from contracts.events import (
    AnswerBody,
    ChunksIndexed,
    ContextInsufficient,
    TurnReply,
    UnansweredNotice,
)
from contracts.readers import ANONYMOUS, Principals
from contracts.settings import ServiceSettings
from contracts.topics import Group, Topic
from orchestrator import handlers
from orchestrator.attachments import ConversationKeys
from orchestrator.crawl import CrawlWaits
from orchestrator.handlers import BusReplies
from orchestrator.retrieval import Retrieval
from orchestrator.state import TurnState, TurnStatus
from orchestrator.tests.stand_ins import (
    MONITOR,
    UNRELATED,
    Event,
    StubRetriever,
    make,
    query,
)
from tests.support import wait_until


class RecordingReplies:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        self.events.append(("progress", stage))

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        self.events.append(("answer", body.action.value))


class RecordingFleet:
    def __init__(self) -> None:
        self.requests: list[ContextInsufficient] = []

    async def request(self, request: ContextInsufficient) -> None:
        self.requests.append(request)

    async def stop(self, turn: TurnState, job_id: str) -> None:
        return None


@pytest.fixture
async def redis(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(fresh_redis_url)
    yield client
    await client.aclose()


class RefreshingRetriever(StubRetriever):
    """A stand-in that also takes the refresh a resumed turn asks for."""

    def refresh(self, *, force: bool = False) -> None:
        return None


class SlowRetriever(StubRetriever):
    """Searches only once the search was announced: a turn that announced it only after the
    search would wait here forever (the test's timeout)."""

    def __init__(self, hits: list[Any], announced: threading.Event) -> None:
        super().__init__(hits)
        self.announced = announced

    def retrieve(
        self, question: str, k: int, *, os: str | None = None, principals: Principals = ANONYMOUS
    ) -> Retrieval:
        if not self.announced.wait(timeout=10):
            raise AssertionError("the search was not announced while it ran")
        return super().retrieve(question, k, os=os, principals=principals)


class AnnouncingReplies(RecordingReplies):
    def __init__(self, events: list[Event], announced: threading.Event) -> None:
        super().__init__(events)
        self.announced = announced

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        await super().progress(turn, stage, detail)
        if stage == "searching":
            self.announced.set()


async def test_an_answered_turn_records_its_audit_trail_in_one_write_before_the_answer(
    redis: aioredis.Redis,
) -> None:
    events: list[Event] = []
    orchestrator, turns = make(redis, events, StubRetriever([MONITOR]))

    asked = query()
    await orchestrator.handle_query(asked, RecordingReplies(events))

    assert events == [
        ("progress", "searching"),
        ("progress", "composing"),
        ("audit", ["retrieval", "decision"]),
        ("answer", "answer"),
    ]
    # The state is written once, answered; before, also when the turn began.
    assert turns.saved == [TurnStatus.ANSWERED]
    state = await turns.get(asked.correlation_id)
    assert state is not None
    assert state.status is TurnStatus.ANSWERED


async def test_a_search_is_announced_while_it_runs(redis: aioredis.Redis) -> None:
    events: list[Event] = []
    announced = threading.Event()
    orchestrator, _ = make(redis, events, SlowRetriever([MONITOR], announced))

    await orchestrator.handle_query(query(), AnnouncingReplies(events, announced))

    assert ("answer", "answer") in events


async def test_a_turn_that_waits_for_more_pages_records_its_search(
    redis: aioredis.Redis,
) -> None:
    events: list[Event] = []
    fleet = RecordingFleet()
    orchestrator, turns = make(
        redis, events, RefreshingRetriever([UNRELATED]), fleet=fleet, waits=CrawlWaits(redis)
    )
    asked = query("How do I reload the Zephyr badge printer?")
    replies = RecordingReplies(events)

    await orchestrator.handle_query(asked, replies)
    assert events[-2:] == [("audit", ["retrieval", "crawl_request"]), ("progress", "crawling")]
    assert len(fleet.requests) == 1

    events.clear()
    page = ChunksIndexed(
        correlation_id=asked.correlation_id,
        conversation_id=asked.conversation_id,
        urls=["https://help.example/unrelated"],
        chunks=1,
        job_id=asked.correlation_id,
        source_event_id="pages-1",
    )
    await orchestrator.resume(asked.correlation_id, replies, indexed=page)

    # Not enough yet: the turn waits on, and the search it made is in the audit trail.
    assert ("audit", ["retrieval"]) in events
    assert not any(kind == "answer" for kind, _ in events)
    state = await turns.get(asked.correlation_id)
    assert state is not None
    assert state.status is TurnStatus.CRAWLING


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every command or pipeline this process writes to Redis, as sent (one entry per write)."""
    sent: list[bytes] = []
    original = AbstractConnection.send_packed_command

    async def recording(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent.append(b"".join(command) if isinstance(command, list) else bytes(command))
        await original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", recording)
    return sent


async def test_over_the_bus_the_answer_is_written_with_the_turns_records_in_one_write(
    fresh_redis_url: str, redis: aioredis.Redis, writes: list[bytes]
) -> None:
    """The conversation, the turn's state, its audit records and the answer (after the progress
    not written yet) go to Redis in one transaction; before, the records were three writes side
    by side and the answer a fourth after them. The turn's reads at its start are one round
    trip too (three side by side before)."""
    bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "orchestrator-test")
    await bus.start()
    try:
        events: list[Event] = []
        orchestrator, turns = make(
            redis, events, StubRetriever([MONITOR]), keys=ConversationKeys(redis, 600)
        )
        replies = BusReplies(bus, turns, orchestrator.deps.conversations)
        asked = query()
        writes.clear()
        await orchestrator.handle_query(asked, replies)
        await replies.drain(asked.correlation_id)
    finally:
        await bus.stop()

    # The turn's state and conversation are read, and its key noted, in one round trip.
    turn_key = b"deskpilot:orchestrator:turn:" + asked.correlation_id.encode()
    (read,) = [w for w in writes if b"GET" in w and turn_key in w]
    assert b"deskpilot:orchestrator:conversation:" + asked.conversation_id.encode() in read
    assert b"SADD" in read
    reply_stream = asked.correlation_id.encode()
    answered = [w for w in writes if b"MULTI" in w and b'"kind":"answer"' in w]
    assert len(answered) == 1, "the answer is written in one transaction"
    (together,) = answered
    assert b"deskpilot:orchestrator:turn:" + reply_stream in together
    assert b"deskpilot:orchestrator:conversation:" + asked.conversation_id.encode() in together
    assert together.count(b"audit.log") == 2  # the retrieval's record and the decision
    # Nothing of the turn's records is written apart from it.
    apart = [w for w in writes if w is not together]
    assert not any(b"SET" in w and b"deskpilot:orchestrator:" in w for w in apart)
    assert not any(b"audit.log" in w for w in apart)
    # The user sees the progress, then the answer, on the reply stream.
    entries: Any = await redis.xrange("reply.test")
    stages = [
        decode_entry(fields, TurnReply)
        for _, fields in entries
        if reply_stream in fields[RAW_FIELD]
    ]
    assert [(r.kind, r.stage) for r in stages] == [
        ("progress", "searching"),
        ("progress", "composing"),
        ("answer", None),
    ]
    state = await turns.get(asked.correlation_id)
    assert state is not None
    assert state.status is TurnStatus.ANSWERED


async def test_a_question_is_acknowledged_in_its_answers_write(
    fresh_redis_url: str, redis: aioredis.Redis, writes: list[bytes]
) -> None:
    """Delivered through the subscription, the question's ``query.received`` entry is
    acknowledged in the answer's transaction, not by a write of its own after it."""
    bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "orchestrator-test")
    events: list[Event] = []
    orchestrator, turns = make(
        redis, events, StubRetriever([MONITOR]), keys=ConversationKeys(redis, 600)
    )
    handlers.register(bus, orchestrator, concurrency=1)
    await bus.start()
    try:
        asked = query()
        entry_id = await bus.publish(Topic.QUERY_RECEIVED, asked)

        async def answered() -> bool:
            state = await turns.get(asked.correlation_id)
            return state is not None and state.status is TurnStatus.ANSWERED

        await wait_until(answered, 20)
        await wait_until(lambda: pel_empty(redis), 20)
        await asyncio.sleep(0.5)  # time for an acknowledgement the bus would send after it
    finally:
        await bus.stop()

    acks = [w for w in writes if b"XACK" in w and Topic.QUERY_RECEIVED.encode() in w]
    assert len(acks) == 1, "acknowledged once"
    (together,) = acks
    assert b"MULTI" in together
    assert b'"kind":"answer"' in together
    assert entry_id.encode() in together


async def pel_empty(redis: aioredis.Redis) -> bool:
    summary = await redis.xpending(Topic.QUERY_RECEIVED, Group.ORCHESTRATOR)
    return int(summary["pending"]) == 0


async def test_a_turn_not_answered_writes_its_notice_with_the_answer(
    fresh_redis_url: str, redis: aioredis.Redis, writes: list[bytes]
) -> None:
    """The notice for the people responsible (``notice.unanswered``) is part of the answer's
    one write: never sent for a turn that was not recorded, never lost for one that was. It
    carries the redacted question and the intent's category (the answer has none: no topic)."""
    bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "orchestrator-test")
    await bus.start()
    try:
        orchestrator, turns = make(redis, [], StubRetriever([UNRELATED]))
        replies = BusReplies(bus, turns, orchestrator.deps.conversations)
        asked = query("My monitor arm from <PERSON_1> wobbles, where do I get a new one?")
        writes.clear()
        await orchestrator.handle_query(asked, replies)
        await replies.drain(asked.correlation_id)
    finally:
        await bus.stop()
    (together,) = [w for w in writes if b"MULTI" in w and b'"kind":"answer"' in w]
    assert b'"action":"no_answer"' in together
    assert b"notice.unanswered" in together
    entries: Any = await redis.xrange("notice.unanswered")
    [notice] = [decode_entry(fields, UnansweredNotice) for _, fields in entries]
    assert (notice.correlation_id, notice.conversation_id) == (
        asked.correlation_id,
        asked.conversation_id,
    )
    assert (notice.outcome, notice.category) == ("no_answer", "peripheral_exchange")
    assert notice.question == asked.text
    assert notice.confidence == pytest.approx(0.12)


async def test_an_answer_sends_no_notice_unless_below_the_notice_confidence(
    fresh_redis_url: str, redis: aioredis.Redis
) -> None:
    bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "orchestrator-test")
    await bus.start()
    try:
        for threshold in (None, 0.9):
            orchestrator, turns = make(redis, [], StubRetriever([MONITOR]))
            orchestrator.settings.notice_confidence = threshold
            replies = BusReplies(bus, turns, orchestrator.deps.conversations)
            asked = query()
            await orchestrator.handle_query(asked, replies)
            await replies.drain(asked.correlation_id)
    finally:
        await bus.stop()
    entries: Any = await redis.xrange("notice.unanswered")
    [notice] = [decode_entry(fields, UnansweredNotice) for _, fields in entries]
    assert (notice.outcome, notice.confidence) == ("low_confidence", pytest.approx(0.82))
