"""What a turn writes on its way to the answer: its audit records together (one write, before the
answer), its state once, and the search announced while it runs.

The orchestrator runs on the session's real Redis with the stand-ins of ``test_service_llm`` for
the models, and recording stand-ins for the services it talks to.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from contracts.events import AnswerBody, ChunksIndexed, ContextInsufficient, QueryReceived
from orchestrator.config import OrchestratorSettings
from orchestrator.crawl import CrawlWaits
from orchestrator.intent import IntentClassifier
from orchestrator.memory import ConversationStore
from orchestrator.retrieval import Retrieval, Retriever
from orchestrator.service import Orchestrator
from orchestrator.state import TurnState, TurnStatus, TurnStore
from orchestrator.tests.test_service_llm import (
    MONITOR,
    UNRELATED,
    StubClassifier,
    StubRetriever,
    classified,
)
from orchestrator.turn import AuditNote, TurnDeps

Event = tuple[str, Any]


class RecordingAudit:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def record(self, turn: TurnState, *notes: AuditNote) -> None:
        self.events.append(("audit", [note.action for note in notes]))

    async def publish(self, record: Any) -> None:
        self.events.append(("audit", [record.action]))


class RecordingReplies:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        self.events.append(("progress", stage))

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        self.events.append(("answer", body.action.value))


class CountingTurns(TurnStore):
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        super().__init__(client, ttl_s)
        self.saved: list[TurnStatus] = []

    async def save(self, state: TurnState) -> None:
        self.saved.append(state.status)
        await super().save(state)


class RecordingFleet:
    def __init__(self) -> None:
        self.requests: list[ContextInsufficient] = []

    async def request(self, request: ContextInsufficient) -> None:
        self.requests.append(request)

    async def stop(self, turn: TurnState, job_id: str) -> None:
        return None


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

    def retrieve(self, question: str, k: int, *, os: str | None = None) -> Retrieval:
        if not self.announced.wait(timeout=10):
            raise AssertionError("the search was not announced while it ran")
        return super().retrieve(question, k, os=os)


class AnnouncingReplies(RecordingReplies):
    def __init__(self, events: list[Event], announced: threading.Event) -> None:
        super().__init__(events)
        self.announced = announced

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        await super().progress(turn, stage, detail)
        if stage == "searching":
            self.announced.set()


@pytest.fixture
async def redis(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(fresh_redis_url)
    yield client
    await client.aclose()


def make(
    redis: aioredis.Redis, events: list[Event], retriever: Any, **deps: Any
) -> tuple[Orchestrator, CountingTurns]:
    turns = CountingTurns(redis, 600)
    built = TurnDeps(
        retriever=cast(Retriever, retriever),
        intents=cast(IntentClassifier, StubClassifier(classified())),
        turns=turns,
        conversations=ConversationStore(redis, 600),
        audit=RecordingAudit(events),
        **deps,
    )
    settings = OrchestratorSettings(cases_max=0, crawl_seed_urls=["https://help.example/"])
    return Orchestrator(built, settings), turns


def query(text: str = "How do I request a second monitor?") -> QueryReceived:
    return QueryReceived(
        correlation_id=uuid.uuid4().hex,
        conversation_id=uuid.uuid4().hex,
        user_id="u1",
        text=text,
        reply_to="reply.test",
    )


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
