"""Documents: admins upload knowledge-base files, follow their indexing, and delete them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.types import Message

from gateway.deps import DocumentsDep, SettingsDep, require_admin
from gateway.errors import ApiError, ErrorCode
from gateway.models import DocumentAccepted, DocumentRead

router = APIRouter(
    prefix="/api/documents", tags=["documents"], dependencies=[Depends(require_admin)]
)

MULTIPART_OVERHEAD = 64 * 1024
"""Room for the multipart envelope (boundaries, part headers) around the file itself."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token."},
    413: {"description": "The file exceeds GATEWAY_MAX_UPLOAD_BYTES."},
    415: {"description": "Not HTML, Markdown, plain text or PDF."},
    422: {"description": "No `file` part, or an empty file."},
}
_MULTIPART_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            }
        },
    }
}


@router.post(
    "",
    response_model=DocumentAccepted,
    status_code=202,
    responses=_ERRORS,
    openapi_extra=_MULTIPART_BODY,
)
async def upload_document(
    request: Request, documents: DocumentsDep, settings: SettingsDep
) -> DocumentAccepted:
    """Queue a document (multipart field `file`: .html, .htm, .md, .markdown, .txt or .pdf) for
    indexing; poll its status with GET /api/documents/{id}."""
    filename, data = await read_upload(request, settings.max_upload_bytes)
    return await documents.submit(filename, data)


@router.get("/{document_id}", response_model=DocumentRead, responses={401: _ERRORS[401]})
async def get_document(document_id: str, documents: DocumentsDep) -> DocumentRead:
    """Where a document stands: queued, indexed (with its chunk count), failed (why) or deleted."""
    return await documents.get(document_id)


@router.delete(
    "/{document_id}",
    response_model=DocumentAccepted,
    status_code=202,
    responses={401: _ERRORS[401]},
)
async def delete_document(document_id: str, documents: DocumentsDep) -> DocumentAccepted:
    """Queue the removal of the document's chunks from the index; GET then reports deleted."""
    return await documents.delete(document_id)


async def read_upload(request: Request, max_bytes: int) -> tuple[str, bytes]:
    """The ``file`` part of a multipart body: its client-side name and its bytes.

    The body is parsed here rather than by a ``File()`` parameter so that the admin check runs
    before any of it is read, and so that reading stops as soon as the body outgrows the limit:
    an oversized upload costs neither memory nor temporary disk space beyond the limit.
    """
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            "Send the document as multipart/form-data with a part named `file`.",
        )
    body_limit = max_bytes + MULTIPART_OVERHEAD
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > body_limit:
        raise _too_large(max_bytes)

    received = 0

    async def receive_within_limit() -> Message:
        nonlocal received
        message = await request.receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > body_limit:
                raise _too_large(max_bytes)
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
            return upload.filename or "", data
    except HTTPException as exc:  # Starlette's verdict on a malformed multipart body
        detail = f"Malformed multipart body: {exc.detail}"
        raise ApiError(ErrorCode.INVALID_REQUEST, detail) from None


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(ErrorCode.FILE_TOO_LARGE, f"The upload exceeds the limit of {max_bytes} bytes.")
