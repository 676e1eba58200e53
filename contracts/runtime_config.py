"""Settings admins change while the stack runs, and how every service reads them.

The seed user story's settings (help-site seeds and allowed domains, ``top_k`` and the relevance
threshold, the crawl's depth, pages, deadline and politeness, the clarification cap, the anger
threshold of escalation and the category -> technician queue mapping) start from each service's
own environment settings. An admin's changes are *overrides* on top of them, kept in one JSON
document in Redis (:data:`CONFIG_KEY`)::

    {"version": 3, "overrides": {"top_k": 8}, "updated_at": "...", "updated_by": "admin token"}

What a caller can rely on:

* Every override was validated by :class:`RuntimeOverrides` before it was stored (the admin API
  answers 422 otherwise), with bounds inside the services' own, so a service applies it as is.
* The document only changes through :meth:`RuntimeConfigStore.save`, a compare-and-set on its
  ``version``: two admins editing at once cannot overwrite each other unknowingly.
* Services read it through :class:`RuntimeConfigReader`, a cached read with a short TTL
  (:data:`CACHE_TTL_S`): a change reaches every process within that time, with no restart and no
  notification channel to miss (a process that was reconnecting during a pub/sub message would
  keep stale values; a TTL cannot). It costs one ``GET`` per process per TTL.
* Each service publishes the defaults it runs with (:func:`publish_defaults`, at start-up), so
  the admin API can show effective values and what is overridden without importing any service.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from redis.exceptions import RedisError, WatchError

log = logging.getLogger("deskpilot.runtime_config")

CONFIG_KEY = "deskpilot:config:runtime"
"""The admins' overrides: one JSON document with a version number."""
DEFAULTS_PREFIX = "deskpilot:config:defaults:"
"""``<prefix><service>``: the values a service runs with when nothing is overridden."""
CACHE_TTL_S = 2.0
"""How long a process reuses the overrides it read: the most a change waits to take effect."""
AUDIT_CONVERSATION = "admin-configuration"
"""The ``conversation_id`` of configuration audit records, so the admin audit view finds them."""

CATEGORIES: tuple[str, ...] = (
    "connectivity",
    "account",
    "courses",
    "documentation",
    "peripheral_exchange",
    "peripheral_question",
    "other",
)
"""The categories the assistant understands (the orchestrator's ``Category``; a test keeps the
two equal), each mapped to a technician queue."""

ORCHESTRATOR = "orchestrator"
CRAWLER = "crawler"
SERVICES: tuple[str, ...] = (ORCHESTRATOR, CRAWLER)

_DOMAIN = re.compile(
    r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*"
    r"(?::\d{1,5})?$"
)
MAX_DOMAIN_CHARS = 259
MAX_URL_CHARS = 2000
MAX_QUEUE_CHARS = 100

S = TypeVar("S", bound=BaseModel)


def _owner(service: str, kind: str) -> dict[str, Any]:
    """Field metadata the admin page builds its form from (``kind``) and the service it tunes."""
    return {"service": service, "kind": kind}


class RuntimeOverrides(BaseModel):
    """The settings an admin may change at run time; unset (None) means the service's default.

    Field names are the services' own settings names (``ORCHESTRATOR_TOP_K`` is ``top_k``), so a
    service applies them with :meth:`apply`."""

    model_config = ConfigDict(extra="forbid")

    crawl_seed_urls: list[str] | None = Field(
        None,
        max_length=50,
        description="Start pages of the help sites read when the knowledge base does not cover "
        "a question (http or https, without user name or password); an empty list turns "
        "crawling off.",
        json_schema_extra=_owner(ORCHESTRATOR, "urls"),
    )
    crawl_allowed_domains: list[str] | None = Field(
        None,
        max_length=100,
        description="Hosts a crawl may read, each with its subdomains (`help.example.com`, "
        "optionally `:port`); empty means the seed URLs' own hosts.",
        json_schema_extra=_owner(ORCHESTRATOR, "domains"),
    )
    top_k: int | None = Field(
        None,
        ge=1,
        le=50,
        description="Chunks retrieved per question.",
        json_schema_extra=_owner(ORCHESTRATOR, "int"),
    )
    relevance_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Similarity below which the knowledge base is taken not to cover a question.",
        json_schema_extra=_owner(ORCHESTRATOR, "float"),
    )
    crawl_max_depth: int | None = Field(
        None,
        ge=0,
        le=10,
        description="Links a crawl follows from a seed at most.",
        json_schema_extra=_owner(ORCHESTRATOR, "int"),
    )
    crawl_max_pages: int | None = Field(
        None,
        ge=1,
        le=500,
        description="Pages one turn's crawl may read.",
        json_schema_extra=_owner(ORCHESTRATOR, "int"),
    )
    crawl_deadline_s: float | None = Field(
        None,
        gt=0,
        le=600,
        description="Seconds a turn's crawl may take before the turn is answered with what was "
        "found; must stay under the gateway's turn timeout.",
        json_schema_extra=_owner(ORCHESTRATOR, "float"),
    )
    crawl_concurrency: int | None = Field(
        None,
        ge=1,
        le=32,
        description="Pages of one crawl fetched at once.",
        json_schema_extra=_owner(ORCHESTRATOR, "int"),
    )
    domain_requests_per_s: float | None = Field(
        None,
        gt=0,
        le=100,
        description="Requests per second to one host, across the whole crawler fleet.",
        json_schema_extra=_owner(CRAWLER, "float"),
    )
    domain_concurrency: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Requests in flight to one host, across the whole crawler fleet.",
        json_schema_extra=_owner(CRAWLER, "int"),
    )
    max_crawl_delay_s: float | None = Field(
        None,
        ge=0,
        le=300,
        description="A robots.txt crawl-delay above this many seconds is capped to it.",
        json_schema_extra=_owner(CRAWLER, "float"),
    )
    clarify_cap: int | None = Field(
        None,
        ge=0,
        le=10,
        description="Clarifying rounds per topic before a ticket is offered instead.",
        json_schema_extra=_owner(ORCHESTRATOR, "int"),
    )
    escalation_anger_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Anger score at which a conversation goes to a technician.",
        json_schema_extra=_owner(ORCHESTRATOR, "float"),
    )
    category_queues: dict[str, str] | None = Field(
        None,
        description="Category -> technician queue a ticket of that category goes to; "
        "categories left out keep their default queue.",
        json_schema_extra=_owner(ORCHESTRATOR, "queues"),
    )

    @field_validator("crawl_seed_urls")
    @classmethod
    def _seed_urls(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        urls = []
        for raw in value:
            url = raw.strip()
            if len(url) > MAX_URL_CHARS:
                raise ValueError(f"a seed URL is longer than {MAX_URL_CHARS} characters")
            try:
                parts = urlsplit(url)
                parts.port  # noqa: B018 - raises on a port that is not a number
            except ValueError:
                raise ValueError(f"{url!r} is not a valid URL") from None
            if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{url!r} is not an http(s) URL with a host")
            if parts.username is not None or parts.password is not None:
                raise ValueError("seed URLs must not carry a user name or password")
            urls.append(url)
        return list(dict.fromkeys(urls))

    @field_validator("crawl_allowed_domains")
    @classmethod
    def _domains(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        domains = []
        for raw in value:
            domain = raw.strip().lower().strip(".")
            if len(domain) > MAX_DOMAIN_CHARS or not _DOMAIN.match(domain):
                raise ValueError(
                    f"{raw!r} is not a host name (like help.example.com or help.example.com:8443)"
                )
            domains.append(domain)
        return list(dict.fromkeys(domains))

    @field_validator("category_queues")
    @classmethod
    def _queues(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - set(CATEGORIES))
        if unknown:
            raise ValueError(
                f"unknown categor{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                f"known: {', '.join(CATEGORIES)}"
            )
        queues = {}
        for category, raw in value.items():
            queue = raw.strip()
            if not queue or len(queue) > MAX_QUEUE_CHARS or not queue.isprintable():
                raise ValueError(
                    f"the queue of {category} must be 1 to {MAX_QUEUE_CHARS} printable characters"
                )
            queues[category] = queue
        return queues

    def values(self) -> dict[str, Any]:
        """The overridden settings only."""
        return self.model_dump(exclude_none=True)

    def apply(self, settings: S) -> S:
        """``settings`` with the overrides it has fields for (the caller's own settings class);
        the bounds here are within the services' own, so no re-validation is needed."""
        fields = type(settings).model_fields
        update = {name: value for name, value in self.values().items() if name in fields}
        return settings.model_copy(update=update) if update else settings


FIELDS: tuple[str, ...] = tuple(RuntimeOverrides.model_fields)


def field_service(name: str) -> str:
    """The service a runtime setting tunes."""
    extra = RuntimeOverrides.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)  # nosec B101 # a type narrowing: every field of RuntimeOverrides declares its extra
    return str(extra["service"])


def field_kind(name: str) -> str:
    """How the admin page edits it: int, float, urls, domains or queues."""
    extra = RuntimeOverrides.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)  # nosec B101 # a type narrowing: every field of RuntimeOverrides declares its extra
    return str(extra["kind"])


def defaults_of(
    settings: BaseModel, service: str, *, queues: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The runtime settings ``service`` tunes, as ``settings`` has them (its environment's
    values); ``queues`` is the orchestrator's category -> queue mapping from its examples file."""
    values: dict[str, Any] = {}
    for name in FIELDS:
        if field_service(name) != service:
            continue
        if name == "category_queues":
            if queues is not None:
                values[name] = dict(queues)
        elif hasattr(settings, name):
            values[name] = getattr(settings, name)
    return values


async def publish_defaults(
    client: aioredis.Redis, service: str, values: Mapping[str, Any], prefix: str = DEFAULTS_PREFIX
) -> None:
    """Record the defaults ``service`` runs with, for the admin API. Best effort: a service
    whose defaults are unknown is shown without them; it still applies overrides."""
    try:
        await client.set(f"{prefix}{service}", json.dumps(dict(values), sort_keys=True))
    except RedisError as exc:
        log.warning("runtime defaults not published", extra={"error": type(exc).__name__})


async def read_defaults(client: aioredis.Redis, prefix: str = DEFAULTS_PREFIX) -> dict[str, Any]:
    """Every service's published defaults in one mapping (a field has one owning service)."""
    raws = await client.mget([f"{prefix}{service}" for service in SERVICES])
    defaults: dict[str, Any] = {}
    for service, raw in zip(SERVICES, raws, strict=True):
        if raw is None:
            continue
        try:
            published = json.loads(raw)
        except ValueError:
            continue
        if isinstance(published, dict):
            defaults.update(
                {k: v for k, v in published.items() if k in FIELDS and field_service(k) == service}
            )
    return defaults


class StoredConfig(BaseModel):
    """The document in Redis: the overrides and who set them last."""

    version: int = Field(0, ge=0, description="Incremented by every change; 0 before the first.")
    overrides: RuntimeOverrides = Field(default_factory=RuntimeOverrides)
    updated_at: datetime | None = None
    updated_by: str | None = None


class StaleVersion(Exception):
    """The document changed since the version the caller based its change on."""

    def __init__(self, expected: int, current: int) -> None:
        super().__init__(f"expected version {expected}, found {current}")
        self.expected = expected
        self.current = current


def parse_stored(raw: bytes | str | None) -> StoredConfig:
    """The stored document; none yet is version 0 with no overrides. Raises ValidationError."""
    if raw is None:
        return StoredConfig()
    return StoredConfig.model_validate_json(raw)


class RuntimeConfigStore:
    """Reads and changes the overrides document (the admin API's side)."""

    def __init__(self, client: aioredis.Redis, key: str = CONFIG_KEY) -> None:
        self.client = client
        self.key = key

    async def load(self) -> StoredConfig:
        return parse_stored(await self.client.get(self.key))

    async def save(
        self, expected_version: int, overrides: RuntimeOverrides, updated_by: str
    ) -> tuple[StoredConfig, StoredConfig]:
        """Replace the overrides if the stored version is still ``expected_version``; returns
        (before, after). Raises :class:`StaleVersion` otherwise, also when another writer got in
        between the read and the write (``WATCH``)."""
        async with self.client.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(self.key)
                before = parse_stored(await pipe.get(self.key))
                if before.version != expected_version:
                    raise StaleVersion(expected_version, before.version)
                after = StoredConfig(
                    version=before.version + 1,
                    overrides=overrides,
                    updated_at=datetime.now(UTC),
                    updated_by=updated_by,
                )
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.set(self.key, after.model_dump_json(exclude_none=True))
                await pipe.execute()
            except WatchError:
                current = await self.load()
                raise StaleVersion(expected_version, current.version) from None
        return before, after


class RuntimeConfigReader:
    """The overrides as a service sees them: read at most once per ``ttl_s`` per process.

    When Redis cannot be read, or holds a document this version cannot parse, the last values
    read stay in force (and the next read is tried after ``ttl_s``): a configuration read never
    fails a turn."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        key: str = CONFIG_KEY,
        ttl_s: float = CACHE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.key = key
        self.ttl_s = ttl_s
        self.clock = clock
        self._config = StoredConfig()
        self._read_at: float | None = None
        self._lock = asyncio.Lock()

    def _fresh(self) -> bool:
        return self._read_at is not None and self.clock() - self._read_at < self.ttl_s

    async def current(self) -> StoredConfig:
        """The overrides in force; the same object until a read finds a new version."""
        if self._fresh():
            return self._config
        async with self._lock:
            if self._fresh():
                return self._config
            try:
                stored = parse_stored(await self.client.get(self.key))
            except RedisError as exc:
                log.warning(
                    "runtime configuration not read; keeping the last values",
                    extra={"error": type(exc).__name__},
                )
            except ValidationError:
                log.warning("runtime configuration not valid; keeping the last values")
            else:
                if stored.version != self._config.version or stored != self._config:
                    log.info("runtime configuration in force", extra={"version": stored.version})
                    self._config = stored
            self._read_at = self.clock()
        return self._config
