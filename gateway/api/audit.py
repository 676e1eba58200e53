"""The audit trail of a conversation, for admins."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from contracts.ids import CONVERSATION_ID_MAX_LENGTH, CONVERSATION_ID_PATTERN
from gateway.deps import AuditDep, require_admin
from gateway.models import AuditRead

router = APIRouter(prefix="/api/admin/audit", tags=["admin"], dependencies=[Depends(require_admin)])

_UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token."}
}


@router.get("", response_model=AuditRead, responses=_UNAUTHORIZED)
async def conversation_audit(
    audit: AuditDep,
    conversation_id: str = Query(
        max_length=CONVERSATION_ID_MAX_LENGTH, pattern=CONVERSATION_ID_PATTERN
    ),
    limit: int = Query(200, ge=1, le=1000),
) -> AuditRead:
    """Every recorded agent action of one conversation (retrieval, decisions, crawls, tickets,
    purges), oldest first, already redacted.

    The audit stream is not indexed by conversation: this reads at most GATEWAY_AUDIT_SCAN of
    its newest entries, newest first, and keeps the conversation's newest `limit` records.
    `complete` is false when the scan stopped before the oldest entry, so older records of the
    conversation may exist."""
    return await audit.conversation(conversation_id, limit)
