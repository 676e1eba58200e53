"""Attachments as the gateway sees them: screen, hand over for reading, answer the upload.

The gateway never reads an attachment's content. It sniffs the type from the first bytes (the
file name and the client's content type are not trusted), enforces the size limits, and publishes
the bytes on ``attachment.received``. The ocr service reads them (log parsing or OCR), the
redactor redacts what was read, and the redactor's reply, on this instance's reply stream,
completes the upload request with the redacted excerpt and error signatures.

The gateway keeps a small redacted record per attachment (status, conversation, summary) for
``GET /api/attachments/{id}`` and to check that a chat message only references attachments of its
own conversation. Records expire after ``GATEWAY_ATTACHMENT_TTL_S``, like the conversation.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable
from typing import Any, Literal

from opentelemetry import trace
from redis.exceptions import RedisError

from contracts.bus import Bus
from contracts.events import AttachmentReceived, AttachmentSummary, TurnReply, new_id
from contracts.textfiles import NotText, decode_text
from contracts.topics import Topic
from gateway.config import GatewaySettings
from gateway.conversations import ATTACHMENT_PREFIX, ConversationIndex, OwnedRecords
from gateway.documents import safe_filename
from gateway.errors import ApiError, ErrorCode
from gateway.models import AttachmentRead
from gateway.turns import TurnService
from gateway.uploads import Upload

log = logging.getLogger("deskpilot.gateway.attachments")
tracer = trace.get_tracer("deskpilot.gateway")

MAX_ATTACHMENTS_PER_MESSAGE = 5

AttachmentKind = Literal["log", "image"]

_IMAGE_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)
_BINARY_SIGNATURES = (b"%PDF-", b"PK\x03\x04", b"\x7fELF", b"MZ", b"\x1f\x8b", b"7z\xbc\xaf")
SUPPORTED = "text logs (.txt, .log, .json, .xml, .csv) and images (PNG, JPEG, GIF, WebP, BMP)"

_ERROR_CODES: dict[str, ErrorCode] = {
    "unsupported_media_type": ErrorCode.UNSUPPORTED_FILE_TYPE,
    "attachment_too_large": ErrorCode.FILE_TOO_LARGE,
    "corrupt_attachment": ErrorCode.CORRUPT_FILE,
    "extraction_failed": ErrorCode.CORRUPT_FILE,
}


def _text_type(text: str) -> str:
    start = text.lstrip("\ufeff \t\r\n")[:1]
    if start in ("{", "["):
        return "application/json"
    if start == "<":
        return "application/xml"
    return "text/plain"


def sniff(data: bytes) -> tuple[AttachmentKind, str]:
    """The attachment's kind and content type, from its bytes alone; 415 for anything that is
    neither a supported image nor text (PDFs, archives, executables, binary data)."""
    head = data[:4096]
    for magic, content_type in _IMAGE_SIGNATURES:
        if head.startswith(magic):
            return "image", content_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image", "image/webp"
    if not head.startswith(_BINARY_SIGNATURES):
        try:
            # As the ocr service will read it (a UTF-16 log without a byte-order mark, as some
            # Windows tools write them, included); the first 4 KiB decide.
            text = decode_text(head)
        except NotText:
            pass
        else:
            return "log", _text_type(text)
    raise ApiError(
        ErrorCode.UNSUPPORTED_FILE_TYPE,
        f"This kind of file cannot be attached. Attach {SUPPORTED}.",
    )


class AttachmentRecords:
    """One small redacted record per attachment, kept with its owner (the uploader) and
    expiring with the conversation."""

    def __init__(self, bus: Bus, index: ConversationIndex, ttl_s: int) -> None:
        self.client = bus.redis
        self.index = index
        self.ttl_s = ttl_s
        self.owned = OwnedRecords(self.client, ATTACHMENT_PREFIX)

    async def create(self, attachment_id: str, owner: str, record: dict[str, Any]) -> None:
        await self.owned.create(attachment_id, owner, record, self.ttl_s)

    async def put(self, attachment_id: str, record: dict[str, Any]) -> None:
        """Replace an existing record (a purged or expired one stays gone)."""
        await self.owned.update(attachment_id, record)

    async def get(self, attachment_id: str) -> dict[str, Any] | None:
        if not _well_formed(attachment_id):
            return None
        return await self.owned.get(attachment_id)

    async def get_owned(self, attachment_id: str, owner: str) -> dict[str, Any] | None:
        """The record when ``owner`` uploaded it; None for anyone else, as for an unknown id."""
        if not _well_formed(attachment_id):
            return None
        return await self.owned.get_owned(attachment_id, owner)


def _well_formed(attachment_id: str) -> bool:
    return attachment_id.isascii() and attachment_id.isalnum() and len(attachment_id) <= 64


class AttachmentService:
    def __init__(
        self,
        bus: Bus,
        turns: TurnService,
        records: AttachmentRecords,
        settings: GatewaySettings,
    ) -> None:
        self.bus = bus
        self.turns = turns
        self.records = records
        self.settings = settings

    @property
    def max_bytes(self) -> int:
        return max(self.settings.max_log_bytes, self.settings.max_image_bytes)

    def screen(self, upload: Upload) -> tuple[AttachmentKind, str]:
        if not upload.data:
            raise ApiError(ErrorCode.INVALID_REQUEST, "The attached file is empty.")
        kind, content_type = sniff(upload.data)
        limit = self.settings.max_log_bytes if kind == "log" else self.settings.max_image_bytes
        if len(upload.data) > limit:
            what = "log files" if kind == "log" else "images"
            raise ApiError(
                ErrorCode.FILE_TOO_LARGE,
                f"The file is {len(upload.data)} bytes; {what} may be at most {limit} bytes. "
                "Attach the part around the error instead.",
            )
        return kind, content_type

    async def submit(
        self,
        upload: Upload,
        conversation_id: str,
        user_id: str,
        on_published: Callable[[], None] | None = None,
    ) -> AttachmentRead:
        """Screen the file, have it read and redacted, and return what was read.

        The caller checked that ``user_id`` owns the conversation. Nothing is stored when the
        file is refused: the gateway keeps no bytes, and the ocr service deletes the stream
        entry whether it could read the file or not. Once the file is on the bus its bytes are
        let go (``upload`` is emptied) and ``on_published`` is called, before the wait for the
        ocr service's reply: a waiting upload holds no file in memory.
        """
        filename = safe_filename(upload.filename)
        kind, content_type = self.screen(upload)
        attachment_id = new_id()
        user = user_id
        size = len(upload.data)
        event = AttachmentReceived(
            correlation_id=attachment_id,
            conversation_id=conversation_id,
            attachment_id=attachment_id,
            user_id=user,
            filename=filename,
            kind=kind,
            content_type=content_type,
            size_bytes=len(upload.data),
            content_b64=base64.b64encode(upload.data).decode("ascii"),
            reply_to=self.turns.reply_to,
        )
        base = {"conversation_id": conversation_id, "user_id": user, "kind": kind}
        with tracer.start_as_current_span(
            "attachment.submit", attributes={"deskpilot.attachment_id": attachment_id}
        ):
            async with self.turns.listen(attachment_id) as replies:
                try:
                    await self.records.create(attachment_id, user, base | {"status": "pending"})
                    await self.records.index.add(conversation_id, "attachment", attachment_id, user)
                    await self.bus.publish(Topic.ATTACHMENT_RECEIVED, event)
                except (RedisError, OSError) as exc:
                    error = type(exc).__name__
                    log.warning("could not queue an attachment", extra={"error": error})
                    raise ApiError(
                        ErrorCode.BUS_UNAVAILABLE,
                        "Deskpilot is briefly unavailable; the file was not sent. Try again.",
                    ) from exc
                finally:
                    # The bytes are on the bus (or refused by it): let go of them now.
                    del event
                    upload.release()
                    if on_published is not None:
                        on_published()
                log.info(
                    "attachment queued",
                    extra={"attachment_id": attachment_id, "kind": kind, "bytes": size},
                )
                reply = await self._wait(attachment_id, replies)
        return self._read(attachment_id, conversation_id, reply)

    async def _wait(self, attachment_id: str, replies: asyncio.Queue[TurnReply]) -> TurnReply:
        try:
            async with asyncio.timeout(self.settings.attachment_timeout_s):
                while True:
                    reply = await replies.get()
                    if reply.kind in ("attachment", "attachment_error"):
                        return reply
        except TimeoutError:
            raise ApiError(
                ErrorCode.TURN_TIMEOUT,
                "Reading the file is taking longer than expected; check it later at "
                f"/api/attachments/{attachment_id}.",
                attachment_id=attachment_id,
            ) from None

    def _read(self, attachment_id: str, conversation_id: str, reply: TurnReply) -> AttachmentRead:
        if reply.kind == "attachment_error" and reply.error is not None:
            raise ApiError(_ERROR_CODES[reply.error.error_code], reply.error.detail)
        if reply.attachment is None:
            raise ApiError(ErrorCode.CORRUPT_FILE, "The file could not be read.")
        return AttachmentRead(
            **reply.attachment.model_dump(), conversation_id=conversation_id, status="ready"
        )

    async def on_reply(self, reply: TurnReply) -> None:
        """Record the outcome, so ``GET`` and chat messages see it; listeners are told by the
        turn service."""
        record = await self.records.get(reply.correlation_id)
        if record is None:
            return
        if reply.kind == "attachment" and reply.attachment is not None:
            record |= {"status": "ready", "summary": reply.attachment.model_dump(mode="json")}
        elif reply.error is not None:
            record |= {"status": "failed", "error": reply.error.model_dump(mode="json")}
        await self.records.put(reply.correlation_id, record)

    async def get(self, attachment_id: str, owner: str | None) -> AttachmentRead:
        """The attachment as ``owner`` may see it: 404 for anyone but its uploader."""
        record = await self.records.get_owned(attachment_id, owner) if owner else None
        if record is None:
            detail = "No such attachment is known."
            raise ApiError(ErrorCode.UNKNOWN_ATTACHMENT, detail)
        if record["status"] == "failed":
            error = record["error"]
            raise ApiError(_ERROR_CODES[error["error_code"]], error["detail"])
        summary = record.get("summary") or {"id": attachment_id, "kind": record["kind"], "bytes": 0}
        return AttachmentRead(
            **AttachmentSummary.model_validate(summary).model_dump(),
            conversation_id=record["conversation_id"],
            status=record["status"],
        )

    async def check_references(
        self, attachment_ids: list[str], conversation_id: str, owner: str
    ) -> None:
        """A message may reference only attachments its user uploaded to this conversation
        and that were read."""
        if len(attachment_ids) > MAX_ATTACHMENTS_PER_MESSAGE:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"A message may reference at most {MAX_ATTACHMENTS_PER_MESSAGE} attachments.",
            )
        for attachment_id in attachment_ids:
            record = await self.records.get_owned(attachment_id, owner)
            if record is None or record.get("conversation_id") != conversation_id:
                raise ApiError(
                    ErrorCode.UNKNOWN_ATTACHMENT,
                    "An attachment this message names is not known in this conversation; "
                    "upload it again.",
                )
            if record.get("status") != "ready":
                raise ApiError(
                    ErrorCode.UNKNOWN_ATTACHMENT,
                    "An attachment this message names could not be read, so it cannot be used.",
                )
