"""HTTP and WebSocket routers, one per resource."""

from fastapi import APIRouter, Depends

from gateway.api import (
    admin,
    analytics,
    attachments,
    audit,
    chat,
    config,
    documents,
    feedback,
    health,
    identity,
    incidents,
    proposals,
    sources,
    tickets,
    turns,
)
from gateway.deps import current_owner, rate_limit

# Every API request counts against its user's and IP's rate limits (gateway/ratelimit.py).
api_router = APIRouter(dependencies=[Depends(rate_limit)])
api_router.include_router(chat.router)
api_router.include_router(identity.router)
api_router.include_router(feedback.router)
api_router.include_router(turns.router)
api_router.include_router(documents.router)
# A token that does not verify is refused on attachments as on chat messages.
api_router.include_router(attachments.router, dependencies=[Depends(current_owner)])
api_router.include_router(admin.router)
api_router.include_router(sources.router)
api_router.include_router(tickets.router)
api_router.include_router(audit.router)
api_router.include_router(analytics.router)
api_router.include_router(config.router)
api_router.include_router(proposals.router)
api_router.include_router(incidents.router)
api_router.include_router(health.router)
