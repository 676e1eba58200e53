"""Feedback-aware retrieval: documents users rate well rank a little higher, badly a little lower.

Every rating (``feedback.recorded``) counts once for each document its answer cited: positive
for 4-5, negative for 1-2, neither for 3 (but it counts as a rating). Once a document has
``feedback_min_ratings`` ratings, the share of positive ones above ``feedback_boost_above``
gives it ``+feedback_boost``, the share of negative ones above ``feedback_penalty_above`` gives
it ``-feedback_penalty``; otherwise nothing. The retriever multiplies a chunk's rank-fusion score
by ``1 + adjustment`` (as it does for the user's operating system), so a penalised article gives
way to the next one that matches about as well, while a chunk's cosine similarity, which decides
whether the knowledge base covers a question at all, keeps its meaning. Without ratings every
adjustment is 0 and retrieval is exactly what it was.

Where the counts live (one Redis hash tag, so the update script works on a cluster too):

* ``deskpilot:orchestrator:{feedback}:positive`` / ``:negative`` / ``:ratings``: hashes of
  URL -> count.
* ``deskpilot:orchestrator:{feedback}:turn:<turn id>``: which rating of the turn is counted (its
  bucket, URLs and time), so a redelivered event changes nothing and a user who re-rates a turn
  replaces their earlier rating instead of adding a second one.

Every process keeps the adjustments in memory (:class:`FeedbackBoosts`), re-read every
``feedback_refresh_s`` and right after it records a rating: one read of three hashes whose size
is the number of rated documents, never a Redis call per retrieval.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
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
POSITIVE_KEY = PREFIX + "positive"
NEGATIVE_KEY = PREFIX + "negative"
RATINGS_KEY = PREFIX + "ratings"
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
        3, ge=1, description="Ratings a document needs before they move it in the ranking."
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
        description="Share of positive ratings a document must exceed to be boosted.",
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
        description="Share of negative ratings a document must exceed to be penalised.",
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
    """One document's ratings."""

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


def adjustment(tally: Tally, settings: FeedbackSettings) -> float:
    """The document's rank adjustment: ``+boost``, ``-penalty`` or 0 (too few ratings, mixed)."""
    if not settings.feedback_enabled or tally.ratings < settings.feedback_min_ratings:
        return 0.0
    if tally.positive / tally.ratings > settings.feedback_boost_above:
        return settings.feedback_boost
    if tally.negative / tally.ratings > settings.feedback_penalty_above:
        return -settings.feedback_penalty
    return 0.0


# Counts one turn's rating, replacing the rating of the turn counted before (a re-rating), and
# ignoring an event counted already or older than the one counted (a late redelivery).
# KEYS: positive, negative, ratings, turn. ARGV: event id, bucket, at (ms), ttl (s), urls JSON.
_RECORD = """
local previous = redis.call('GET', KEYS[4])
local at = tonumber(ARGV[3])
if previous then
  local old = cjson.decode(previous)
  if old.event_id == ARGV[1] or tonumber(old.at) > at then
    return 0
  end
  for _, url in ipairs(old.urls) do
    redis.call('HINCRBY', KEYS[3], url, -1)
    if old.bucket == 'positive' then
      redis.call('HINCRBY', KEYS[1], url, -1)
    elseif old.bucket == 'negative' then
      redis.call('HINCRBY', KEYS[2], url, -1)
    end
  end
end
local urls = cjson.decode(ARGV[5])
for _, url in ipairs(urls) do
  redis.call('HINCRBY', KEYS[3], url, 1)
  if ARGV[2] == 'positive' then
    redis.call('HINCRBY', KEYS[1], url, 1)
  elseif ARGV[2] == 'negative' then
    redis.call('HINCRBY', KEYS[2], url, 1)
  end
end
redis.call('SET', KEYS[4], cjson.encode({event_id=ARGV[1], bucket=ARGV[2], at=at, urls=urls}),
           'EX', tonumber(ARGV[4]))
return 1
"""


class FeedbackLedger:
    """The per-document rating counts in Redis."""

    def __init__(self, client: aioredis.Redis, turn_ttl_s: int) -> None:
        self.client = client
        self.turn_ttl_s = turn_ttl_s
        self._record = client.register_script(_RECORD)

    async def record(self, event: FeedbackRecorded, urls: list[str] | None = None) -> bool:
        """Count ``event`` for the documents its answer cited (``urls`` overrides them); False
        when it changed nothing (counted already, older than the rating counted, no documents).
        """
        cited = list(dict.fromkeys(urls if urls is not None else event.cited_urls))
        if not cited:
            return False
        counted = await self._record(
            keys=[POSITIVE_KEY, NEGATIVE_KEY, RATINGS_KEY, TURN_PREFIX + event.turn_id],
            args=[
                event.event_id,
                bucket_of(event.score),
                int(event.occurred_at.timestamp() * 1000),
                self.turn_ttl_s,
                json.dumps(cited),
            ],
        )
        return bool(counted)

    async def tallies(self) -> dict[str, Tally]:
        """Every rated document's counts."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(POSITIVE_KEY)
            pipe.hgetall(NEGATIVE_KEY)
            pipe.hgetall(RATINGS_KEY)
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
        tallies = await self.ledger.tallies()
        adjustments = {
            url: value
            for url, tally in tallies.items()
            if (value := adjustment(tally, self.settings)) != 0.0
        }
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
