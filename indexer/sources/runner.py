"""Runs a configured source's sync on request and keeps the sources' catalogue for the admin API.

The catalogue (:data:`contracts.sources.CATALOGUE_KEY`) holds one :class:`SourceStatus` per
configured source: announced when the indexer starts, marked running while a sync runs, and
given the run's summary or error when it ends. A source no longer configured stays in it, marked
``hidden`` and then ``removing``, until :mod:`indexer.sources.removal` has removed it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import redis

from contracts.events import SyncSummary
from contracts.sources import CATALOGUE_KEY, SourceStatus
from indexer.service import Ingestor
from indexer.sources.base import Draft, DraftLink, Source
from indexer.sources.config import SharePointConfig, SourceSettings
from indexer.sources.confluence import ConfluenceSource
from indexer.sources.removal import RemovalResult, SourceRemovals, known_sources
from indexer.sources.state import SyncState
from indexer.sources.sync import SourceSync, SyncBusy, SyncResult

logger = logging.getLogger(__name__)


SCHEDULE_PREFIX = "deskpilot:indexer:source-schedule:"
DRAFT_PREFIX = "deskpilot:indexer:source-draft:"
"""``<prefix><source>:<proposal id>`` -> the draft written (JSON), so a redelivered request
reports the same draft instead of writing a second one."""


REMOVED_SOURCE_GRACE_S = 7 * 86_400.0
"""How long a source taken out of the configuration stays hidden before it is removed (the
default of ``INDEXER_REMOVED_SOURCE_GRACE_S``)."""


class UnknownSource(LookupError):
    """No source of that name is configured."""


class SourceRemoving(UnknownSource):
    """The source is being removed (taken out of the configuration on some replica)."""


def open_source(config: SourceSettings) -> Source:
    """The plugin for ``config``'s kind."""
    if isinstance(config, SharePointConfig):
        from indexer.sources.sharepoint import SharePointSource

        return SharePointSource(config)
    return ConfluenceSource(config)


class SourceRunner:
    """Syncs configured sources by name (synchronous: call it from a worker thread)."""

    def __init__(
        self,
        sources: list[SourceSettings],
        ingestor: Ingestor,
        client: redis.Redis,
        removed_grace_s: float = REMOVED_SOURCE_GRACE_S,
    ) -> None:
        self.sources = {source.name: source for source in sources}
        self.ingestor = ingestor
        self.client = client
        self.removals = SourceRemovals(client, ingestor, removed_grace_s)

    def announce(self) -> None:
        """Put every configured source in the catalogue (keeping its last run), put back the
        ones being removed that are configured again, and hide those no longer configured
        (their sync state found in Redis, or their catalogue entry)."""
        self.reconcile(known_sources(self.client))
        for config in self.sources.values():
            status = self.status(config.name) or SourceStatus(name=config.name, kind=config.kind)
            status.kind, status.interval_s = config.kind, config.interval_s
            status.documents = SyncState(self.client, config.name).document_count()
            self._save(status)

    def reconcile(self, known: set[str] | None = None) -> None:
        """Hide the sources the catalogue (or ``known``) has and the configuration does not
        name, put back those configured again, and show each one's removal in the catalogue
        (an entry nothing is removing any more goes)."""
        catalogued = {_text(name) for name in self.client.hkeys(CATALOGUE_KEY)}
        pending = set(self.removals.pending())
        self.removals.reconcile(self.sources, catalogued | pending | (known or set()))
        removals = self.removals.pending()
        for name in catalogued:
            removal = removals.get(name)
            status = self.status(name)
            if status is None or (removal is None and name not in self.sources):
                # Unless it could not be hidden yet (its lock was held): again next time.
                if status is None or not self.removals.has_state(name):
                    self.client.hdel(CATALOGUE_KEY, name)
                continue
            if removal is None:
                if status.state not in ("hidden", "removing"):
                    continue
                status.state, status.removal_due_at = "idle", None  # put back
            else:
                hidden = removal.phase in ("hiding", "hidden")
                status.state = "hidden" if hidden else "removing"
                status.removal_due_at = datetime.fromtimestamp(removal.due, UTC)
            status.documents = SyncState(self.client, name).document_count()
            self._save(status)
        for config in self.sources.values():
            if config.name not in catalogued:
                # Configured, but its entry went with a removal that had started when it was
                # put back: listed again (its next sync starts afresh).
                self._save(SourceStatus(name=config.name, kind=config.kind))

    def remove_due(self, now: float | None = None) -> list[RemovalResult]:
        """Reconcile, then remove the sources whose grace period is over (at ``now``, default
        the time): their summaries to publish, then to hand to :meth:`removed`."""
        self.reconcile()
        results = self.removals.purge_due(self.sources, now)
        for result in results:
            status = self.status(result.name)
            if status is not None:
                status.state, status.documents = "removing", 0
                self._save(status)
        return results

    def removed(self, result: RemovalResult) -> None:
        """``result`` is published: the source leaves the catalogue and is freed."""
        self.client.hdel(CATALOGUE_KEY, result.name)
        self.removals.done(result)

    def due(self) -> list[str]:
        """Sources whose scheduled sync is due, each claimed for its interval: of all replicas
        asking, one gets each due source per interval."""
        names = []
        for config in self.sources.values():
            if config.interval_s is None:
                continue
            claimed = self.client.set(
                f"{SCHEDULE_PREFIX}{config.name}", "1", nx=True, px=int(config.interval_s * 1000)
            )
            if claimed:
                names.append(config.name)
        return names

    def status(self, name: str) -> SourceStatus | None:
        raw = self.client.hget(CATALOGUE_KEY, name)
        return SourceStatus.model_validate_json(raw) if raw else None

    def sync(self, name: str) -> SyncResult:
        """One run of source ``name``; raises :class:`UnknownSource` and
        :class:`~indexer.sources.sync.SyncBusy`."""
        config = self.sources.get(name)
        if config is None:
            raise UnknownSource(f"no source named {name!r} is configured")
        if self.removals.get(name) is not None:
            raise SourceRemoving(
                f"source {name!r} is being removed (another indexer replica's configuration no "
                "longer names it); it is put back, with its documents, once every replica "
                "names it again"
            )
        state = SyncState(self.client, name)
        status = self.status(name) or SourceStatus(name=name, kind=config.kind)
        source = open_source(config)
        sync = SourceSync(source, self.ingestor, state)

        def started() -> None:
            status.state = "running"
            status.last_started_at = datetime.now(UTC)
            self._save(status)

        try:
            result = sync.run(on_start=started)
        except SyncBusy:
            raise
        except Exception as exc:
            # Chroma or Redis failed under the run: its cursor stays where it was committed.
            result = SyncResult(run_id="", summary=SyncSummary(), error=type(exc).__name__)
            logger.exception("sync of %s failed", name)
        finally:
            source.close()
        status.state = "failed" if result.error else "idle"
        status.removal_due_at = None
        status.last_run_id = result.run_id or status.last_run_id
        status.last_finished_at = datetime.now(UTC)
        status.last_summary = result.summary
        status.last_error = result.error
        status.documents = state.document_count()
        self._save(status)
        return result

    def _save(self, status: SourceStatus) -> None:
        self.client.hset(CATALOGUE_KEY, status.name, status.model_dump_json())

    def draft(self, name: str, draft: Draft) -> DraftLink:
        """Write ``draft`` into source ``name`` once: a request already done reports the draft
        it wrote. Raises :class:`UnknownSource` and :class:`~indexer.sources.base.DraftError`."""
        config = self.sources.get(name)
        if config is None:
            raise UnknownSource(f"no source named {name!r} is configured")
        key = f"{DRAFT_PREFIX}{name}:{draft.key}"
        done = self.client.get(key)
        if done:
            stored = json.loads(done)
            return DraftLink(stored["draft_id"], stored["url"])
        source = open_source(config)
        try:
            link = source.write_draft(draft)
        finally:
            source.close()
        self.client.set(key, json.dumps({"draft_id": link.draft_id, "url": link.url}))
        return link


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
