"""Wires the gateway: FastAPI app, the bus started in its lifespan, the static chat page.

The public app serves no metrics: like every service, the gateway serves them on its own
``DESKPILOT_METRICS_PORT`` listener (contracts/metrics.py), which no public Service or policy
opens, so the scrape needs no credential and the admin token stays with its holders."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts.bus import Bus, create_group
from contracts.heartbeat import Heartbeat
from contracts.metrics import serve_metrics
from contracts.topics import Group
from gateway import analytics, channels, directory, feedback, handlers
from gateway.api import api_router
from gateway.api.config import ConfigService
from gateway.attachments import AttachmentRecords, AttachmentService
from gateway.audit import AuditReader
from gateway.config import GatewaySettings
from gateway.conversations import ConversationIndex, PurgeService
from gateway.documents import DocumentRecords, DocumentService
from gateway.errors import install_error_handlers
from gateway.feedback import FeedbackService
from gateway.identity import (
    IdentityResolver,
    anonymous_ids_from_redis,
    withhold_tokens_in_server_logs,
)
from gateway.incidents import IncidentBoard, IncidentService
from gateway.origins import OriginPolicy
from gateway.proposals import ProposalService, ProposalStore
from gateway.ratelimit import ClientAddress, RateLimiter
from gateway.search import SearchService
from gateway.sources import SourceService
from gateway.tickets import TicketReadModel
from gateway.turns import TurnService, TurnStore
from gateway.uploads import UploadGate

SERVICE = "gateway"
STATIC_DIR = Path(__file__).parent / "static"


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    bus = Bus(settings, SERVICE)
    index = ConversationIndex(
        bus.redis,
        max(settings.turn_ttl_s, settings.attachment_ttl_s),
        claim_ttl_s=settings.conversation_claim_ttl_s,
    )
    recorder = analytics.AnalyticsRecorder(bus.redis, settings.analytics_retention_days)
    store = TurnStore(bus.redis, settings.turn_ttl_s)
    turns = TurnService(bus, store, settings, index, analytics=recorder)
    attachments = AttachmentService(
        bus, turns, AttachmentRecords(bus, index, settings.attachment_ttl_s), settings
    )
    feedback_service = FeedbackService(bus, store, recorder)
    rate_limiter = RateLimiter.from_settings(bus.redis, settings)
    # Where Teams and Slack users' groups come from, and those of users with too many groups
    # for their token.
    readers_directory = directory.build(settings, bus.redis)
    channel_set = channels.build(
        settings, turns, index, bus.redis, feedback_service, rate_limiter, readers_directory
    )
    handlers.register(bus, turns, attachments, channel_set.turns if channel_set else None)
    purge = PurgeService(bus, index, recorder)
    handlers.register_purge(bus, purge)
    documents = DocumentService(bus, DocumentRecords(bus.redis), settings)
    handlers.register_documents(bus, documents)
    tickets = TicketReadModel(bus.redis)
    # The incidents on the bus are read back over MCP only. With MCP off the gateway's group on
    # incident.reported still exists (contracts.topics.SUBSCRIPTIONS): switched on later, the
    # board catches up on the incidents the stream still holds (not on the tickets linked
    # meanwhile: the ticket events were read without it).
    incident_board = (
        IncidentBoard(
            bus.redis,
            resolved_keep_s=settings.incident_resolved_keep_s,
            stale_after_s=settings.incident_stale_after_s,
        )
        if settings.mcp_enabled
        else None
    )
    handlers.register_tickets(bus, tickets, incident_board)
    if incident_board is not None:
        handlers.register_incidents(bus, incident_board)
    incidents = IncidentService(bus)
    proposal_store = ProposalStore(bus.redis)
    handlers.register_proposals(bus, proposal_store)
    analytics.register(bus, recorder)
    # The WebSocket takes its user token in the query string, which uvicorn logs.
    withhold_tokens_in_server_logs()
    identities = IdentityResolver.from_settings(settings)

    mcp_server = None
    if incident_board is not None:
        # Deferred: the mcp SDK is only needed where the MCP server is on.
        from gateway.channels.mcp import server as mcp

        mcp_server = mcp.build(
            mcp.McpServices(
                settings,
                bus,
                turns,
                index,
                tickets,
                incidents,
                incident_board,
                SearchService(bus, turns),
                rate_limiter,
            )
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The reply group exists before the first message is published, so no reply is missed.
        await create_group(bus.redis, turns.reply_to, Group.GATEWAY)
        if identities.anonymous is None:
            identities.anonymous = await anonymous_ids_from_redis(
                bus.redis, settings.anonymous_ttl_s
            )
        await bus.start()
        heartbeat = Heartbeat(bus.redis, SERVICE, settings.node_name, settings.heartbeat_interval_s)
        heartbeat.start()
        metrics_server = serve_metrics(settings, SERVICE)
        try:
            async with AsyncExitStack() as running:
                if mcp_server is not None:
                    await running.enter_async_context(mcp_server.session_manager.run())
                yield
        finally:
            if metrics_server is not None:
                await asyncio.to_thread(metrics_server.close)
            await heartbeat.stop()
            await bus.stop()

    app = FastAPI(
        title="Deskpilot gateway",
        version="0.1.0",
        summary="Chat, feedback, turn and document API of the Deskpilot IT-support assistant.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.directory = readers_directory
    app.state.turns = turns
    app.state.documents = documents
    app.state.attachments = attachments
    app.state.purge = purge
    app.state.sources = SourceService(bus, bus.redis)
    app.state.tickets = tickets
    app.state.proposals = ProposalService(bus, proposal_store, documents)
    handlers.register_drafts(bus, app.state.proposals)
    app.state.incidents = incidents
    app.state.audit = AuditReader(bus.redis, settings.audit_scan)
    app.state.feedback = feedback_service
    feedback.register(bus, app.state.feedback)
    app.state.analytics = analytics.AnalyticsReader(bus.redis, turns.reply_to)
    app.state.runtime_config = ConfigService(bus, settings)
    app.state.identity = identities
    app.state.conversations = index
    app.state.upload_gate = UploadGate(settings, bus.redis)
    # Who may open the chat's WebSocket: the gateway's own pages, the pages that embed it and
    # the origins allowed to call the API (gateway/origins.py).
    app.state.origins = OriginPolicy([*settings.frame_ancestors, *settings.cors_origins])
    app.state.rate_limiter = rate_limiter
    app.state.client_address = ClientAddress(settings.trusted_proxies)
    install_error_handlers(app)
    app.include_router(api_router)
    if mcp_server is not None:
        from gateway.channels.mcp.server import asgi_app

        endpoint = asgi_app(mcp_server, identities, settings, rate_limiter, readers_directory)
        app.router.routes.append(Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]))
    if channel_set is not None:
        for name, value in channel_set.state.items():
            setattr(app.state, name, value)
        for router in channel_set.routers:
            app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    async def chat_page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html")

    @app.get("/admin", include_in_schema=False)
    async def admin_page() -> FileResponse:
        # The page holds no data: it asks for the admin token and calls the admin API with it.
        return FileResponse(STATIC_DIR / "admin.html")

    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            max_age=600,
        )
    # Added last, so it is outermost: CORS preflights and errors get the headers too.
    app.add_middleware(SecurityHeaders, frame_ancestors=settings.frame_ancestors)
    return app


class SecurityHeaders:
    """CSP and the other protective headers on every HTTP response.

    Scripts and everything else load only from the gateway, so text shown in the chat can never
    run as code even if it reached the DOM as markup; style attributes stay allowed (charts and
    progress bars set them). Who may frame the chat is ``GATEWAY_FRAME_ANCESTORS``. The OpenAPI
    pages (Swagger UI and ReDoc load their scripts from a CDN) keep only the other headers.
    """

    OPEN_PATHS = ("/docs", "/redoc")

    def __init__(self, app: ASGIApp, frame_ancestors: list[str]) -> None:
        self.app = app
        ancestors = " ".join(frame_ancestors) or "'none'"
        policy = (
            "default-src 'self'; script-src 'self'; style-src 'self'; "
            "style-src-attr 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "
            "frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
            f"frame-ancestors {ancestors}"
        )
        self.common = [
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"strict-origin-when-cross-origin"),
            (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
        ]
        self.csp = (b"content-security-policy", policy.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = list(self.common)
        if not str(scope.get("path", "")).startswith(self.OPEN_PATHS):
            extra.append(self.csp)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)
