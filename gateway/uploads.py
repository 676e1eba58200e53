"""Uploads (documents and attachments): admission under load, and reading multipart bodies
within a size limit.

Every upload is held whole in the gateway's memory while it is received, encoded and published
(the bus carries it base64-encoded, so it costs about five times its size for a moment), and
an attachment then sits in Redis until the ocr service has read it. :class:`UploadGate` decides,
before a byte of the body is read, whether an upload may start:

* at most ``GATEWAY_UPLOAD_CONCURRENCY_PER_USER`` uploads in progress per user and
  ``GATEWAY_UPLOAD_CONCURRENCY_PER_IP`` per client address (429 with ``Retry-After``);
* at most ``GATEWAY_UPLOAD_CONCURRENCY_TOTAL`` in progress in the process, and file bytes held
  in memory within ``GATEWAY_UPLOAD_MEMORY_BYTES`` (503 with ``Retry-After``): an upload reserves
  its declared length (the whole limit when it declares none) until it is on the bus;
* for attachments, the ``attachment.received`` stream's size in Redis (``MEMORY USAGE``, what is
  really there: entries leave the stream when the ocr service has read them, so a crash of any
  process leaves no count behind) within ``GATEWAY_OCR_QUEUE_MAX_BYTES`` (503 with
  ``Retry-After``).

The counts are per gateway process, which is what holds the memory; the per-user and per-IP
upload rates (``GATEWAY_RATE_LIMIT_UPLOAD_*``) are counted in Redis across replicas. A refused
upload leaves nothing behind: no record, no stream entry, no temporary file.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from fastapi import Request
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.types import Message

from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode

log = logging.getLogger("deskpilot.gateway.uploads")

MULTIPART_OVERHEAD = 64 * 1024
"""Room for the multipart envelope (boundaries, part headers, small fields) around the file."""


@dataclass
class Upload:
    filename: str
    data: bytes
    fields: dict[str, str] = field(default_factory=dict)
    """The multipart body's text fields (e.g. ``conversation_id``)."""

    def release(self) -> None:
        """Let go of the file's bytes once they were handed on (the name stays)."""
        self.data = b""


def too_large(max_bytes: int) -> ApiError:
    return ApiError(ErrorCode.FILE_TOO_LARGE, f"The upload exceeds the limit of {max_bytes} bytes.")


def declared_length(request: Request) -> int | None:
    """The body's ``Content-Length``, None when it declares none (chunked)."""
    declared = request.headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None


def check_envelope(request: Request, max_bytes: int, what: str = "file") -> None:
    """Refuse, before reading anything, a body that is not multipart or declares a length over
    the limit."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Send the {what} as multipart/form-data with a part named `file`.",
        )
    declared = declared_length(request)
    if declared is not None and declared > max_bytes + MULTIPART_OVERHEAD:
        raise too_large(max_bytes)


async def read_upload(request: Request, max_bytes: int, what: str = "file") -> Upload:
    """The ``file`` part of a multipart body (its client-side name and its bytes) and the text
    fields beside it.

    The body is parsed here rather than by a ``File()`` parameter so that authentication and
    admission run before any of it is read, and so that reading stops at the first chunk that
    takes the body over the limit: an oversized upload costs no memory beyond the limit. A body
    whose declared length is over the limit is refused before it is read at all. The file is
    kept in memory only, never spooled to a temporary file (an attachment is not redacted yet).
    """
    check_envelope(request, max_bytes, what)
    body_limit = max_bytes + MULTIPART_OVERHEAD

    received = 0

    async def receive_within_limit() -> Message:
        nonlocal received
        message = await request.receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > body_limit:
                raise too_large(max_bytes)
        return message

    limited = Request(request.scope, receive_within_limit)
    parser = MultiPartParser(limited.headers, limited.stream(), max_files=1, max_fields=16)
    # Starlette spools a file part over 1 MiB to a temporary file on disk; the body is capped,
    # so holding all of it in memory is bounded, and nothing un-redacted reaches a disk.
    parser.spool_max_size = body_limit
    try:
        form = await parser.parse()
    except (MultiPartException, HTTPException) as exc:  # a malformed multipart body
        detail = f"Malformed multipart body: {getattr(exc, 'message', None) or exc}"
        raise ApiError(ErrorCode.INVALID_REQUEST, detail) from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(
                ErrorCode.INVALID_REQUEST, "The multipart body needs a file part named `file`."
            )
        data = await upload.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise too_large(max_bytes)
        fields = {key: value for key, value in form.items() if isinstance(value, str)}
        return Upload(upload.filename or "", data, fields)
    finally:
        await form.close()


# -- admission -----------------------------------------------------------------------------------


@dataclass
class UploadSlot:
    """An admitted upload: its place in the counts until the request ends, and its share of the
    memory budget until :meth:`release_memory` (once its bytes are on the bus)."""

    gate: UploadGate
    keys: tuple[str, ...]
    reserved_bytes: int

    def release_memory(self) -> None:
        self.gate.memory_bytes -= self.reserved_bytes
        self.reserved_bytes = 0


class UploadGate:
    """Admission of uploads in this gateway process (see the module docstring)."""

    def __init__(self, settings: GatewaySettings, redis: Redis) -> None:
        self.settings = settings
        self.redis = redis
        self.in_progress: Counter[str] = Counter()
        """Uploads in progress per ``user:<id>``/``ip:<address>``, and ``total``."""
        self.memory_bytes = 0
        """File bytes reserved by uploads being received or published."""

    def _busy(self, detail: str) -> ApiError:
        retry = str(self.settings.upload_retry_after_s)
        return ApiError(ErrorCode.UPLOADS_BUSY, detail, headers={"Retry-After": retry})

    async def _check_queue(self, queue: str, incoming: int) -> None:
        try:
            queued = await self.redis.memory_usage(queue, samples=0) or 0
        except (RedisConnectionError, RedisTimeoutError) as exc:
            # Publishing will fail too and say so; the gate is not what reports the outage.
            log.warning("ocr queue not measured", extra={"error": type(exc).__name__})
            return
        except RedisError as exc:
            # Redis answers but refuses (an ACL without MEMORY USAGE on the stream): the cap is
            # off until an operator grants it, so say so loudly.
            log.error(
                "ocr queue cannot be measured: grant the gateway MEMORY USAGE on the stream",
                extra={"error": type(exc).__name__, "stream": queue},
            )
            return
        encoded = math.ceil(incoming / 3) * 4
        if int(queued) + encoded > self.settings.ocr_queue_max_bytes:
            log.info("upload refused", extra={"reason": "ocr_queue", "queued_bytes": queued})
            raise self._busy(
                "Many attachments are waiting to be read; try again in "
                f"{self.settings.upload_retry_after_s} s."
            )

    @asynccontextmanager
    async def admit(
        self,
        user: str | None,
        ip: str | None,
        declared_bytes: int | None,
        max_bytes: int,
        queue: str | None = None,
    ) -> AsyncIterator[UploadSlot]:
        """Admit one upload of ``user`` (None: a caller without credentials) from ``ip``, whose
        body declares ``declared_bytes`` (None: unknown, so the whole ``max_bytes`` is
        reserved), or raise 429/503; ``queue`` is the stream it will wait in, if any."""
        settings = self.settings
        reserve = min(declared_bytes, max_bytes) if declared_bytes is not None else max_bytes
        if queue is not None:
            await self._check_queue(queue, reserve)
        # From here to the increments nothing awaits: the checks and the counts are one step.
        limits = {
            f"user:{user}": settings.upload_concurrency_per_user,
            f"ip:{ip}": settings.upload_concurrency_per_ip,
        }
        keys = [key for key, who in ((f"user:{user}", user), (f"ip:{ip}", ip)) if who]
        for key in keys:
            if self.in_progress[key] >= limits[key]:
                log.info("upload refused", extra={"reason": key.partition(":")[0]})
                raise ApiError(
                    ErrorCode.TOO_MANY_UPLOADS,
                    "Too many uploads at once: wait for the ones in progress, then try again in "
                    f"{settings.upload_retry_after_s} s.",
                    headers={"Retry-After": str(settings.upload_retry_after_s)},
                )
        busy = f"Deskpilot is busy with uploads; try again in {settings.upload_retry_after_s} s."
        if self.in_progress["total"] >= settings.upload_concurrency_total:
            log.info("upload refused", extra={"reason": "total"})
            raise self._busy(busy)
        if self.memory_bytes + reserve > settings.upload_memory_bytes:
            log.info("upload refused", extra={"reason": "memory"})
            raise self._busy(busy)
        counted = (*keys, "total")
        for key in counted:
            self.in_progress[key] += 1
        self.memory_bytes += reserve
        slot = UploadSlot(self, counted, reserve)
        try:
            yield slot
        finally:
            slot.release_memory()
            for key in counted:
                self.in_progress[key] -= 1
                if not self.in_progress[key]:
                    del self.in_progress[key]
