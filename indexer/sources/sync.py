"""One sync run of one source: list changes since the cursor, index what is new or changed,
skip what is not, remove what is gone.

What a caller can rely on:

* **new** documents are indexed; **changed** ones (another version, or the same version with
  other content or readers) get their chunks replaced so that a reader checking generations
  (:mod:`contracts.live`) sees the old version or the new one, never both, never neither; when
  only the readers changed (same content hash), the new chunks reuse the old ones' text and
  vectors, so nothing is embedded;
  **unchanged** ones (same version as indexed) are not even fetched, so nothing is embedded;
  **deleted** ones lose their chunks.
* At the end of a complete listing (never in a run that stopped before it), the documents under
  none of the key prefixes the source says its configuration covers (:meth:`Source.covered`: a
  library, list or the pages taken out of it) are removed as deleted ones, hidden first; a
  source that cannot tell (its configuration unresolved) removes nothing so.
* One document that cannot be read or extracted is counted ``failed``, kept in the state's
  ``failed`` hash and retried first by the next run; the run goes on.
* The cursor moves only past a page whose every change is committed (indexed, skipped, removed
  or recorded as failed). A run stopped anywhere (the source failed, the process was killed)
  resumes from there: documents committed before the stop are found at their indexed version and
  skipped, and a document written but not yet recorded is found current by the ingestor, so
  nothing is embedded twice.
* One run per source at a time across replicas (a lock in Redis); a second request while one
  runs is refused with :class:`SyncBusy`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from contracts.events import SyncSummary
from indexer.extract import UnsupportedDocument
from indexer.service import Ingestor, Versioned
from indexer.sources.base import Change, ChangePage, DocumentError, Source, SourceError
from indexer.sources.state import KnownDocument, SyncState

logger = logging.getLogger(__name__)

Outcome = Literal["new", "changed", "unchanged", "deleted", "failed"]
MAX_FAILURES_LISTED = 20
RETIRE_GRACE_S = 60.0
"""How long a replaced generation's chunks stay after the switch: far longer than a reader
takes between reading the published generation and reading chunks (one retrieval)."""


REMOVE_BATCH = 500
"""Documents removed together (one hide, one Chroma call, one transaction to forget them)."""


class SyncBusy(RuntimeError):
    """Another replica is syncing this source now."""


@dataclass(slots=True)
class SyncResult:
    """How a run ended: its id, its summary (a resumed run's counts include the earlier part),
    why it stopped early (None when it ran to the end) and the first failing documents."""

    run_id: str
    summary: SyncSummary
    error: str | None = None
    failures: list[str] = field(default_factory=list)
    resumed: bool = False


def source_doc_id(source: str, key: str) -> str:
    """A source document's doc id: stable per source and key, whatever its URL or title."""
    return hashlib.sha256(f"source\n{source}\n{key}".encode()).hexdigest()


class SourceSync:
    """Runs syncs of one source into one ingestor, with its state in Redis."""

    def __init__(
        self,
        source: Source,
        ingestor: Ingestor,
        state: SyncState,
        grace_s: float = RETIRE_GRACE_S,
    ) -> None:
        self.source = source
        self.grace_s = grace_s
        self.ingestor = ingestor
        self.state = state
        self._retried: set[str] = set()

    def run(self, on_start: Callable[[], None] | None = None) -> SyncResult:
        """One run, from the stored cursor to the end of the listing (or the first error of the
        source itself); ``on_start`` is called once the source is held. Raises
        :class:`SyncBusy` when another run holds the source."""
        if not self.state.acquire():
            raise SyncBusy(f"source {self.source.name!r} is being synced by another replica")
        started = time.perf_counter()
        try:
            if on_start is not None:
                on_start()
            run_id, summary, resumed = self.state.begin()
            result = SyncResult(run_id, summary, resumed=resumed)
            try:
                self._purge_retired()
                self._retry_failed(result)
                self._list(result)
                self._purge_retired()
            except SourceError as exc:
                result.error = str(exc)
                logger.warning("sync of %s stopped: %s", self.source.name, exc)
            else:
                self.state.finish()
            summary.total = (
                summary.new + summary.changed + summary.unchanged + summary.deleted + summary.failed
            )
            summary.duration_s = round(time.perf_counter() - started, 3)
            return result
        finally:
            self.state.release()

    # ----------------------------------------------------------------------------------------

    def _purge_retired(self) -> None:
        """Delete the chunks of generations replaced at least ``grace_s`` ago."""
        ids = self.state.retired(older_than_s=self.grace_s)
        if ids:
            self.ingestor.delete_chunks(ids)
            self.state.forget_retired(ids)

    def _retry_failed(self, result: SyncResult) -> None:
        self._retried = set()
        for key, version in sorted(self.state.failed().items()):
            outcome = self._apply(Change(key, version), result)
            self._retried.add(key)
            if outcome is not None and outcome != "failed":
                # It failed in an earlier run and was counted there; now it is done.
                self.state.count(outcome)
                _add(result.summary, outcome)

    def _list(self, result: SyncResult) -> None:
        for page in self.source.changes(self.state.cursor()):
            counts = dict.fromkeys(("new", "changed", "unchanged", "deleted", "failed"), 0)
            for change in page.changes:
                if change.key in self._retried and not change.deleted:
                    continue  # retried at the start of this run, and counted then
                outcome = self._apply(change, result)
                if outcome is not None:
                    counts[outcome] += 1
                self.state.renew()  # a page of long documents must not outlast the lock
            scope, first, last = self._scope(page)
            listed = [c.key for c in page.changes if not c.deleted] + list(page.present)
            if scope is not None and last:
                # Swept before the page is committed: a run stopped during the sweep reads
                # this page again and sweeps again (what is gone is no longer known).
                earlier = set() if first else self.state.seen(scope)
                self._sweep(result, scope, earlier | set(listed))
            if page.last:
                self._sweep_uncovered(result)
            end_of_complete_listing = page.last and self.source.lists_everything
            self.state.commit_page(
                None if end_of_complete_listing else page.cursor,
                counts,
                listed if scope is not None else (),
                scope or "",
                first=first,
                last=last,
            )
            for name, value in counts.items():
                setattr(result.summary, name, getattr(result.summary, name) + value)
            self.state.renew()

    def _scope(self, page: ChangePage) -> tuple[str | None, bool, bool]:
        """The key prefix a page completely lists part of (None: it is no complete listing),
        whether the page starts that listing and whether it ends it. A source that lists
        everything lists the prefix "" each run; the run's start forgets what was listed, and
        so does a page that starts the listing over."""
        if self.source.lists_everything:
            return "", page.scope_first, page.last
        if page.scope is None:
            return None, False, False
        return page.scope, page.scope_first, page.scope_last

    def _sweep(self, result: SyncResult, scope: str, seen: set[str]) -> None:
        """After a complete listing of ``scope``: documents under it that are indexed but were
        not listed are gone at the source."""
        self._drop(result, lambda key: key.startswith(scope) and key not in seen)

    def _sweep_uncovered(self, result: SyncResult) -> None:
        """After the complete listing: documents under no prefix the configuration covers
        (a library, list or space no longer configured) leave the index."""
        covered = self.source.covered()
        if covered is None:
            return  # the source cannot tell: keep everything
        prefixes = tuple(covered)
        dropped = self._drop(result, lambda key: not key.startswith(prefixes))
        if dropped:
            logger.info(
                "%s: %d documents removed, no longer in the configuration",
                self.source.name,
                dropped,
            )

    def _drop(self, result: SyncResult, gone: Callable[[str], bool]) -> int:
        """Remove the known documents whose key is ``gone`` (counted deleted, how many
        returned), and forget such keys that failed (nothing to retry)."""
        known = self.state.keys()
        removed = remove_documents(
            self.state, self.ingestor, sorted(filter(gone, known)), renew=self.state.renew
        )
        self.state.forget_failed([key for key in self.state.failed() if gone(key)])
        result.summary.deleted += removed
        return removed

    def _apply(self, change: Change, result: SyncResult) -> Outcome | None:
        known = self.state.known(change.key)
        if change.deleted:
            if known is None:
                # Never indexed (a folder, a file of another type), or failed: not retried now.
                self.state.forget(change.key)
                return None
            self._remove(change.key, known)
            return "deleted"
        if (
            known is not None
            and known.version == change.version
            and known.chunking in (None, self.ingestor.chunking)
        ):
            return "unchanged"  # a chunk setting changed since: chunked again below
        try:
            return self._index(change, known)
        except (DocumentError, UnsupportedDocument) as exc:
            self.state.fail(change.key, change.version)
            if len(result.failures) < MAX_FAILURES_LISTED:
                result.failures.append(f"{change.key}: {exc}")
            logger.warning("%s: document %s failed: %s", self.source.name, change.key, exc)
            return "failed"

    def _index(self, change: Change, known: KnownDocument | None) -> Outcome:
        doc_id = source_doc_id(self.source.name, change.key)
        document = dataclasses.replace(self.source.fetch(change), explicit_id=doc_id)
        try:
            readers = self.source.permissions(change)
        except ValueError as exc:  # an id that cannot be filed (see contracts.readers)
            raise DocumentError(f"its readers: {exc}") from None
        chunking = self.ingestor.chunking
        generation = hashlib.sha256(
            f"{document.content_hash}\n{readers.fingerprint()}\n{chunking}".encode()
        ).hexdigest()[:24]
        remembered = KnownDocument(
            change.version, document.content_hash, generation, doc_id, chunking
        )
        if known is not None and known.generation == generation:
            # Another version number, same content and readers: nothing to embed.
            self.state.remember(change.key, remembered)
            return "unchanged"
        metadata = {
            "source": self.source.name,
            "source_key": change.key,
            "source_version": change.version,
            **readers.metadata(),
        }
        versioned = Versioned(generation, metadata)
        # Other readers, same text: the published chunks and their vectors, restamped (with the
        # document's link as it is now: a moved file keeps its hash).
        restamped = (
            known is not None
            and known.content_hash == document.content_hash
            and self.ingestor.restamp(
                doc_id,
                known.generation,
                Versioned(generation, {**metadata, "url": document.url}),
            )
        )
        if not restamped:
            self.ingestor.ingest_documents([document], {doc_id: versioned})
        # Also when the ingestor found it current (a run killed after the write): the switch.
        self.state.publish(doc_id, generation)
        live, replaced = self.ingestor.generations(doc_id, generation)
        # A generation published again (readers changed, then changed back within the grace
        # period) was retired by the first change: live now, it must outlast that retirement.
        self.state.forget_retired(live)
        self.state.retire(replaced)
        self.state.remember(change.key, remembered)
        return "new" if known is None else "changed"

    def _remove(self, key: str, known: KnownDocument) -> None:
        # Hidden first: a reader then sees none of it, as for a page that does not exist.
        self.state.hide(known.doc_id)
        self.ingestor.delete_document(known.doc_id)
        self.state.forget(key)


def remove_documents(
    state: SyncState,
    ingestor: Ingestor,
    keys: list[str],
    counter: str | None = None,
    renew: Callable[[], None] | None = None,
    batch: int = REMOVE_BATCH,
) -> int:
    """Remove the documents of ``keys`` known to ``state``, ``batch`` at a time: each batch
    hidden from readers (one transaction), its chunks deleted (a Chroma call per 500
    documents), then forgotten and counted in ``counter`` (the run's by default) in one
    transaction. Stopped anywhere and done again, it deletes what is left and counts each
    document once (what was deleted but not yet forgotten is deleted again: nothing). Returns
    how many known documents it removed."""
    removed = 0
    for start in range(0, len(keys), batch):
        part = keys[start : start + batch]
        known = state.known_many(part)
        doc_ids = [document.doc_id for document in known.values()]
        state.hide(*doc_ids)
        ingestor.delete_documents(doc_ids)
        state.forget_many(part, counter)
        removed += len(known)
        if renew is not None:
            renew()
    return removed


def _add(summary: SyncSummary, outcome: str) -> None:
    setattr(summary, outcome, getattr(summary, outcome) + 1)
