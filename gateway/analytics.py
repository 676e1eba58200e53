"""Support analytics for admins: what the assistant resolved, escalated, could not answer, how
users rated it, how fast it was, and how the bus is doing.

The gateway sees every answer arrive (its own reply stream), every rating, and reads two more
streams through its consumer group: the orchestrator's ``decision`` records on ``audit.log``
(why a turn was escalated, the redacted question of a turn left unanswered) and
``crawl.finished``. Each fact is added to counters of its UTC day as it happens, so a report
reads a few small keys per day of the period, never a list of turns:

* ``day:<YYYYMMDD>``: a hash of counters (turns, actions, categories, escalation reasons,
  ratings, crawl jobs and pages, ...).
* ``latency:<day>``: answer latency as a histogram (buckets 10 % wide), for percentiles.
* ``resolved:<day>`` (conversation -> turns resolved) and ``ticketed:<day>`` (conversations that
  got a ticket), for the deflection rate.
* ``unanswered:<day>`` / ``unanswered-example:<day>``: questions that ended in ``no_answer``,
  grouped by their content words, with the latest redacted wording of each group;
  ``unanswered-source:<day>`` says which conversation each wording came from and
  ``examples-of:<conversation>`` which wordings a conversation gave, so that a purge of the
  conversation removes them (its counts stay: they hold no text).
* ``cited:<day>``, ``doc-rated:<day>``, ``doc-score:<day>``: citations and ratings per document.

Conversations are named by a digest of their id (:func:`contracts.ids.conversation_digest`), never
by the id: after a purge nothing here names the conversation, and what it counted stays counted.

Every key lives under one Redis hash tag and expires ``GATEWAY_ANALYTICS_RETENTION_DAYS`` after
its last write. Each fact is applied by one script that first sets a per-fact marker, so a
redelivered answer, audit record or crawl summary is counted once.

Nothing here holds user text except the redacted question of an unanswered turn (what the
redactor wrote, placeholders instead of values), which is what an admin needs to see the gap.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from contracts.bus import Bus, Delivery
from contracts.events import Action, AuditRecorded, CrawlFinished, EscalationReason
from contracts.ids import conversation_digest
from contracts.topics import REPLY_PREFIX, Group, Topic, dead_letter_stream
from gateway.models import (
    AnalyticsRead,
    BusRead,
    CitedDocumentRead,
    Count,
    CrawlRead,
    CsatRead,
    DayRead,
    DeadLetterRead,
    DeflectionRead,
    EscalationRead,
    GroupLag,
    LatencyRead,
    StreamRead,
    UnansweredTopic,
)

log = logging.getLogger("deskpilot.gateway.analytics")

PREFIX = "deskpilot:gateway:{analytics}:"
MARKER_PREFIX = PREFIX + "seen:"
EXAMPLES_OF_PREFIX = PREFIX + "examples-of:"
"""Set per conversation (by its digest): ``<YYYYMMDD>|<topic>`` of each unanswered wording it
gave."""
PURGED_PREFIX = PREFIX + "purged:"
"""Per purged conversation (by its digest), for :data:`MARKER_TTL_S`: its decision records that
arrive after the purge (the audit stream is read in lingering batches) give no wording."""
NO_GUARD = PREFIX + "no-guard"
"""The guard of a fact that no purge can cancel: a key that is never written."""
MARKER_TTL_S = 3 * 24 * 3600
"""How long a counted fact's marker is kept: longer than any redelivery takes."""

RESOLVED_ACTIONS = frozenset({Action.ANSWER, Action.CHECKLIST, Action.AUTOMATION})
SUPPORT_ACTIONS = RESOLVED_ACTIONS | {Action.NO_ANSWER, Action.ESCALATED}
LATENCY_BASE = 1.1
TOP = 10
MAX_DAYS = 366
REPLY_STREAMS_SCANNED = 50

DEFINITIONS = {
    "support_turns": "Turns that reached an outcome on an IT-support request: answered, walked "
    "through a checklist, resolved by an automation, not answered (no_answer) or escalated. "
    "Greetings, clarifying questions and off-topic refusals are not support turns.",
    "deflection": "Deflection rate: support turns resolved by the assistant (answer, checklist "
    "or automation) in conversations that did not get a ticket during the period, divided by "
    "all support turns of the period.",
    "escalation": "Escalation rate: support turns that handed the conversation to a technician "
    "(a ticket filed, or promised when the ticket system was down), divided by all support "
    "turns; reasons as the orchestrator recorded them.",
    "csat": "CSAT: the average of the 1-5 ratings users gave answers during the period, and "
    "how many gave each score (a turn rated again counts with its latest rating).",
    "latency": "Answer latency: from the moment the gateway accepted the message to the moment "
    "the answer reached it, crawls and ticket filing included; percentiles within 10 %.",
    "crawl_hit_rate": "Crawl hit rate: turns that had the help sites read for them and then "
    "got an answer or a checklist, divided by all turns that had them read.",
    "unanswered": "Unanswered topics: questions that ended in no_answer, grouped by their "
    "content words (redacted as the redactor wrote them).",
    "consumer_lag": "Consumer lag: entries of a stream its consumer group has not read yet; "
    "pending: read but not acknowledged (in work, or a consumer died). Dead letters: messages "
    "that failed too often, waiting for an operator (`deskpilot dlq`).",
}


def day_of(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def key(kind: str, day: date) -> str:
    return f"{PREFIX}{kind}:{day:%Y%m%d}"


# -- grouping unanswered questions ----------------------------------------------------------------

_WORD = re.compile(r"[^\W_]{3,}")
_PLACEHOLDER = re.compile(r"<[A-Z_]+_\d+>")
_STOP_WORDS = """
about after again all also and any are can cannot can't could did does doesn't don't for from
get getting got had has have having hello help how into its just know like make may might more
need needs not now off one our out please should some still thank thanks that the their them
then there these they this tried trying use using want was way were what when where which while
who why will with won't would you your yours
"""
_STOP = frozenset(_STOP_WORDS.split())
TOPIC_WORDS = 5


def topic_key(question: str) -> str:
    """The group of an unanswered question: its first few content words, sorted, so "How do I
    book the cafeteria?" and "book cafeteria how" are one topic. Placeholders are left out."""
    text = _PLACEHOLDER.sub(" ", question).lower()
    words = [w for w in _WORD.findall(text) if w not in _STOP and not w.isdigit()]
    unique = list(dict.fromkeys(words))[:TOPIC_WORDS]
    return " ".join(sorted(unique)) or "(no content words)"


def escalation_reason(reason: str) -> str:
    """The :class:`EscalationReason` in a decision's logged reason ("escalated (anger): ...")."""
    found = re.match(r"\s*escalated \((\w+)\)", reason)
    known = {r.value for r in EscalationReason}
    return found.group(1) if found and found.group(1) in known else "other"


# -- latency histogram -----------------------------------------------------------------------------


def latency_bucket(ms: float) -> int:
    """The histogram bucket of ``ms``: bucket ``b`` holds (1.1^(b-1), 1.1^b] ms."""
    return max(0, math.ceil(math.log(max(ms, 1.0)) / math.log(LATENCY_BASE)))


def percentile(histogram: Mapping[int, int], share: float) -> float | None:
    """The ``share`` quantile (0.5, 0.95) of a latency histogram, as its bucket's upper bound."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    rank = math.ceil(share * total)
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return round(LATENCY_BASE**bucket, 1)
    return None  # pragma: no cover (rank <= total)


# -- writing ---------------------------------------------------------------------------------------

# Applies a fact's counter changes once: the marker is set first (NX), and when it was already
# there nothing is changed; nor when the guard exists (a purge's tombstone). KEYS: the marker,
# the guard, then the keys the operations name by position. ARGV: marker TTL, key TTL,
# operations as JSON [[op, key position, field, value], ...].
_APPLY_ONCE = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', tonumber(ARGV[1])) then
  return 0
end
local ttl = tonumber(ARGV[2])
for _, op in ipairs(cjson.decode(ARGV[3])) do
  local target = KEYS[op[2]]
  if op[1] == 'hincrby' then
    redis.call('HINCRBY', target, op[3], op[4])
  elseif op[1] == 'hset' then
    redis.call('HSET', target, op[3], op[4])
  elseif op[1] == 'sadd' then
    redis.call('SADD', target, op[3])
  end
  redis.call('EXPIRE', target, ttl)
end
return 1
"""


# Removes what one purged conversation wrote of unanswered wordings, where the wording is still
# its own (a later one of another conversation stays). KEYS: the conversation's examples-of set,
# then per wording its source and example hashes. ARGV: the conversation's digest, then per wording
# its topic.
_PURGE_EXAMPLES = """
local removed = 0
for i = 2, #ARGV do
  local source, example = KEYS[2 * i - 2], KEYS[2 * i - 1]
  if redis.call('HGET', source, ARGV[i]) == ARGV[1] then
    redis.call('HDEL', source, ARGV[i])
    removed = removed + redis.call('HDEL', example, ARGV[i])
  end
end
redis.call('DEL', KEYS[1])
return removed
"""


@dataclass
class Changes:
    """Counter changes of one fact, applied at once by :data:`_APPLY_ONCE` unless ``guard``
    exists."""

    keys: list[str] = field(default_factory=list)
    ops: list[tuple[str, int, str, str | int]] = field(default_factory=list)
    guard: str = NO_GUARD

    def _position(self, name: str) -> int:
        if name not in self.keys:
            self.keys.append(name)
        return self.keys.index(name) + 3  # KEYS[1] the marker, KEYS[2] the guard; Lua from 1

    def incr(self, name: str, fieldname: str, amount: int = 1) -> None:
        self.ops.append(("hincrby", self._position(name), fieldname, amount))

    def put(self, name: str, fieldname: str, value: str) -> None:
        self.ops.append(("hset", self._position(name), fieldname, value))

    def add(self, name: str, member: str) -> None:
        self.ops.append(("sadd", self._position(name), member, ""))


@dataclass(frozen=True)
class AnsweredTurn:
    """What analytics keeps of one answered turn (no user text)."""

    turn_id: str
    conversation_id: str
    at: datetime
    action: Action
    category: str | None
    latency_ms: float | None
    cited_urls: Sequence[str]
    crawled: bool = False


@dataclass(frozen=True)
class RatingFacts:
    """One stored rating, as analytics counts it."""

    score: int
    at: datetime
    cited_urls: Sequence[str]


class AnalyticsRecorder:
    """Adds facts to the daily counters, each exactly once."""

    def __init__(self, client: aioredis.Redis, retention_days: int) -> None:
        self.client = client
        self.retention_s = retention_days * 24 * 3600
        self._apply = client.register_script(_APPLY_ONCE)
        self._purge_examples = client.register_script(_PURGE_EXAMPLES)

    async def apply(self, marker: str, changes: Changes) -> bool:
        """Apply ``changes`` unless a fact with ``marker`` was applied before."""
        if not changes.ops:
            return False
        done = await self._apply(
            keys=[MARKER_PREFIX + marker, changes.guard, *changes.keys],
            args=[MARKER_TTL_S, self.retention_s, json.dumps(changes.ops)],
        )
        return bool(done)

    async def on_answer(self, turn: AnsweredTurn) -> bool:
        day = day_of(turn.at)
        counters = key("day", day)
        changes = Changes()
        changes.incr(counters, "turns")
        changes.incr(counters, f"action:{turn.action.value}")
        if turn.category:
            changes.incr(counters, f"category:{turn.category}")
        if turn.action in SUPPORT_ACTIONS:
            changes.incr(counters, "support")
        if turn.action in RESOLVED_ACTIONS:
            changes.incr(counters, "resolved")
            changes.incr(key("resolved", day), conversation_digest(turn.conversation_id))
        elif turn.action is Action.ESCALATED:
            changes.incr(counters, "escalated")
            changes.add(key("ticketed", day), conversation_digest(turn.conversation_id))
        elif turn.action is Action.NO_ANSWER:
            changes.incr(counters, "no_answer")
        if turn.latency_ms is not None:
            changes.incr(key("latency", day), str(latency_bucket(turn.latency_ms)))
            changes.incr(counters, "latency_n")
        if turn.crawled:
            changes.incr(counters, "crawl_turns")
            if turn.action in (Action.ANSWER, Action.CHECKLIST):
                changes.incr(counters, "crawl_hits")
        for url in dict.fromkeys(turn.cited_urls):
            changes.incr(key("cited", day), url)
        return await self.apply(f"answer:{turn.turn_id}", changes)

    async def on_rating(self, marker: str, new: RatingFacts, old: RatingFacts | None) -> bool:
        """Count a rating; a turn rated before has its earlier rating taken back."""
        changes = Changes()
        for facts, sign in ((old, -1), (new, 1)):
            if facts is None:
                continue
            day = day_of(facts.at)
            changes.incr(key("day", day), f"rating:{facts.score}", sign)
            for url in dict.fromkeys(facts.cited_urls):
                changes.incr(key("doc-rated", day), url, sign)
                changes.incr(key("doc-score", day), url, sign * facts.score)
        return await self.apply(f"rating:{marker}", changes)

    async def on_decision(self, record: AuditRecorded) -> bool:
        """The orchestrator's decision records: escalation reasons, unanswered questions."""
        if record.action != "decision":
            return False
        outcome = record.details.get("outcome")
        day = day_of(record.occurred_at)
        changes = Changes()
        if outcome == Action.ESCALATED.value:
            changes.incr(key("day", day), f"reason:{escalation_reason(record.reason)}")
        elif outcome == Action.NO_ANSWER.value:
            question = record.details.get("question")
            if isinstance(question, str) and question.strip():
                topic = topic_key(question)
                ref = conversation_digest(record.conversation_id)
                changes.guard = PURGED_PREFIX + ref
                changes.incr(key("unanswered", day), topic)
                changes.put(key("unanswered-example", day), topic, question.strip()[:300])
                changes.put(key("unanswered-source", day), topic, ref)
                changes.add(EXAMPLES_OF_PREFIX + ref, f"{day:%Y%m%d}|{topic}")
        return await self.apply(f"audit:{record.event_id}", changes)

    async def purge(self, conversation_id: str) -> int:
        """Remove the unanswered wordings the conversation gave (where no later one replaced
        them) and take none of it that arrives later; how many were removed."""
        ref = conversation_digest(conversation_id)
        # The tombstone first: a record applied before it is in the set read next (each fact is
        # applied by one script), one after it is refused.
        await self.client.set(PURGED_PREFIX + ref, "1", ex=MARKER_TTL_S)
        keys = [EXAMPLES_OF_PREFIX + ref]
        topics = []
        for raw in await self.client.smembers(EXAMPLES_OF_PREFIX + ref):
            day, _, topic = _text(raw).partition("|")
            keys += [f"{PREFIX}unanswered-source:{day}", f"{PREFIX}unanswered-example:{day}"]
            topics.append(topic)
        return int(await self._purge_examples(keys=keys, args=[ref, *topics]))

    async def on_crawl_finished(self, event: CrawlFinished) -> bool:
        counters = key("day", day_of(event.occurred_at))
        changes = Changes()
        changes.incr(counters, "crawl_jobs")
        changes.incr(counters, "crawl_pages", len(event.pages))
        changes.incr(counters, f"crawl_end:{event.reason}")
        return await self.apply(f"crawl:{event.event_id}", changes)


def register(bus: Bus, recorder: AnalyticsRecorder) -> None:
    """Read the audit stream and crawl summaries through the gateway's consumer group."""

    async def on_audit(record: AuditRecorded, _: Delivery) -> None:
        await recorder.on_decision(record)

    async def on_crawl(event: CrawlFinished, _: Delivery) -> None:
        await recorder.on_crawl_finished(event)

    # Read in lingering batches (contracts.topics.LINGERING): nobody waits on them.
    bus.subscribe(Topic.AUDIT, AuditRecorded, on_audit, group=Group.GATEWAY)
    bus.subscribe(Topic.CRAWL_FINISHED, CrawlFinished, on_crawl, group=Group.GATEWAY)


# -- reading: the report ---------------------------------------------------------------------------


def _ints(raw: Mapping[Any, Any]) -> dict[str, int]:
    return {_text(k): int(v) for k, v in raw.items()}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _top(counter: Counter[str], limit: int = TOP) -> list[Count]:
    ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
    return [Count(name=name, count=count) for name, count in ranked[:limit] if count > 0]


def _prefixed(counters: Mapping[str, int], prefix: str) -> Counter[str]:
    return Counter(
        {name[len(prefix) :]: n for name, n in counters.items() if name.startswith(prefix)}
    )


def _csat(counters: Mapping[str, int]) -> tuple[dict[str, int], int, float | None]:
    distribution = {str(s): max(0, counters.get(f"rating:{s}", 0)) for s in range(1, 6)}
    total = sum(distribution.values())
    score = sum(int(s) * n for s, n in distribution.items())
    return distribution, total, (round(score / total, 2) if total else None)


@dataclass
class _Day:
    day: date
    counters: dict[str, int]
    latency: dict[int, int]
    resolved: dict[str, int]
    ticketed: set[str]
    unanswered: dict[str, int]
    examples: dict[str, str]
    cited: dict[str, int]
    rated: dict[str, int]
    scores: dict[str, int]


class AnalyticsReader:
    def __init__(self, client: aioredis.Redis, own_reply_stream: str) -> None:
        self.client = client
        self.own_reply_stream = own_reply_stream

    async def report(self, first: date, last: date) -> AnalyticsRead:
        days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
        loaded = await self._load(days)
        ticketed = set().union(*(d.ticketed for d in loaded)) if loaded else set()
        totals: Counter[str] = Counter()
        latency: Counter[int] = Counter()
        unanswered: Counter[str] = Counter()
        examples: dict[str, str] = {}
        cited: Counter[str] = Counter()
        rated: Counter[str] = Counter()
        scores: Counter[str] = Counter()
        daily: list[DayRead] = []
        deflected_total = 0
        for d in loaded:
            totals.update(d.counters)
            latency.update(d.latency)
            unanswered.update(d.unanswered)
            examples.update(d.examples)  # later days overwrite: the latest wording
            cited.update(d.cited)
            rated.update(d.rated)
            scores.update(d.scores)
            deflected = sum(n for conv, n in d.resolved.items() if conv not in ticketed)
            deflected_total += deflected
            support = d.counters.get("support", 0)
            _, ratings, average = _csat(d.counters)
            daily.append(
                DayRead(
                    day=d.day,
                    turns=d.counters.get("turns", 0),
                    support_turns=support,
                    deflected=deflected,
                    deflection_rate=_ratio(deflected, support),
                    escalated=d.counters.get("escalated", 0),
                    no_answer=d.counters.get("no_answer", 0),
                    ratings=ratings,
                    csat_average=average,
                    p50_ms=percentile(d.latency, 0.5),
                    p95_ms=percentile(d.latency, 0.95),
                )
            )
        support = totals.get("support", 0)
        distribution, ratings, average = _csat(totals)
        crawl_turns, crawl_hits = totals.get("crawl_turns", 0), totals.get("crawl_hits", 0)
        documents = [
            CitedDocumentRead(
                url=url,
                cited=count,
                ratings=rated.get(url, 0),
                average=round(scores[url] / rated[url], 2) if rated.get(url, 0) > 0 else None,
            )
            for url, count in sorted(cited.items(), key=lambda item: (-item[1], item[0]))[:TOP]
        ]
        return AnalyticsRead(
            from_=first,
            to=last,
            generated_at=datetime.now(UTC),
            turns=totals.get("turns", 0),
            support_turns=support,
            deflection=DeflectionRead(
                rate=_ratio(deflected_total, support),
                deflected=deflected_total,
                support_turns=support,
                definition=DEFINITIONS["deflection"],
            ),
            escalation=EscalationRead(
                rate=_ratio(totals.get("escalated", 0), support),
                escalated=totals.get("escalated", 0),
                reasons=_top(_prefixed(totals, "reason:")),
                definition=DEFINITIONS["escalation"],
            ),
            csat=CsatRead(
                average=average,
                ratings=ratings,
                distribution=distribution,
                definition=DEFINITIONS["csat"],
            ),
            intents=_top(_prefixed(totals, "action:")),
            categories=_top(_prefixed(totals, "category:")),
            unanswered=[
                UnansweredTopic(topic=c.name, count=c.count, example=examples.get(c.name, ""))
                for c in _top(unanswered)
            ],
            crawl=CrawlRead(
                jobs=totals.get("crawl_jobs", 0),
                pages=totals.get("crawl_pages", 0),
                endings=_top(_prefixed(totals, "crawl_end:")),
                crawl_turns=crawl_turns,
                answered=crawl_hits,
                hit_rate=_ratio(crawl_hits, crawl_turns),
                definition=DEFINITIONS["crawl_hit_rate"],
            ),
            latency=LatencyRead(
                answers=sum(latency.values()),
                p50_ms=percentile(latency, 0.5),
                p95_ms=percentile(latency, 0.95),
                definition=DEFINITIONS["latency"],
            ),
            documents=documents,
            bus=await self.bus(),
            daily=daily,
            definitions=DEFINITIONS,
        )

    async def _load(self, days: Sequence[date]) -> list[_Day]:
        kinds = (
            "day",
            "latency",
            "resolved",
            "ticketed",
            "unanswered",
            "unanswered-example",
            "cited",
            "doc-rated",
            "doc-score",
        )
        async with self.client.pipeline(transaction=False) as pipe:
            for day in days:
                for kind in kinds:
                    if kind == "ticketed":
                        pipe.smembers(key(kind, day))
                    else:
                        pipe.hgetall(key(kind, day))
            results = await pipe.execute()
        loaded = []
        for n, day in enumerate(days):
            row = dict(zip(kinds, results[n * len(kinds) : (n + 1) * len(kinds)], strict=True))
            loaded.append(
                _Day(
                    day=day,
                    counters=_ints(row["day"]),
                    latency={int(k): v for k, v in _ints(row["latency"]).items()},
                    resolved=_ints(row["resolved"]),
                    ticketed={_text(m) for m in row["ticketed"]},
                    unanswered=_ints(row["unanswered"]),
                    examples={_text(k): _text(v) for k, v in row["unanswered-example"].items()},
                    cited=_ints(row["cited"]),
                    rated=_ints(row["doc-rated"]),
                    scores=_ints(row["doc-score"]),
                )
            )
        return loaded

    async def bus(self) -> BusRead:
        """Lag and pending entries per stream and group (XINFO GROUPS), and dead-letter depth
        (XLEN of each ``*.dlq``), for every topic and the gateways' reply streams."""
        streams = [str(topic) for topic in Topic]
        streams += sorted(await self._reply_streams())
        async with self.client.pipeline(transaction=False) as pipe:
            for stream in streams:
                pipe.xlen(stream)
                pipe.xinfo_groups(stream)
                pipe.xlen(dead_letter_stream(stream))
            results = await pipe.execute(raise_on_error=False)
        read: list[StreamRead] = []
        dead: list[DeadLetterRead] = []
        for n, stream in enumerate(streams):
            length, groups, depth = results[3 * n : 3 * n + 3]
            if isinstance(groups, ResponseError):  # no such stream (never written)
                groups = []
            if isinstance(length, int) and (length or groups):
                read.append(StreamRead(stream=stream, length=length, groups=_groups(groups)))
            if isinstance(depth, int) and depth > 0:
                dead.append(DeadLetterRead(stream=dead_letter_stream(stream), depth=depth))
        return BusRead(
            streams=read,
            dead_letters=dead,
            dead_letter_total=sum(d.depth for d in dead),
            definition=DEFINITIONS["consumer_lag"],
        )

    async def _reply_streams(self) -> set[str]:
        """The gateways' reply streams: this one's, and others' found by a bounded scan."""
        found = {self.own_reply_stream}
        async for name in self.client.scan_iter(
            match=f"{REPLY_PREFIX}*", count=1000, _type="stream"
        ):
            stream = _text(name)
            if not stream.endswith(".dlq"):
                found.add(stream)
            if len(found) >= REPLY_STREAMS_SCANNED:
                break
        return found


def _groups(raw: Iterable[Mapping[Any, Any]]) -> list[GroupLag]:
    groups = []
    for info in raw:
        values = {_text(k): v for k, v in info.items()}
        lag = values.get("lag")
        groups.append(
            GroupLag(
                group=_text(values.get("name", "")),
                lag=int(lag) if lag is not None else None,
                pending=int(values.get("pending", 0) or 0),
                consumers=int(values.get("consumers", 0) or 0),
            )
        )
    return sorted(groups, key=lambda g: g.group)
