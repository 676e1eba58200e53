"""Turns, for clients that lost their connection mid-turn."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import TurnsDep
from gateway.errors import ApiError, ErrorCode
from gateway.models import TurnRead

router = APIRouter(prefix="/api/turns", tags=["turns"])


@router.get("/{turn_id}", response_model=TurnRead)
async def get_turn(turn_id: str, turns: TurnsDep) -> TurnRead:
    """A turn's status, and its answer once there is one."""
    turn = await turns.store.get(turn_id)
    if turn is None:
        raise ApiError(ErrorCode.UNKNOWN_TURN, f"No turn {turn_id!r} is known (or it expired).")
    return turn
