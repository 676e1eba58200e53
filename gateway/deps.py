"""Dependencies the routers use, as ``Annotated`` aliases."""

from __future__ import annotations

import hashlib
import secrets
from typing import Annotated

from fastapi import Depends, Request, WebSocket
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.attachments import AttachmentService
from gateway.audit import AuditReader
from gateway.config import GatewaySettings, secret_value
from gateway.conversations import PurgeService
from gateway.documents import DocumentService
from gateway.errors import ApiError, ErrorCode
from gateway.identity import Identity, IdentityResolver
from gateway.incidents import IncidentService
from gateway.service import TurnService
from gateway.tickets import TicketReadModel


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


def get_tickets(request: Request) -> TicketReadModel:
    tickets: TicketReadModel = request.app.state.tickets
    return tickets


def get_incidents(request: Request) -> IncidentService:
    service: IncidentService = request.app.state.incidents
    return service


def get_audit(request: Request) -> AuditReader:
    reader: AuditReader = request.app.state.audit
    return reader


def get_identity_resolver_ws(websocket: WebSocket) -> IdentityResolver:
    resolver: IdentityResolver = websocket.app.state.identity
    return resolver


TurnsDep = Annotated[TurnService, Depends(get_turns)]
TurnsWsDep = Annotated[TurnService, Depends(get_turns_ws)]
SettingsDep = Annotated[GatewaySettings, Depends(get_settings)]
DocumentsDep = Annotated[DocumentService, Depends(get_documents)]
AttachmentsDep = Annotated[AttachmentService, Depends(get_attachments)]
AttachmentsWsDep = Annotated[AttachmentService, Depends(get_attachments_ws)]
PurgeDep = Annotated[PurgeService, Depends(get_purge)]
TicketsDep = Annotated[TicketReadModel, Depends(get_tickets)]
IncidentsDep = Annotated[IncidentService, Depends(get_incidents)]
AuditDep = Annotated[AuditReader, Depends(get_audit)]
IdentityResolverWsDep = Annotated[IdentityResolver, Depends(get_identity_resolver_ws)]


_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="DESKPILOT_ADMIN_TOKEN, until identity providers are configured.",
)


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Admin endpoints need ``Authorization: Bearer <DESKPILOT_ADMIN_TOKEN>``. A missing and a
    wrong token get the same 401, and the comparison takes the same time whatever the token
    (digests compared with ``compare_digest``, so not even its length leaks). An empty
    configured token disables admin endpoints."""
    if not _token_matches(settings.admin_token.get_secret_value(), credentials):
        raise ApiError(ErrorCode.UNAUTHORIZED, "Admin credentials are missing or not valid.")


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
    description="Optional: a signed user token (HS256 JWT with `sub` and `exp`). Without one "
    "the caller is anonymous.",
)


def current_identity(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_user_bearer)],
) -> Identity | None:
    """The verified caller, or None (anonymous); 401 for a token that does not verify."""
    resolver: IdentityResolver = request.app.state.identity
    return resolver.resolve_header(request.headers.get("authorization"))


IdentityDep = Annotated[Identity | None, Depends(current_identity)]
