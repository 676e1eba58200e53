"""Support analytics for admins."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from gateway.analytics import MAX_DAYS
from gateway.deps import AnalyticsDep, require_admin
from gateway.errors import ApiError, ErrorCode
from gateway.models import AnalyticsRead

router = APIRouter(
    prefix="/api/admin/analytics", tags=["admin"], dependencies=[Depends(require_admin)]
)

DEFAULT_DAYS = 7

_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token."},
    422: {"description": "A date that is not ISO 8601, `from` after `to`, or a longer period."},
}


@router.get("", response_model=AnalyticsRead, response_model_by_alias=True, responses=_RESPONSES)
async def analytics(
    reader: AnalyticsDep,
    from_: Annotated[
        date | None,
        Query(
            alias="from",
            description="First day (UTC, ISO 8601 date such as 2026-03-01); default six days "
            "before `to`.",
        ),
    ] = None,
    to: Annotated[
        date | None, Query(description="Last day (UTC), included; default today.")
    ] = None,
) -> AnalyticsRead:
    """Deflection and escalation rates (with reasons), CSAT, top intents and categories,
    unanswered topics, crawl statistics, answer latency p50/p95, consumer lag and dead letters,
    and a daily series, for whole UTC days from `from` to `to` (at most 366 days). Each
    figure's definition is in `definitions`."""
    last = to or datetime.now(UTC).date()
    first = from_ or last - timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        raise ApiError(ErrorCode.INVALID_REQUEST, "`from` must not be after `to`.")
    if (last - first).days + 1 > MAX_DAYS:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"The period is longer than {MAX_DAYS} days.")
    return await reader.report(first, last)
