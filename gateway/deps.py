"""Dependencies the routers use, as ``Annotated`` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, WebSocket

from gateway.config import GatewaySettings
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


TurnsDep = Annotated[TurnService, Depends(get_turns)]
TurnsWsDep = Annotated[TurnService, Depends(get_turns_ws)]
SettingsDep = Annotated[GatewaySettings, Depends(get_settings)]
