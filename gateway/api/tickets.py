"""Tickets as the ticketing service reported them, for admins."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from gateway.deps import TicketsDep, require_technician
from gateway.errors import ApiError, ErrorCode
from gateway.models import TicketRead

router = APIRouter(
    prefix="/api/admin/tickets", tags=["tickets"], dependencies=[Depends(require_technician)]
)

_UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or invalid credentials."},
    403: {"description": "Valid credentials without the technician or admin role."},
}


@router.get("", response_model=list[TicketRead], responses=_UNAUTHORIZED)
async def list_tickets(
    tickets: TicketsDep,
    status: str | None = Query(
        None, max_length=64, description="Only tickets in this status (case-insensitive)."
    ),
    user_id: str | None = Query(None, max_length=128, description="Only this user's tickets."),
    limit: int = Query(50, ge=1, le=500),
) -> list[TicketRead]:
    """Tickets newest first (by their last update), as the latest ticket event described them."""
    return await tickets.list(status=status, user_id=user_id, limit=limit)


@router.get(
    "/{key}",
    response_model=TicketRead,
    responses={**_UNAUTHORIZED, 404: {"description": "No ticket with this key was reported."}},
)
async def get_ticket(key: str, tickets: TicketsDep) -> TicketRead:
    """One ticket by its key (e.g. IT-1042)."""
    ticket = await tickets.get(key)
    if ticket is None:
        raise ApiError(ErrorCode.UNKNOWN_TICKET, "No such ticket is known.")
    return ticket
