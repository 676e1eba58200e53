"""Dependencies the routers use, as ``Annotated`` aliases."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request, WebSocket
from fastapi.requests import HTTPConnection
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.analytics import AnalyticsReader
from gateway.attachments import AttachmentService
from gateway.audit import AuditReader
from gateway.config import GatewaySettings, secret_value
from gateway.conversations import ConversationIndex, PurgeService
from gateway.directory import with_directory_groups
from gateway.documents import DocumentService
from gateway.errors import ApiError, ErrorCode
from gateway.feedback import FeedbackService
from gateway.identity import (
    AnonymousIds,
    Caller,
    Identity,
    IdentityResolver,
    Role,
    is_anonymous_token,
    owner_identity,
    refuse,
    require_roles,
    user_identity,
)
from gateway.incidents import IncidentService
from gateway.origins import OriginPolicy
from gateway.ratelimit import ClientAddress, RateLimiter, kind_of
from gateway.sources import SourceService
from gateway.tickets import TicketReadModel
from gateway.turns import TurnService
from gateway.uploads import UploadGate


def get_turns(request: Request) -> TurnService:
    service: TurnService = request.app.state.turns
    return service


def get_turns_ws(websocket: WebSocket) -> TurnService:
    service: TurnService = websocket.app.state.turns
    return service


def get_settings(request: Request) -> GatewaySettings:
    settings: GatewaySettings = request.app.state.settings
    return settings


def get_documents(request: Request) -> DocumentService:
    service: DocumentService = request.app.state.documents
    return service


def get_attachments(request: Request) -> AttachmentService:
    service: AttachmentService = request.app.state.attachments
    return service


def get_attachments_ws(websocket: WebSocket) -> AttachmentService:
    service: AttachmentService = websocket.app.state.attachments
    return service


def get_purge(request: Request) -> PurgeService:
    service: PurgeService = request.app.state.purge
    return service


def get_sources(request: Request) -> SourceService:
    service: SourceService = request.app.state.sources
    return service


def get_tickets(request: Request) -> TicketReadModel:
    tickets: TicketReadModel = request.app.state.tickets
    return tickets


def get_incidents(request: Request) -> IncidentService:
    service: IncidentService = request.app.state.incidents
    return service


def get_audit(request: Request) -> AuditReader:
    reader: AuditReader = request.app.state.audit
    return reader


def get_feedback(request: Request) -> FeedbackService:
    service: FeedbackService = request.app.state.feedback
    return service


def get_analytics(request: Request) -> AnalyticsReader:
    reader: AnalyticsReader = request.app.state.analytics
    return reader


def get_identity_resolver(connection: HTTPConnection) -> IdentityResolver:
    resolver: IdentityResolver = connection.app.state.identity
    return resolver


def get_identity_resolver_ws(websocket: WebSocket) -> IdentityResolver:
    resolver: IdentityResolver = websocket.app.state.identity
    return resolver


def get_conversations(connection: HTTPConnection) -> ConversationIndex:
    conversations: ConversationIndex = connection.app.state.conversations
    return conversations


def get_upload_gate(connection: HTTPConnection) -> UploadGate:
    gate: UploadGate = connection.app.state.upload_gate
    return gate


def get_origins(connection: HTTPConnection) -> OriginPolicy:
    policy: OriginPolicy = connection.app.state.origins
    return policy


TurnsDep = Annotated[TurnService, Depends(get_turns)]
TurnsWsDep = Annotated[TurnService, Depends(get_turns_ws)]
SettingsDep = Annotated[GatewaySettings, Depends(get_settings)]
DocumentsDep = Annotated[DocumentService, Depends(get_documents)]
AttachmentsDep = Annotated[AttachmentService, Depends(get_attachments)]
AttachmentsWsDep = Annotated[AttachmentService, Depends(get_attachments_ws)]
PurgeDep = Annotated[PurgeService, Depends(get_purge)]
SourcesDep = Annotated[SourceService, Depends(get_sources)]
TicketsDep = Annotated[TicketReadModel, Depends(get_tickets)]
IncidentsDep = Annotated[IncidentService, Depends(get_incidents)]
AuditDep = Annotated[AuditReader, Depends(get_audit)]
FeedbackDep = Annotated[FeedbackService, Depends(get_feedback)]
AnalyticsDep = Annotated[AnalyticsReader, Depends(get_analytics)]
IdentityResolverWsDep = Annotated[IdentityResolver, Depends(get_identity_resolver_ws)]
IdentityResolverDep = Annotated[IdentityResolver, Depends(get_identity_resolver)]
ConversationsDep = Annotated[ConversationIndex, Depends(get_conversations)]
UploadGateDep = Annotated[UploadGate, Depends(get_upload_gate)]
OriginsDep = Annotated[OriginPolicy, Depends(get_origins)]


def get_caller(connection: HTTPConnection) -> Caller:
    """What the request's ``Authorization`` header amounts to (an identity, a refused token, or
    anonymous), worked out once per request: FastAPI caches it for every dependency asking.
    Synchronous on purpose: a JWKS fetch blocks, so this runs in the thread pool."""
    resolver: IdentityResolver = connection.app.state.identity
    return resolver.caller_of_header(connection.headers.get("authorization"))


CallerDep = Annotated[Caller, Depends(get_caller)]

ROLE_REFUSED_DETAIL = "Admin credentials are missing or not valid."
"""The same 401 for every credential problem on role-gated endpoints (missing, wrong scheme,
wrong admin token, invalid, expired or foreign user token)."""

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="RoleToken",
    description="A user token (JWT) whose roles claim gives the endpoint's role, or "
    "DESKPILOT_ADMIN_TOKEN (break-glass and service credential, admin role).",
)


def require_role(*allowed: Role) -> Callable[..., Awaitable[Identity]]:
    """A dependency admitting callers that hold one of ``allowed`` roles (admin always does):
    a user token whose roles claim maps to one (``GATEWAY_JWT_ROLES_CLAIM``,
    ``GATEWAY_JWT_ROLE_MAP``), or ``DESKPILOT_ADMIN_TOKEN``, the break-glass and service
    credential, which stands for admin and is compared in constant time. No credentials or
    invalid ones of any kind: one 401; valid credentials without the role: 403. The dependency
    returns the caller's :class:`Identity` (``source`` is ``token`` or ``admin_token``), for
    records of who did what."""

    async def dependency(
        caller: CallerDep,
        _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Identity:
        return require_roles(caller, allowed, ROLE_REFUSED_DETAIL)

    return dependency


require_admin = require_role("admin")
"""Admin endpoints (documents, tickets' changes, audit, purge, analytics, configuration,
proposals): a token with the admin role, or DESKPILOT_ADMIN_TOKEN (break-glass/service
credential; an empty configured token accepts nothing)."""
require_technician = require_role("technician")
"""Reading tickets: technicians and admins."""
AdminDep = Annotated[Identity, Depends(require_admin)]
TechnicianDep = Annotated[Identity, Depends(require_technician)]


def _token_matches(expected: str, credentials: HTTPAuthorizationCredentials | None) -> bool:
    """True when a token was presented and equals a non-empty ``expected``, compared in constant
    time (digests, so not even the length leaks)."""
    presented = credentials.credentials if credentials is not None else ""
    matches = secrets.compare_digest(
        hashlib.sha256(presented.encode()).digest(), hashlib.sha256(expected.encode()).digest()
    )
    return bool(expected) and credentials is not None and matches


_incident_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="IncidentToken",
    description="GATEWAY_INCIDENT_TOKEN, given to the status page or monitoring system.",
)


def require_incident_token(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_incident_bearer)],
) -> None:
    """``POST /api/incidents`` needs ``Authorization: Bearer <GATEWAY_INCIDENT_TOKEN>``, checked
    like the admin token; an empty configured token disables it."""
    if not _token_matches(secret_value(settings.incident_token), credentials):
        raise ApiError(ErrorCode.UNAUTHORIZED, "Incident credentials are missing or not valid.")


_user_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="UserToken",
    description="Optional: a signed user token (a JWT from the identity provider, or HS256 "
    "with the shared secret; `sub` and `exp` required), or an anonymous token from POST "
    "/api/anonymous. Without either the caller is a new anonymous user each time.",
)


async def current_identity(
    connection: HTTPConnection,
    caller: CallerDep,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_user_bearer)],
) -> Identity | None:
    """The verified user, or None (anonymous; the admin token is not a user); 401 for a token
    that does not verify."""
    return await with_directory_groups(user_identity(caller), connection.app.state.directory)


IdentityDep = Annotated[Identity | None, Depends(current_identity)]


async def current_owner(
    connection: HTTPConnection,
    caller: CallerDep,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_user_bearer)],
) -> Identity | None:
    """Whose records the caller may read: a user token's subject or an anonymous token's
    user; None without either (the admin token included: it owns nothing); 401 for a token
    that does not verify. A user whose groups did not fit in the token gets the directory's."""
    return await with_directory_groups(owner_identity(caller), connection.app.state.directory)


OwnerDep = Annotated[Identity | None, Depends(current_owner)]


def anonymous_ids(resolver: IdentityResolver) -> AnonymousIds:
    """The gateway's anonymous token issuer; 503 until the gateway has its key."""
    if resolver.anonymous is None:
        raise refuse(Caller(refused="keys_unavailable"))
    return resolver.anonymous


def owner_of(
    resolver: IdentityResolver, owner: Identity | None, anonymous_token: str | None = None
) -> Identity:
    """Who a request acts as: its token's user; else the anonymous token it carries in a body
    field (``user_id``, for clients of the field's first version; anything that is not one of
    the gateway's anonymous tokens there identifies nobody); else a new anonymous user that
    nobody, the caller included, can name again: what it makes can never be read or continued
    by anyone."""
    if owner is not None:
        return owner
    if anonymous_token and is_anonymous_token(anonymous_token):
        identity = owner_identity(resolver.anonymous_caller(anonymous_token))
        if identity is not None:
            return identity
    return Identity(
        user_id=AnonymousIds.new_user_id(),
        authenticated=False,
        roles=frozenset(),
        source="anonymous",
    )


def client_ip(connection: HTTPConnection) -> str | None:
    """The client's address: the socket's peer, or ``X-Forwarded-For`` from trusted proxies."""
    addresses: ClientAddress = connection.app.state.client_address
    peer = connection.client.host if connection.client else None
    return addresses.of(peer, connection.headers.getlist("x-forwarded-for"))


def rate_limit_user(identity: Identity | None) -> str | None:
    """Whose allowance a caller spends: a token's subject, or the admin token's own."""
    if identity is None:
        return None
    return f"{identity.source}:{identity.user_id}"


def get_rate_limiter(connection: HTTPConnection) -> RateLimiter | None:
    limiter: RateLimiter | None = getattr(connection.app.state, "rate_limiter", None)
    return limiter


ClientIpDep = Annotated[str | None, Depends(client_ip)]
RateLimiterDep = Annotated[RateLimiter | None, Depends(get_rate_limiter)]


async def rate_limit(
    connection: HTTPConnection, caller: CallerDep, limiter: RateLimiterDep, ip: ClientIpDep
) -> None:
    """Counts every API request against its user's and its IP's allowance: 429 with
    ``Retry-After`` over either. A refused token counts as anonymous here (the route refuses it
    with 401 itself). WebSocket connections and frames are counted by the chat route."""
    if limiter is None or connection.scope["type"] != "http":
        return
    kind = kind_of(connection.scope["method"], connection.url.path)
    if kind is None:
        return
    decision = await limiter.hit(kind, rate_limit_user(caller.identity), ip)
    if not decision.allowed:
        raise decision.error()
