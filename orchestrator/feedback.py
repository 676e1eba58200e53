"""Feedback-aware retrieval: documents users rate well rank a little higher, badly a little lower.

A document's ratings are counted by *user*, not by turn: each user who rated an answer citing it
has one vote on it, their latest rating of any such answer: positive for 4-5, negative for 1-2,
neither for 3 (but it counts as a rater). So one person who rates many turns citing an article
counts once and cannot bury (or promote) it alone. Once a document has ``feedback_min_ratings``
distinct raters, the share of positive votes above ``feedback_boost_above`` gives it
``+feedback_boost``, the share of negative ones above ``feedback_penalty_above`` gives it
``-feedback_penalty``; otherwise nothing. The retriever multiplies a chunk's rank-fusion score
by ``1 + adjustment`` (as it does for the user's operating system), so a penalised article gives
way to the next one that matches about as well, while a chunk's cosine similarity, which decides
whether the knowledge base covers a question at all, keeps its meaning. Without ratings every
adjustment is 0 and retrieval is exactly what it was.

Where the counts live (one Redis hash tag, so the update script works on a cluster too):

* ``deskpilot:orchestrator:{feedback}:votes``: a hash of ``<URL>\\n<user digest>`` -> that user's
  vote on the document (bucket and when it was given); the user appears only as a SHA-256 digest.
  A newer rating replaces the vote, an older one (a late redelivery) does not.
* ``deskpilot:orchestrator:{feedback}:raters`` / ``:raters:positive`` / ``:raters:negative``:
  hashes of URL -> how many distinct users voted, and voted positive or negative.
* ``deskpilot:orchestrator:{feedback}:turn:<turn id>``: which rating of the turn is counted (its
  event and time), so a redelivered or late event changes nothing.

How a change to these rules is gated: ``deskpilot eval retrieval --feedback <source>`` runs the
offline retrieval evaluation with and without the adjustments that the counts (the live ones,
``redis://...``, or a JSONL of ``{url, positive, negative, ratings}``) give under the current
``ORCHESTRATOR_FEEDBACK_*`` settings, and exits 1 when they lower recall@1 or MRR: a change to
the rules or the settings that lowers ``eval retrieval`` is not shipped.

Every process keeps the adjustments in memory (:class:`FeedbackBoosts`), re-read every
``feedback_refresh_s`` and right after it records a rating: one read of three hashes whose size
is the number of rated documents, never a Redis call per retrieval.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import redis.asyncio as aioredis
from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from contracts.events import FeedbackRecorded
from contracts.settings import ServiceSettings

log = logging.getLogger("deskpilot.orchestrator.feedback")

Bucket = Literal["positive", "negative", "neutral"]

PREFIX = "deskpilot:orchestrator:{feedback}:"
POSITIVE_KEY = PREFIX + "raters:positive"
NEGATIVE_KEY = PREFIX + "raters:negative"
RATERS_KEY = PREFIX + "raters"
VOTES_KEY = PREFIX + "votes"
TURN_PREFIX = PREFIX + "turn:"


class FeedbackSettings(ServiceSettings):
    """How ratings move documents in the ranking.

    Meant to be a base of :class:`orchestrator.config.OrchestratorSettings` (same prefix).
    """

    model_config = SettingsConfigDict(env_prefix="ORCHESTRATOR_")

    feedback_enabled: bool = Field(
        True, description="Let users' ratings of answers move the documents they cited."
    )
    feedback_min_ratings: int = Field(
        3,
        ge=1,
        description="Distinct users who rated a document before their ratings move it in the "
        "ranking (one user's ratings of many turns count once).",
    )
    feedback_boost: float = Field(
        0.15,
        ge=0,
        le=1,
        description="Rank boost of a document rated mostly positive (4-5): its chunks' fused "
        "scores are multiplied by 1 + this.",
    )
    feedback_boost_above: float = Field(
        0.6,
        ge=0,
        lt=1,
        description="Share of its raters whose latest rating is positive a document must exceed "
        "to be boosted.",
    )
    feedback_penalty: float = Field(
        0.20,
        ge=0,
        lt=1,
        description="Rank penalty of a document rated mostly negative (1-2): its chunks' fused "
        "scores are multiplied by 1 - this.",
    )
    feedback_penalty_above: float = Field(
        0.5,
        ge=0,
        lt=1,
        description="Share of its raters whose latest rating is negative a document must exceed "
        "to be penalised.",
    )
    feedback_refresh_s: float = Field(
        2.0,
        gt=0,
        description="Seconds between two reads of the rating counts by each orchestrator "
        "process (a process that records a rating reads them at once).",
    )
    feedback_turn_ttl_s: int = Field(
        90 * 24 * 3600,
        ge=3600,
        description="How long which rating of a turn was counted is kept; a re-rating after "
        "that counts as a new rating.",
    )

    @model_validator(mode="after")
    def _feedback_shares_exclusive(self) -> FeedbackSettings:
        # Both at once would need more than 100 % of the ratings.
        if self.feedback_boost_above + self.feedback_penalty_above < 1:
            raise ValueError(
                "ORCHESTRATOR_FEEDBACK_BOOST_ABOVE + ORCHESTRATOR_FEEDBACK_PENALTY_ABOVE must "
                "be at least 1, so a document is never both boosted and penalised"
            )
        return self


@dataclass(frozen=True, slots=True)
class Tally:
    """One document's raters: how many distinct users voted positive, negative, at all."""

    positive: int = 0
    negative: int = 0
    ratings: int = 0


def bucket_of(score: int) -> Bucket:
    """4-5 positive, 1-2 negative, 3 neither."""
    if score >= 4:
        return "positive"
    if score <= 2:
        return "negative"
    return "neutral"


def adjustments_of(tallies: Mapping[str, Tally], settings: FeedbackSettings) -> dict[str, float]:
    """Every document's non-zero adjustment under ``settings``."""
    return {
        url: value
        for url, tally in tallies.items()
        if (value := adjustment(tally, settings)) != 0.0
    }


def read_tallies(lines: Iterable[str]) -> dict[str, Tally]:
    """Counts from JSONL lines ``{"url", "positive", "negative", "ratings"}`` (blank lines
    skipped); ``ValueError`` naming the first bad line."""
    tallies: dict[str, Tally] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            tallies[str(record["url"])] = Tally(
                int(record.get("positive", 0)),
                int(record.get("negative", 0)),
                int(record["ratings"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"line {number}: not a {{url, positive, negative, ratings}} object"
            ) from exc
    return tallies


async def live_tallies(redis_url: str) -> dict[str, Tally]:
    """The orchestrator's counts as they are in Redis."""
    client = aioredis.from_url(redis_url)
    try:
        return await FeedbackLedger(client, 3600).tallies()
    finally:
        await client.aclose()


class FixedAdjustments:
    """Adjustments that do not change (an evaluation's), for the retriever."""

    def __init__(self, adjustments: Mapping[str, float]) -> None:
        self.adjustments = dict(adjustments)

    def adjustment(self, url: str) -> float:
        return self.adjustments.get(url, 0.0)


def adjustment(tally: Tally, settings: FeedbackSettings) -> float:
    """The document's rank adjustment: ``+boost``, ``-penalty`` or 0 (too few ratings, mixed)."""
    if not settings.feedback_enabled or tally.ratings < settings.feedback_min_ratings:
        return 0.0
    if tally.positive / tally.ratings > settings.feedback_boost_above:
        return settings.feedback_boost
    if tally.negative / tally.ratings > settings.feedback_penalty_above:
        return -settings.feedback_penalty
    return 0.0


# Counts one turn's rating as its user's vote on each document the answer cited: a user has one
# vote per document, their latest rating of any answer citing it. Ignores an event counted already
# or older than the turn's counted rating; a vote newer than the event is kept.
# KEYS: positive, negative, raters, turn, votes.
# ARGV: event id, bucket, at (ms), ttl (s), urls JSON, voter digest. Returns 1 when a count moved.
_RECORD = """
local at = tonumber(ARGV[3])
local previous = redis.call('GET', KEYS[4])
if previous then
  local old = cjson.decode(previous)
  if old.event_id == ARGV[1] or tonumber(old.at) > at then
    return 0
  end
end
local bucket_key = {positive = KEYS[1], negative = KEYS[2]}
local changed = 0
for _, url in ipairs(cjson.decode(ARGV[5])) do
  local field = url .. '\\n' .. ARGV[6]
  local vote = redis.call('HGET', KEYS[5], field)
  local old_bucket, old_at = nil, nil
  if vote then
    local space = string.find(vote, ' ', 1, true)
    old_bucket = string.sub(vote, 1, space - 1)
    old_at = tonumber(string.sub(vote, space + 1))
  end
  if not vote or old_at <= at then
    if old_bucket ~= ARGV[2] then
      if old_bucket == nil then
        redis.call('HINCRBY', KEYS[3], url, 1)
      elseif bucket_key[old_bucket] then
        redis.call('HINCRBY', bucket_key[old_bucket], url, -1)
      end
      if bucket_key[ARGV[2]] then
        redis.call('HINCRBY', bucket_key[ARGV[2]], url, 1)
      end
      changed = 1
    end
    redis.call('HSET', KEYS[5], field, ARGV[2] .. ' ' .. ARGV[3])
  end
end
redis.call('SET', KEYS[4], cjson.encode({event_id=ARGV[1], at=at}), 'EX', tonumber(ARGV[4]))
return changed
"""


def voter(user_id: str) -> str:
    """How a user appears in the votes: a digest, never their id."""
    return hashlib.sha256(user_id.encode()).hexdigest()[:32]


class FeedbackLedger:
    """The per-document rating counts in Redis."""

    def __init__(self, client: aioredis.Redis, turn_ttl_s: int) -> None:
        self.client = client
        self.turn_ttl_s = turn_ttl_s
        self._record = client.register_script(_RECORD)

    async def record(self, event: FeedbackRecorded, urls: list[str] | None = None) -> bool:
        """Count ``event`` as its user's vote on the documents its answer cited (``urls``
        overrides them); False when no count moved (counted already, older than what is counted,
        the same vote as the user's earlier one, no documents)."""
        cited = list(dict.fromkeys(urls if urls is not None else event.cited_urls))
        if not cited:
            return False
        counted = await self._record(
            keys=[POSITIVE_KEY, NEGATIVE_KEY, RATERS_KEY, TURN_PREFIX + event.turn_id, VOTES_KEY],
            args=[
                event.event_id,
                bucket_of(event.score),
                int(event.occurred_at.timestamp() * 1000),
                self.turn_ttl_s,
                json.dumps(cited),
                voter(event.user_id),
            ],
        )
        return bool(counted)

    async def tallies(self) -> dict[str, Tally]:
        """Every rated document's counts."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(POSITIVE_KEY)
            pipe.hgetall(NEGATIVE_KEY)
            pipe.hgetall(RATERS_KEY)
            positive, negative, ratings = await pipe.execute()
        pos, neg = _counts(positive), _counts(negative)
        return {
            url: Tally(pos.get(url, 0), neg.get(url, 0), total)
            for url, total in _counts(ratings).items()
            if total > 0
        }


def _counts(raw: Mapping[bytes | str, bytes | str]) -> dict[str, int]:
    return {
        (key.decode() if isinstance(key, bytes) else key): int(value) for key, value in raw.items()
    }


class FeedbackBoosts:
    """The adjustments of every rated document, in memory, for the retriever (thread-safe: the
    mapping is replaced whole, never changed in place)."""

    def __init__(self, ledger: FeedbackLedger, settings: FeedbackSettings) -> None:
        self.ledger = ledger
        self.settings = settings
        self._adjustments: Mapping[str, float] = {}

    def adjustment(self, url: str) -> float:
        """``+boost``, ``-penalty`` or 0 for the document at ``url``."""
        return self._adjustments.get(url, 0.0)

    @property
    def adjustments(self) -> Mapping[str, float]:
        return self._adjustments

    async def refresh(self) -> None:
        """Re-read the counts (called every ``feedback_refresh_s`` and after each rating)."""
        adjustments = adjustments_of(await self.ledger.tallies(), self.settings)
        if adjustments != self._adjustments:
            log.info(
                "feedback adjustments changed",
                extra={
                    "boosted": sum(1 for v in adjustments.values() if v > 0),
                    "penalised": sum(1 for v in adjustments.values() if v < 0),
                },
            )
        self._adjustments = adjustments

    async def on_feedback(self, event: FeedbackRecorded, urls: list[str] | None = None) -> bool:
        """Count a rating and use the new counts at once in this process."""
        counted = await self.ledger.record(event, urls)
        log.info(
            "rating counted" if counted else "rating changed nothing",
            extra={"turn_id": event.turn_id, "score": event.score},
        )
        if counted:
            await self.refresh()
        return counted
