"""Attachments: a user attaches a log file or a screenshot to the conversation."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from contracts.ids import is_conversation_id
from contracts.topics import Topic
from gateway.deps import (
    AttachmentsDep,
    ClientIpDep,
    ConversationsDep,
    IdentityResolverDep,
    OwnerDep,
    UploadGateDep,
    owner_of,
    rate_limit_user,
)
from gateway.errors import ApiError, ErrorCode
from gateway.models import AttachmentRead
from gateway.uploads import check_envelope, declared_length, read_upload

router = APIRouter(prefix="/api/attachments", tags=["attachments"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    413: {
        "description": "Over GATEWAY_MAX_LOG_BYTES or GATEWAY_MAX_IMAGE_BYTES, or too many pixels."
    },
    415: {
        "description": "Neither a text log nor a PNG, JPEG, GIF, WebP or BMP image (judged by "
        "the bytes, not the name)."
    },
    404: {"description": "`conversation_id` names no conversation of the caller's."},
    422: {"description": "No `file` part, an empty file, or an image that cannot be decoded."},
    429: {"description": "The caller has as many uploads in progress as allowed (Retry-After)."},
    503: {
        "description": "The bus is unavailable, or the gateway is at its upload limits "
        "(Retry-After); nothing was stored."
    },
    504: {"description": "Still being read; fetch GET /api/attachments/{id} later."},
}
_MULTIPART_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "conversation_id": {"type": "string"},
                        "user_id": {"type": "string"},
                    },
                }
            }
        },
    }
}


@router.post("", response_model=AttachmentRead, responses=_ERRORS, openapi_extra=_MULTIPART_BODY)
async def upload_attachment(
    request: Request,
    attachments: AttachmentsDep,
    conversations: ConversationsDep,
    identities: IdentityResolverDep,
    owner: OwnerDep,
    gate: UploadGateDep,
    ip: ClientIpDep,
) -> AttachmentRead:
    """Attach a file (multipart `file`, with the chat's `conversation_id`): it is read (log
    lines or OCR) and redacted, and the answer shows the redacted excerpt and the error
    signatures found. Reference its `id` in the next chat message's `attachments`, with the
    same credentials (user token, or anonymous token as the bearer token or `user_id`).

    Under load an upload is refused before its body is read: 429 when the caller already has
    uploads in progress, 503 when the gateway holds as many as it may or the files waiting for
    the ocr service fill their queue; both say when to retry (`Retry-After`)."""
    max_bytes = attachments.max_bytes
    check_envelope(request, max_bytes, "attachment")
    async with gate.admit(
        rate_limit_user(owner),
        ip,
        declared_length(request),
        max_bytes,
        queue=Topic.ATTACHMENT_RECEIVED,
    ) as slot:
        upload = await read_upload(request, max_bytes, "attachment")
        user = owner_of(identities, owner, upload.fields.get("user_id"))
        requested = upload.fields.get("conversation_id") or None
        if requested is not None and not is_conversation_id(requested):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "`conversation_id` must be 1 to 128 letters, digits or `_ . : -`.",
            )
        conversation_id = await conversations.resolve(requested, user.user_id)
        return await attachments.submit(
            upload, conversation_id, user.user_id, on_published=slot.release_memory
        )


@router.get("/{attachment_id}", response_model=AttachmentRead, responses={404: {}, 422: {}})
async def get_attachment(
    attachment_id: str, attachments: AttachmentsDep, owner: OwnerDep
) -> AttachmentRead:
    """An attachment's redacted summary (pending while it is read; gone with the conversation),
    for the user who uploaded it; anyone else gets the 404 of an unknown id."""
    return await attachments.get(attachment_id, owner.user_id if owner else None)
