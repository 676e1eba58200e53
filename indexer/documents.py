"""The document store: every ingested document's extracted form, kept in Redis.

Chroma holds chunks and embeddings, which depend on the chunking settings and the model. This
store holds what they are made from (title, URL, metadata, sections with typed blocks), one JSON
value per document under ``deskpilot:indexer:document:<doc_id>`` with no TTL, so that
``deskpilot reindex`` can rebuild the collection after either changes, including uploads whose
original bytes are gone.

It also keeps deletion tombstones (``deskpilot:indexer:deleted:<doc_id>``, kept 30 days): an
upload whose delivery is retried after the document was deleted must not bring it back.

The client is synchronous because everything that writes here (ingestion, re-indexing) is
CPU-bound work that runs in a worker thread or in the command line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

from contracts.readers import Readers
from indexer.extract import Block, ExtractedDocument, Section, extract_document
from indexer.service import Ingestor, IngestReport

logger = logging.getLogger(__name__)

DOCUMENT_PREFIX = "deskpilot:indexer:document:"
DELETED_PREFIX = "deskpilot:indexer:deleted:"
TOMBSTONE_TTL_S = 30 * 24 * 3600
"""Far longer than any redelivery of a message can take (reclaim idle time x max deliveries)."""
RECORD_VERSION = 1


def document_to_record(doc: ExtractedDocument) -> dict[str, Any]:
    """The JSON-able form of ``doc``; :func:`document_from_record` restores it exactly."""
    return {
        "version": RECORD_VERSION,
        "doc_id": doc.doc_id,
        "title": doc.title,
        "url": doc.url,
        "category": doc.category,
        "os": doc.os,
        "content_hash": doc.content_hash,
        "readers": None
        if doc.readers is None
        else {"users": list(doc.readers.users), "groups": list(doc.readers.groups)},
        "sections": [
            {
                "path": list(section.path),
                "blocks": [{"kind": block.kind, "text": block.text} for block in section.blocks],
            }
            for section in doc.sections
        ],
    }


def document_from_record(record: dict[str, Any]) -> ExtractedDocument:
    """The stored document, with its stored id (an upload's id is not derived from its URL)."""
    return ExtractedDocument(
        title=record["title"],
        url=record["url"],
        category=record.get("category"),
        os=record.get("os"),
        sections=tuple(
            Section(
                tuple(section["path"]),
                tuple(Block(block["kind"], block["text"]) for block in section["blocks"]),
            )
            for section in record["sections"]
        ),
        explicit_id=record["doc_id"],
        readers=None
        if not (readers := record.get("readers"))
        else Readers(public=False, users=tuple(readers["users"]), groups=tuple(readers["groups"])),
    )


class DocumentStore:
    """Extracted documents by doc id, and deletion tombstones."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    @classmethod
    def from_url(cls, url: str) -> DocumentStore:
        return cls(redis.Redis.from_url(url, health_check_interval=10, socket_keepalive=True))

    def ping(self) -> bool:
        return bool(self.client.ping())

    def close(self) -> None:
        self.client.close()

    def put(self, doc: ExtractedDocument) -> None:
        """Store (or replace) ``doc``'s extracted form; idempotent."""
        self.client.set(DOCUMENT_PREFIX + doc.doc_id, json.dumps(document_to_record(doc)))

    def get(self, doc_id: str) -> ExtractedDocument | None:
        raw = self.client.get(DOCUMENT_PREFIX + doc_id)
        return document_from_record(json.loads(raw)) if raw else None

    def delete(self, doc_id: str) -> bool:
        return bool(self.client.delete(DOCUMENT_PREFIX + doc_id))

    def doc_ids(self) -> set[str]:
        """Ids of every stored document."""
        return set(self._scan(DOCUMENT_PREFIX))

    def mark_deleted(self, doc_id: str) -> None:
        self.client.set(DELETED_PREFIX + doc_id, "1", ex=TOMBSTONE_TTL_S)

    def is_deleted(self, doc_id: str) -> bool:
        return bool(self.client.exists(DELETED_PREFIX + doc_id))

    def _scan(self, prefix: str) -> Iterator[str]:
        for key in self.client.scan_iter(match=prefix + "*", count=1000):
            name = key.decode() if isinstance(key, bytes) else str(key)
            yield name[len(prefix) :]


def record_ingested(report: IngestReport, store: DocumentStore) -> int:
    """Store every file ``report`` indexed or found unchanged; returns how many were stored.

    Folder ingestion (:meth:`indexer.service.Ingestor.ingest_path`) works from files; this reads
    them again afterwards (extraction is cheap next to embedding) so the store also knows them.
    A file that changed or vanished in between is stored as it is now, or skipped.
    """
    stored = 0
    for outcome in report.documents:
        if outcome.path is None:
            continue
        try:
            doc = extract_document(outcome.path)
        except (OSError, ValueError) as exc:
            logger.warning("could not record %s: %s", outcome.path, type(exc).__name__)
            continue
        store.put(doc)
        stored += 1
    return stored


def ingest_and_record(ingestor: Ingestor, path: Path, store: DocumentStore | None) -> IngestReport:
    """``ingestor.ingest_path(path)``, then record what it ingested when there is a store."""
    report = ingestor.ingest_path(path)
    if store is not None:
        record_ingested(report, store)
    return report
