"""Chat: one request per turn over HTTP, or a conversation over a WebSocket.

Both act as one user, the conversation's owner: a user token's subject, or an anonymous user
the gateway issued a token to. A conversation id the caller does not own, whether it exists or
not, gets the same answer: 404 ``unknown_conversation`` over HTTP, a new conversation on the
WebSocket.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError

from contracts.events import new_id
from gateway.attachments import AttachmentService
from gateway.conversations import ConversationIndex
from gateway.deps import (
    AttachmentsDep,
    AttachmentsWsDep,
    ClientIpDep,
    ConversationsDep,
    IdentityResolverDep,
    IdentityResolverWsDep,
    OriginsDep,
    OwnerDep,
    RateLimiterDep,
    SettingsDep,
    TurnsDep,
    TurnsWsDep,
    anonymous_ids,
    owner_of,
    rate_limit_user,
)
from gateway.directory import with_directory_groups
from gateway.errors import STATUS, ApiError, ErrorCode
from gateway.identity import AnonymousToken, Identity, IdentityResolver, owner_identity
from gateway.models import ChatCreate, ChatRead
from gateway.ratelimit import Decision, LimitKind, RateLimiter
from gateway.turns import TurnService

router = APIRouter(tags=["chat"])
log = logging.getLogger("deskpilot.gateway.chat")


@router.post(
    "/api/chat",
    response_model=ChatRead,
    responses={
        401: {"description": "A user or anonymous token was sent and it is not valid."},
        404: {"description": "`conversation_id` names no conversation of the caller's."},
    },
)
async def chat(
    request: ChatCreate,
    turns: TurnsDep,
    attachments: AttachmentsDep,
    conversations: ConversationsDep,
    settings: SettingsDep,
    owner: OwnerDep,
    identities: IdentityResolverDep,
) -> ChatRead:
    """Ask one question and wait for the answer (504 with the turn id if it takes too long).

    The user is the subject of the user token (`Authorization: Bearer <JWT>`), or the
    anonymous user of an anonymous token (from `POST /api/anonymous`, sent as the bearer
    token or as `user_id`). Without either, the caller is a new anonymous user each time: the
    answer comes back, but nobody can continue that conversation or fetch that turn later.
    Leave `conversation_id` out to start a conversation (the answer says its id); to continue
    one, send its id with the same credentials."""
    turn_id = new_id()
    if request.attachments and request.conversation_id is None:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            "Attachments belong to a conversation: send its `conversation_id` too.",
        )
    user = owner_of(identities, owner, request.user_id)
    text = turns.validate_text(
        request.text, attachments=bool(request.attachments) or request.request_ticket
    )
    conversation_id = await conversations.resolve(request.conversation_id, user.user_id)
    if request.attachments:
        await attachments.check_references(request.attachments, conversation_id, user.user_id)
    try:
        return await turns.ask(
            text,
            conversation_id,
            user.user_id,
            turn_id,
            settings.turn_timeout_s,
            attachments=request.attachments,
            request_ticket=request.request_ticket,
            authenticated=user.source == "token",
            groups=user.groups,
        )
    except TimeoutError:
        raise ApiError(
            ErrorCode.TURN_TIMEOUT,
            "The answer is taking longer than expected; fetch it later from "
            f"/api/turns/{turn_id} with the same credentials.",
            turn_id=turn_id,
            conversation_id=conversation_id,
        ) from None


class _Connection:
    """One browser's WebSocket: frames in, a turn task per message, frames out."""

    def __init__(
        self,
        websocket: WebSocket,
        turns: TurnService,
        attachments: AttachmentService,
        conversation_id: str,
        user: Identity,
        frame_limit: Callable[[], Awaitable[Decision]] | None = None,
    ) -> None:
        self.websocket = websocket
        self.turns = turns
        self.attachments = attachments
        self.conversation_id = conversation_id
        self.user = user
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
            await self.attachments.check_references(
                attachments, self.conversation_id, self.user.user_id
            )
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
                    self.user.user_id,
                    turn_id,
                    attachments=attachments,
                    request_ticket=request_ticket,
                    authenticated=self.user.source == "token",
                    groups=self.user.groups,
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
                    progress: dict[str, object] = {
                        "type": "progress",
                        "turn_id": turn_id,
                        "stage": reply.stage,
                    }
                    if reply.detail is not None:  # "writing": the answer so far
                        progress["detail"] = reply.detail
                    if reply.count is not None:  # "crawling": pages read of the budget
                        progress |= {"count": reply.count, "total": reply.total}
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
    conversations: ConversationsDep,
    origins: OriginsDep,
    limiter: RateLimiterDep,
    ip: ClientIpDep,
    conversation_id: str | None = None,
    token: str | None = None,
    user: str | None = None,
) -> None:
    """A conversation: send ``{"type":"message","text":...}``, receive progress and answers.

    The page that opens it must be the gateway's own or one of the configured embedding pages
    (``Origin``, see :mod:`gateway.origins`); any other is refused with 403 before the
    connection opens. ``token`` (optional) is a user token, as in ``Authorization: Bearer`` on
    ``/api/chat``; one that does not verify is refused with 401. Without one, ``user`` is the
    anonymous token the gateway gave this browser before: its anonymous user continues, and a
    missing, expired or forged one makes a new anonymous user. The ``ready`` frame then carries
    ``anonymous_token`` (renewed on every connection; keep it for the next one and send it as
    the bearer token of uploads and turn fetches). ``conversation_id`` continues a conversation
    of this user; any other id (unknown, someone else's, malformed) gets a new conversation,
    whose id the ``ready`` frame says. Each message frame counts against the chat rate limit; a
    frame over it is answered with an ``error`` frame (``rate_limited``, ``retry_after`` in
    seconds) and the connection stays open."""
    try:
        origin = websocket.headers.get("origin")
        if not origins.allows(origin, websocket.headers.get("host")):
            log.warning(
                "websocket origin refused", extra={"origin": origin[:200] if origin else ""}
            )
            raise ApiError(ErrorCode.FORBIDDEN, "This page may not open the Deskpilot chat.")
        # Off the event loop: a JWKS fetch (a new signing key) blocks.
        caller = await run_in_threadpool(identities.caller_of_token, token)
        directory = websocket.app.state.directory
        identity = await with_directory_groups(owner_identity(caller), directory)
        if identity is None and user:
            # An anonymous token that does not verify is not refused: the browser just becomes
            # a new anonymous user (a refused handshake would only make it retry forever).
            identity = _anonymous_user(identities, user)
        issued: AnonymousToken | None = None
        owner = identity
        if identity is None or identity.source == "anonymous":
            issued = anonymous_ids(identities).issue(identity.user_id if identity else None)
            owner = identity or Identity(
                user_id=issued.user_id, authenticated=False, roles=frozenset(), source="anonymous"
            )
        assert owner is not None  # nosec B101 # type narrowing: set on both branches above
        if limiter is not None:
            limited_user = rate_limit_user(identity)
            decision = await limiter.hit(LimitKind.API, limited_user, ip)
            if not decision.allowed:
                raise decision.error()
        try:
            conversation = await _conversation_of(conversations, conversation_id, owner.user_id)
        except RedisError as exc:
            raise ApiError(
                ErrorCode.BUS_UNAVAILABLE,
                "Deskpilot is briefly unavailable; try again.",
                headers={"Retry-After": "1"},
            ) from exc
    except ApiError as exc:
        await _refuse(websocket, exc)
        return
    await websocket.accept()
    connection = _Connection(
        websocket,
        turns,
        attachments,
        conversation,
        owner,
        frame_limit=_frame_limit(limiter, rate_limit_user(owner), ip),
    )
    ready: dict[str, Any] = {"type": "ready", "conversation_id": connection.conversation_id}
    if issued is not None:
        ready |= {"anonymous_token": issued.token, "anonymous_expires_at": issued.expires_at}
    await connection.send(ready)
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


def _anonymous_user(identities: IdentityResolver, anonymous_token: str) -> Identity | None:
    """The anonymous user an anonymous token names, None for anything else."""
    caller = identities.anonymous_caller(anonymous_token)
    return caller.identity if caller.refused is None else None


async def _conversation_of(
    conversations: ConversationIndex, requested: str | None, owner: str
) -> str:
    """The requested conversation when ``owner`` owns it, else a new one of theirs: an id that
    is unknown, someone else's or malformed is answered the same way."""
    if requested is not None and await conversations.owns(requested, owner):
        return requested
    return await conversations.open(owner)


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
