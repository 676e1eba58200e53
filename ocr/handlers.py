"""Attachment in, extracted text out (or an error reply); the raw entry is deleted either way."""

from __future__ import annotations

import asyncio
import logging

from contracts.bus import Bus, Delivery
from contracts.events import AttachmentError, AttachmentExtracted, AttachmentReceived, TurnReply
from contracts.ids import derived_event_id
from contracts.topics import Group, Topic
from ocr.errors import AttachmentRefused
from ocr.service import AttachmentReader, Extracted

log = logging.getLogger("deskpilot.ocr")


def extracted_event_id(received_event_id: str) -> str:
    """Deterministic, so a redelivered attachment yields the same downstream event id."""
    return derived_event_id("deskpilot", "attachment-extracted", received_event_id)


def error_event_id(received_event_id: str) -> str:
    """Deterministic too: a redelivery repeats the same error reply, which the gateway de-dups."""
    return derived_event_id("deskpilot", "attachment-error", received_event_id)


FAILED_DETAIL = (
    "The file could not be read this time. Attach it again in a moment; if it keeps failing, "
    "type the error message instead."
)


def register(bus: Bus, reader: AttachmentReader, concurrency: int, max_deliveries: int) -> None:
    async def read(event: AttachmentReceived, delivery: Delivery) -> Extracted:
        try:
            return await asyncio.to_thread(reader.read, event.kind, event.content_b64)
        except AttachmentRefused:
            raise
        except Exception as exc:
            # Not the file's fault (as far as we know): let the bus retry it, and on the last
            # delivery tell the user rather than leave the upload waiting for nothing.
            if delivery.deliveries < max_deliveries:
                raise
            log.error("attachment could not be read", extra={"error": type(exc).__name__})
            raise AttachmentRefused("extraction_failed", FAILED_DETAIL) from exc

    async def on_attachment(event: AttachmentReceived, delivery: Delivery) -> None:
        try:
            extracted = await read(event, delivery)
        except AttachmentRefused as refused:
            reply = TurnReply(
                event_id=error_event_id(event.event_id),
                correlation_id=event.correlation_id,
                conversation_id=event.conversation_id,
                kind="attachment_error",
                error=AttachmentError(error_code=refused.error_code, detail=refused.detail),
            )
            await bus.publish_replacing(delivery, (event.reply_to, reply))
            log.info(
                "attachment refused",
                extra={
                    "kind": event.kind,
                    "error_code": refused.error_code,
                    "bytes": event.size_bytes,
                },
            )
            return
        # Attachment bytes are raw user data: they live only until they are read.
        await bus.publish_replacing(
            delivery,
            (
                Topic.ATTACHMENT_EXTRACTED,
                AttachmentExtracted(
                    event_id=extracted_event_id(event.event_id),
                    correlation_id=event.correlation_id,
                    conversation_id=event.conversation_id,
                    attachment_id=event.attachment_id,
                    user_id=event.user_id,
                    kind=event.kind,
                    filename=event.filename,
                    size_bytes=event.size_bytes,
                    text=extracted.text,
                    signatures=extracted.signatures,
                    first_error_at=extracted.first_error_at,
                    reply_to=event.reply_to,
                ),
            ),
        )
        log.info(
            "attachment read",
            extra={
                "kind": event.kind,
                "bytes": event.size_bytes,
                "lines": extracted.lines,
                "signatures": len(extracted.signatures),
            },
        )

    bus.subscribe(
        Topic.ATTACHMENT_RECEIVED,
        AttachmentReceived,
        on_attachment,
        group=Group.OCR,
        concurrency=concurrency,
    )
