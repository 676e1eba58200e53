"""Anonymous users: the token that lets a client without an account come back to what it made."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import IdentityResolverDep, anonymous_ids
from gateway.models import AnonymousRead

router = APIRouter(prefix="/api/anonymous", tags=["identity"])


@router.post("", response_model=AnonymousRead, status_code=201)
async def new_anonymous_user(identities: IdentityResolverDep) -> AnonymousRead:
    """A new anonymous user and its token. Send the token as `Authorization: Bearer <token>`
    (or `user_id` on `POST /api/chat`, `user` on the WebSocket) to continue a conversation,
    fetch a turn or an attachment; nobody without it can. The chat page gets one in the
    WebSocket's `ready` frame instead."""
    issued = anonymous_ids(identities).issue()
    return AnonymousRead(
        anonymous_token=issued.token, user_id=issued.user_id, expires_at=issued.expires_at
    )
