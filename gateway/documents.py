"""Uploaded documents as the gateway sees them: check, hand over to the indexer, track status.

The gateway never parses a document. It checks the file's type and size, publishes the bytes on
``document.submitted`` for the indexer, and keeps one small record per document in Redis that the
indexer's ``document.status`` events update, so an admin can poll ``GET /api/documents/{id}``.
Records have no TTL: they are a few hundred bytes and say what happened to each upload.

Every event about a document carries the document id as its conversation id, so
``grep <id> logs/*.log`` follows one document through the gateway and the indexer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
from pathlib import PurePosixPath

import redis.asyncio as aioredis
from opentelemetry import trace
from redis.exceptions import RedisError

from contracts.bus import Bus
from contracts.events import DocumentDeleted, DocumentStatus, DocumentSubmitted, new_id, utcnow
from contracts.readers import MAX_GROUPS, Readers
from contracts.textfiles import NotText, decode_text
from contracts.topics import Topic
from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode
from gateway.models import DocumentAccepted, DocumentRead

log = logging.getLogger("deskpilot.gateway.documents")
tracer = trace.get_tracer("deskpilot.gateway")

DOCUMENT_PREFIX = "deskpilot:gateway:document:"

TEXT_TYPES = {
    ".html": "text/html",
    ".htm": "text/html",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
}
CONTENT_TYPES = {**TEXT_TYPES, ".pdf": "application/pdf"}
"""What the indexer can read, by extension; the client's declared content type is not trusted."""

_DOCUMENT_ID = re.compile(r"^(?:[0-9a-f]{32}|[0-9a-f]{64})$")
"""Upload ids are uuid4 hex; documents ingested from folders have SHA-256 hex ids."""
_MAX_FILENAME_CHARS = 200
_UPLOADER = "admin"
"""Who uploads: the holder of the admin token, until identity providers are configured."""


def safe_filename(raw: str | None) -> str:
    """The file's own name without any client-side folders or control characters, shortened to
    200 characters with its extension kept; 422 when nothing usable is left."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip().lstrip(".")
    if not name:
        raise ApiError(ErrorCode.INVALID_REQUEST, "The uploaded file needs a file name.")
    if len(name) > _MAX_FILENAME_CHARS:
        suffix = PurePosixPath(name).suffix[:20]
        name = name[: _MAX_FILENAME_CHARS - len(suffix)] + suffix
    return name


def check_upload(filename: str, data: bytes, max_bytes: int) -> str:
    """Refuse what the indexer cannot read or should not receive; return the content type.

    413 above ``max_bytes``; 415 for other extensions, a ``.pdf`` that is not a PDF, or a text
    format that no text encoding reads (binary data with a misleading name: a NUL byte alone does
    not make it binary, UTF-16 and UTF-32 text holds them); 422 for an empty file.
    """
    if len(data) > max_bytes:
        raise ApiError(
            ErrorCode.FILE_TOO_LARGE,
            f"The file is {len(data)} bytes; the limit is {max_bytes} bytes.",
        )
    suffix = PurePosixPath(filename).suffix.lower()
    content_type = CONTENT_TYPES.get(suffix)
    if content_type is None:
        supported = ", ".join(sorted(CONTENT_TYPES))
        raise ApiError(
            ErrorCode.UNSUPPORTED_FILE_TYPE,
            f"Files of type {suffix or '(no extension)'!r} cannot be indexed; "
            f"upload one of: {supported}.",
        )
    if not data:
        raise ApiError(ErrorCode.INVALID_REQUEST, "The uploaded file is empty.")
    if suffix == ".pdf" and not data[:1024].lstrip().startswith(b"%PDF-"):
        raise ApiError(ErrorCode.UNSUPPORTED_FILE_TYPE, "The file is named .pdf but is not a PDF.")
    if suffix in TEXT_TYPES:
        try:
            decode_text(data)  # as the indexer will read it
        except NotText:
            raise ApiError(
                ErrorCode.UNSUPPORTED_FILE_TYPE,
                f"The file is named {suffix} but holds binary data, not text.",
            ) from None
    return content_type


def check_readers(users: list[str], groups: list[str]) -> Readers | None:
    """Who may read an upload, from the admin's lists: None (everyone) when both are empty;
    422 for an id that could never match a reader (empty, too long, not printable, with ``|``),
    before the file is read."""
    if len(users) + len(groups) > MAX_GROUPS:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"At most {MAX_GROUPS} readers (users and groups) per document.",
        )
    try:
        readers = Readers(public=False, users=tuple(users), groups=tuple(groups))
    except ValueError as exc:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"read_users / read_groups: {exc}.") from None
    return readers if users or groups else None


def valid_document_id(document_id: str) -> bool:
    return bool(_DOCUMENT_ID.match(document_id))


class DocumentRecords:
    """The gateway's record of each document: its status as the indexer last reported it."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client

    async def get(self, document_id: str) -> DocumentRead | None:
        raw = await self.client.get(DOCUMENT_PREFIX + document_id)
        return DocumentRead.model_validate_json(raw) if raw else None

    async def put(self, record: DocumentRead, filename: str | None = None) -> None:
        stored = record.model_dump(mode="json") | {"updated_at": utcnow().isoformat()}
        if filename is not None:
            stored["filename"] = filename
        else:  # keep the file name the upload recorded
            previous = await self.client.get(DOCUMENT_PREFIX + record.id)
            if previous and "filename" in (old := json.loads(previous)):
                stored["filename"] = old["filename"]
        await self.client.set(DOCUMENT_PREFIX + record.id, json.dumps(stored))

    async def delete(self, document_id: str) -> None:
        await self.client.delete(DOCUMENT_PREFIX + document_id)


class DocumentService:
    def __init__(self, bus: Bus, records: DocumentRecords, settings: GatewaySettings) -> None:
        self.bus = bus
        self.records = records
        self.settings = settings

    async def submit(
        self, filename: str, data: bytes, readers: Readers | None = None
    ) -> DocumentAccepted:
        """Check the file and queue it for indexing, readable by ``readers`` (everyone when
        None); once this returns it is durably queued.

        The record is written before the event is published: the indexer's status could
        otherwise arrive first and be overwritten by "queued".
        """
        filename = safe_filename(filename)
        # In a thread: telling text from binary decodes the file (10 MB of cp1252: 0.3 s here).
        content_type = await asyncio.to_thread(
            check_upload, filename, data, self.settings.max_upload_bytes
        )
        document_id = new_id()
        with tracer.start_as_current_span(
            "document.submit", attributes={"deskpilot.document_id": document_id}
        ):
            try:
                await self.records.put(
                    DocumentRead(id=document_id, status="queued", detail="waiting for the indexer"),
                    filename=filename,
                )
                await self.bus.publish(
                    Topic.DOCUMENT_SUBMITTED,
                    DocumentSubmitted(
                        correlation_id=new_id(),
                        conversation_id=document_id,
                        document_id=document_id,
                        filename=filename,
                        content_type=content_type,
                        content_b64=base64.b64encode(data).decode("ascii"),
                        uploaded_by=_UPLOADER,
                        read_users=list(readers.users) if readers else [],
                        read_groups=list(readers.groups) if readers else [],
                    ),
                )
            except (RedisError, OSError) as exc:
                log.warning("could not queue a document", extra={"error": type(exc).__name__})
                await self._forget(document_id)
                raise _bus_unavailable() from exc
        log.info(
            "document queued",
            extra={
                "document_id": document_id,
                "content_type": content_type,
                "bytes": len(data),
                "restricted": readers is not None,
            },
        )
        return DocumentAccepted(id=document_id)

    async def get(self, document_id: str) -> DocumentRead:
        record = await self.records.get(document_id) if valid_document_id(document_id) else None
        if record is None:
            raise ApiError(ErrorCode.UNKNOWN_DOCUMENT, "No such document is known.")
        return record

    async def delete(self, document_id: str) -> DocumentAccepted:
        """Queue the removal of every chunk of the document.

        Accepted for any well-formed id, including documents ingested from folders (whose ids are
        in each chunk's metadata) and ids already deleted: deleting is idempotent.
        """
        if not valid_document_id(document_id):
            raise ApiError(ErrorCode.UNKNOWN_DOCUMENT, "No such document is known.")
        with tracer.start_as_current_span(
            "document.delete", attributes={"deskpilot.document_id": document_id}
        ):
            try:
                current = await self.records.get(document_id)
                await self.records.put(
                    DocumentRead(
                        id=document_id,
                        status="queued",
                        chunks=current.chunks if current else 0,
                        detail="deletion requested",
                    )
                )
                await self.bus.publish(
                    Topic.DOCUMENT_DELETED,
                    DocumentDeleted(
                        correlation_id=new_id(),
                        conversation_id=document_id,
                        document_id=document_id,
                        deleted_by=_UPLOADER,
                    ),
                )
            except (RedisError, OSError) as exc:
                log.warning("could not queue a deletion", extra={"error": type(exc).__name__})
                raise _bus_unavailable() from exc
        log.info("document deletion queued", extra={"document_id": document_id})
        return DocumentAccepted(id=document_id)

    async def on_status(self, event: DocumentStatus) -> None:
        """Record the indexer's outcome. Idempotent; "deleted" is final, so a late "indexed"
        from a redelivered upload cannot bring a deleted document back to life."""
        current = await self.records.get(event.document_id)
        if current is not None and current.status == "deleted" and event.status != "deleted":
            log.info("status after deletion ignored", extra={"status": event.status})
            return
        await self.records.put(
            DocumentRead(
                id=event.document_id, status=event.status, chunks=event.chunks, detail=event.detail
            )
        )
        log.info("document status", extra={"status": event.status, "chunks": event.chunks})

    async def _forget(self, document_id: str) -> None:
        # Redis is down: the record most likely was not written either.
        with contextlib.suppress(RedisError, OSError):
            await self.records.delete(document_id)


def _bus_unavailable() -> ApiError:
    return ApiError(
        ErrorCode.BUS_UNAVAILABLE,
        "Deskpilot is briefly unavailable; the request was not queued. Try again.",
    )
