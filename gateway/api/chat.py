"""Chat: one request per turn over HTTP, or a conversation over a WebSocket."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from contracts.events import new_id
from gateway.attachments import AttachmentService
from gateway.deps import (
    AttachmentsDep,
    AttachmentsWsDep,
    ClientIpDep,
    IdentityDep,
    IdentityResolverWsDep,
    RateLimiterDep,
    SettingsDep,
    TurnsDep,
    TurnsWsDep,
    rate_limit_user,
)
from gateway.errors import STATUS, ApiError, ErrorCode
from gateway.identity import Identity, anonymous_user_id
from gateway.models import ChatCreate, ChatRead
from gateway.ratelimit import Decision, LimitKind, RateLimiter
from gateway.service import TurnService

router = APIRouter(tags=["chat"])
log = logging.getLogger("deskpilot.gateway.chat")


@router.post(
    "/api/chat",
    response_model=ChatRead,
    responses={401: {"description": "A user token was sent and it is not valid."}},
)
async def chat(
    request: ChatCreate,
    turns: TurnsDep,
    attachments: AttachmentsDep,
    settings: SettingsDep,
    identity: IdentityDep,
) -> ChatRead:
    """Ask one question and wait for the answer (504 with the turn id if it takes too long).

    With a valid user token (`Authorization: Bearer <JWT>`) the token's subject is the user,
    whatever `user_id` says; without one `user_id` is the browser's anonymous id (letters,
    digits, `-`, `_`; at most 64) and the user is `anon:<user_id>`, never authenticated."""
    turn_id = new_id()
    if request.attachments:
        if request.conversation_id is None:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "Attachments belong to a conversation: send its `conversation_id` too.",
            )
        await attachments.check_references(request.attachments, request.conversation_id)
    async with turns.listen(turn_id) as replies:
        await turns.submit(
            request.text,
            request.conversation_id,
            identity.user_id if identity else anonymous_user_id(request.user_id),
            turn_id,
            attachments=request.attachments,
            request_ticket=request.request_ticket,
            authenticated=identity is not None,
        )
        try:
            async with asyncio.timeout(settings.turn_timeout_s):
                while True:
                    reply = await replies.get()
                    if reply.kind == "answer":
                        return await turns.answer_of(reply)
        except TimeoutError:
            raise ApiError(
                ErrorCode.TURN_TIMEOUT,
                "The answer is taking longer than expected; fetch it later from "
                f"/api/turns/{turn_id}.",
                turn_id=turn_id,
            ) from None


class _Connection:
    """One browser's WebSocket: frames in, a turn task per message, frames out."""

    def __init__(
        self,
        websocket: WebSocket,
        turns: TurnService,
        attachments: AttachmentService,
        conversation_id: str,
        identity: Identity | None = None,
        user_id: str | None = None,
        frame_limit: Callable[[], Awaitable[Decision]] | None = None,
    ) -> None:
        self.websocket = websocket
        self.turns = turns
        self.attachments = attachments
        self.conversation_id = conversation_id
        self.identity = identity
        self.user_id = identity.user_id if identity else user_id
        self.frame_limit = frame_limit
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, frame: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.websocket.send_json(frame)

    async def error(self, code: ErrorCode, detail: str, **refs: str | None) -> None:
        """An error frame; ``refs`` (turn_id, client_id) say which message it is about."""
        extra = {key: value for key, value in refs.items() if value}
        await self.send({"type": "error", "error_code": code.value, "detail": detail, **extra})

    async def on_frame(self, raw: str) -> None:
        try:
            frame = json.loads(raw)
        except ValueError:
            await self.error(ErrorCode.INVALID_JSON, "Frames must be JSON objects.")
            return
        if self.frame_limit is not None:
            decision = await self.frame_limit()
            if not decision.allowed:
                # The connection stays open: the page may send again after retry_after seconds.
                limited = decision.error()
                ref = frame.get("client_id") if isinstance(frame, dict) else None
                await self.send(
                    {"type": "error", "error_code": limited.code.value, "detail": limited.detail}
                    | {"retry_after": decision.retry_after_s}
                    | ({"client_id": ref} if isinstance(ref, str) and 0 < len(ref) <= 64 else {})
                )
                return
        if not isinstance(frame, dict) or frame.get("type") != "message":
            await self.error(ErrorCode.INVALID_REQUEST, 'Send {"type": "message", "text": "..."}.')
            return
        client_id = frame.get("client_id")
        if not (isinstance(client_id, str) and 0 < len(client_id) <= 64):
            client_id = None
        text = frame.get("text")
        attachments = frame.get("attachments", [])
        request_ticket = frame.get("request_ticket", False)
        if text is None and (attachments or request_ticket):
            text = ""
        if not isinstance(text, str):
            await self.error(
                ErrorCode.INVALID_REQUEST, "`text` must be a string.", client_id=client_id
            )
            return
        if not (
            isinstance(attachments, list)
            and all(isinstance(item, str) for item in attachments)
            and isinstance(request_ticket, bool)
        ):
            await self.error(
                ErrorCode.INVALID_REQUEST,
                "`attachments` must be a list of attachment ids and `request_ticket` a boolean.",
                client_id=client_id,
            )
            return
        try:
            text = self.turns.validate_text(text, attachments=bool(attachments) or request_ticket)
            await self.attachments.check_references(attachments, self.conversation_id)
        except ApiError as exc:
            await self.error(exc.code, exc.detail, client_id=client_id)
            return
        task = asyncio.create_task(self.run_turn(text, client_id, attachments, request_ticket))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run_turn(
        self,
        text: str,
        client_id: str | None,
        attachments: list[str] | None = None,
        request_ticket: bool = False,
    ) -> None:
        """Submit one message and forward its progress and answer to the socket.

        ``client_id``, when the page sent one, is echoed in ``accepted`` and ``error`` frames so
        the page can match them to its messages even when several are in flight.
        """
        turn_id = new_id()
        async with self.turns.listen(turn_id) as replies:
            try:
                await self.turns.submit(
                    text,
                    self.conversation_id,
                    self.user_id,
                    turn_id,
                    attachments=attachments,
                    request_ticket=request_ticket,
                    authenticated=self.identity is not None,
                )
            except ApiError as exc:
                await self.error(exc.code, exc.detail, client_id=client_id)
                return
            accepted = {"type": "accepted", "turn_id": turn_id}
            await self.send(accepted | ({"client_id": client_id} if client_id else {}))
            await self.send({"type": "progress", "turn_id": turn_id, "stage": "redacting"})
            while True:
                reply = await replies.get()
                if reply.kind == "progress":
                    progress = {"type": "progress", "turn_id": turn_id, "stage": reply.stage}
                    if reply.detail is not None:  # "writing": the answer so far
                        progress["detail"] = reply.detail
                    await self.send(progress)
                    continue
                try:
                    answer = await self.turns.answer_of(reply)
                except ApiError as exc:
                    await self.error(exc.code, exc.detail, turn_id=turn_id, client_id=client_id)
                    return
                await self.send({"type": "answer", **answer.model_dump(mode="json")})
                return

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


@router.websocket("/ws/chat")
async def chat_socket(
    websocket: WebSocket,
    turns: TurnsWsDep,
    attachments: AttachmentsWsDep,
    identities: IdentityResolverWsDep,
    limiter: RateLimiterDep,
    ip: ClientIpDep,
    conversation_id: str | None = None,
    token: str | None = None,
    user: str | None = None,
) -> None:
    """A conversation: send ``{"type":"message","text":...}``, receive progress and answers.

    ``token`` (optional) is a user token, as in ``Authorization: Bearer`` on ``/api/chat``; one
    that does not verify is refused before the connection opens. ``user`` is the page's
    per-browser anonymous id (letters, digits, ``-``, ``_``; at most 64): without a token the
    user is ``anon:<user>``, never authenticated, like ``user_id`` on ``/api/chat``. Each
    message frame counts against the chat rate limit; a frame over it is answered with an
    ``error`` frame (``rate_limited``, ``retry_after`` in seconds) and the connection stays
    open."""
    try:
        # Off the event loop: a JWKS fetch (a new signing key) blocks.
        identity = await run_in_threadpool(identities.resolve_token, token)
        if limiter is not None:
            decision = await limiter.hit(LimitKind.API, rate_limit_user(identity), ip)
            if not decision.allowed:
                raise decision.error()
    except ApiError as exc:
        await _refuse(websocket, exc)
        return
    await websocket.accept()
    if conversation_id and (len(conversation_id) > 128 or not conversation_id.isascii()):
        conversation_id = None
    anonymous = anonymous_user_id(user)
    connection = _Connection(
        websocket,
        turns,
        attachments,
        conversation_id or new_id(),
        identity,
        anonymous,
        frame_limit=_frame_limit(limiter, rate_limit_user(identity) or anonymous, ip),
    )
    await connection.send({"type": "ready", "conversation_id": connection.conversation_id})
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            raw = message.get("text")
            if raw is None:
                await connection.error(ErrorCode.INVALID_JSON, "Frames must be JSON text.")
                continue
            await connection.on_frame(raw)
    except WebSocketDisconnect:
        pass
    finally:
        # The turns go on: answers are stored and can be fetched from /api/turns/{turn_id}.
        await connection.close()


def _frame_limit(
    limiter: RateLimiter | None, user: str | None, ip: str | None
) -> Callable[[], Awaitable[Decision]] | None:
    """Each frame of a connection counts as a chat message of its user (a token's subject or the
    browser's ``anon:`` id) and IP."""
    if limiter is None:
        return None

    async def hit() -> Decision:
        return await limiter.hit(LimitKind.CHAT, user, ip)

    return hit


async def _refuse(websocket: WebSocket, error: ApiError) -> None:
    """Refuse the handshake: an HTTP error response where the server supports it (the ASGI
    denial-response extension), else a policy-violation close (the browser sees a failed
    handshake either way)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        headers = dict(error.headers)
        if error.code is ErrorCode.UNAUTHORIZED:
            headers["WWW-Authenticate"] = "Bearer"
        response = JSONResponse(error.payload(), status_code=STATUS[error.code], headers=headers)
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=1008, reason=error.detail)
