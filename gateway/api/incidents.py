"""Incidents reported by status pages and monitoring systems."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from gateway.deps import IncidentsDep, require_incident_token
from gateway.models import IncidentAccepted, IncidentCreate

router = APIRouter(
    prefix="/api/incidents", tags=["incidents"], dependencies=[Depends(require_incident_token)]
)


@router.post(
    "",
    response_model=IncidentAccepted,
    status_code=202,
    responses={
        401: {"description": "Missing or wrong GATEWAY_INCIDENT_TOKEN (or none configured)."},
        422: {"description": "The body is not a valid incident."},
    },
)
async def report_incident(report: IncidentCreate, incidents: IncidentsDep) -> IncidentAccepted:
    """Report a new or changed incident. Users whose problem matches it are told about it and
    matching tickets are linked to it; send it again with the same `id` when it changes, and
    with `resolved: true` when it is over."""
    return await incidents.report(report)
