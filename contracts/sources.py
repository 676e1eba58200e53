"""Knowledge sources as the admin API sees them: names, and each one's last sync.

The indexer configures and syncs sources (``indexer.sources``); the gateway lists them and asks
for a sync. They share what is here: the pattern a source name must match (checked at every entry
point, so a name is never a path or a key pattern), and the catalogue the indexer keeps in Redis,
one JSON value per source in the hash :data:`CATALOGUE_KEY`, which the gateway only reads.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from contracts.events import SyncSummary

SOURCE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
"""Lower-case letters, digits, ``-`` and ``_``, at most 63: safe in a URL path, a Redis key and a
log line as it is."""
_NAME = re.compile(SOURCE_NAME_PATTERN)

SOURCES_CONVERSATION = "knowledge-sources"
"""The conversation id of source sync events (they belong to no user's conversation)."""

CATALOGUE_KEY = "deskpilot:sources:catalogue"
"""Hash: source name -> :class:`SourceStatus` as JSON. Written by the indexer, read by the
gateway."""


def is_source_name(value: str) -> bool:
    """Whether ``value`` is a well-formed source name (not whether such a source exists)."""
    return bool(_NAME.fullmatch(value))


class SourceStatus(BaseModel):
    """One configured source: what it is and how its last sync went."""

    name: str = Field(examples=["it-wiki"])
    kind: Literal["confluence", "sharepoint"]
    interval_s: float | None = Field(
        None, description="Seconds between scheduled syncs; none: on demand only."
    )
    state: Literal["idle", "running", "failed", "hidden", "removing"] = Field(
        "idle",
        description="hidden: no longer configured, its documents answered no more and removed "
        "at `removal_due_at` unless it is configured again; removing: being removed.",
    )
    last_run_id: str | None = None
    last_started_at: datetime | None = None
    last_finished_at: datetime | None = None
    last_summary: SyncSummary | None = None
    last_error: str | None = Field(None, description="Why the last run stopped early, if it did.")
    documents: int = Field(0, ge=0, description="Documents of this source in the index.")
    removal_due_at: datetime | None = Field(
        None,
        description="When a source no longer configured is removed (its documents deleted); "
        "configured again before then, it is shown again as it was.",
    )

    @property
    def taken_out(self) -> bool:
        """No longer configured (hidden, or being removed): nothing syncs it."""
        return self.state in ("hidden", "removing")


async def read_catalogue(client: Any) -> list[SourceStatus]:
    """Every source the indexer announced, by name (``client``: a ``redis.asyncio`` client)."""
    raw: dict[Any, Any] = await client.hgetall(CATALOGUE_KEY)
    statuses = [SourceStatus.model_validate_json(value) for value in raw.values()]
    return sorted(statuses, key=lambda status: status.name)


async def read_source(client: Any, name: str) -> SourceStatus | None:
    """One source's status, or None when no source of that name is configured."""
    if not is_source_name(name):
        return None
    raw = await client.hget(CATALOGUE_KEY, name)
    return SourceStatus.model_validate_json(raw) if raw else None
