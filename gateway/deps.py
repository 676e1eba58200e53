"""Dependencies the routers use, as ``Annotated`` aliases."""

from __future__ import annotations

import hashlib
import secrets
from typing import Annotated

from fastapi import Depends, Request, WebSocket
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.attachments import AttachmentService
from gateway.config import GatewaySettings
from gateway.conversations import PurgeService
from gateway.documents import DocumentService
from gateway.errors import ApiError, ErrorCode
from gateway.service import TurnService


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


TurnsDep = Annotated[TurnService, Depends(get_turns)]
TurnsWsDep = Annotated[TurnService, Depends(get_turns_ws)]
SettingsDep = Annotated[GatewaySettings, Depends(get_settings)]
DocumentsDep = Annotated[DocumentService, Depends(get_documents)]
AttachmentsDep = Annotated[AttachmentService, Depends(get_attachments)]
AttachmentsWsDep = Annotated[AttachmentService, Depends(get_attachments_ws)]
PurgeDep = Annotated[PurgeService, Depends(get_purge)]


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
    expected = settings.admin_token.get_secret_value()
    presented = credentials.credentials if credentials is not None else ""
    matches = secrets.compare_digest(
        hashlib.sha256(presented.encode()).digest(), hashlib.sha256(expected.encode()).digest()
    )
    if not (expected and credentials is not None and matches):
        raise ApiError(ErrorCode.UNAUTHORIZED, "Admin credentials are missing or not valid.")
