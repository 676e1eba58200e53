"""Uploaded documents: ingest one under the gateway's id, or delete one, idempotently.

An upload keeps the document id the gateway gave it as its ``doc_id`` and is known by the URL
``upload://<id>/<file name>``, so its chunks carry that id (deletion finds them) and citations say
where the text came from. Every step may run again after a redelivery with the same result: the
extracted form is stored under the same id, the chunk ids are deterministic, deleting nothing is
fine, and a tombstone stops a late redelivery of the upload from reviving a deleted document.

Outcomes name problems in general terms (an unsupported type, an unreadable PDF, no text) and
never quote the document's content. Nothing here knows about the message bus.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from contracts.readers import Readers
from indexer.documents import DocumentStore
from indexer.extract import (
    PDF_SUFFIXES,
    UnreadableDocument,
    UnsupportedDocument,
    extract_bytes,
)
from indexer.service import Ingestor

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

logger = logging.getLogger(__name__)

UPLOAD_SCHEME = "upload"


def upload_url(document_id: str, filename: str) -> str:
    """``upload://<document id>/<file name, percent-encoded>``."""
    return f"{UPLOAD_SCHEME}://{document_id}/{quote(filename, safe='')}"


@dataclass(frozen=True, slots=True)
class UploadResult:
    """What became of one submitted or deleted document."""

    status: Literal["indexed", "failed", "deleted"]
    chunks: int = 0
    """Chunks of the document in the index now."""
    detail: str | None = None
    chunks_written: int = 0
    """Chunks (re)written by this call; 0 when the document was already indexed as it is."""
    url: str | None = None


class UploadService:
    """Ingests and deletes uploaded documents; methods are blocking (run them in a thread)."""

    def __init__(self, ingestor: Ingestor, collection: Collection, store: DocumentStore) -> None:
        self._ingestor = ingestor
        self._collection = collection
        self._store = store

    def submit(
        self,
        document_id: str,
        filename: str,
        content_b64: str,
        readers: Readers | None = None,
    ) -> UploadResult:
        """Extract, store and index an upload, readable by ``readers`` (everyone when None).
        Problems with the file itself give a ``failed`` result; problems with Chroma or Redis
        raise, so the message is retried."""
        if self._store.is_deleted(document_id):
            return UploadResult("deleted", detail="deleted before it was indexed")
        try:
            data = base64.b64decode(content_b64, validate=True)
        except (binascii.Error, ValueError):
            return UploadResult("failed", detail="the upload's content is not valid base64")
        url = upload_url(document_id, filename)
        try:
            doc = extract_bytes(data, filename, url)
        except UnsupportedDocument as exc:
            return UploadResult("failed", detail=_extraction_problem(exc, filename), url=url)
        doc = dataclasses.replace(doc, explicit_id=document_id, readers=readers)
        if not doc.sections:
            return UploadResult("failed", detail=_no_text(filename), url=url)

        # Stored first: a re-index running meanwhile then keeps the chunks written next.
        self._store.put(doc)
        report = self._ingestor.ingest_document(doc)
        if self._store.is_deleted(document_id):  # deleted while it was being indexed
            return self.delete(document_id)
        chunks = self.chunk_count(document_id)
        if chunks == 0:
            self._store.delete(document_id)
            return UploadResult("failed", detail=_no_text(filename), url=url)
        logger.info(
            "upload indexed",
            extra={"chunks": chunks, "chunks_written": report.chunks_written},
        )
        return UploadResult(
            "indexed",
            chunks=chunks,
            detail=f"{chunks} chunks from {len(doc.sections)} sections",
            chunks_written=report.chunks_written,
            url=url,
        )

    def delete(self, document_id: str) -> UploadResult:
        """Remove the document's chunks and stored form; idempotent. Works for any doc id, so a
        document ingested from a folder can be removed the same way."""
        self._store.mark_deleted(document_id)
        removed = self._ingestor.delete_document(document_id)
        self._store.delete(document_id)
        logger.info("document deleted", extra={"chunks_deleted": removed})
        return UploadResult("deleted", detail=f"{removed} chunks removed")

    def chunk_count(self, doc_id: str) -> int:
        return len(self._collection.get(where={"doc_id": doc_id}, include=[])["ids"])


def _extraction_problem(exc: UnsupportedDocument, filename: str) -> str:
    """Why a file could not be read, in general terms (the extractor never quotes content)."""
    if isinstance(exc, UnreadableDocument):
        return exc.problem
    suffix = PurePosixPath(filename).suffix.lower()
    return f"unsupported file type {suffix or '(none)'!r}"


def _no_text(filename: str) -> str:
    if PurePosixPath(filename).suffix.lower() in PDF_SUFFIXES:
        return "no text found: the PDF has no text layer (a scanned PDF needs OCR)"
    return "no text found in the document"
