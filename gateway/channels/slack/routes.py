"""Slack's request URLs: ``/slack/events``, ``/slack/commands``, ``/slack/interactivity``.

Every request is checked before anything is read from it: its size (``GATEWAY_SLACK_MAX_BODY_
BYTES``, refused with 413 before verification), then its signature (:mod:`.signature`; one
401 whatever was wrong, the reason logged), then that its signature was not seen before (a
replay: 401 as well). Only then is its body parsed. With the Slack channel off (no signing
secret) the routes do not exist (404).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from gateway.channels.http import read_limited
from gateway.channels.slack.adapter import SlackAdapter, parse_json
from gateway.channels.slack.signature import SIGNATURE_HEADER, SignatureRefused, SlackSignature
from gateway.errors import ApiError, ErrorCode

log = logging.getLogger("deskpilot.gateway.slack")

router = APIRouter(prefix="/slack", tags=["slack"], include_in_schema=True)

REFUSED = "The request is not signed by Slack."


class SlackRequest:
    """A verified request: its raw body and the adapter to hand it to."""

    def __init__(self, adapter: SlackAdapter, body: bytes) -> None:
        self.adapter = adapter
        self.body = body


async def _verified(request: Request, *, once: bool) -> SlackRequest:
    # The router is included only when the channel is configured (gateway/app.py).
    adapter: SlackAdapter = request.app.state.slack
    signature: SlackSignature = request.app.state.slack_signature
    body = await read_limited(request, adapter.settings.slack_max_body_bytes)
    try:
        signature.verify(request.headers, body)
    except SignatureRefused as exc:
        log.warning("Slack request refused", extra={"reason": exc.reason})
        raise ApiError(ErrorCode.UNAUTHORIZED, REFUSED) from None
    if once and not await adapter.first_sight(request.headers[SIGNATURE_HEADER]):
        log.warning("Slack request refused", extra={"reason": "replayed"})
        raise ApiError(ErrorCode.UNAUTHORIZED, REFUSED)
    return SlackRequest(adapter, body)


async def verified_event(request: Request) -> SlackRequest:
    """An Events API request: a replay of one is a delivery of the same ``event_id``, which the
    adapter handles once however often it comes (Slack's own retries included: they are
    signed anew, but within a second they may carry the same signature)."""
    return await _verified(request, once=False)


async def verified_once(request: Request) -> SlackRequest:
    """A slash command or a button press: these have no id of their own, so a request whose
    signature was seen before is a replay, refused."""
    return await _verified(request, once=True)


EventDep = Annotated[SlackRequest, Depends(verified_event)]
VerifiedDep = Annotated[SlackRequest, Depends(verified_once)]


@router.post("/events", responses={401: {"description": "Not signed by Slack, or replayed."}})
async def events(slack: EventDep) -> Response:
    """The Events API request URL: URL verification, mentions and direct messages."""
    envelope = parse_json(slack.body)
    if envelope is None:
        raise ApiError(ErrorCode.INVALID_JSON, "The body must be a JSON object.")
    kind = envelope.get("type")
    if kind == "url_verification":
        challenge = envelope.get("challenge")
        if not isinstance(challenge, str) or len(challenge) > 512:
            raise ApiError(ErrorCode.INVALID_REQUEST, "No challenge to answer.")
        return JSONResponse({"challenge": challenge})
    if kind == "event_callback":
        await slack.adapter.on_event(envelope)
    return Response(status_code=200)


@router.post("/commands", responses={401: {"description": "Not signed by Slack, or replayed."}})
async def commands(slack: VerifiedDep) -> dict[str, Any]:
    """The slash command's request URL (``/it``)."""
    form = dict(parse_qsl(slack.body.decode("utf-8", "replace"), keep_blank_values=True))
    return await slack.adapter.on_command(form)


@router.post(
    "/interactivity", responses={401: {"description": "Not signed by Slack, or replayed."}}
)
async def interactivity(slack: VerifiedDep) -> Response:
    """Interactivity's request URL: the buttons of answers."""
    form = dict(parse_qsl(slack.body.decode("utf-8", "replace"), keep_blank_values=True))
    payload = parse_json(form.get("payload", "").encode())
    if payload is None:
        raise ApiError(ErrorCode.INVALID_REQUEST, "No interaction payload.")
    await slack.adapter.on_action(payload)
    return Response(status_code=200)
