"""Attachments: a user attaches a log file or a screenshot to the conversation."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from gateway.deps import AttachmentsDep, IdentityDep
from gateway.identity import anonymous_user_id
from gateway.models import AttachmentRead
from gateway.uploads import read_upload

router = APIRouter(prefix="/api/attachments", tags=["attachments"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    413: {
        "description": "Over GATEWAY_MAX_LOG_BYTES or GATEWAY_MAX_IMAGE_BYTES, or too many pixels."
    },
    415: {
        "description": "Neither a text log nor a PNG, JPEG, GIF, WebP or BMP image (judged by "
        "the bytes, not the name)."
    },
    422: {"description": "No `file` part, an empty file, or an image that cannot be decoded."},
    503: {"description": "The bus is unavailable; nothing was stored."},
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
    request: Request, attachments: AttachmentsDep, identity: IdentityDep
) -> AttachmentRead:
    """Attach a file (multipart `file`, with the chat's `conversation_id`): it is read (log
    lines or OCR) and redacted, and the answer shows the redacted excerpt and the error
    signatures found. Reference its `id` in the next chat message's `attachments`."""
    upload = await read_upload(request, attachments.max_bytes, "attachment")
    conversation_id = upload.fields.get("conversation_id") or None
    if conversation_id is not None:
        conversation_id = conversation_id[:128]
    user_id = identity.user_id if identity else anonymous_user_id(upload.fields.get("user_id"))
    return await attachments.submit(upload, conversation_id, user_id)


@router.get("/{attachment_id}", response_model=AttachmentRead, responses={404: {}, 422: {}})
async def get_attachment(attachment_id: str, attachments: AttachmentsDep) -> AttachmentRead:
    """An attachment's redacted summary (pending while it is read; gone with the conversation)."""
    return await attachments.get(attachment_id)
