"""Re-indexing: rebuild the knowledge-base collection from the document store.

Every stored document (see :mod:`indexer.documents`) is chunked again with the current settings
and written through :meth:`indexer.service.Ingestor.ingest_document`; chunks of documents the
store no longer holds are removed. This is what to run after changing the chunking settings or
code, after losing or damaging the Chroma data, or with ``force`` after changing the embedding
model.

Without ``force``, a document whose chunks come out exactly as stored (same ids, same content
hash) is not embedded again: the same text and model give the same vectors. With ``force`` each
document's chunks are deleted and written again, so it is briefly missing from answers.

Documents synced from knowledge sources (Confluence, SharePoint) are not in the store and are
left alone: their source's sync writes and removes them.

Writes go to the live collection, one document at a time, so a running stack keeps answering
meanwhile; nothing is swapped, because the orchestrator holds the collection by id.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from indexer.documents import DocumentStore
from indexer.service import Ingestor

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

logger = logging.getLogger(__name__)

_PAGE = 1000


@dataclass(slots=True)
class ReindexReport:
    documents: int = 0
    """Documents in the store."""
    indexed: int = 0
    """Documents whose chunks were (re)written."""
    unchanged: int = 0
    empty: int = 0
    """Stored documents that yield no chunks (nothing to index)."""
    chunks_written: int = 0
    chunks_deleted: int = 0
    orphans_removed: int = 0
    """Documents in the collection but not in the store, whose chunks were removed."""
    orphans_kept: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int | float]:
        return {
            "documents": self.documents,
            "indexed": self.indexed,
            "unchanged": self.unchanged,
            "empty": self.empty,
            "chunks_written": self.chunks_written,
            "chunks_deleted": self.chunks_deleted,
            "orphans_removed": self.orphans_removed,
            "orphans_kept": self.orphans_kept,
            "seconds": round(self.seconds, 2),
        }


class EmptyStore(RuntimeError):
    """The store knows no document while the collection has chunks: re-indexing would empty
    the collection, which is almost certainly not what the operator wants."""


def indexed_doc_ids(collection: Collection) -> set[str]:
    """Every ``doc_id`` that has chunks in ``collection``, but synced source documents': those
    are not in the document store, their source's sync keeps them (``indexer.sources``)."""
    found: set[str] = set()
    offset = 0
    while True:
        page = collection.get(include=["metadatas"], limit=_PAGE, offset=offset)
        metadatas = page["metadatas"] or []
        found.update(
            str(meta["doc_id"])
            for meta in metadatas
            if meta and meta.get("doc_id") and not meta.get("source")
        )
        if len(page["ids"]) < _PAGE:
            return found
        offset += _PAGE


def reindex(
    ingestor: Ingestor,
    collection: Collection,
    store: DocumentStore,
    *,
    force: bool = False,
    remove_orphans: bool = True,
) -> ReindexReport:
    """Rebuild ``collection`` from ``store``; see the module docstring.

    Raises :class:`EmptyStore` when the store is empty but the collection is not (documents
    ingested before they were recorded, or with no Redis): nothing would be left.
    """
    started = time.perf_counter()
    report = ReindexReport()
    stored = store.doc_ids()
    report.documents = len(stored)
    if not stored and remove_orphans and collection.count() > 0:
        raise EmptyStore(
            "the document store is empty but the collection holds chunks; re-indexing would "
            "remove them all"
        )
    for doc_id in sorted(stored):
        doc = store.get(doc_id)
        if doc is None:  # deleted meanwhile
            report.documents -= 1
            continue
        if force:
            report.chunks_deleted += ingestor.delete_document(doc_id)
        result = ingestor.ingest_document(doc)
        report.chunks_written += result.chunks_written
        report.chunks_deleted += result.chunks_deleted
        if result.files_indexed:
            report.indexed += 1
        elif result.files_unchanged:
            report.unchanged += 1
        else:
            report.empty += 1
    # Re-read the store: a document uploaded while this ran is stored before it is indexed.
    orphans = indexed_doc_ids(collection) - store.doc_ids()
    if remove_orphans:
        for doc_id in sorted(orphans):
            report.chunks_deleted += ingestor.delete_document(doc_id)
        report.orphans_removed = len(orphans)
    else:
        report.orphans_kept = len(orphans)
    report.seconds = time.perf_counter() - started
    logger.info("re-indexed: %s", report.summary())
    return report
