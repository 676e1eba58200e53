"""Feedback-aware retrieval: the policy, the counts on real valkey, the ranking they change, and
the ``feedback.recorded`` subscription on a real bus."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import chromadb
import pytest
import redis.asyncio as aioredis
from chromadb.config import Settings
from pydantic import ValidationError

from contracts.bus import Bus
from contracts.events import Action, AnswerBody, Citation, FeedbackRecorded, utcnow
from contracts.settings import ServiceSettings
from contracts.topics import Group, Topic
from orchestrator import handlers
from orchestrator.feedback import (
    FeedbackBoosts,
    FeedbackLedger,
    FeedbackSettings,
    Tally,
    adjustment,
    bucket_of,
)
from orchestrator.retrieval import Retriever
from orchestrator.state import TurnState, TurnStore
from tests.support import wait_until


@pytest.fixture
async def client(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A database of the test's own: the ledger's keys have fixed names."""
    connection = aioredis.from_url(fresh_redis_url)
    try:
        yield connection
    finally:
        await connection.aclose()


def rating(
    turn_id: str, score: int, urls: list[str], user: str | None = None, **fields: Any
) -> FeedbackRecorded:
    """A rating of ``turn_id``, by ``user`` (by default a user of its own)."""
    return FeedbackRecorded(
        correlation_id=turn_id,
        conversation_id="c-1",
        turn_id=turn_id,
        user_id=user or f"anon:{turn_id}",
        score=score,
        cited_urls=urls,
        **fields,
    )


# -- the policy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "bucket"),
    [(1, "negative"), (2, "negative"), (3, "neutral"), (4, "positive"), (5, "positive")],
)
def test_scores_fall_into_buckets(score: int, bucket: str) -> None:
    assert bucket_of(score) == bucket


@pytest.mark.parametrize(
    ("tally", "expected"),
    [
        (Tally(positive=2, negative=0, ratings=2), 0.0),  # fewer than 3 ratings: nothing
        (Tally(positive=0, negative=2, ratings=2), 0.0),
        (Tally(positive=3, negative=0, ratings=3), 0.15),
        (Tally(positive=2, negative=1, ratings=3), 0.15),  # 66.7 % > 60 %
        (Tally(positive=3, negative=2, ratings=5), 0.0),  # exactly 60 %: not over
        (Tally(positive=0, negative=3, ratings=3), -0.20),
        (Tally(positive=1, negative=2, ratings=3), -0.20),  # 66.7 % negative
        (Tally(positive=2, negative=2, ratings=4), 0.0),  # exactly 50 %: not over
        (Tally(positive=1, negative=1, ratings=3), 0.0),  # a 3 in between: mixed
        (Tally(positive=0, negative=0, ratings=5), 0.0),  # all 3s
    ],
)
def test_the_default_policy(tally: Tally, expected: float) -> None:
    assert adjustment(tally, FeedbackSettings()) == pytest.approx(expected)


def test_the_policy_is_configurable_and_can_be_switched_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_FEEDBACK_MIN_RATINGS", "5")
    monkeypatch.setenv("ORCHESTRATOR_FEEDBACK_PENALTY", "0.5")
    settings = FeedbackSettings()
    assert adjustment(Tally(0, 4, 4), settings) == 0.0
    assert adjustment(Tally(0, 5, 5), settings) == pytest.approx(-0.5)
    off = FeedbackSettings(feedback_enabled=False)
    assert adjustment(Tally(0, 9, 9), off) == 0.0


def test_a_policy_that_could_boost_and_penalise_at_once_is_refused() -> None:
    with pytest.raises(ValidationError, match="BOOST_ABOVE"):
        FeedbackSettings(feedback_boost_above=0.3, feedback_penalty_above=0.3)


# -- the counts on valkey ------------------------------------------------------------------------


async def test_ratings_are_counted_per_cited_document(client: aioredis.Redis) -> None:
    ledger = FeedbackLedger(client, turn_ttl_s=3600)
    a, b = "https://kb.example/a", "https://kb.example/b"

    assert await ledger.record(rating("t1", 5, [a, b]))
    assert await ledger.record(rating("t2", 1, [a]))
    assert await ledger.record(rating("t3", 3, [a]))
    assert not await ledger.record(rating("t4", 2, []))  # nothing cited, nothing to move

    assert await ledger.tallies() == {a: Tally(1, 1, 3), b: Tally(1, 0, 1)}


async def test_a_redelivered_rating_counts_once(client: aioredis.Redis) -> None:
    ledger = FeedbackLedger(client, turn_ttl_s=3600)
    event = rating("t1", 1, ["https://kb.example/a"])

    assert await ledger.record(event)
    assert not await ledger.record(event)

    assert await ledger.tallies() == {"https://kb.example/a": Tally(0, 1, 1)}


async def test_a_re_rating_replaces_the_turns_earlier_rating(client: aioredis.Redis) -> None:
    ledger = FeedbackLedger(client, turn_ttl_s=3600)
    url = "https://kb.example/a"
    first = rating("t1", 1, [url])
    second = rating("t1", 5, [url], occurred_at=first.occurred_at + timedelta(seconds=5))

    await ledger.record(first)
    await ledger.record(second)
    assert await ledger.tallies() == {url: Tally(1, 0, 1)}

    # The first event redelivered late (after the second was counted) changes nothing.
    assert not await ledger.record(first)
    assert await ledger.tallies() == {url: Tally(1, 0, 1)}
    assert 0 < await client.ttl("deskpilot:orchestrator:{feedback}:turn:t1") <= 3600


async def test_one_user_rating_many_turns_counts_once(client: aioredis.Redis) -> None:
    ledger = FeedbackLedger(client, turn_ttl_s=3600)
    boosts = FeedbackBoosts(ledger, FeedbackSettings())
    article = "https://kb.example/vpn"

    # One person rates five answers citing the article 1 of 5: one rater, no penalty.
    for n in range(5):
        await boosts.on_feedback(rating(f"mine-{n}", 1, [article], user="emp-7"))
    assert await ledger.tallies() == {article: Tally(0, 1, 1)}
    assert boosts.adjustment(article) == 0.0

    # Three people who each rate it badly do move it.
    for user in ("emp-8", "emp-9"):
        await boosts.on_feedback(rating(f"{user}-1", 2, [article], user=user))
    assert await ledger.tallies() == {article: Tally(0, 3, 3)}
    assert boosts.adjustment(article) == pytest.approx(-0.20)
    # The users appear in the counts only as digests.
    votes = await client.hgetall("deskpilot:orchestrator:{feedback}:votes")
    assert votes
    assert not any(b"emp-" in field for field in votes)


async def test_a_users_latest_rating_of_a_document_is_their_vote(client: aioredis.Redis) -> None:
    ledger = FeedbackLedger(client, turn_ttl_s=3600)
    url = "https://kb.example/a"
    first = rating("t1", 1, [url], user="emp-1")
    later = rating("t2", 5, [url], user="emp-1", occurred_at=first.occurred_at + timedelta(1))
    earlier = rating("t3", 1, [url], user="emp-1", occurred_at=first.occurred_at - timedelta(1))

    assert await ledger.record(first)
    assert await ledger.record(later)  # another answer citing it, rated later: vote changes
    assert await ledger.tallies() == {url: Tally(1, 0, 1)}
    assert not await ledger.record(earlier)  # delivered late: older than the vote, ignored
    again = rating("t4", 4, [url], user="emp-1", occurred_at=later.occurred_at + timedelta(1))
    assert not await ledger.record(again)  # newer, but the same vote: no count moves
    assert await ledger.tallies() == {url: Tally(1, 0, 1)}


async def test_boosts_follow_the_counts(client: aioredis.Redis) -> None:
    ledger = FeedbackLedger(client, turn_ttl_s=3600)
    boosts = FeedbackBoosts(ledger, FeedbackSettings())
    good, bad = "https://kb.example/good", "https://kb.example/bad"

    for n in range(2):
        await boosts.on_feedback(rating(f"g{n}", 5, [good]))
        await boosts.on_feedback(rating(f"b{n}", 1, [bad]))
    assert boosts.adjustments == {}  # two ratings each: not yet

    await boosts.on_feedback(rating("g2", 4, [good]))
    await boosts.on_feedback(rating("b2", 2, [bad]))
    assert boosts.adjustment(good) == pytest.approx(0.15)
    assert boosts.adjustment(bad) == pytest.approx(-0.20)
    assert boosts.adjustment("https://kb.example/unrated") == 0.0

    # Another process sees them on its next refresh.
    other = FeedbackBoosts(FeedbackLedger(client, turn_ttl_s=3600), FeedbackSettings())
    await other.refresh()
    assert other.adjustments == boosts.adjustments


# -- the ranking ---------------------------------------------------------------------------------


class FixedEncoder:
    """Questions and chunks as fixed unit vectors: the test decides who is closest."""

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts: list[str]) -> list[list[float]]:
        return [list(self.vectors[text]) for text in texts]


class StaticFeedback:
    def __init__(self, adjustments: dict[str, float]) -> None:
        self.adjustments = adjustments

    def adjustment(self, url: str) -> float:
        return self.adjustments.get(url, 0.0)


def unit(*values: float) -> Sequence[float]:
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


@pytest.fixture
def two_articles(tmp_path: Path) -> Any:
    """Two articles about printers; the first matches the question a little better."""
    collection = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    ).get_or_create_collection(
        f"test-{uuid.uuid4().hex[:12]}",
        configuration={"hnsw": {"space": "cosine"}},
        embedding_function=None,
    )
    for url, text, vector in (
        ("https://kb.example/printer-a", "Add a printer from Settings.", unit(1.0, 0.2, 0.0)),
        ("https://kb.example/printer-b", "Add a printer with the wizard.", unit(1.0, 0.35, 0.0)),
    ):
        collection.add(
            ids=[hashlib.sha256(url.encode()).hexdigest()[:32]],
            embeddings=[vector],
            documents=[text],
            metadatas=[{"url": url, "title": text, "section": text, "chunk_index": 0}],
        )
    return collection


QUESTION = "add a printer"
ENCODER = FixedEncoder({QUESTION: unit(1.0, 0.0, 0.0)})


def test_without_ratings_the_ranking_is_unchanged(two_articles: Any) -> None:
    plain = Retriever(ENCODER, two_articles).search(QUESTION, 2)
    with_source = Retriever(ENCODER, two_articles, feedback=StaticFeedback({})).search(QUESTION, 2)

    assert [h.url for h in plain] == [
        "https://kb.example/printer-a",
        "https://kb.example/printer-b",
    ]
    assert with_source == plain  # same hits, same fused scores, feedback 0


def test_a_penalised_document_gives_way_and_keeps_its_similarity(two_articles: Any) -> None:
    plain = Retriever(ENCODER, two_articles).search(QUESTION, 2)
    feedback = StaticFeedback({"https://kb.example/printer-a": -0.20})
    penalised = Retriever(ENCODER, two_articles, feedback=feedback).search(QUESTION, 2)

    assert [h.url for h in penalised] == [
        "https://kb.example/printer-b",
        "https://kb.example/printer-a",
    ]
    before = {h.url: h for h in plain}
    after = {h.url: h for h in penalised}
    a = "https://kb.example/printer-a"
    assert after[a].fused_score == pytest.approx(before[a].fused_score * 0.8)
    assert after[a].feedback == pytest.approx(-0.20)
    assert after[a].score == pytest.approx(before[a].score)  # the cosine is never adjusted


def test_a_boosted_document_moves_up(two_articles: Any) -> None:
    feedback = StaticFeedback({"https://kb.example/printer-b": 0.15})
    hits = Retriever(ENCODER, two_articles, feedback=feedback).search(QUESTION, 2)

    assert hits[0].url == "https://kb.example/printer-b"
    assert hits[0].feedback == pytest.approx(0.15)


# -- the subscription ----------------------------------------------------------------------------


async def test_feedback_events_on_the_bus_move_the_ranking(
    client: aioredis.Redis, fresh_redis_url: str
) -> None:
    settings = ServiceSettings(redis_url=fresh_redis_url)
    bus = Bus(settings, "orchestrator")
    boosts = FeedbackBoosts(FeedbackLedger(bus.redis, 3600), FeedbackSettings())
    turns = TurnStore(bus.redis, 3600)
    url = "https://kb.example/printer-a"
    # An event without the answer's context (an older gateway): the turn's own answer says.
    await turns.save(
        TurnState(
            correlation_id="old-1",
            conversation_id="c-1",
            user_id="anonymous",
            reply_to="reply.test",
            question="add a printer",
            answer=AnswerBody(
                answer="From the article [1]",
                action=Action.ANSWER,
                citations=[Citation(n=1, url=url, title="Printers", snippet="Add")],
            ),
        )
    )
    handlers.register_feedback(bus, boosts, turns)
    await bus.start()
    try:
        publisher = Bus(settings, "gateway")
        await publisher.broker.connect()
        for n in range(2):
            await publisher.publish(Topic.FEEDBACK_RECORDED, rating(f"t{n}", 1, [url]))
        await publisher.publish(
            Topic.FEEDBACK_RECORDED,
            FeedbackRecorded(
                correlation_id="old-1",
                conversation_id="c-1",
                turn_id="old-1",
                user_id="anonymous",
                score=2,
                occurred_at=utcnow(),
            ),
        )
        await publisher.stop()
        await wait_until(lambda: boosts.adjustment(url) != 0.0, 10)
    finally:
        await bus.stop()

    assert boosts.adjustment(url) == pytest.approx(-0.20)
    groups = await client.xinfo_groups(Topic.FEEDBACK_RECORDED)
    assert Group.ORCHESTRATOR.encode() in [g["name"] for g in groups]
