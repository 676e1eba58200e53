"""A local Slack for tests: the Web API the gateway calls, and the signed requests Slack sends.

Served over real HTTP on loopback (:mod:`tests.support.served`), it follows Slack's documented
shapes:

* Web API methods under ``/api/``: ``chat.postMessage``, ``chat.update``,
  ``chat.postEphemeral`` and ``users.info``, taking a JSON body, a form body or query
  parameters, authenticated by ``Authorization: Bearer <bot token>``. Success is HTTP 200 with
  ``{"ok": true, ...}``; failures are HTTP 200 with ``{"ok": false, "error": <code>}``
  (``not_authed``, ``invalid_auth``, ``channel_not_found``, ``message_not_found``,
  ``user_not_found``, ``no_text``, ``invalid_blocks``), except rate limiting: HTTP 429 with
  ``Retry-After`` (seconds) and ``{"ok": false, "error": "ratelimited"}``
  (:meth:`FakeSlack.rate_limit` makes the next calls of a method limited). Blocks are checked
  against Block Kit's limits (50 blocks, 3000 characters of section text, 10 context elements,
  75 characters of button text, 2000 of a button's value, unique block ids).
* ``response_url`` hooks under ``/hooks/``: what slash commands are answered through.
* The other direction, Slack calling the app: :meth:`FakeSlack.send` signs a body as Slack
  does (``v0`` HMAC-SHA256 of ``v0:<timestamp>:<body>`` under the signing secret, headers
  ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature``) and posts it; :meth:`mention`,
  :meth:`direct_message`, :meth:`command` and :meth:`press` build the Events API envelope
  (``event_callback``), the slash command's form and the ``block_actions`` payload.

What the app posted is kept in :attr:`FakeSlack.messages` (by channel and ``ts``, updated in
place by ``chat.update``), :attr:`ephemerals` and :attr:`responses`.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.support.served import ServedFake

TEAM = "T0DESKPLT"
BOT_USER = "U0BOTUSER"
APP_ID = "A0DESKPLT"
BOT_TOKEN = "xoxb-test-0123456789-deskpilot"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@dataclass
class Posted:
    """A message the app posted (``chat.postMessage``), as it stands after any update."""

    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    updates: int = 0
    answered_at: float | None = None
    """``time.perf_counter()`` when the message first carried blocks (an answer)."""


@dataclass
class SlackUser:
    id: str
    email: str | None
    name: str = "someone"
    deleted: bool = False
    is_bot: bool = False


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class BlocksInvalid(Exception):
    pass


def check_blocks(blocks: object) -> None:
    """Raise :class:`BlocksInvalid` where Block Kit would answer ``invalid_blocks``."""
    if not isinstance(blocks, list) or len(blocks) > 50:
        raise BlocksInvalid("at most 50 blocks")
    ids: set[str] = set()
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") not in {
            "section",
            "context",
            "actions",
            "divider",
            "header",
        }:
            raise BlocksInvalid("unknown block")
        block_id = block.get("block_id")
        if block_id is not None:
            if block_id in ids or len(block_id) > 255:
                raise BlocksInvalid("block_id")
            ids.add(block_id)
        if block["type"] == "section":
            text = block.get("text", {}).get("text", "")
            if not 1 <= len(text) <= 3000:
                raise BlocksInvalid("section text length")
        if block["type"] == "context" and not 1 <= len(block.get("elements", [])) <= 10:
            raise BlocksInvalid("context elements")
        if block["type"] == "actions":
            elements = block.get("elements", [])
            if not 1 <= len(elements) <= 25:
                raise BlocksInvalid("actions elements")
            for element in elements:
                if len(element.get("text", {}).get("text", "")) > 75:
                    raise BlocksInvalid("button text")
                if len(element.get("value", "")) > 2000 or len(element.get("action_id", "")) > 255:
                    raise BlocksInvalid("button value")


class FakeSlack(ServedFake):
    """Slack, as far as the gateway's channel sees it. Use as a context manager."""

    def __init__(
        self,
        *,
        signing_secret: str = SIGNING_SECRET,
        bot_token: str = BOT_TOKEN,
        team: str = TEAM,
    ) -> None:
        self.signing_secret = signing_secret
        self.bot_token = bot_token
        self.team = team
        self.users: dict[str, SlackUser] = {}
        self.channels: set[str] = set()
        self.messages: dict[tuple[str, str], Posted] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.limited: dict[str, list[int]] = {}
        """Per method, the Retry-After of each coming call to answer 429."""
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self.gateway_url = ""

    # -- setup ---------------------------------------------------------------------------------

    def add_user(self, user: str, email: str | None, **more: Any) -> SlackUser:
        found = SlackUser(user, email, **more)
        self.users[user] = found
        return found

    def add_channel(self, channel: str) -> str:
        self.channels.add(channel)
        return channel

    def rate_limit(self, method: str, *retry_after_s: int) -> None:
        """The next ``len(retry_after_s)`` calls of ``method`` answer 429 with these waits."""
        with self._lock:
            self.limited.setdefault(method, []).extend(retry_after_s)

    def next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    @property
    def api_url(self) -> str:
        return self.origin + "/api/"

    @property
    def hooks_prefix(self) -> str:
        return self.origin + "/hooks/"

    # -- what the app posted -------------------------------------------------------------------

    def thread(self, channel: str, thread_ts: str | None) -> list[Posted]:
        """The app's messages in a thread (``None``: top level of the channel), oldest first."""
        with self._lock:
            found = [m for m in self.messages.values() if m.channel == channel]
        return sorted((m for m in found if m.thread_ts == thread_ts), key=lambda m: float(m.ts))

    # -- the Web API ---------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/{method}", self._api, methods=["GET", "POST"]),
                Route("/hooks/{hook}", self._hook, methods=["POST"]),
            ]
        )

    async def _args(self, request: Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query_params)
        body = await request.body()
        content_type = request.headers.get("content-type", "")
        if body and content_type.startswith("application/json"):
            loaded = json.loads(body)
            if isinstance(loaded, dict):
                args |= loaded
        elif body:
            args |= dict(parse_qsl(body.decode()))
            if isinstance(args.get("blocks"), str):
                args["blocks"] = json.loads(args["blocks"])
        return args

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        with self._lock:
            self.calls.append(method)
            waits = self.limited.get(method)
            wait = waits.pop(0) if waits else None
        if wait is not None:
            return JSONResponse(
                {"ok": False, "error": "ratelimited"},
                status_code=429,
                headers={"Retry-After": str(wait)},
            )
        auth = request.headers.get("authorization", "")
        if not auth:
            return _error("not_authed")
        if not hmac.compare_digest(auth, f"Bearer {self.bot_token}"):
            return _error("invalid_auth")
        args = await self._args(request)
        handler = {
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._ephemeral,
            "users.info": self._users_info,
        }.get(method)
        if handler is None:
            return _error("unknown_method")
        return handler(args)

    def _post_message(self, args: dict[str, Any]) -> Response:
        channel = str(args.get("channel", ""))
        if channel not in self.channels:
            return _error("channel_not_found")
        text, blocks = args.get("text"), args.get("blocks")
        if not text and not blocks:
            return _error("no_text")
        if text and len(str(text)) > 40_000:
            return _error("msg_too_long")
        if blocks is not None:
            try:
                check_blocks(blocks)
            except BlocksInvalid:
                return _error("invalid_blocks")
        ts = self.next_ts()
        thread_ts = args.get("thread_ts") or None
        posted = Posted(channel, ts, str(text or ""), thread_ts, list(blocks or []))
        posted.answered_at = time.perf_counter() if blocks else None
        with self._lock:
            self.messages[(channel, ts)] = posted
        return JSONResponse(
            {"ok": True, "channel": channel, "ts": ts, "message": {"text": posted.text, "ts": ts}}
        )

    def _update(self, args: dict[str, Any]) -> Response:
        channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
        if channel not in self.channels:
            return _error("channel_not_found")
        with self._lock:
            posted = self.messages.get((channel, ts))
        if posted is None:
            return _error("message_not_found")
        text, blocks = args.get("text"), args.get("blocks")
        if not text and not blocks:
            return _error("no_text")
        if blocks:
            try:
                check_blocks(blocks)
            except BlocksInvalid:
                return _error("invalid_blocks")
        with self._lock:
            posted.text = str(text or "")
            posted.blocks = list(blocks or [])
            posted.updates += 1
            if blocks and posted.answered_at is None:
                posted.answered_at = time.perf_counter()
        return JSONResponse({"ok": True, "channel": channel, "ts": ts, "text": posted.text})

    def _ephemeral(self, args: dict[str, Any]) -> Response:
        channel, user = str(args.get("channel", "")), str(args.get("user", ""))
        if channel not in self.channels:
            return _error("channel_not_found")
        if user not in self.users:
            return _error("user_not_in_channel")
        with self._lock:
            self.ephemerals.append({"channel": channel, "user": user, "text": args.get("text")})
        return JSONResponse({"ok": True, "message_ts": self.next_ts()})

    def _users_info(self, args: dict[str, Any]) -> Response:
        found = self.users.get(str(args.get("user", "")))
        if found is None:
            return _error("user_not_found")
        profile: dict[str, Any] = {"real_name": found.name}
        if found.email is not None:
            profile["email"] = found.email
        return JSONResponse(
            {
                "ok": True,
                "user": {
                    "id": found.id,
                    "team_id": self.team,
                    "name": found.name,
                    "deleted": found.deleted,
                    "is_bot": found.is_bot,
                    "profile": profile,
                },
            }
        )

    async def _hook(self, request: Request) -> Response:
        body = json.loads(await request.body())
        if "blocks" in body:
            try:
                check_blocks(body["blocks"])
            except BlocksInvalid:
                return PlainTextResponse("invalid_blocks", status_code=400)
        with self._lock:
            self.responses.append({"hook": request.path_params["hook"], **body})
        return PlainTextResponse("ok")

    # -- Slack calling the app -----------------------------------------------------------------

    def send(
        self,
        path: str,
        body: bytes,
        content_type: str,
        *,
        timestamp: int | None = None,
        secret: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Post ``body`` to the gateway's ``path`` signed as Slack signs it (``secret`` and
        ``timestamp`` to forge or age the signature)."""
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signed = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": sign(secret or self.signing_secret, stamp, body),
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        }
        return httpx.post(
            self.gateway_url + path, content=body, headers=signed | (headers or {}), timeout=30
        )

    def envelope(self, event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
        """The Events API's ``event_callback`` around ``event``."""
        return {
            "token": "verification-token-unused",
            "team_id": self.team,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or "Ev" + uuid.uuid4().hex[:10].upper(),
            "event_time": int(time.time()),
            "authorizations": [{"team_id": self.team, "user_id": BOT_USER, "is_bot": True}],
            "is_ext_shared_channel": False,
        }

    def send_event(
        self, envelope: dict[str, Any], *, retry_num: int | None = None, **kwargs: Any
    ) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}) or {})
        if retry_num is not None:
            headers |= {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        body = json.dumps(envelope).encode()
        return self.send("/slack/events", body, "application/json", headers=headers, **kwargs)

    def _message(
        self, kind: str, user: str, channel: str, text: str, thread_ts: str | None, **more: str
    ) -> dict[str, Any]:
        ts = self.next_ts()
        event: dict[str, Any] = {"type": kind, "user": user, "text": text, "ts": ts}
        event |= {"channel": channel, "event_ts": ts, **more}
        if thread_ts:
            event["thread_ts"] = thread_ts
        return self.envelope(event)

    def mention(
        self, user: str, channel: str, text: str, *, thread_ts: str | None = None
    ) -> dict[str, Any]:
        """An ``app_mention`` event envelope: ``user`` wrote ``@Deskpilot text`` in ``channel``."""
        return self._message("app_mention", user, channel, f"<@{BOT_USER}> {text}", thread_ts)

    def direct_message(
        self, user: str, channel: str, text: str, *, thread_ts: str | None = None
    ) -> dict[str, Any]:
        """A ``message`` event in the app's DM ``channel`` (``channel_type`` ``im``)."""
        return self._message("message", user, channel, text, thread_ts, channel_type="im")

    def command(self, user: str, channel: str, text: str, **kwargs: Any) -> httpx.Response:
        """``/it text`` typed by ``user`` in ``channel``."""
        form = {
            "token": "verification-token-unused",
            "team_id": self.team,
            "team_domain": "northwind",
            "channel_id": channel,
            "channel_name": "it-help",
            "user_id": user,
            "user_name": self.users[user].name if user in self.users else "someone",
            "command": "/it",
            "text": text,
            "api_app_id": APP_ID,
            "response_url": self.hooks_prefix + "commands-" + uuid.uuid4().hex[:8],
            "trigger_id": f"{int(time.time())}.{uuid.uuid4().int % 10**12}",
        } | kwargs.pop("form", {})
        body = urlencode(form).encode()
        return self.send("/slack/commands", body, "application/x-www-form-urlencoded", **kwargs)

    def press(
        self, user: str, message: Posted, action_id: str, value: str, **kwargs: Any
    ) -> httpx.Response:
        """``user`` pressed the button ``action_id`` (with ``value``) of ``message``."""
        payload = {
            "type": "block_actions",
            "user": {"id": user, "team_id": self.team, "username": "someone"},
            "api_app_id": APP_ID,
            "token": "verification-token-unused",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
                **({"thread_ts": message.thread_ts} if message.thread_ts else {}),
            },
            "trigger_id": f"{int(time.time())}.{uuid.uuid4().int % 10**12}",
            "team": {"id": self.team, "domain": "northwind"},
            "channel": {"id": message.channel, "name": "it-help"},
            "message": {
                "type": "message",
                "ts": message.ts,
                "text": message.text,
                **({"thread_ts": message.thread_ts} if message.thread_ts else {}),
            },
            "response_url": self.hooks_prefix + "actions-" + uuid.uuid4().hex[:8],
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "b",
                    "value": value,
                    "action_ts": str(time.time()),
                }
            ],
        } | kwargs.pop("payload", {})
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return self.send(
            "/slack/interactivity", body, "application/x-www-form-urlencoded", **kwargs
        )


def _error(code: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": code})


def button(message: Posted, action_id: str, value_prefix: str = "") -> dict[str, Any]:
    """The button ``action_id`` of ``message`` (the first whose value starts with the prefix)."""
    for block in message.blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("action_id") == action_id and str(element.get("value", "")).startswith(
                value_prefix
            ):
                return dict(element)
    raise AssertionError(f"no {action_id} button in the message")
