"""Documents: admins upload knowledge-base files, follow their indexing, and delete them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from gateway.deps import (
    AdminDep,
    ClientIpDep,
    DocumentsDep,
    SettingsDep,
    UploadGateDep,
    rate_limit_user,
    require_admin,
)
from gateway.documents import check_readers
from gateway.models import DocumentAccepted, DocumentRead
from gateway.uploads import check_envelope, declared_length, read_upload

router = APIRouter(
    prefix="/api/documents", tags=["documents"], dependencies=[Depends(require_admin)]
)

_READ_GROUPS = (
    "A group that may read the document: an id as the user tokens' groups claim lists it "
    "(Entra ID: the group's object id)."
)
_READ_USERS = "A user that may read the document: a user token's subject."

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token."},
    413: {"description": "The file exceeds GATEWAY_MAX_UPLOAD_BYTES."},
    415: {"description": "Not HTML, Markdown, plain text or PDF."},
    422: {"description": "No `file` part, an empty file, or an unusable reader id."},
    429: {"description": "This admin has as many uploads in progress as allowed (Retry-After)."},
    503: {"description": "The gateway is at its upload limits (Retry-After)."},
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
    request: Request,
    documents: DocumentsDep,
    settings: SettingsDep,
    admin: AdminDep,
    gate: UploadGateDep,
    ip: ClientIpDep,
    read_groups: Annotated[list[str] | None, Query(description=_READ_GROUPS)] = None,
    read_users: Annotated[list[str] | None, Query(description=_READ_USERS)] = None,
) -> DocumentAccepted:
    """Queue a document (multipart field `file`: .html, .htm, .md, .markdown, .txt or .pdf) for
    indexing; poll its status with GET /api/documents/{id}. Under load it is refused before its
    body is read (429/503 with Retry-After), like attachments.

    Everyone may read it unless `read_groups` or `read_users` name who may (repeat the
    parameter for several): then only those users and members of those groups get answers from
    it, everyone else as if it did not exist."""
    readers = check_readers(read_users or [], read_groups or [])
    max_bytes = settings.max_upload_bytes
    check_envelope(request, max_bytes, "document")
    user = rate_limit_user(admin)
    async with gate.admit(user, ip, declared_length(request), max_bytes):
        upload = await read_upload(request, max_bytes, "document")
        return await documents.submit(upload.filename, upload.data, readers)


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
