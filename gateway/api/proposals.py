"""Knowledge-base update proposals: the admins' review queue (approve, reject, export)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from gateway.deps import AdminDep, require_admin
from gateway.identity import Identity
from gateway.models import (
    ProposalApprove,
    ProposalDraftCreate,
    ProposalList,
    ProposalRead,
    ProposalReject,
    ProposalStatus,
)
from gateway.proposals import ProposalService, export_markdown, slug

ADMIN_TOKEN_ACTOR = "admin token"  # noqa: S105 - a label, not a secret  # nosec B105


def get_proposals(request: Request) -> ProposalService:
    service: ProposalService = request.app.state.proposals
    return service


ProposalsDep = Annotated[ProposalService, Depends(get_proposals)]


def acting_admin(admin: Identity) -> str:
    """Who the audit record names: the admin's user id, or "admin token" for the break-glass
    credential (which is no person)."""
    return ADMIN_TOKEN_ACTOR if admin.source == "admin_token" else admin.user_id


router = APIRouter(
    prefix="/api/admin/proposals", tags=["admin"], dependencies=[Depends(require_admin)]
)

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or invalid credentials."},
    403: {"description": "Valid credentials without the admin role."},
    404: {
        "description": "No such proposal (`unknown_proposal`), or no such source "
        "(`unknown_source`)."
    },
}
_DECIDED: dict[int | str, dict[str, Any]] = {
    409: {"description": "The proposal was already approved or rejected (`version_conflict`)."}
}


@router.get("", response_model=ProposalList, responses={401: _ERRORS[401], 403: _ERRORS[403]})
async def list_proposals(
    proposals: ProposalsDep,
    status: Annotated[
        ProposalStatus | None, Query(description="Only proposals in this status.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> ProposalList:
    """Proposals drafted from recurring knowledge gaps, most recently drafted first."""
    return ProposalList(proposals=await proposals.store.listing(status, limit))


@router.get("/{proposal_id}", response_model=ProposalRead, responses=_ERRORS)
async def get_proposal(proposal_id: str, proposals: ProposalsDep) -> ProposalRead:
    """A proposal: the questions asked, the proposed article, its sources, the decision."""
    return await proposals.get(proposal_id)


@router.post(
    "/{proposal_id}/approve", response_model=ProposalRead, responses={**_ERRORS, **_DECIDED}
)
async def approve_proposal(
    proposal_id: str, proposals: ProposalsDep, admin: AdminDep, body: ProposalApprove | None = None
) -> ProposalRead:
    """Ingest the proposed article into the knowledge base (as a Markdown document upload;
    follow it with GET /api/documents/{document_id}). With a `target`, the article also goes
    to that knowledge source as a draft that a person publishes (see `draft`); the approval
    does not wait for it, and neither a source that is down nor a request that could not be
    queued fails it (`draft.status` then says "failed"; ask again with POST .../draft)."""
    target = body.target if body is not None else None
    return await proposals.approve(proposal_id, acting_admin(admin), target)


@router.post(
    "/{proposal_id}/draft",
    response_model=ProposalRead,
    status_code=202,
    responses={
        **_ERRORS,
        409: {"description": "Not approved, or a draft is requested or exists already."},
        503: {"description": "The request could not be queued (`bus_unavailable`): ask again."},
    },
)
async def draft_proposal(
    proposal_id: str, body: ProposalDraftCreate, proposals: ProposalsDep, admin: AdminDep
) -> ProposalRead:
    """Write an approved proposal into a knowledge source as a draft (again, after a failure
    such as a missing permission). Follow it with GET /api/admin/proposals/{proposal_id}."""
    return await proposals.request_draft(proposal_id, acting_admin(admin), body.target)


@router.post(
    "/{proposal_id}/reject", response_model=ProposalRead, responses={**_ERRORS, **_DECIDED}
)
async def reject_proposal(
    proposal_id: str, body: ProposalReject, proposals: ProposalsDep, admin: AdminDep
) -> ProposalRead:
    """Dismiss the proposal, with the reason recorded."""
    return await proposals.reject(proposal_id, acting_admin(admin), body.reason)


@router.get(
    "/{proposal_id}/export",
    response_class=Response,
    responses={**_ERRORS, 200: {"content": {"text/markdown": {}}}},
)
async def export_proposal(proposal_id: str, proposals: ProposalsDep) -> Response:
    """The proposed article as Markdown, ready to paste into a SharePoint page."""
    proposal = await proposals.get(proposal_id)
    return Response(
        export_markdown(proposal),
        media_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{slug(proposal.title)}.md"'},
    )
