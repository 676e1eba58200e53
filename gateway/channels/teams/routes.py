"""The bot's messaging endpoint: ``POST /teams/messages``.

The body is read up to ``GATEWAY_TEAMS_MAX_BODY_BYTES`` (413 beyond), its ``serviceUrl`` must
start with one of ``GATEWAY_TEAMS_SERVICE_URL_PREFIXES``, and the Bot Framework token must verify
(:mod:`.auth`; one 401 whatever was wrong, the reason logged; 503 when the signing keys cannot be
fetched, so the Bot Framework tries again). Only then is the activity handled.
"""

from __future__ import annotations

import json
import logging

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from gateway.channels.http import read_limited
from gateway.channels.teams.adapter import TeamsAdapter
from gateway.channels.teams.auth import BotFrameworkAuth
from gateway.errors import ApiError, ErrorCode
from gateway.identity import InvalidToken

log = logging.getLogger("deskpilot.gateway.teams")

router = APIRouter(prefix="/teams", tags=["teams"])

REFUSED = "The request is not from the Bot Framework."


@router.post(
    "/messages",
    responses={
        401: {"description": "No valid Bot Framework token for this activity."},
        413: {"description": "The activity is too large."},
    },
)
async def messages(request: Request) -> Response:
    """Activities from Teams (through the Bot Framework)."""
    adapter: TeamsAdapter = request.app.state.teams
    auth: BotFrameworkAuth = request.app.state.teams_auth
    body = await read_limited(request, adapter.settings.teams_max_body_bytes)
    try:
        activity = json.loads(body)
    except ValueError:
        activity = None
    service_url = activity.get("serviceUrl") if isinstance(activity, dict) else None
    if not isinstance(service_url, str) or not service_url.startswith(
        tuple(adapter.settings.teams_service_url_prefixes)
    ):
        # Not even a plausible activity: refused like a bad token, nothing said about why.
        log.warning("Teams request refused", extra={"reason": "service_url"})
        raise ApiError(ErrorCode.UNAUTHORIZED, REFUSED)
    assert isinstance(activity, dict)  # nosec B101 # type narrowing: service_url came from it
    try:
        channel = activity.get("channelId")
        await run_in_threadpool(
            auth.verify,
            request.headers.get("authorization"),
            service_url,
            channel if isinstance(channel, str) else "",
        )
    except InvalidToken as exc:
        log.warning("Teams request refused", extra={"reason": exc.kind})
        if exc.kind == "keys_unavailable":
            raise ApiError(
                ErrorCode.IDENTITY_UNAVAILABLE,
                "The Bot Framework's keys cannot be read right now.",
                headers={"Retry-After": "5"},
            ) from None
        raise ApiError(ErrorCode.UNAUTHORIZED, REFUSED) from None
    await adapter.on_activity(activity)
    return Response(status_code=200)
