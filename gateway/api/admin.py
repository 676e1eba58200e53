"""Admin operations on conversations: purge everything kept of one."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path

from contracts.ids import CONVERSATION_ID_MAX_LENGTH, CONVERSATION_ID_PATTERN
from gateway.deps import PurgeDep, require_admin
from gateway.models import PurgeAccepted

router = APIRouter(prefix="/api/admin", tags=["admin"], dependencies=[Depends(require_admin)])


@router.delete(
    "/conversations/{conversation_id}",
    response_model=PurgeAccepted,
    status_code=202,
    responses={401: {"description": "Missing or wrong admin token."}},
)
async def purge_conversation(
    purge: PurgeDep,
    conversation_id: str = Path(
        max_length=CONVERSATION_ID_MAX_LENGTH, pattern=CONVERSATION_ID_PATTERN
    ),
) -> PurgeAccepted:
    """Delete every trace of a conversation: turns, answers, ratings, attachments, memory and
    placeholder numbers, in every service. Tickets stay (technicians own them)."""
    return PurgeAccepted(purge_id=await purge.request(conversation_id, "admin"))
