"""Ratings of answers."""

from __future__ import annotations

from fastapi import APIRouter

from gateway.deps import FeedbackDep, IdentityResolverDep, OwnerDep, owner_of
from gateway.models import FeedbackCreate, FeedbackRead

router = APIRouter(prefix="/api/feedback", tags=["feedback"])


@router.post(
    "",
    response_model=FeedbackRead,
    status_code=201,
    responses={
        401: {"description": "A user token was sent and it is not valid."},
        404: {"description": "No turn of the caller's has this id (or it expired)."},
    },
)
async def record_feedback(
    feedback: FeedbackCreate,
    ratings: FeedbackDep,
    owner: OwnerDep,
    identities: IdentityResolverDep,
) -> FeedbackRead:
    """Rate an answered turn of your own from 1 to 5, with an optional comment: with the same
    user token or anonymous token (`Authorization: Bearer`) the turn was sent with; anyone
    else gets the 404 of an unknown turn. Rating the same turn again replaces the earlier
    rating. The rating is stored with the answer's action, category and cited documents; the
    comment is kept, and published on `feedback.recorded`, only once the redactor has removed
    personal and secret data from it, and it is never sent back (the answer says only whether
    one was received)."""
    rater = owner_of(identities, owner, feedback.user_id)
    return await ratings.record(feedback, rater.user_id)
