"""Gap detection and proposal drafting on real Redis, a real Chroma and the real embedder.

The gap window is fed the events the orchestrator and the gateway publish (decision records,
ratings); a round clusters the questions and publishes ``proposal.drafted`` on the real bus,
read back from the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import redis.asyncio as aioredis
from chromadb.api.models.Collection import Collection

from contracts.bus import Bus, decode_entry
from contracts.events import AuditRecorded, FeedbackRecorded, ProposalDrafted, new_id
from contracts.readers import Readers
from contracts.topics import Topic
from indexer.cases import CaseStore, ResolvedCase, open_cases_collection
from indexer.config import IndexerSettings
from indexer.embedding import Embedder
from indexer.extract import extract_markdown
from indexer.gaps import GapQuestion, GapWindow, cluster, tombstone
from indexer.proposals import Drafter, GapDetector, is_crawled, title_of
from indexer.service import Ingestor

VPN = [
    "vpn keeps disconnecting every few minutes",
    "my VPN connection drops all the time",
    "VPN disconnects constantly when working from home",
]
PRINTER = ["the third floor printer jams on every page", "printer on floor 3 keeps jamming paper"]


def decision(question: str | None, outcome: str, turn_id: str | None = None) -> AuditRecorded:
    details: dict[str, Any] = {"outcome": outcome}
    if question is not None:
        details["question"] = question
    return AuditRecorded(
        correlation_id=turn_id or new_id(),
        conversation_id=new_id(),
        service="orchestrator",
        action="decision",
        reason="test",
        details=details,
    )


def rating(turn_id: str, score: int) -> FeedbackRecorded:
    return FeedbackRecorded(
        correlation_id=turn_id,
        conversation_id=new_id(),
        turn_id=turn_id,
        user_id="anon:1",
        score=score,
    )


@pytest.fixture
async def client(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A database of the test's own: the gap window's keys have fixed names."""
    redis_client = aioredis.from_url(fresh_redis_url)
    yield redis_client
    await redis_client.aclose()


@pytest.fixture
def window(client: aioredis.Redis) -> GapWindow:
    return GapWindow(client, window_days=7)


async def test_no_answer_and_escalated_questions_are_gaps_once_per_turn(window: GapWindow) -> None:
    record = decision("vpn keeps   disconnecting", "no_answer")
    kept = await window.on_audit(record)
    assert kept is not None
    assert (kept.text, kept.signal) == ("vpn keeps disconnecting", "no_answer")
    assert await window.on_audit(record) is None  # a redelivery adds nothing
    assert await window.on_audit(decision("printer jams", "escalated")) is not None
    assert await window.on_audit(decision(None, "no_answer")) is None  # no question: nothing
    assert await window.on_audit(decision("hello", "answer")) is None
    assert [q.signal for q in await window.questions(10)] == ["no_answer", "escalated"]


async def test_a_low_rating_makes_the_turns_question_a_gap_in_either_order(
    window: GapWindow,
) -> None:
    first, second, praised = new_id(), new_id(), new_id()
    # The decision first, then the rating.
    assert await window.on_audit(decision("outlook will not start", "answer", first)) is None
    kept = await window.on_feedback(rating(first, 2))
    assert kept is not None
    assert kept.signal == "low_rating"
    # The rating first, then the decision.
    assert await window.on_feedback(rating(second, 1)) is None
    late = await window.on_audit(decision("teams has no sound", "answer", second))
    assert late is not None
    assert late.signal == "low_rating"
    # A good rating is no gap.
    await window.on_audit(decision("reset my password", "answer", praised))
    assert await window.on_feedback(rating(praised, 5)) is None
    texts = sorted(q.text for q in await window.questions(10))
    assert texts == ["outlook will not start", "teams has no sound"]


async def test_records_of_a_purged_conversation_that_arrive_late_are_not_kept(
    window: GapWindow,
) -> None:
    """The audit stream is read in lingering batches: a decision record written before a purge
    may be handled after it, and a rating may come late. Neither brings the question back."""
    late = decision("how do I map the finance share", "no_answer")
    rated = decision("printer on floor 3 jams", "answer")
    rated = rated.model_copy(update={"conversation_id": late.conversation_id})
    await window.on_audit(rated)
    assert await window.purge(late.conversation_id) == 1

    assert await window.on_audit(late) is None
    low = rating(rated.correlation_id, 1).model_copy(
        update={"conversation_id": late.conversation_id}
    )
    assert await window.on_feedback(low) is None
    assert await window.questions(10) == []
    left = await window.client.keys(f"*{late.conversation_id}*")
    left += await window.client.keys(f"*{late.correlation_id}*")
    assert left == [], "nothing of the purged conversation is written again, nor named"
    assert await window.client.exists(tombstone(late.conversation_id)), "the purge is remembered"


async def test_questions_outside_the_window_are_pruned(window: GapWindow) -> None:
    old = decision("an old question", "no_answer")
    old.occurred_at = datetime.now(UTC) - timedelta(days=8)
    assert await window.on_audit(old) is None  # already outside the window
    await window.on_audit(decision("a new question", "no_answer"))
    assert await window.prune(now=datetime.now(UTC) + timedelta(days=8)) == 1
    assert await window.questions(10) == []


def test_similar_questions_cluster_together(embedder: Embedder) -> None:
    questions = [VPN[0], PRINTER[0], VPN[1], PRINTER[1], VPN[2], "how do I order a new monitor"]
    groups = cluster(embedder.encode(questions), threshold=0.5)
    assert [sorted(questions[i] for i in g.members) for g in groups[:2]] == [
        sorted(VPN),
        sorted(PRINTER),
    ]
    assert len(groups) == 3


def test_titles_and_crawled_chunks() -> None:
    assert title_of("  my vpn   drops?? ") == "My vpn drops"
    assert is_crawled({"url": "https://help.example.com/vpn", "category": ""})
    assert not is_crawled({"url": "https://it.example/kb/vpn", "category": "network"})
    assert not is_crawled({"url": "upload://abc/vpn.md", "category": ""})
    assert is_crawled({"url": "upload://abc/vpn.md", "source": "crawled"})


@pytest.fixture
def cases(settings: IndexerSettings, embedder: Embedder) -> Collection:
    collection = open_cases_collection(settings)
    CaseStore(embedder, collection).upsert(
        [
            ResolvedCase(
                id="IT-1042",
                summary="VPN connection drops every few minutes",
                symptoms="The VPN disconnects repeatedly at home",
                resolution="Update the VPN client to 5.2 and turn off Wi-Fi power saving.",
            ),
            ResolvedCase(
                id="IT-2001",
                summary="Cannot order a standing desk",
                resolution="Facilities handle desks; use the facilities form.",
            ),
        ]
    )
    return collection


def read_proposals(raw: Any) -> list[ProposalDrafted]:
    return [decode_entry(fields, ProposalDrafted) for _, fields in raw]


async def test_a_round_drafts_one_proposal_per_recurring_gap_and_redrafts_when_it_grows(
    client: aioredis.Redis,
    window: GapWindow,
    embedder: Embedder,
    ingestor: Ingestor,
    collection: Collection,
    cases: Collection,
    settings: IndexerSettings,
    fresh_redis_url: str,
) -> None:
    page = extract_markdown(
        "# Stable VPN at home\n\nIf the VPN disconnects often, switch the VPN protocol to TCP "
        "in the client's settings and restart it.",
        fallback_title="Stable VPN",
        fallback_url="https://help.example.com/vpn-stable",
    )
    ingestor.ingest_documents([page])
    settings = settings.model_copy(update={"redis_url": fresh_redis_url, "gaps_min_size": 3})
    bus = Bus(settings, "indexer")
    await bus.broker.connect()
    try:
        detector = GapDetector(
            bus, window, embedder, Drafter(collection, cases, 0.4), settings.model_copy()
        )
        for question in [*VPN[:2], *PRINTER]:
            await window.on_audit(decision(question, "no_answer"))
        assert await detector.run() == []  # two VPN questions: below the minimum size
        await window.on_audit(decision(VPN[2], "escalated"))
        [first] = await detector.run()
        assert await detector.run() == []  # nothing changed: nothing published again
        await window.on_audit(decision("the vpn disconnects me all day long", "no_answer"))
        [second] = await detector.run()
        published = read_proposals(await client.xrange(Topic.PROPOSALS))
    finally:
        await bus.stop()

    assert [p.revision for p in published] == [1, 2]
    assert first.proposal_id == second.proposal_id  # the same gap, grown
    assert len(first.questions) == 3
    assert len(second.questions) == 4
    assert {q.signal for q in first.questions} == {"no_answer", "escalated"}
    refs = {(s.kind, s.ref) for s in first.sources}
    assert ("ticket", "IT-1042") in refs
    assert ("page", "https://help.example.com/vpn-stable") in refs
    assert ("ticket", "IT-2001") not in refs
    assert "Update the VPN client to 5.2" in first.article_markdown
    assert "switch the VPN protocol to TCP" in first.article_markdown
    assert first.article_markdown.startswith(f"# {first.title}\n")
    assert "vpn" in first.title.lower()


def test_a_restricted_page_leaves_no_trace_in_a_draft(
    embedder: Embedder, ingestor: Ingestor, collection: Collection
) -> None:
    """A proposal is read by reviewers and published for everyone: the closest article and the
    pages it quotes are public ones, even when a restricted page is closer."""
    restricted = extract_markdown(
        "# VPN keeps disconnecting every few minutes\n\nVPN disconnects constantly when "
        "working from home, the connection drops all the time: the executives' Falcon gateway "
        "needs your hardware token.",
        fallback_title="Executive VPN",
        fallback_url="https://wiki.example/exec/vpn-drops",
    )
    public = extract_markdown(
        "# VPN client settings\n\nThe VPN client's settings list the protocol and the server.",
        fallback_title="VPN client settings",
        fallback_url="https://it.example/kb/vpn",
    )
    ingestor.ingest_documents(
        [replace(restricted, readers=Readers(public=False, groups=("executives",))), public]
    )
    vectors = np.asarray(embedder.encode(VPN))
    centroid = vectors.mean(axis=0)
    centroid /= np.linalg.norm(centroid)
    questions = [GapQuestion(new_id(), text, "no_answer", datetime.now(UTC)) for text in VPN]
    # The restricted page is the closest of all: it would be the affected article.
    nearest = collection.query(query_embeddings=[centroid.tolist()], n_results=1)
    assert nearest["metadatas"][0][0]["url"] == "https://wiki.example/exec/vpn-drops"

    draft = Drafter(collection, None, 0.2).draft(questions, centroid.tolist(), "VPN drops")

    # Without the filter the restricted page would be the closest article; now the public
    # page is what the draft quotes (a page without category counts as crawled here).
    assert draft.affected_url is None
    assert [s.ref for s in draft.sources] == ["https://it.example/kb/vpn"]
    everything = " ".join(
        [draft.article_markdown, str(draft.affected_title), *(s.ref for s in draft.sources)]
    )
    assert "falcon" not in everything.lower()
    assert "exec" not in everything.lower()
