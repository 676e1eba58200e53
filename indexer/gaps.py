"""Knowledge gaps: the questions the assistant could not help with, kept for a rolling window,
and their clusters.

A *gap question* is a redacted user question whose turn ended in ``no_answer``, was escalated,
or was rated 1-2. The orchestrator's decision records on the audit stream carry the redacted
question (``details.question``); a low rating (``feedback.recorded``) names only the turn, so
the question is looked up among the decision records seen (and a rating that arrives before its
turn's record is remembered until the record comes).

Everything lives in Redis under ``deskpilot:indexer:gaps:``, one gap question per turn (the
correlation id), so a redelivered event changes nothing; entries older than the window are
pruned. Only the redacted text is kept, never a user id.

Clustering is plain: questions in time order join the cluster whose centroid is closest when
it is at least ``threshold`` similar, else start a new one; clusters whose centroids are then
that similar are merged. Vectors are L2-normalised, so a dot product is a cosine similarity.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from contracts.events import Action, AuditRecorded, FeedbackRecorded, GapSignal
from contracts.ids import conversation_digest

log = logging.getLogger("deskpilot.indexer.gaps")

PREFIX = "deskpilot:indexer:gaps:"
WINDOW_KEY = PREFIX + "window"
"""Sorted set: turn id -> when its question became a gap (epoch seconds)."""
QUESTIONS_KEY = PREFIX + "questions"
"""Hash: turn id -> the gap question as JSON (text, signal, asked_at)."""
ASKED_PREFIX = PREFIX + "asked:"
"""Per turn: the redacted question of any decision record, for a later low rating."""
LOW_RATING_PREFIX = PREFIX + "low:"
"""Per turn: a low rating that arrived before the turn's decision record."""
CONVERSATION_PREFIX = PREFIX + "conversation:"
"""Set per conversation: its turns the window knows, so a purge finds them."""
PURGED_PREFIX = PREFIX + "purged:"
"""Per purged conversation, for the window's length: its records that arrive after the purge
(the audit stream is read in lingering batches, a rating may come late) are not kept. The key
carries a digest of the conversation id (``tombstone``), so no key names a purged conversation."""


def tombstone(conversation_id: str) -> str:
    """The key that marks ``conversation_id`` as purged, without naming it."""
    return PURGED_PREFIX + conversation_digest(conversation_id)


LOW_RATING_MAX = 2
GAP_OUTCOMES: dict[str, GapSignal] = {
    Action.NO_ANSWER.value: "no_answer",
    Action.ESCALATED.value: "escalated",
}
MAX_QUESTION_CHARS = 300


@dataclass(frozen=True, slots=True)
class GapQuestion:
    turn_id: str
    text: str
    signal: GapSignal
    asked_at: datetime

    @property
    def key(self) -> str:
        """Stable identity of the question (its turn), for cluster ids."""
        return hashlib.sha256(self.turn_id.encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(
            {"text": self.text, "signal": self.signal, "asked_at": self.asked_at.isoformat()}
        )

    @classmethod
    def from_json(cls, turn_id: str, raw: str | bytes) -> GapQuestion:
        data = json.loads(raw)
        return cls(turn_id, data["text"], data["signal"], datetime.fromisoformat(data["asked_at"]))


def as_text(value: object) -> str:
    """A Redis reply as text (the bus's client returns bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _clean(question: object) -> str | None:
    if not isinstance(question, str):
        return None
    text = " ".join(question.split())[:MAX_QUESTION_CHARS]
    return text or None


class GapWindow:
    """The rolling window of gap questions in Redis."""

    def __init__(self, client: aioredis.Redis, window_days: float) -> None:
        self.client = client
        self.window = timedelta(days=window_days)

    @property
    def ttl_s(self) -> int:
        return max(1, int(self.window.total_seconds()))

    async def on_audit(self, record: AuditRecorded) -> GapQuestion | None:
        """A decision record: its question is a gap when the outcome was no answer or a ticket,
        or when the turn was already rated low; else it is remembered for a later rating."""
        if record.action != "decision":
            return None
        question = _clean(record.details.get("question"))
        if question is None:
            return None
        turn_id = record.correlation_id
        signal = GAP_OUTCOMES.get(str(record.details.get("outcome")))
        # One round trip: whether the conversation was purged, the turn noted for a purge and,
        # for an answered turn, its question kept for a later rating together with whether a
        # low rating came first.
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.exists(tombstone(record.conversation_id))
            self._remember(pipe, record.conversation_id, turn_id)
            if signal is None:
                pipe.exists(LOW_RATING_PREFIX + turn_id)
                pipe.set(ASKED_PREFIX + turn_id, question, ex=self.ttl_s)
            purged, *written = await pipe.execute()
        if purged:  # a record that arrived after its conversation's purge: undo, keep nothing
            await self.client.delete(
                CONVERSATION_PREFIX + record.conversation_id, ASKED_PREFIX + turn_id
            )
            return None
        if signal is None:
            if not written[2]:
                return None
            signal = "low_rating"
        return await self.add(GapQuestion(turn_id, question, signal, record.occurred_at))

    async def on_feedback(self, event: FeedbackRecorded) -> GapQuestion | None:
        """A rating of 1-2 makes the rated turn's question a gap (once its question is known)."""
        if event.score > LOW_RATING_MAX or await self._purged(event.conversation_id):
            return None
        await self.remember(event.conversation_id, event.turn_id)
        raw = await self.client.get(ASKED_PREFIX + event.turn_id)
        question = _clean(None if raw is None else as_text(raw))
        if question is None:
            await self.client.set(LOW_RATING_PREFIX + event.turn_id, "1", ex=self.ttl_s)
            return None
        return await self.add(GapQuestion(event.turn_id, question, "low_rating", event.occurred_at))

    async def remember(self, conversation_id: str, turn_id: str) -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            self._remember(pipe, conversation_id, turn_id)
            await pipe.execute()

    def _remember(self, pipe: Pipeline, conversation_id: str, turn_id: str) -> None:
        """Queue the commands that note ``turn_id`` under its conversation (for a purge)."""
        key = CONVERSATION_PREFIX + conversation_id
        pipe.sadd(key, turn_id)
        pipe.expire(key, self.ttl_s)

    async def _purged(self, conversation_id: str) -> bool:
        return bool(await self.client.exists(tombstone(conversation_id)))

    async def purge(self, conversation_id: str) -> int:
        """Forget every question of the conversation (an operator's purge), and take none of it
        that arrives later; how many turns."""
        key = CONVERSATION_PREFIX + conversation_id
        turns = [as_text(t) for t in await self.client.smembers(key)]
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.set(tombstone(conversation_id), "1", ex=self.ttl_s)
            for turn_id in turns:
                pipe.delete(ASKED_PREFIX + turn_id, LOW_RATING_PREFIX + turn_id)
                pipe.hdel(QUESTIONS_KEY, turn_id)
                pipe.zrem(WINDOW_KEY, turn_id)
            pipe.delete(key)
            await pipe.execute()
        return len(turns)

    async def add(self, question: GapQuestion) -> GapQuestion | None:
        """Keep ``question`` (once per turn; the first signal wins); None when already kept or
        already outside the window."""
        at = question.asked_at.timestamp()
        if at < (datetime.now(UTC) - self.window).timestamp():
            return None
        added = await self.client.zadd(WINDOW_KEY, {question.turn_id: at}, nx=True)
        if not added:
            return None
        await self.client.hset(QUESTIONS_KEY, question.turn_id, question.to_json())
        log.info("gap question kept", extra={"signal": question.signal})
        return question

    async def prune(self, now: datetime | None = None) -> int:
        """Forget the questions that left the window; how many."""
        cutoff = ((now or datetime.now(UTC)) - self.window).timestamp()
        old = await self.client.zrangebyscore(WINDOW_KEY, "-inf", f"({cutoff}")
        if not old:
            return 0
        await self.client.hdel(QUESTIONS_KEY, *old)
        await self.client.zrem(WINDOW_KEY, *old)
        return len(old)

    async def questions(self, limit: int) -> list[GapQuestion]:
        """The window's most recent ``limit`` questions, oldest first."""
        ids = [as_text(i) for i in await self.client.zrange(WINDOW_KEY, -limit, -1)]
        if not ids:
            return []
        raws = await self.client.hmget(QUESTIONS_KEY, ids)
        return [
            GapQuestion.from_json(turn_id, raw)
            for turn_id, raw in zip(ids, raws, strict=True)
            if raw is not None
        ]


# -- clustering ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Cluster:
    """Indices of member questions (in the order given) and the sum of their vectors."""

    members: list[int]
    total: np.ndarray

    @property
    def centroid(self) -> np.ndarray:
        """The members' mean direction, normalised."""
        norm = float(np.linalg.norm(self.total))
        return self.total / norm if norm else self.total


def _normalised(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


def cluster(vectors: Sequence[Sequence[float]], threshold: float) -> list[Cluster]:
    """Threshold clustering of normalised vectors (see the module docstring); deterministic for
    a given order. Clusters come largest first; members keep their input order."""
    data = np.asarray(vectors, dtype=np.float64)
    if data.size == 0:
        return []
    totals = np.zeros_like(data)  # row k: the sum of cluster k's vectors
    centroids = np.zeros_like(data)  # row k: that sum normalised
    members: list[list[int]] = []
    for index, vector in enumerate(data):
        count = len(members)
        if count:
            similarities = centroids[:count] @ vector
            best = int(np.argmax(similarities))
            if similarities[best] >= threshold:
                totals[best] += vector
                centroids[best] = _normalised(totals[best : best + 1])[0]
                members[best].append(index)
                continue
        totals[count] = vector
        centroids[count] = _normalised(data[index : index + 1])[0]
        members.append([index])
    totals = totals[: len(members)]
    while len(members) > 1:
        centroids = _normalised(totals)
        similarities = np.triu(centroids @ centroids.T, k=1)
        similarities[np.tril_indices(len(members))] = -np.inf
        first, second = np.unravel_index(int(np.argmax(similarities)), similarities.shape)
        if similarities[first, second] < threshold:
            break
        totals[first] += totals[second]
        members[int(first)].extend(members.pop(int(second)))
        totals = np.delete(totals, second, axis=0)
    clusters = [Cluster(sorted(group), totals[k]) for k, group in enumerate(members)]
    return sorted(clusters, key=lambda c: (-len(c.members), c.members[0]))
