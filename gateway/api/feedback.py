"""Ratings of answers."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import TurnsDep
from gateway.models import FeedbackCreate, FeedbackRead

router = APIRouter(prefix="/api/feedback", tags=["feedback"])


@router.post("", response_model=FeedbackRead, status_code=201)
async def record_feedback(feedback: FeedbackCreate, turns: TurnsDep) -> FeedbackRead:
    """Rate an answered turn from 1 to 5, with an optional comment."""
    return await turns.record_feedback(feedback)
