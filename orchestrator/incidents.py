"""Ongoing incidents, and whether a user's turn is about one.

When an outage hits many people, each of them who asks about it should hear what is known instead
of being walked through troubleshooting that cannot help. This module holds the three pieces:

* :class:`IncidentStore` keeps every incident reported on ``incident.reported`` in Redis, newest
  version per id (by ``updated_at``, else the event's ``occurred_at``), so a redelivered or late
  older report never overwrites a newer one. A resolved incident leaves the active set at once but
  its record is kept for ``resolved_keep_s``, so a late older "investigating" cannot bring it
  back; an active incident nobody updates for ``stale_after_s`` is forgotten. ``active()`` is
  cached in-process for ``cache_s``, since every turn asks.
* :func:`match` decides whether a turn (redacted text, error signatures, learned category) is
  about one of the active incidents. Clues and their weights:

  - an error signature the incident lists (in the turn's signatures or its text; exact, hex codes
    compared case-insensitively): strong, unless it is generic (``HTTP 503``, an errno), then weak;
  - an affected service named in the text (word boundaries, any case, simple variants of spelling
    such as ``vpn``/``VPNs``, ``Global Protect``/``globalprotect``, ``wifi``/``Wi-Fi``; never a
    synonym that is not listed: ``e-mail`` is no ``Outlook``): strong;
  - a single word of a multi-word service name or of the title (``exchange`` of "Exchange
    Online", ``badge`` of "Badge readers down"): weak;
  - the same category: counts only with another clue.

  A strong clue alone matches; a weak clue needs the category or another clue; the category alone
  never does. Among several matching incidents the highest score wins (the category breaks ties,
  then the most recently updated). The :class:`IncidentMatch` carries a reason made of the
  incident's own terms and clue kinds, never the user's text, so it can be logged.
* :func:`incident_notice` is what the user reads; :func:`to_ref` is the reply's ``incident``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import redis.asyncio as aioredis

from contracts.events import (
    INCIDENT_RESOLVED_KEEP_S,
    INCIDENT_STALE_AFTER_S,
    Incident,
    IncidentRef,
    IncidentReported,
    utcnow,
)

log = logging.getLogger("deskpilot.orchestrator.incidents")

KEY_PREFIX = "deskpilot:orchestrator:incident:"
# One hash tag for every incident key: the apply script touches a record and the active set
# together, which a Redis cluster allows only within one slot. Incidents are few.
_TAG = "{incidents}"


# -- the store ----------------------------------------------------------------------------------

# KEYS: the incident's record (hash), the active set.
# ARGV: id, version (ms), resolved (1/0), incident JSON, resolved keep (ms), stale after (ms).
# Returns 0 when an equal or newer version is stored (stale report), 1 when stored and active,
# 2 when stored and resolved, 3 when the same version with the same content is already stored.
_APPLY = """
local stored = redis.call('HMGET', KEYS[1], 'version', 'resolved', 'incident')
local version = tonumber(ARGV[2])
if stored[1] then
  local have = tonumber(stored[1])
  if have > version then return 0 end
  if have == version then
    if stored[2] == '1' and ARGV[3] == '0' then return 0 end
    if stored[2] == ARGV[3] and stored[3] == ARGV[4] then return 3 end
  end
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'resolved', ARGV[3], 'incident', ARGV[4])
if ARGV[3] == '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  redis.call('SREM', KEYS[2], ARGV[1])
  return 2
end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""

_OUTCOMES = {0: "stale", 1: "active", 2: "resolved", 3: "duplicate"}


def _readable(incident_id: str, raw: bytes | str) -> Incident | None:
    """A stored record as an incident; None (logged) when it is not one: not UTF-8, not JSON, not
    an incident (damaged, or written by another version). The other incidents still count."""
    try:
        return Incident.model_validate_json(_text(raw))
    except ValueError as exc:  # pydantic's ValidationError and UnicodeDecodeError are ValueErrors
        log.error(
            "unreadable incident record",
            extra={"incident_id": incident_id, "error_type": type(exc).__name__},
        )
        return None


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _version_ms(event: IncidentReported) -> int:
    moment = event.incident.updated_at or event.occurred_at
    return int(_as_utc(moment).timestamp() * 1000)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class IncidentStore:
    """Incidents in Redis, shared by every orchestrator replica.

    ``apply`` is atomic (one script) and idempotent: redeliveries and reports arriving out of
    order leave the newest version. ``active()`` may lag an ``apply`` on another replica by up to
    ``cache_s``; on this replica an ``apply`` clears the cache.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        cache_s: float = 2.0,
        resolved_keep_s: int = INCIDENT_RESOLVED_KEEP_S,
        stale_after_s: int = INCIDENT_STALE_AFTER_S,
        prefix: str = KEY_PREFIX,
    ) -> None:
        self.client = client
        self.cache_s = cache_s
        self.resolved_keep_s = resolved_keep_s
        self.stale_after_s = stale_after_s
        self.prefix = prefix
        self._apply = client.register_script(_APPLY)
        self._cached: tuple[Incident, ...] | None = None
        self._cached_at = 0.0
        self._lock = asyncio.Lock()

    # -- keys ------------------------------------------------------------------------------

    def record_key(self, incident_id: str) -> str:
        return f"{self.prefix}{_TAG}:id:{incident_id}"

    @property
    def active_key(self) -> str:
        return f"{self.prefix}{_TAG}:active"

    # -- writing ---------------------------------------------------------------------------

    async def apply(self, event: IncidentReported) -> str:
        """Keep the report if it is the newest version of its incident.

        Returns ``active`` or ``resolved`` when stored, ``duplicate`` when exactly this version
        was stored already, ``stale`` when a newer version (or, at the same time, a resolution)
        is stored: safe to ack in every case.
        """
        incident = event.incident
        resolved = incident.over
        result = await self._apply(
            keys=[self.record_key(incident.id), self.active_key],
            args=[
                incident.id,
                _version_ms(event),
                "1" if resolved else "0",
                incident.model_dump_json(),
                self.resolved_keep_s * 1000,
                self.stale_after_s * 1000,
            ],
        )
        outcome = _OUTCOMES[int(result)]
        if outcome in ("active", "resolved"):
            self._cached = None
        log.info("incident applied", extra={"incident_id": incident.id, "outcome": outcome})
        return outcome

    # -- reading ---------------------------------------------------------------------------

    async def get(self, incident_id: str) -> Incident | None:
        """The stored version, active or recently resolved; None when there is none or it
        cannot be read."""
        raw = await self.client.hget(self.record_key(incident_id), "incident")
        return None if raw is None else _readable(incident_id, raw)

    async def active(self) -> list[Incident]:
        """Active incidents, most recently updated first (cached for ``cache_s``)."""
        cached = self._fresh()
        if cached is not None:
            return list(cached)
        async with self._lock:  # one refresh at a time; the others take its result
            cached = self._fresh()
            if cached is None:
                cached = await self._load()
                self._cached, self._cached_at = cached, time.monotonic()
        return list(cached)

    def _fresh(self) -> tuple[Incident, ...] | None:
        if self._cached is not None and time.monotonic() - self._cached_at < self.cache_s:
            return self._cached
        return None

    async def _load(self) -> tuple[Incident, ...]:
        members = await self.client.smembers(self.active_key)
        ids = sorted(_text(m) for m in members)
        if not ids:
            return ()
        pipe = self.client.pipeline(transaction=False)
        for incident_id in ids:
            pipe.hmget(self.record_key(incident_id), ["incident", "resolved"])
        rows = await pipe.execute()
        incidents: list[Incident] = []
        gone: list[str] = []
        for incident_id, (raw, resolved) in zip(ids, rows, strict=True):
            if raw is None or (resolved is not None and _text(resolved) == "1"):
                gone.append(incident_id)  # expired as stale (or resolved in between)
                continue
            incident = _readable(incident_id, raw)
            if incident is not None:
                incidents.append(incident)
        if gone:
            await self.client.srem(self.active_key, *gone)
        incidents.sort(key=_recency, reverse=True)
        return tuple(incidents)


def _recency(incident: Incident) -> datetime:
    moment = incident.updated_at or incident.started_at
    return _as_utc(moment) if moment else datetime.min.replace(tzinfo=UTC)


# -- matching -----------------------------------------------------------------------------------

STRONG = 2.0
"""A listed service named, or a specific error signature (the latter scores a little more)."""
SIGNATURE_BONUS = 1.0
WEAK = 1.0
"""A word of a service name or the title, or a generic signature: never enough alone."""
CATEGORY = 0.5
"""The same category, counted only next to another clue."""
MIN_SCORE = 1.5
EXTRA = 0.25
"""Each further distinct clue of a kind already counted, at most ``MAX_EXTRA`` of them."""
MAX_EXTRA = 2

# Vendor names in front of a product: "Microsoft Teams" is also "Teams", "Palo Alto GlobalProtect"
# also "GlobalProtect".
_VENDORS = (
    "microsoft", "ms", "google", "cisco", "palo alto", "palo alto networks", "atlassian",
    "okta", "zoom", "apple", "adobe", "amazon", "aws", "azure", "citrix", "vmware", "fortinet",
    "salesforce", "slack", "dropbox", "box", "sap", "oracle", "ibm", "hp", "dell", "lenovo",
)  # fmt: skip
# Product names that are also everyday words: without their vendor they are only weak clues
# ("I want to exchange my mouse" is not about Microsoft Exchange).
_COMMON_WORDS = frozenset(
    {
        "exchange", "office", "word", "access", "project", "edge", "forms", "lists",
        "planner", "stream", "drive", "meet", "chat", "calendar", "mail", "sites", "docs",
        "sheets", "slides", "keep", "connect", "workspace", "cloud", "identity", "directory",
        "defender", "intune", "sign in", "login", "phone", "voice", "print", "files", "search",
        "notes", "people", "tasks", "groups", "admin", "portal", "wallet", "photos", "music",
    }
)  # fmt: skip
# Words of titles and service names that say nothing about what is affected.
_GENERIC_WORDS = frozenset(
    {
        "a", "an", "the", "and", "or", "of", "for", "to", "in", "on", "at", "by", "with", "from",
        "is", "are", "was", "be", "been", "being", "not", "no", "some", "all", "any", "most",
        "many", "few", "our", "your", "their", "its", "this", "that", "these", "those", "it",
        "issue", "issues", "problem", "problems", "incident", "incidents", "outage", "outages",
        "degraded", "degradation", "performance", "partial", "major", "minor", "disruption",
        "disrupted", "interruption", "intermittent", "elevated", "increased", "error", "errors",
        "rate", "rates", "failure", "failures", "failing", "failed", "down", "slow", "slowness",
        "latency", "delays", "delay", "delayed", "unavailable", "unavailability", "available",
        "availability", "affecting", "affected", "impact", "impacting", "impacted", "users",
        "user", "customers", "employees", "staff", "people", "region", "regions",
        "service", "services", "system", "systems", "platform", "online", "app", "apps",
        "application", "applications", "server", "servers", "client", "clients", "tool",
        "tools", "access", "accessing", "unable", "cannot", "can't", "investigating",
        "identified", "monitoring", "resolved", "scheduled", "maintenance", "update",
        "updates", "emea", "apac", "amer", "eu", "us", "uk", "global", "worldwide", "remote",
        "office", "offices", "home", "site", "sites", "building", "floor", "new", "old",
        "network", "networks", "connectivity", "connection", "connections", "working", "works",
        "work", "reports", "reported", "due", "after", "before", "during",
    }
)  # fmt: skip

_SEPARATOR = r"[\s\-_.]?"
# Not right after a letter or digit, nor after a one-letter prefix ("mail" is not in "e-mail").
_BEFORE = r"(?<![^\W_])(?<!\b[^\W\d_]-)"
_AFTER = r"(?![^\W_])"
_RUN = re.compile(r"[^\W_]+")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+")
_ALTERNATIVES = re.compile(r"\s*[()/|]\s*")
_HEX = re.compile(r"0x[0-9a-f]+", re.IGNORECASE)
_GENERIC_SIGNATURE = re.compile(
    r"(?:HTTP(?:/\d(?:\.\d)?)?\s*\d{3}|errno\s*-?\d+|(?:WSA)?E[A-Z_]{2,})", re.IGNORECASE
)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class IncidentMatch:
    """The incident a turn is about, how sure (``score``) and why (for the log: the incident's
    own terms and clue kinds, never the user's text)."""

    incident: Incident
    score: float
    reason: str


def _tokens(name: str) -> list[str]:
    """Words of a name, camelCase split: ``GlobalProtect`` -> ``Global``, ``Protect``."""
    return [part for run in _RUN.findall(name) for part in _CAMEL.findall(run)]


@functools.lru_cache(maxsize=1024)
def _name_pattern(name: str) -> tuple[re.Pattern[str], str] | None:
    """The name with its words joined by an optional separator, ending in an optional plural
    or possessive; case-insensitive unless the name is one or two characters ("IT", "AD").
    With it, its first word in lower case: text without it cannot match."""
    tokens = _tokens(name)
    if not tokens:
        return None
    body = _SEPARATOR.join(re.escape(t) for t in tokens)
    short = sum(len(t) for t in tokens) <= 2
    flags = 0 if short else re.IGNORECASE
    pattern = re.compile(rf"{_BEFORE}{body}(?:'s|’s|s|es)?{_AFTER}", flags)
    return pattern, tokens[0].lower()


def _normal(value: str) -> str:
    return _SPACES.sub(" ", value).strip()


def _lower_words(value: str) -> str:
    return " ".join(t.lower() for t in _tokens(value))


def _names(service: str) -> tuple[list[str], list[str]]:
    """(strong, weak) forms of one affected service name.

    Strong: the name, each alternative it spells out ("Email (Exchange Online)" is also "Email"
    and "Exchange Online"), and each without its vendor unless that leaves an everyday word.
    Weak: the single distinctive words of multi-word names.
    """
    strong: list[str] = []
    weak: list[str] = []
    whole = _normal(service)
    if not whole:
        return strong, weak
    strong.append(whole)
    for part in _ALTERNATIVES.split(whole):
        if part and part != whole and any(_distinctive(w) for w in _tokens(part)):
            strong.append(part)
    for name in list(strong):
        lowered = _lower_words(name)
        for vendor in _VENDORS:
            if lowered.startswith(vendor + " ") and len(lowered) > len(vendor) + 1:
                rest_tokens = _tokens(name)[len(vendor.split()) :]
                rest = " ".join(rest_tokens)
                if not rest_tokens:
                    continue
                if rest.lower() in _COMMON_WORDS:
                    weak.append(rest)
                else:
                    strong.append(rest)
        words = _WORD.findall(name)
        if len(words) > 1:
            weak.extend(w for w in words if _distinctive(w))
    return strong, weak


def _distinctive(word: str) -> bool:
    letters = "".join(_tokens(word)).lower()
    return len(letters) >= 3 and not letters.isdigit() and word.lower() not in _GENERIC_WORDS


def _signature_key(signature: str) -> str:
    normal = _normal(signature)
    return normal.lower() if _HEX.fullmatch(normal) else normal


@dataclass(frozen=True)
class _Signature:
    shown: str
    key: str
    pattern: re.Pattern[str]
    generic: bool


@dataclass(frozen=True)
class _Terms:
    """What an incident is matched on, worked out once per version of it."""

    signatures: tuple[_Signature, ...]
    strong: tuple[str, ...]
    weak: tuple[str, ...]
    title: tuple[str, ...]
    category: str


def _signature(signature: str) -> _Signature:
    normal = _normal(signature)
    body = r"\s+".join(re.escape(part) for part in normal.split(" "))
    before = _BEFORE if normal[0].isalnum() else ""
    after = _AFTER if normal[-1].isalnum() else ""
    flags = re.IGNORECASE if _HEX.fullmatch(normal) else 0
    return _Signature(
        shown=normal,
        key=_signature_key(normal),
        pattern=re.compile(f"{before}{body}{after}", flags),
        generic=_GENERIC_SIGNATURE.fullmatch(normal) is not None,
    )


@functools.lru_cache(maxsize=256)
def _terms(
    title: str, services: tuple[str, ...], signatures: tuple[str, ...], category: str | None
) -> _Terms:
    strong: list[str] = []
    weak: list[str] = []
    for service in services:
        names, words = _names(service)
        strong += names
        weak += words
    return _Terms(
        signatures=tuple(_signature(s) for s in signatures if _normal(s)),
        strong=tuple(strong),
        weak=tuple(weak),
        title=tuple(w for w in _WORD.findall(title) if _distinctive(w)),
        category=_category_key(category),
    )


def _category_key(category: str | None) -> str:
    return _lower_words(category or "").replace(" ", "_")


def _found(names: Iterable[str], text: str, lowered: str) -> list[str]:
    """The names (as the incident spells them) found in ``text``, each once."""
    hits: dict[str, str] = {}
    for name in names:
        compiled = _name_pattern(name)
        if compiled is None or name.lower() in hits:
            continue
        pattern, first = compiled
        if first in lowered and pattern.search(text):  # a cheap look before the regex
            hits[name.lower()] = name
    return list(hits.values())


def _score(
    incident: Incident, text: str, signatures: set[str], category: str
) -> tuple[float, list[str]]:
    terms = _terms(
        incident.title,
        tuple(incident.affected_services),
        tuple(incident.error_signatures),
        incident.category,
    )
    lowered = text.lower()
    reasons: list[str] = []
    score = 0.0

    specific: list[str] = []
    generic: list[str] = []
    for signature in terms.signatures:
        if signature.key in signatures or signature.pattern.search(text):
            (generic if signature.generic else specific).append(signature.shown)
    if specific:
        score += STRONG + SIGNATURE_BONUS + EXTRA * min(len(specific) - 1, MAX_EXTRA)
        reasons.append("signature " + ", ".join(specific))

    services = _found(terms.strong, text, lowered)
    if services:
        score += STRONG + EXTRA * min(len(services) - 1, MAX_EXTRA)
        reasons.append("service " + ", ".join(services))

    weak_hits = [] if services else _found(terms.weak, text, lowered)
    taken = {w.lower() for w in [*services, *weak_hits]}
    weak_hits += [w for w in _found(terms.title, text, lowered) if w.lower() not in taken]
    weak_clues = len(generic) + len(weak_hits)
    if weak_clues:
        score += WEAK + EXTRA * min(weak_clues - 1, MAX_EXTRA)
        if generic:
            reasons.append("generic signature " + ", ".join(generic))
        if weak_hits:
            reasons.append("word " + ", ".join(weak_hits))

    if score > 0 and category and category == terms.category:
        score += CATEGORY
        reasons.append(f"category {category}")
    return score, reasons


def match(
    incidents: Sequence[Incident],
    text: str,
    signatures: Iterable[str] = (),
    category: str | None = None,
) -> IncidentMatch | None:
    """The active incident this turn is about, or None.

    ``text`` is the redacted message with any attachment text, ``signatures`` the error
    signatures of its attachments and message, ``category`` the learned one. Resolved incidents
    in ``incidents`` are ignored.
    """
    given = list(signatures)
    keys = {_signature_key(s) for s in given if _normal(s)}
    haystack = " ".join([text, *given])
    wanted = _category_key(category)
    best: tuple[float, datetime, str, IncidentMatch] | None = None
    for incident in incidents:
        if incident.over:
            continue
        score, reasons = _score(incident, haystack, keys, wanted)
        if score < MIN_SCORE:
            continue
        found = IncidentMatch(incident=incident, score=round(score, 2), reason="; ".join(reasons))
        # Highest score, then the most recently updated, then the id (for a stable choice).
        rank = (score, _recency(incident), incident.id, found)
        if best is None or rank[:3] > best[:3]:
            best = rank
    return None if best is None else best[3]


# -- telling the user ---------------------------------------------------------------------------

_STATUS_PHRASES = {
    "investigating": "under investigation",
    "identified": "cause identified, a fix is being worked on",
    "monitoring": "a fix is in place and being monitored",
    "in_progress": "in progress",
    "verifying": "being verified",
    "scheduled": "scheduled maintenance",
}
LATEST_UPDATE_CHARS = 300


def _status_phrase(status: str) -> str:
    key = _SPACES.sub("_", status.strip().lower())
    return _STATUS_PHRASES.get(key, key.replace("_", " "))


def since_phrase(started_at: datetime | None, now: datetime | None = None) -> str:
    """``since 09:10 UTC`` today, ``since 25 Nov 09:10 UTC`` this year, else with the year;
    ``starting ...`` when the start lies ahead (announced maintenance)."""
    if started_at is None:
        return ""
    start = _as_utc(started_at)
    current = _as_utc(now or utcnow())
    word = "starting" if start > current + timedelta(minutes=1) else "since"
    clock = start.strftime("%H:%M UTC")
    if start.date() == current.date():
        return f"{word} {clock}"
    day = f"{start.day} {start.strftime('%b')}"
    if start.year != current.year:
        day += f" {start.year}"
    return f"{word} {day} {clock}"


def _shorten(text: str, limit: int) -> str:
    text = _normal(text)
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:-–— ")
    return cut + "…"


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def incident_notice(incident: Incident, now: datetime | None = None) -> str:
    """What the user reads: the incident, its status and start, the latest update, and that
    they need not keep troubleshooting (with the ticket offer)."""
    title = _normal(incident.title).rstrip(".") or "an outage"
    status = _status_phrase(incident.status)
    details = [d for d in (status, since_phrase(incident.started_at, now)) if d]
    first = f"This looks like an ongoing incident IT already knows about: {title}"
    if details:
        first += f" ({', '.join(details)})"
    parts = [first + "."]
    update = _shorten(incident.latest_update or "", LATEST_UPDATE_CHARS)
    if update and update.rstrip(".").lower() != title.lower():
        parts.append(f"Latest update: {_sentence(update)}")
    parts.append(
        "You don't need to keep troubleshooting on your side: it should work again once the "
        "incident is fixed. If you'd like a ticket anyway, just say so and I'll link it to this "
        "incident."
    )
    if incident.url:  # last, so no full stop sticks to the link
        parts.append(f"Status updates: {incident.url}")
    return " ".join(parts)


def to_ref(incident: Incident) -> IncidentRef:
    return IncidentRef(
        id=incident.id,
        title=incident.title,
        status=incident.status,
        url=incident.url,
        since=incident.started_at,
        latest_update=incident.latest_update,
    )
