"""Knowledge sources (Confluence, SharePoint): list them with their last sync, and sync one now."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from contracts.sources import SourceStatus
from gateway.deps import SourcesDep, require_admin
from gateway.models import SyncAccepted

router = APIRouter(
    prefix="/api/admin/sources", tags=["admin"], dependencies=[Depends(require_admin)]
)

_UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token."}
}
_KNOWN: dict[int | str, dict[str, Any]] = {
    **_UNAUTHORIZED,
    404: {"description": "No source of that name is configured."},
}


@router.get("", response_model=list[SourceStatus], responses=_UNAUTHORIZED)
async def list_sources(sources: SourcesDep) -> list[SourceStatus]:
    """Every configured source with its last sync: when, the summary (new, changed, unchanged,
    deleted, failed), why it stopped early if it did, and its documents in the index."""
    return await sources.list()


@router.get("/{name}", response_model=SourceStatus, responses=_KNOWN)
async def get_source(name: str, sources: SourcesDep) -> SourceStatus:
    """One source's status."""
    return await sources.get(name)


@router.post(
    "/{name}/sync",
    response_model=SyncAccepted,
    status_code=202,
    responses=_KNOWN,
)
async def sync_source(name: str, sources: SourcesDep) -> SyncAccepted:
    """Queue a sync of the source now (the first one indexes everything; later ones only what
    changed). Follow it with GET /api/admin/sources/{name}."""
    return SyncAccepted(request_id=await sources.request_sync(name, "admin"))
