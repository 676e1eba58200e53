"""Turns, for clients that lost their connection mid-turn."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import OwnerDep, TurnsDep
from gateway.errors import ApiError, ErrorCode
from gateway.models import TurnRead

router = APIRouter(prefix="/api/turns", tags=["turns"])


@router.get(
    "/{turn_id}",
    response_model=TurnRead,
    responses={404: {"description": "No turn of the caller's has this id (or it expired)."}},
)
async def get_turn(turn_id: str, turns: TurnsDep, owner: OwnerDep) -> TurnRead:
    """A turn's status, and its answer once there is one, for the user who sent it (the same
    user token or anonymous token as the message); anyone else gets the 404 of an unknown id."""
    turn = await turns.store.get_owned(turn_id, owner.user_id) if owner else None
    if turn is None:
        raise ApiError(ErrorCode.UNKNOWN_TURN, "No such turn is known (or it expired).")
    return turn
