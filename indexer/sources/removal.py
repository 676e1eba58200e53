"""Sources taken out of the configuration: hidden at once, removed after a grace period.

A source no longer named in ``INDEXER_SOURCES`` must stop being answered, and its chunks, sync
state and delta links must go. A typo in a name (or a settings file rolled out half-edited) would
then wipe a large index that took hours to embed, so removal happens in two steps:

1. **Hidden.** A replica that knows a source its configuration does not name (the sources'
   catalogue has it, or, when the replica starts, sync state in Redis under its name) holds
   the source's sync lock (:class:`~indexer.sources.state.SyncState`: no sync of it runs
   meanwhile) and moves the published generation of each of its documents out of
   :data:`contracts.live.LIVE_KEY` into the removal's own hash, batch by batch, each batch one
   transaction. Readers see a synced chunk only when its generation is published, so from then
   on no search, keyword ranking, citation or proposal (:class:`indexer.proposals.Drafter`)
   shows any of it. Nothing is deleted.
   The removal is recorded (``hidden``, since when, due when) for the admin API.
2. **Removed**, once ``INDEXER_REMOVED_SOURCE_GRACE_S`` has passed: one replica (the lock)
   marks it ``purging`` (no way back from here), removes its documents 500 at a time
   (:func:`~indexer.sources.sync.remove_documents`: hidden, chunks deleted, forgotten and
   counted in the removal's record in one transaction), then every chunk still carrying the
   source's name (replaced generations awaiting their purge, a document written by a run killed
   before it was recorded), then its sync state (cursor, delta links, documents, failures,
   listings) and schedule. The record says ``removed`` with the summary, the runner publishes
   it (``source.sync.completed`` with ``removal`` set, and an audit record), and only then
   drops the record and frees the lock.

**Put back in time:** a replica whose configuration names a hidden source again (at start and at
every schedule tick) publishes the kept generations again and drops the record. The sync state was
never touched, so the next sync goes on from its cursor: nothing is fetched or embedded again. Put
back after the purge started, the purge ends first and the source is then synced afresh.

**Killed midway:** the lock expires (:data:`~indexer.sources.state.LOCK_TTL_MS`) and any replica's
next tick goes on where the record says: hiding again skips what is hidden already (its
generation is no longer published), a batch of documents deleted but not yet forgotten is
deleted again (nothing left to delete) and counted once, and a summary published but not yet
dropped is published again (events are delivered at least once). Several replicas: the lock
makes one of them do each step; the others skip the source that tick.

**Rolling update:** while replicas run different configurations, each hides or restores the
source at its ticks; every restore starts the grace period again, so nothing is deleted until
they agree for longer than it. A name nothing knows (no sync state, no catalogue entry) is
ignored. A grace period of 0 removes at the first tick: no safety net.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import redis

from contracts.events import SyncSummary
from contracts.live import EPOCH_KEY, LIVE_KEY
from indexer.service import Ingestor
from indexer.sources.state import PREFIX, SyncState
from indexer.sources.sync import REMOVE_BATCH, remove_documents

logger = logging.getLogger(__name__)

REMOVALS_KEY = "deskpilot:indexer:source-removals"
"""Set: names of the sources being removed. Each has a hash ``<REMOVAL_PREFIX><name>`` (its
phase, since, due, how many documents deleted) and ``<REMOVAL_PREFIX><name>:hidden`` (doc id ->
the generation that was published when it was hidden)."""
REMOVAL_PREFIX = "deskpilot:indexer:source-removal:"

Phase = Literal["hiding", "hidden", "purging", "removed"]


@dataclass(frozen=True, slots=True)
class Removal:
    """Where a source's removal is."""

    name: str
    removal_id: str
    phase: Phase
    since: float
    due: float
    deleted: int


@dataclass(slots=True)
class RemovalResult:
    """A source removed: the summary to publish. The source's lock is held by ``state`` until
    :meth:`SourceRemovals.done`, so no other replica publishes it too."""

    name: str
    removal_id: str
    summary: SyncSummary
    state: SyncState


def known_sources(client: redis.Redis) -> set[str]:
    """Names of the sources with sync state in Redis (a SCAN of the keyspace: at start only)."""
    names = set()
    for key in client.scan_iter(match=f"{PREFIX}*", count=1000):
        rest = _text(key)[len(PREFIX) :]
        names.add(rest.split(":", 1)[0])
    return names


class SourceRemovals:
    """Hides, restores and removes unconfigured sources (synchronous: call from a thread)."""

    def __init__(
        self,
        client: redis.Redis,
        ingestor: Ingestor,
        grace_s: float,
        batch: int = REMOVE_BATCH,
    ) -> None:
        self.client = client
        self.ingestor = ingestor
        self.grace_s = grace_s
        self.batch = batch

    def _record(self, name: str) -> str:
        return f"{REMOVAL_PREFIX}{name}"

    def _hidden(self, name: str) -> str:
        return f"{REMOVAL_PREFIX}{name}:hidden"

    # -- what is under way ------------------------------------------------------------------

    def pending(self) -> dict[str, Removal]:
        """Every removal under way, by source name."""
        found = {}
        for raw_name in self.client.smembers(REMOVALS_KEY):
            name = _text(raw_name)
            removal = self.get(name)
            if removal is not None:
                found[name] = removal
        return found

    def get(self, name: str) -> Removal | None:
        raw: dict[Any, Any] = self.client.hgetall(self._record(name))
        if not raw:
            return None
        fields = {_text(k): _text(v) for k, v in raw.items()}
        return Removal(
            name,
            fields["id"],
            fields["phase"],  # type: ignore[arg-type]
            float(fields["since"]),
            float(fields["due"]),
            int(fields.get("deleted", 0)),
        )

    # -- hiding and putting back ------------------------------------------------------------

    def hide(self, name: str) -> Removal | None:
        """Hide source ``name`` from readers and record its removal (or go on hiding it);
        None when it has no sync state (nothing to hide or remove) or another replica holds its
        lock (a sync or another step runs: tried again at the next check)."""
        removal = self.get(name)
        if removal is not None and removal.phase != "hiding":
            return removal
        if removal is None and not self.has_state(name):
            return None  # never synced (or a typo): nothing to hide or remove
        state = SyncState(self.client, name)
        if not state.acquire():
            return None
        try:
            if removal is None:
                now = time.time()
                pipe = self.client.pipeline(transaction=True)
                pipe.hset(
                    self._record(name),
                    mapping={
                        "id": uuid.uuid4().hex,
                        "phase": "hiding",
                        "since": now,
                        "due": now + self.grace_s,
                        "deleted": 0,
                    },
                )
                pipe.sadd(REMOVALS_KEY, name)
                pipe.execute()
            keys = sorted(state.keys())
            for start in range(0, len(keys), self.batch):
                known = state.known_many(keys[start : start + self.batch])
                self._hide_batch(name, [document.doc_id for document in known.values()])
                state.renew()
            self.client.hset(self._record(name), "phase", "hidden")
            logger.warning(
                "source %s is no longer configured: its %d documents are hidden, and removed "
                "after %.0f s unless it is configured again",
                name,
                len(keys),
                self.grace_s,
            )
        finally:
            state.release()
        return self.get(name)

    def has_state(self, name: str) -> bool:
        """Whether source ``name`` has sync state in Redis (it was synced, or began to be)."""
        parts = ("docs", "cursor", "failed", "retired", "run")
        return bool(self.client.exists(*(f"{PREFIX}{name}:{part}" for part in parts)))

    def _hide_batch(self, name: str, doc_ids: list[str]) -> None:
        # The source's lock is held: no sync publishes these documents between the read and
        # the transaction. A document hidden already (a resumed hiding) has no generation to
        # keep, and the one kept for it stays.
        if not doc_ids:
            return
        published = dict(zip(doc_ids, self.client.hmget(LIVE_KEY, doc_ids), strict=True))
        kept: dict[Any, Any] = {
            doc_id: _text(gen) for doc_id, gen in published.items() if gen is not None
        }
        pipe = self.client.pipeline(transaction=True)
        if kept:
            pipe.hset(self._hidden(name), mapping=kept)
        pipe.hdel(LIVE_KEY, *doc_ids)
        pipe.incr(EPOCH_KEY)
        pipe.execute()

    def restore(self, name: str) -> bool:
        """Source ``name`` is configured again: publish what was hidden and drop its removal.
        False when it cannot now (its purge has started, or another replica holds its lock)."""
        removal = self.get(name)
        if removal is None:
            return True
        if removal.phase in ("purging", "removed"):
            return False
        state = SyncState(self.client, name)
        if not state.acquire():
            return False
        try:
            cursor = 0
            while True:
                cursor, batch = self.client.hscan(self._hidden(name), cursor, count=self.batch)
                if isinstance(batch, dict) and batch:
                    pipe = self.client.pipeline(transaction=True)
                    generations: dict[Any, Any] = {_text(k): _text(v) for k, v in batch.items()}
                    pipe.hset(LIVE_KEY, mapping=generations)
                    pipe.incr(EPOCH_KEY)
                    pipe.execute()
                state.renew()
                if cursor == 0:
                    break
            self._drop(name)
            logger.warning("source %s is configured again: its documents are shown again", name)
            return True
        finally:
            state.release()

    def reconcile(self, configured: Iterable[str], known: Iterable[str]) -> None:
        """Hide the sources of ``known`` (or under removal) that are not ``configured``, and
        put back those under removal that are."""
        wanted = set(configured)
        pending = self.pending()
        for name in sorted(set(known) - wanted):
            if name not in pending or pending[name].phase == "hiding":
                self.hide(name)
        for name in sorted(wanted & set(pending)):
            self.restore(name)

    # -- removing ---------------------------------------------------------------------------

    def purge_due(self, configured: Iterable[str], now: float | None = None) -> list[RemovalResult]:
        """Remove the sources whose grace period is over (and finish those stopped midway), each
        by the one replica that holds its lock; their locks stay held until :meth:`done`."""
        wanted = set(configured)
        moment = time.time() if now is None else now
        results = []
        for name, removal in sorted(self.pending().items()):
            if removal.phase == "hiding" or (removal.phase == "hidden" and removal.due > moment):
                continue
            if removal.phase == "hidden" and name in wanted:
                continue  # configured here again: restored, not removed
            state = SyncState(self.client, name)
            if not state.acquire():
                continue
            try:
                # Read again under the lock: another replica may have finished it, or it may
                # have been put back (and hidden again, due later) since.
                current = self.get(name)
                if current is None or (current.phase == "hidden" and current.due > moment):
                    state.release()
                    continue
                results.append(self._purge(current, state))
            except Exception:
                state.release()
                raise
        return results

    def _purge(self, removal: Removal, state: SyncState) -> RemovalResult:
        name = removal.name
        record = self._record(name)
        if removal.phase == "hidden":
            self.client.hset(record, mapping={"phase": "purging", "started": time.time()})
        if removal.phase != "removed":
            remove_documents(
                state, self.ingestor, sorted(state.keys()), record, state.renew, self.batch
            )
            self.ingestor.delete_source_chunks(name)
            leftovers = [
                key
                for key in self.client.scan_iter(match=f"{PREFIX}{name}:*", count=1000)
                if _text(key) != f"{PREFIX}{name}:lock"
            ]
            pipe = self.client.pipeline(transaction=True)
            if leftovers:
                pipe.delete(*leftovers)
            pipe.delete(self._hidden(name))
            pipe.hset(record, mapping={"phase": "removed", "finished": time.time()})
            pipe.execute()
        fields = {_text(k): _text(v) for k, v in self.client.hgetall(record).items()}
        deleted = int(fields.get("deleted", 0))
        duration = float(fields.get("finished", 0)) - float(fields.get("started", 0))
        summary = SyncSummary(total=deleted, deleted=deleted, duration_s=round(duration, 3))
        logger.warning("source %s removed: %d documents deleted", name, deleted)
        return RemovalResult(name, fields["id"], summary, state)

    def done(self, result: RemovalResult) -> None:
        """The removal's summary is published: drop its record and free the source."""
        self._drop(result.name)
        result.state.release()

    def _drop(self, name: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self._record(name), self._hidden(name))
        pipe.srem(REMOVALS_KEY, name)
        pipe.execute()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
