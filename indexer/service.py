"""Ingestion: files in, embedded chunks in Chroma out, idempotently.

Why idempotent: messages are delivered at least once and the demo knowledge base is re-seeded on
every start, so the same file is routinely ingested again. Chunk ids are deterministic (document
id + ordinal + content), an unchanged document writes nothing, and a changed one replaces its
chunks without leaving orphans. Nothing here knows about the message bus.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from contracts.readers import PUBLIC, Readers
from indexer.chunking import Chunk, ChunkingConfig, SemanticChunker
from indexer.extract import ExtractedDocument, UnsupportedDocument, extract_document

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Metadata, PyEmbedding, Where

    from indexer.config import IndexerSettings
    from indexer.embedding import Embedder

logger = logging.getLogger(__name__)

# Documents chunked and embedded together: one spaCy batch and one model batch for all their
# sentences and chunks, which pads less and amortises per-call overhead.
_DOCUMENT_BATCH = 16
# Chroma caps the records per call (a few thousand on SQLite); one document's chunks rarely come
# near it, but a long manual could.
_WRITE_BATCH = 500


def demo_kb_path() -> Path:
    """The bundled demo knowledge base (Markdown articles with front matter), shipped as package
    data so an installed indexer can seed itself with no configuration."""
    return Path(__file__).resolve().parent / "demo_kb"


def chunk_id(doc_id: str, chunk: Chunk, generation: str = "") -> str:
    """A chunk's Chroma id: the same document, position and text always give the same id, so a
    redelivered message overwrites instead of duplicating. Starts with the document id's prefix
    so ids of one document sort together when an operator looks at the store. A versioned
    document's ``generation`` is part of the id, so a new generation never overwrites a chunk of
    the published one in place."""
    salted = f"{doc_id}\n{generation}" if generation else doc_id
    digest = hashlib.sha256(f"{salted}\n{chunk.ordinal}\n{chunk.text}".encode()).hexdigest()
    return f"{doc_id[:16]}-{chunk.ordinal:04d}-{digest[:24]}"


def _restamped_id(chunk_id: str, generation: str) -> str:
    """The id of a chunk written again under another generation (:meth:`Ingestor.restamp`):
    its document prefix and position kept, the rest derived from its old id and the generation,
    so writing the same generation again overwrites instead of duplicating."""
    kept = chunk_id.rsplit("-", 1)[0]
    digest = hashlib.sha256(f"{chunk_id}\n{generation}".encode()).hexdigest()
    return f"{kept}-{digest[:24]}"


def _readers_salt(doc: ExtractedDocument) -> str:
    """Part of a restricted upload's chunk ids: other readers give other ids, so a change of who
    may read it is a change of the collection's ids, which the orchestrator's snapshot notices
    (it compares ids, not metadata). Public documents keep the ids they always had."""
    if doc.readers is None:
        return ""
    return "readers:" + hashlib.sha256(doc.readers.fingerprint().encode()).hexdigest()[:16]


def _same_readers(
    doc: ExtractedDocument, metadatas: Sequence[Mapping[str, object]], versioned: object
) -> bool:
    """Whether the stored chunks were filed for the readers ``doc`` has now (a source
    document's readers are part of its generation instead)."""
    if versioned is not None:
        return True
    wanted = (doc.readers or PUBLIC).fingerprint()
    return all(Readers.of(meta).fingerprint() == wanted for meta in metadatas)


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file that was not indexed, and why (unsupported type, no text)."""

    path: Path | None
    reason: str


@dataclass(frozen=True, slots=True)
class DocumentOutcome:
    """What happened to one document; the handler turns these into ``chunks.indexed`` events."""

    doc_id: str
    url: str
    title: str
    status: Literal["indexed", "unchanged"]
    chunks_written: int
    chunks_deleted: int
    path: Path | None = None


@dataclass(slots=True)
class IngestReport:
    """Counts for one ingestion call (a file, a folder, or one extracted document)."""

    files_seen: int = 0
    files_unchanged: int = 0
    files_indexed: int = 0
    files_skipped: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    seconds: float = 0.0
    documents: list[DocumentOutcome] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)

    def __str__(self) -> str:
        """One log-friendly line; the per-document lists stay out of it."""
        return (
            f"{self.files_seen} files ({self.files_indexed} indexed, {self.files_unchanged} "
            f"unchanged, {self.files_skipped} skipped), {self.chunks_written} chunks written, "
            f"{self.chunks_deleted} deleted in {self.seconds:.1f}s"
        )

    def add(self, other: IngestReport) -> None:
        """Fold ``other`` into this report (``seconds`` is measured by the caller)."""
        self.files_seen += other.files_seen
        self.files_unchanged += other.files_unchanged
        self.files_indexed += other.files_indexed
        self.files_skipped += other.files_skipped
        self.chunks_written += other.chunks_written
        self.chunks_deleted += other.chunks_deleted
        self.documents.extend(other.documents)
        self.skipped.extend(other.skipped)


ChunkMetadata = Mapping[str, str | int | float | bool]
"""Extra metadata a caller files a document's chunks under (a source document's readers)."""


@dataclass(frozen=True, slots=True)
class Versioned:
    """A document whose versions readers must never see mixed (a synced source document).

    Its chunks carry ``generation`` (and ``metadata`` besides the usual fields), and their ids
    include it, so a new generation is written beside the published one and never overwrites
    or deletes it: the caller publishes the generation once it is written, and deletes the other
    generations' chunks (:meth:`Ingestor.generations`, :meth:`Ingestor.delete_chunks`) when
    no reader can still be using them (see :mod:`contracts.live`).
    """

    generation: str
    metadata: ChunkMetadata = field(default_factory=dict)


class Ingestor:
    """Extracts, chunks, embeds and stores documents in one Chroma collection.

    The embedder and the collection are created once by the service (they are expensive) and
    passed in. Methods are synchronous and CPU-bound; call them from a worker thread in async code.
    """

    def __init__(
        self, embedder: Embedder, collection: Collection, settings: IndexerSettings
    ) -> None:
        self._embedder = embedder
        self._collection = collection
        self._settings = settings
        self._chunker = SemanticChunker(embedder, ChunkingConfig.from_settings(settings))
        # Seeding and message handlers may ingest from different threads; the read-compare-write
        # of one document must not interleave with another's, or a stale-chunk delete could race.
        self._store_lock = threading.Lock()

    def ingest_path(self, path: Path) -> IngestReport:
        """Ingest one file, or every file under a folder (recursively, in sorted order).

        Unsupported files are skipped and listed in the report; hidden files and folders
        (``.git``, ``.DS_Store``) are not even counted. Raises ``FileNotFoundError`` for a path
        that does not exist.
        """
        started = time.perf_counter()
        if path.is_dir():
            files: list[Path] = list(_visible_files(path))
        elif path.is_file():
            files = [path]
        else:
            raise FileNotFoundError(f"nothing to ingest at {path}")
        report = IngestReport()
        for start in range(0, len(files), _DOCUMENT_BATCH):
            report.add(self.ingest_files(files[start : start + _DOCUMENT_BATCH]))
        report.seconds = time.perf_counter() - started
        logger.info("ingested %s: %s", path, report)
        return report

    def ingest_file(self, path: Path) -> IngestReport:
        """Ingest one file; an unsupported type is reported as skipped, not raised."""
        return self.ingest_files([path])

    def ingest_files(self, paths: Sequence[Path]) -> IngestReport:
        """Ingest several files as one batch; unsupported types are reported as skipped."""
        started = time.perf_counter()
        report = IngestReport()
        docs: list[ExtractedDocument] = []
        for path in paths:
            try:
                docs.append(extract_document(path))
            except UnsupportedDocument as exc:
                logger.debug("skipping %s: %s", path, exc)
                skipped = IngestReport(files_seen=1, files_skipped=1)
                skipped.skipped.append(SkippedFile(path, str(exc)))
                report.add(skipped)
        report.add(self.ingest_documents(docs))
        report.seconds = time.perf_counter() - started
        return report

    @property
    def chunking(self) -> str:
        """The chunker's fingerprint: its settings and algorithm, stored with every chunk."""
        return self._chunker.fingerprint

    def ingest_document(self, doc: ExtractedDocument) -> IngestReport:
        """Store ``doc``'s chunks unless the stored version is identical; see
        :meth:`ingest_documents`."""
        return self.ingest_documents([doc])

    def ingest_documents(
        self,
        docs: Sequence[ExtractedDocument],
        versioned: Mapping[str, Versioned] | None = None,
    ) -> IngestReport:
        """Store each document's chunks unless the stored version is identical.

        A document is unchanged when its stored chunks are complete (``chunk_count`` of them,
        indices ``0..n-1``) and all carry its ``content_hash`` and the chunker's fingerprint
        (settings and algorithm). That check reads metadata only: chunking embeds sentences, so
        it is skipped for unchanged documents. A half-finished earlier write or changed chunking
        settings fail the check, and the document is chunked and written again.

        Changed documents are chunked and embedded together (one batch across documents), then
        each is upserted and its stale chunks deleted. Writing before deleting means a concurrent
        query never sees the document missing, and a crash in between leaves the complete new
        version plus stale chunks that the redelivered message removes; the end state is the
        same as delete-then-upsert, without the gap.

        ``versioned`` (by doc id) marks source documents: their new chunks are written beside
        the old ones, which are left for the caller to retire (see :class:`Versioned`).
        """
        started = time.perf_counter()
        report = IngestReport()
        pending: list[ExtractedDocument] = []
        versioned = versioned or {}
        for doc in docs:
            if self._is_current(doc, versioned.get(doc.doc_id)):
                unchanged = IngestReport(files_seen=1, files_unchanged=1)
                unchanged.documents.append(self._outcome(doc, "unchanged", 0, 0))
                report.add(unchanged)
            else:
                pending.append(doc)
        chunked = self._chunker.chunk_many(pending)
        vectors = iter(self._embedder.encode([c.text for chunks in chunked for c in chunks]))
        for doc, chunks in zip(pending, chunked, strict=True):
            embeddings: list[PyEmbedding] = [next(vectors) for _ in chunks]
            generation = versioned[doc.doc_id].generation if doc.doc_id in versioned else ""
            salt = generation or _readers_salt(doc)
            ids = [chunk_id(doc.doc_id, chunk, salt) for chunk in chunks]
            with self._store_lock:
                report.add(self._store(doc, chunks, ids, embeddings, versioned.get(doc.doc_id)))
        report.seconds = time.perf_counter() - started
        return report

    def restamp(self, doc_id: str, published: str, versioned: Versioned) -> bool:
        """Write ``doc_id``'s chunks of generation ``published`` again as ``versioned``'s
        generation, with its metadata (other readers), reusing their text and vectors: for a
        document whose readers alone changed, nothing is chunked or embedded. The published
        chunks stay for the caller to retire, as after :meth:`ingest_documents`.

        False, with nothing written, when the published chunks are incomplete or from other
        chunking settings, or chunks of the new generation exist already: the caller ingests
        the document instead (which finds those current)."""
        stored = self._collection.get(
            where={"doc_id": doc_id},
            include=["metadatas", "documents", "embeddings"],
        )
        rows = [
            row
            for row in zip(
                stored["ids"],
                stored["documents"] or [],
                stored["metadatas"] or [],
                list(stored["embeddings"] if stored["embeddings"] is not None else []),
                strict=True,
            )
            if row[2].get("generation") in (published, versioned.generation)
        ]
        if any(row[2].get("generation") == versioned.generation for row in rows) or not rows:
            return False
        indices = sorted(int(str(row[2].get("chunk_index", -1))) for row in rows)
        if indices != list(range(len(rows))) or any(
            row[2].get("chunking") != self._chunker.fingerprint
            or row[2].get("chunk_count") != len(rows)
            for row in rows
        ):
            return False
        indexed_at = datetime.now(UTC).isoformat(timespec="seconds")
        ids = [_restamped_id(row[0], versioned.generation) for row in rows]
        metadatas: list[Metadata] = [
            {
                **row[2],
                **versioned.metadata,
                "generation": versioned.generation,
                "indexed_at": indexed_at,
            }
            for row in rows
        ]
        with self._store_lock:
            for start in range(0, len(ids), _WRITE_BATCH):
                end = start + _WRITE_BATCH
                self._collection.upsert(
                    ids=ids[start:end],
                    embeddings=[row[3] for row in rows[start:end]],
                    documents=[row[1] for row in rows[start:end]],
                    metadatas=metadatas[start:end],
                )
        return True

    def generations(self, doc_id: str, generation: str) -> tuple[list[str], list[str]]:
        """Ids of ``doc_id``'s chunks of ``generation``, and of every other generation."""
        ids, metadatas = self._stored(doc_id)
        pairs = list(zip(ids, metadatas, strict=True))
        return (
            [i for i, m in pairs if m.get("generation") == generation],
            [i for i, m in pairs if m.get("generation") != generation],
        )

    def delete_chunks(self, ids: Sequence[str]) -> int:
        """Remove the chunks ``ids`` (those that still exist); returns how many were asked."""
        with self._store_lock:
            return self._delete(set(ids))

    def delete_document(self, doc_id: str) -> int:
        """Remove every chunk of ``doc_id``; returns how many there were (0 when none: deleting
        is idempotent, so a redelivered deletion is harmless)."""
        with self._store_lock:
            stored_ids, _ = self._stored(doc_id)
            return self._delete(set(stored_ids))

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        """Remove every chunk of each of ``doc_ids``, many documents a Chroma call (idempotent,
        like :meth:`delete_document`)."""
        ordered = sorted(set(doc_ids))
        with self._store_lock:
            for start in range(0, len(ordered), _WRITE_BATCH):
                batch = ordered[start : start + _WRITE_BATCH]
                self._collection.delete(where=cast("Where", {"doc_id": {"$in": batch}}))

    def delete_source_chunks(self, source: str) -> int:
        """Remove every chunk a sync of ``source`` wrote (its metadata names the source and a
        document key there, so an upload or crawled page is never taken for one); returns how
        many. For what is left once the source's documents are removed: a few, if any."""
        with self._store_lock:
            stored = self._collection.get(where={"source": source}, include=["metadatas"])
            rows = zip(stored["ids"], stored["metadatas"] or [], strict=True)
            return self._delete({i for i, meta in rows if meta and meta.get("source_key")})

    def _store(
        self,
        doc: ExtractedDocument,
        chunks: list[Chunk],
        ids: list[str],
        embeddings: list[PyEmbedding],
        versioned: Versioned | None = None,
    ) -> IngestReport:
        all_ids, metadatas = self._stored(doc.doc_id)
        stored_ids = set(all_ids)
        if versioned is not None and not chunks:
            # Nothing to index any more: write nothing, so the caller publishes an empty
            # generation and retires the published one like any other.
            report = IngestReport(files_seen=1, files_skipped=1)
            report.skipped.append(SkippedFile(doc.source_path, "no text to index"))
            return report
        if versioned is not None:
            # Chunks of other generations (the published one, retired ones) are not this
            # version's: compare with this generation's only.
            stored_ids = {i for i, m in zip(all_ids, metadatas, strict=True) if _gen(m, versioned)}
            metadatas = [m for m in metadatas if _gen(m, versioned)]
        stored_versions = {
            (str(meta.get("content_hash")), str(meta.get("chunking"))) for meta in metadatas
        }
        same_readers = _same_readers(doc, metadatas, versioned)
        report = IngestReport(files_seen=1)
        if not chunks:
            report.chunks_deleted = self._delete(stored_ids)
            report.files_skipped = 1
            report.skipped.append(SkippedFile(doc.source_path, "no text to index"))
        elif (
            same_readers
            and stored_ids == set(ids)
            and stored_versions == {(doc.content_hash, self._chunker.fingerprint)}
        ):
            report.files_unchanged = 1
            report.documents.append(self._outcome(doc, "unchanged", 0, 0))
        else:
            self._write(doc, chunks, ids, embeddings, versioned)
            report.files_indexed = 1
            report.chunks_written = len(ids)
            if versioned is None:
                report.chunks_deleted = self._delete(stored_ids - set(ids))
            report.documents.append(
                self._outcome(doc, "indexed", report.chunks_written, report.chunks_deleted)
            )
        return report

    def _stored(self, doc_id: str) -> tuple[list[str], list[Mapping[str, object]]]:
        """Ids and metadata (in the same order) of what the collection holds for ``doc_id``."""
        result = self._collection.get(where={"doc_id": doc_id}, include=["metadatas"])
        return list(result["ids"]), list(result["metadatas"] or [])

    def _is_current(self, doc: ExtractedDocument, versioned: Versioned | None = None) -> bool:
        """Whether the stored chunks of ``doc`` are complete and from this text and chunker (and
        of this generation, for a versioned document)."""
        _, metadatas = self._stored(doc.doc_id)
        if versioned is not None:
            metadatas = [meta for meta in metadatas if _gen(meta, versioned)]
        if not metadatas:
            return False
        indices = sorted(int(str(meta.get("chunk_index", -1))) for meta in metadatas)
        return (
            indices == list(range(len(metadatas)))
            and _same_readers(doc, metadatas, versioned)
            and all(
                meta.get("content_hash") == doc.content_hash
                and meta.get("chunking") == self._chunker.fingerprint
                and meta.get("chunk_count") == len(metadatas)
                for meta in metadatas
            )
        )

    def _write(
        self,
        doc: ExtractedDocument,
        chunks: list[Chunk],
        ids: list[str],
        embeddings: list[PyEmbedding],
        versioned: Versioned | None = None,
    ) -> None:
        indexed_at = datetime.now(UTC).isoformat(timespec="seconds")
        base: dict[str, str | int | float | bool] = {
            "doc_id": doc.doc_id,
            "url": doc.url,
            "title": doc.title,
            "category": doc.category or "",
            "os": doc.os or "",
            "content_hash": doc.content_hash,
            "chunking": self._chunker.fingerprint,
            "chunk_count": len(chunks),
            "indexed_at": indexed_at,
        }
        if doc.readers is not None:
            base.update(doc.readers.metadata())
        if versioned is not None:
            base.update(versioned.metadata)
            base["generation"] = versioned.generation
        metadatas: list[Metadata] = [
            {**base, "section": chunk.section, "chunk_index": chunk.ordinal} for chunk in chunks
        ]
        for start in range(0, len(ids), _WRITE_BATCH):
            end = start + _WRITE_BATCH
            self._collection.upsert(
                ids=ids[start:end],
                embeddings=embeddings[start:end],
                documents=[chunk.body for chunk in chunks[start:end]],
                metadatas=metadatas[start:end],
            )

    def _delete(self, ids: set[str]) -> int:
        ordered = sorted(ids)
        for start in range(0, len(ordered), _WRITE_BATCH):
            self._collection.delete(ids=ordered[start : start + _WRITE_BATCH])
        return len(ordered)

    @staticmethod
    def _outcome(
        doc: ExtractedDocument,
        status: Literal["indexed", "unchanged"],
        written: int,
        deleted: int,
    ) -> DocumentOutcome:
        return DocumentOutcome(
            doc_id=doc.doc_id,
            url=doc.url,
            title=doc.title,
            status=status,
            chunks_written=written,
            chunks_deleted=deleted,
            path=doc.source_path,
        )


def _gen(meta: Mapping[str, object], versioned: Versioned) -> bool:
    """Whether a stored chunk belongs to ``versioned``'s generation."""
    return meta.get("generation") == versioned.generation


def _visible_files(folder: Path) -> Iterator[Path]:
    """Files under ``folder`` in sorted order, skipping hidden names; symlinked folders are not
    followed, so a link loop cannot make ingestion run forever."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(root) / name
