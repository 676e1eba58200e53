"""A crawl job's state in Redis, changed only by atomic Lua scripts, so any worker can carry on.

Keys of job ``J`` share the hash tag ``{J}`` (one cluster slot, so one script may touch them all)
and expire ``CRAWLER_JOB_TTL_S`` after the job starts; ``<ns>`` is ``CRAWLER_NAMESPACE``:

=============================== ===========================================================
``<ns>crawler:job:{J}:meta``    hash: the request (``spec``), ``status`` running/finished,
                                ``reason``, ``started_ms``, ``deadline_ms``, ``finished_ms``,
                                ``max_pages``, ``max_depth``, ``concurrency``, counters
                                ``outstanding`` (dispatched, not completed), ``published`` and
                                ``skip:<cause>``, ``finished_by``, and ``awaiting`` (1 while
                                the job's sitemaps are being read: nothing but the seeds is
                                dispatched, and an empty frontier does not end the job)
``...:frontier``                sorted set: URLs waiting, scored by the link planner (best first)
``...:links``                   hash: URL → JSON of how it was found (depth, parent, anchor)
``...:seen``                    set: every URL ever queued (the visited set: never queued twice)
``...:patterns``                hash: URL pattern → URLs queued (the planner's novelty), and
                                ``chain|<pattern>`` → those found on a page of the same
                                pattern (capped: a calendar's next-month chain is a trap)
``...:state``                   hash: URL → ``q`` (dispatched), ``f:<entry>`` (being fetched by the
                                task stream entry), ``d:<outcome>`` (done)
``...:batch``                   hash: dispatcher → JSON of the URLs it dispatched (replayed, never
                                re-popped, when the dispatcher's message is redelivered)
``...:hashes``                  hash: content hash → URL (identical content published once; a
                                URL whose fetch fails after its claim lets it go)
``...:offsite``                 set: links found outside the allowed domains (``skip:off_domain``
                                counts each once)
``...:pages``                   list: summaries of the published pages, in order
``...:outbox``                  hash: URL → JSON of its page event (``PagesCrawled``), written
                                with its ``d:page`` and deleted once the event is out
``...:refused``                 hash: URL → JSON of why the SSRF guard refused it (the first
                                :data:`MAX_REFUSALS_KEPT`), so a caller can say which address
``...:leases``                  hash: URL → ``<holder>|<expiry ms>``, renewed while a handler
                                call (the holder) fetches the URL
``...:stop``                    string: set when the job must stop early
``<ns>crawler:jobs:running``    sorted set: running job ids by deadline (for the deadline sweep)
=============================== ===========================================================

Why no page is lost or fetched twice in effect when a worker dies: a URL leaves the frontier only
inside the script that records who dispatched it (``batch``) and marks it ``q``; the dispatcher
acks its own message only after publishing the task, and a redelivered dispatcher republishes the
same batch. A task's stream entry claims its URL (``f:<entry>``); a second entry for the same URL
is dropped as a duplicate, while the first, if its worker dies, is reclaimed by the bus and resumes
the same claim once the dead worker's lease on the URL has run out (a live but slow worker keeps
renewing its lease, so an entry handed over too early is not fetched twice). Completion is a single
transition from ``f:<entry>`` to ``d:<outcome>``, so counters move once.

Why a job publishes exactly the pages it counts (never more than ``max_pages``): a page's event
goes out only after that transition, from the ``outbox`` entry the transition wrote, and is
deleted from there once out. A worker that dies before it is out leaves it there: the task entry,
redelivered, finds its URL done and publishes it (the same deterministic event id, so a copy that
did get out de-duplicates), and announcing the job's end publishes whatever is left first. An
attempt whose completion comes back ``again`` (another attempt recorded the URL's outcome) or
``stale`` (the job is gone) publishes nothing of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as aioredis

from contracts.events import ContextInsufficient, CrawlPageSummary, PagesCrawled

_COMMON = """
local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function fmt(x) return string.format('%.0f', x) end
local function keep_ttl(meta)
    local ttl = redis.call('PTTL', meta)
    if ttl > 0 then
        for i = 1, #KEYS do
            if redis.call('PTTL', KEYS[i]) == -1 then redis.call('PEXPIRE', KEYS[i], ttl) end
        end
    end
end
local function hnum(key, field) return tonumber(redis.call('HGET', key, field) or '0') end
-- Pop the best URLs the budget and concurrency allow, remember them under `who`.
local function dispatch(meta, frontier, links, state, batch, who)
    local prev = redis.call('HGET', batch, who)
    if prev then return prev end
    local list = {}
    if redis.call('HGET', meta, 'status') == 'running' then
        local out = hnum(meta, 'outstanding')
        local room = math.min(hnum(meta, 'concurrency') - out,
                              hnum(meta, 'max_pages') - hnum(meta, 'published') - out)
        while room > 0 do
            local popped = redis.call('ZPOPMAX', frontier)
            if #popped == 0 then break end
            redis.call('HSET', state, popped[1], 'q')
            list[#list + 1] = {popped[1], redis.call('HGET', links, popped[1]) or ''}
            room = room - 1
            out = out + 1
        end
        redis.call('HSET', meta, 'outstanding', out)
    end
    local encoded = '[]'
    if #list > 0 then encoded = cjson.encode(list) end
    redis.call('HSET', batch, who, encoded)
    return encoded
end
-- items: {url, score, link json, pattern, chained (1: found on a page of the same pattern)}
local function enqueue(meta, frontier, links, seen, patterns, items, cap)
    for _, l in ipairs(items) do
        if redis.call('SADD', seen, l[1]) == 1 then
            local chain = 'chain|' .. l[4]
            if l[5] == 1 and hnum(patterns, chain) >= cap then
                redis.call('HINCRBY', meta, 'skip:trap', 1)
            else
                if l[5] == 1 then redis.call('HINCRBY', patterns, chain, 1) end
                redis.call('HINCRBY', patterns, l[4], 1)
                redis.call('ZADD', frontier, l[2], l[1])
                redis.call('HSET', links, l[1], l[3])
            end
        end
    end
end
"""

# KEYS: meta frontier links seen patterns state batch hashes pages stop
_CREATE = (
    _COMMON
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
    return {0, dispatch(KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7], ARGV[5])}
end
local now = now_ms()
local budget = cjson.decode(ARGV[2])
redis.call('HSET', KEYS[1], 'spec', ARGV[1], 'status', 'running', 'started_ms', fmt(now),
    'deadline_ms', fmt(now + budget.deadline_s * 1000), 'max_pages', budget.max_pages,
    'max_depth', budget.max_depth, 'concurrency', budget.concurrency,
    'outstanding', 0, 'published', 0, 'awaiting', ARGV[6])
redis.call('EXPIRE', KEYS[1], ARGV[3])
enqueue(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], cjson.decode(ARGV[4]), 1e9)
local batch = dispatch(KEYS[1], KEYS[2], KEYS[3], KEYS[6], KEYS[7], ARGV[5])
keep_ttl(KEYS[1])
return {1, batch, fmt(now + budget.deadline_s * 1000)}
"""
)

# KEYS: meta state stop leases; ARGV: url entry worker lease_ms
_BEGIN = (
    _COMMON
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
local st = redis.call('HGET', KEYS[2], ARGV[1])
if not st then return 'gone' end
if string.sub(st, 1, 2) == 'd:' then return 'done' end
if string.sub(st, 1, 2) == 'f:' and st ~= 'f:' .. ARGV[2] then return 'duplicate' end
local now = now_ms()
local lease = redis.call('HGET', KEYS[4], ARGV[1])
if lease then
    local sep = string.find(lease, '|', 1, true)
    local owner, expires = string.sub(lease, 1, sep - 1), tonumber(string.sub(lease, sep + 1))
    if owner ~= ARGV[3] and expires > now then return 'busy' end
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[3] .. '|' .. fmt(now + tonumber(ARGV[4])))
redis.call('HSET', KEYS[2], ARGV[1], 'f:' .. ARGV[2])
if redis.call('HGET', KEYS[1], 'status') ~= 'running' or redis.call('EXISTS', KEYS[3]) == 1 then
    return 'cancel'
end
if now >= hnum(KEYS[1], 'deadline_ms') then return 'late' end
keep_ttl(KEYS[1])
return 'go'
"""
)

# KEYS: leases; ARGV: url worker lease_ms
_RENEW = (
    _COMMON
    + """
local lease = redis.call('HGET', KEYS[1], ARGV[1])
if not lease or string.sub(lease, 1, #ARGV[2] + 1) ~= ARGV[2] .. '|' then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '|' .. fmt(now_ms() + tonumber(ARGV[3])))
return 1
"""
)

# KEYS: meta frontier links seen patterns state batch hashes pages stop leases outbox
# ARGV: url entry outcome summary links cap event
_COMPLETE = (
    _COMMON
    + """
local meta, state, batch = KEYS[1], KEYS[6], KEYS[7]
local url, entry, outcome = ARGV[1], ARGV[2], ARGV[3]
local st = redis.call('HGET', state, url)
if st ~= 'f:' .. entry then
    if st and string.sub(st, 1, 2) == 'd:' then
        local fin = 0
        if redis.call('HGET', meta, 'finished_by') == entry then fin = 1 end
        return {'again', redis.call('HGET', batch, entry) or '[]', fin, hnum(meta, 'published'),
            redis.call('HGET', KEYS[12], url) or ''}
    end
    return {'stale', '[]', 0, 0, ''}
end
redis.call('HSET', state, url, 'd:' .. outcome)
redis.call('HDEL', KEYS[11], url)
redis.call('HINCRBY', meta, 'outstanding', -1)
if outcome == 'page' then
    redis.call('HINCRBY', meta, 'published', 1)
    redis.call('RPUSH', KEYS[9], ARGV[4])
    if ARGV[7] ~= '' then redis.call('HSET', KEYS[12], url, ARGV[7]) end
else
    redis.call('HINCRBY', meta, 'skip:' .. outcome, 1)
end
local running = redis.call('HGET', meta, 'status') == 'running'
local now = now_ms()
local reason = false
if running then
    enqueue(meta, KEYS[2], KEYS[3], KEYS[4], KEYS[5], cjson.decode(ARGV[5]), tonumber(ARGV[6]))
    if redis.call('EXISTS', KEYS[10]) == 1 then reason = 'stopped'
    elseif now >= hnum(meta, 'deadline_ms') then reason = 'deadline'
    elseif hnum(meta, 'published') >= hnum(meta, 'max_pages') then reason = 'max_pages'
    end
end
local dispatched = '[]'
if running and not reason and hnum(meta, 'awaiting') > 0 then
    -- The sitemaps are being read: the next URLs are chosen once they are in the frontier too.
    redis.call('HSET', batch, entry, '[]')
elseif running and not reason then
    dispatched = dispatch(meta, KEYS[2], KEYS[3], state, batch, entry)
    if hnum(meta, 'outstanding') <= 0 and redis.call('ZCARD', KEYS[2]) == 0
        and hnum(meta, 'awaiting') <= 0 then
        reason = 'frontier_empty'
    end
else
    redis.call('HSET', batch, entry, '[]')
end
local fin = 0
if reason then
    redis.call('HSET', meta, 'status', 'finished', 'reason', reason, 'finished_by', entry,
        'finished_ms', fmt(now))
    fin = 1
end
keep_ttl(meta)
return {'ok', dispatched, fin, hnum(meta, 'published'), ''}
"""
)

# KEYS: meta frontier links seen patterns state batch; ARGV: items who
# URLs found apart from any page (the sitemaps), queued once: a second call with the same `who`
# replays the first one's dispatch. The job stops awaiting them, and ends if nothing is left.
_ADD_FOUND = (
    _COMMON
    + """
local meta, frontier = KEYS[1], KEYS[2]
local prev = redis.call('HGET', KEYS[7], ARGV[2])
if prev then return {prev, 0} end
redis.call('HSET', meta, 'awaiting', 0)
if redis.call('HGET', meta, 'status') ~= 'running' then
    redis.call('HSET', KEYS[7], ARGV[2], '[]')
    return {'[]', 0}
end
enqueue(meta, frontier, KEYS[3], KEYS[4], KEYS[5], cjson.decode(ARGV[1]), 1e9)
local batch = dispatch(meta, frontier, KEYS[3], KEYS[6], KEYS[7], ARGV[2])
local fin = 0
if hnum(meta, 'outstanding') <= 0 and redis.call('ZCARD', frontier) == 0 then
    redis.call('HSET', meta, 'status', 'finished', 'reason', 'frontier_empty',
        'finished_by', ARGV[2], 'finished_ms', fmt(now_ms()))
    fin = 1
end
keep_ttl(meta)
return {batch, fin}
"""
)

# KEYS: meta; ARGV: reason who
_FINISH = (
    _COMMON
    + """
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'finished', 'reason', ARGV[1], 'finished_by', ARGV[2],
    'finished_ms', fmt(now_ms()))
return 1
"""
)

# KEYS: meta offsite; ARGV: urls
_NOTE_OFFSITE = """
local added = 0
for i = 1, #ARGV do added = added + redis.call('SADD', KEYS[2], ARGV[i]) end
if added > 0 then redis.call('HINCRBY', KEYS[1], 'skip:off_domain', added) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return added
"""

# KEYS: meta refused; ARGV: url json cap
_NOTE_REFUSED = """
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
local added = redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return added
"""

MAX_REFUSALS_KEPT = 20

# KEYS: hashes; ARGV: hash url
_CLAIM_HASH = """
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner then return owner end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return ARGV[2]
"""

# KEYS: hashes; ARGV: hash url
_RELEASE_HASH = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
"""

Begin = Literal["go", "done", "duplicate", "busy", "cancel", "late", "gone"]


@dataclass(frozen=True)
class Queued:
    """A URL the planner wants fetched: how it was found and how promising it looks."""

    url: str
    score: float
    depth: int
    pattern: str
    parent: str | None = None
    anchor: str = ""
    chained: bool = False
    """Found on a page of the same pattern (``/calendar/2031/7`` on ``/calendar/2031/6``)."""


@dataclass(frozen=True)
class Dispatched:
    url: str
    depth: int
    parent: str | None
    anchor: str
    score: float


@dataclass(frozen=True)
class Completion:
    state: Literal["ok", "again", "stale"]
    dispatched: list[Dispatched]
    finished: bool
    """This completion ended the job (it announces ``crawl.finished``)."""
    published: int = 0
    """Pages the job has published so far."""
    unsent: PagesCrawled | None = None
    """``again``: the URL's page event, recorded with its outcome and not yet out."""


@dataclass(frozen=True)
class JobView:
    """What a worker needs to know about a job (read once per task, cached per process)."""

    job_id: str
    spec: ContextInsufficient


def _decode_batch(raw: bytes | str) -> list[Dispatched]:
    items = json.loads(raw)
    if not isinstance(items, list):  # cjson writes an empty table as {}
        return []
    out = []
    for url, info_raw in items:
        info = json.loads(info_raw) if info_raw else {}
        out.append(
            Dispatched(
                url,
                int(info.get("depth", 0)),
                info.get("parent"),
                str(info.get("anchor", "")),
                float(info.get("score", 0.0)),
            )
        )
    return out


def _encode_queued(items: list[Queued]) -> str:
    return json.dumps(
        [
            [
                q.url,
                q.score,
                json.dumps(
                    {"depth": q.depth, "parent": q.parent, "anchor": q.anchor, "score": q.score}
                ),
                q.pattern,
                1 if q.chained else 0,
            ]
            for q in items
        ]
    )


class JobStore:
    """The scripts above, bound to one Redis client and key namespace."""

    def __init__(self, redis: aioredis.Redis, prefix: str = "", ttl_s: int = 86_400) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl_s = ttl_s
        self._create = redis.register_script(_CREATE)
        self._begin = redis.register_script(_BEGIN)
        self._complete = redis.register_script(_COMPLETE)
        self._finish = redis.register_script(_FINISH)
        self._add_found = redis.register_script(_ADD_FOUND)
        self._renew = redis.register_script(_RENEW)
        self._claim_hash = redis.register_script(_CLAIM_HASH)
        self._release_hash = redis.register_script(_RELEASE_HASH)
        self._note_offsite = redis.register_script(_NOTE_OFFSITE)
        self._note_refused = redis.register_script(_NOTE_REFUSED)
        self._specs: dict[str, ContextInsufficient] = {}

    # -- keys ------------------------------------------------------------------------------

    def key(self, job_id: str, part: str) -> str:
        return f"{self.prefix}crawler:job:{{{job_id}}}:{part}"

    def _keys(self, job_id: str) -> list[str]:
        parts = ("meta", "frontier", "links", "seen", "patterns", "state", "batch", "hashes")
        return [self.key(job_id, p) for p in (*parts, "pages", "stop", "leases", "outbox")]

    @property
    def running_key(self) -> str:
        return f"{self.prefix}crawler:jobs:running"

    # -- transitions -----------------------------------------------------------------------

    async def create(
        self,
        spec: ContextInsufficient,
        seeds: list[Queued],
        dispatcher: str,
        *,
        awaiting: bool = False,
    ) -> tuple[bool, list[Dispatched]]:
        """Create the job once (a second call replays the first dispatch) and dispatch seeds.

        ``awaiting``: more URLs will be added (:meth:`add_found`); until then an empty frontier
        does not end the job.
        """
        result = await self._create(
            keys=self._keys(spec.job_id),
            args=[
                spec.model_dump_json(),
                spec.budget.model_dump_json(),
                self.ttl_s,
                _encode_queued(seeds),
                dispatcher,
                1 if awaiting else 0,
            ],
        )
        created = int(result[0]) == 1
        if created:
            await self.redis.zadd(self.running_key, {spec.job_id: int(result[2])})
        return created, _decode_batch(result[1])

    async def begin(
        self, job_id: str, url: str, entry: str, worker: str = "", lease_ms: int = 3000
    ) -> Begin:
        """Claim ``url`` for the task stream entry ``entry`` and lease it to ``worker`` (one
        holder per handler call).

        ``busy``: the entry is being handled by another live holder (the bus handed it over while
        the first was only slow); wait and ask again: once that holder completes, this returns
        ``done``, and if its process died, its lease runs out and this returns ``go``.
        """
        keys = [
            self.key(job_id, "meta"),
            self.key(job_id, "state"),
            self.key(job_id, "stop"),
            self.key(job_id, "leases"),
        ]
        result = await self._begin(keys=keys, args=[url, entry, worker, lease_ms])
        state = result.decode() if isinstance(result, bytes) else str(result)
        return state  # type: ignore[return-value]

    async def renew(self, job_id: str, url: str, worker: str, lease_ms: int) -> bool:
        """Extend ``worker``'s lease on ``url``; False if it lost it."""
        result = await self._renew(keys=[self.key(job_id, "leases")], args=[url, worker, lease_ms])
        return int(result) == 1

    async def complete(
        self,
        job_id: str,
        url: str,
        entry: str,
        outcome: str,
        *,
        summary: CrawlPageSummary | None = None,
        event: PagesCrawled | None = None,
        links: list[Queued] | None = None,
        pattern_cap: int = 1_000_000,
    ) -> Completion:
        """Record ``url``'s outcome once, queue its links, dispatch what may start next.

        A page's ``event`` is kept in the job's outbox with the outcome, to be published only
        after this (then :meth:`sent`); a completion that is not the first (``again``) brings
        back the URL's event if it is still there.
        """
        result = await self._complete(
            keys=self._keys(job_id),
            args=[
                url,
                entry,
                outcome,
                summary.model_dump_json() if summary else "",
                _encode_queued(links or []),
                pattern_cap,
                event.model_dump_json() if event is not None and outcome == "page" else "",
            ],
        )
        state = result[0].decode() if isinstance(result[0], bytes) else str(result[0])
        return Completion(
            state,  # type: ignore[arg-type]
            _decode_batch(result[1]),
            int(result[2]) == 1,
            int(result[3]),
            PagesCrawled.model_validate_json(result[4]) if result[4] else None,
        )

    async def add_found(
        self, job_id: str, found: list[Queued], dispatcher: str
    ) -> tuple[list[Dispatched], bool]:
        """Queue URLs found apart from any page (a site's sitemaps) and end the wait for them
        (``awaiting``); dispatch what may start. Once per ``dispatcher``: a second call replays
        the first's dispatch. True when this ended the job (nothing left to crawl)."""
        result = await self._add_found(
            keys=self._keys(job_id)[:7], args=[_encode_queued(found), dispatcher]
        )
        return _decode_batch(result[0]), int(result[1]) == 1

    async def sent(self, job_id: str, url: str) -> None:
        """``url``'s page event is out: it leaves the outbox."""
        await self.redis.hdel(self.key(job_id, "outbox"), url)

    async def unsent(self, job_id: str) -> dict[str, PagesCrawled]:
        """URL → page event for the pages recorded whose event is not known to be out yet."""
        raw: dict[Any, Any] = await self.redis.hgetall(self.key(job_id, "outbox"))
        return {
            (k.decode() if isinstance(k, bytes) else str(k)): PagesCrawled.model_validate_json(v)
            for k, v in raw.items()
        }

    async def finish(self, job_id: str, reason: str, who: str) -> bool:
        """End a running job (stop, deadline); True if this call ended it."""
        result = await self._finish(keys=[self.key(job_id, "meta")], args=[reason, who])
        return int(result) == 1

    async def request_stop(self, job_id: str) -> None:
        await self.redis.set(self.key(job_id, "stop"), "1", ex=self.ttl_s)

    async def claim_content(self, job_id: str, content_hash: str, url: str) -> str:
        """The URL that owns ``content_hash`` in this job: ``url`` if it is the first."""
        result = await self._claim_hash(
            keys=[self.key(job_id, "hashes"), self.key(job_id, "meta")],
            args=[content_hash, url],
        )
        return result.decode() if isinstance(result, bytes) else str(result)

    async def release_content(self, job_id: str, content_hash: str, url: str) -> bool:
        """``url`` will not publish ``content_hash`` after all: the next URL with it may claim
        it. True if ``url`` held the claim (a claim of another URL is left alone)."""
        result = await self._release_hash(
            keys=[self.key(job_id, "hashes")], args=[content_hash, url]
        )
        return int(result) == 1

    async def settled(self, job_id: str) -> None:
        """The job's end was announced: the deadline sweep can forget it."""
        await self.redis.zrem(self.running_key, job_id)

    # -- reads -----------------------------------------------------------------------------

    async def spec(self, job_id: str) -> ContextInsufficient | None:
        cached = self._specs.get(job_id)
        if cached is not None:
            return cached
        raw = await self.redis.hget(self.key(job_id, "meta"), "spec")
        if raw is None:
            return None
        spec = ContextInsufficient.model_validate_json(raw)
        if len(self._specs) > 1000:
            self._specs.clear()
        self._specs[job_id] = spec
        return spec

    async def meta(self, job_id: str) -> dict[str, str]:
        raw: dict[Any, Any] = await self.redis.hgetall(self.key(job_id, "meta"))
        return {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }

    async def pages(self, job_id: str) -> list[CrawlPageSummary]:
        raw = await self.redis.lrange(self.key(job_id, "pages"), 0, -1)
        return [CrawlPageSummary.model_validate_json(item) for item in raw]

    async def pattern_counts(self, job_id: str, patterns: list[str]) -> list[int]:
        if not patterns:
            return []
        raw = await self.redis.hmget(self.key(job_id, "patterns"), patterns)
        return [int(v) if v is not None else 0 for v in raw]

    async def note_off_domain(self, job_id: str, urls: list[str]) -> int:
        """Count links outside the allowed domains, each once per job (``skip:off_domain``)."""
        if not urls:
            return 0
        added = await self._note_offsite(
            keys=[self.key(job_id, "meta"), self.key(job_id, "offsite")], args=urls
        )
        return int(added)

    async def note_refused(self, job_id: str, url: str, detail: str, addresses: list[str]) -> None:
        """Keep why the SSRF guard refused ``url`` (the addresses it refused), for the job's
        requester; the first :data:`MAX_REFUSALS_KEPT` per job."""
        record = json.dumps({"detail": detail, "addresses": addresses})
        await self._note_refused(
            keys=[self.key(job_id, "meta"), self.key(job_id, "refused")],
            args=[url, record, MAX_REFUSALS_KEPT],
        )

    async def refused(self, job_id: str) -> dict[str, dict[str, Any]]:
        """URL → ``{"detail", "addresses"}`` for the URLs the SSRF guard refused in the job."""
        raw: dict[Any, Any] = await self.redis.hgetall(self.key(job_id, "refused"))
        return {
            (k.decode() if isinstance(k, bytes) else str(k)): json.loads(v) for k, v in raw.items()
        }

    async def unseen(self, job_id: str, urls: list[str]) -> list[bool]:
        if not urls:
            return []
        flags = await self.redis.smismember(self.key(job_id, "seen"), urls)
        return [not bool(f) for f in flags]

    async def due(self, now_ms: int) -> list[str]:
        """Running jobs whose deadline has passed."""
        raw = await self.redis.zrangebyscore(self.running_key, "-inf", now_ms)
        return [r.decode() if isinstance(r, bytes) else str(r) for r in raw]
