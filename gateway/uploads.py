"""Reading multipart uploads within a size limit, for documents and attachments alike."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.types import Message

from gateway.errors import ApiError, ErrorCode

MULTIPART_OVERHEAD = 64 * 1024
"""Room for the multipart envelope (boundaries, part headers, small fields) around the file."""


@dataclass(frozen=True)
class Upload:
    filename: str
    data: bytes
    fields: dict[str, str] = field(default_factory=dict)
    """The multipart body's text fields (e.g. ``conversation_id``)."""


def too_large(max_bytes: int) -> ApiError:
    return ApiError(ErrorCode.FILE_TOO_LARGE, f"The upload exceeds the limit of {max_bytes} bytes.")


async def read_upload(request: Request, max_bytes: int, what: str = "file") -> Upload:
    """The ``file`` part of a multipart body (its client-side name and its bytes) and the text
    fields beside it.

    The body is parsed here rather than by a ``File()`` parameter so that authentication runs
    before any of it is read, and so that reading stops as soon as the body outgrows the limit:
    an oversized upload costs neither memory nor temporary disk space beyond the limit. A body
    whose declared length is over the limit is refused before it is read at all.
    """
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Send the {what} as multipart/form-data with a part named `file`.",
        )
    body_limit = max_bytes + MULTIPART_OVERHEAD
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > body_limit:
        raise too_large(max_bytes)

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
    try:
        async with limited.form(max_files=1, max_fields=16) as form:
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
    except HTTPException as exc:  # Starlette's verdict on a malformed multipart body
        detail = f"Malformed multipart body: {exc.detail}"
        raise ApiError(ErrorCode.INVALID_REQUEST, detail) from None
