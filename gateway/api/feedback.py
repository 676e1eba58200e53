"""Ratings of answers."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import FeedbackDep
from gateway.models import FeedbackCreate, FeedbackRead

router = APIRouter(prefix="/api/feedback", tags=["feedback"])


@router.post(
    "",
    response_model=FeedbackRead,
    status_code=201,
    responses={404: {"description": "No such turn (or it expired)."}},
)
async def record_feedback(feedback: FeedbackCreate, ratings: FeedbackDep) -> FeedbackRead:
    """Rate an answered turn from 1 to 5, with an optional comment. The rating is stored with
    the answer's action, category and cited documents, and published on `feedback.recorded`;
    rating the same turn again replaces the earlier rating."""
    return await ratings.record(feedback)
