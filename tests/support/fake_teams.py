"""A local Bot Framework for tests: the channel that sends Teams activities, and the services a
bot calls back, served over real HTTP on loopback (:mod:`tests.support.served`).

Following the Bot Framework's documented protocol:

* OpenID metadata at ``/.well-known/openidconfiguration`` (``issuer``, ``jwks_uri``,
  ``id_token_signing_alg_values_supported``) and the signing keys at ``/keys`` (RSA, with
  ``endorsements``);
* the identity platform's token endpoint at ``/<tenant>/oauth2/v2.0/token``: the client
  credentials grant with scope ``https://api.botframework.com/.default``, answered with
  ``{"token_type", "expires_in", "access_token"}``, or 401 ``invalid_client`` for a wrong
  secret and 400 ``invalid_scope`` / ``unsupported_grant_type``;
* the Bot Connector under :attr:`FakeTeams.service_url`: ``POST
  /v3/conversations/{id}/activities[/{activityId}]`` (201 ``{"id"}``) and ``PUT`` of an activity,
  authenticated by the app token it issued (401 otherwise), 404 ``ConversationNotFound``, and
  429 with ``Retry-After`` when :meth:`FakeTeams.throttle` says (errors as
  ``{"error": {"code", "message"}}``).

:meth:`FakeTeams.send` posts an activity to the bot with ``Authorization: Bearer <JWT>`` signed
as the Bot Framework signs it (``iss`` ``https://api.botframework.com``, ``aud`` the app id,
``serviceurl`` the activity's), with knobs to forge it (another key, audience, issuer, service
URL, an expired token). :meth:`message` and :meth:`submit` build a user's message and a card
button's press. What the bot sent is kept in :attr:`FakeTeams.sent`.
"""

from __future__ import annotations

import hmac
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx
import jwt
from jwt.algorithms import RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.fake_idp import SigningKey, new_key
from tests.support.served import ServedFake

ISSUER = "https://api.botframework.com"
APP_ID = "6f1d3c2b-8e4a-4b7c-9d2e-1a2b3c4d5e6f"
APP_PASSWORD = "teams-app-secret-0123456789"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
SCOPE = "https://api.botframework.com/.default"


@dataclass
class Sent:
    """An activity the bot sent (``reply_to``: the activity it replied to)."""

    conversation_id: str
    activity: dict[str, Any]
    id: str
    reply_to: str | None = None
    updates: list[dict[str, Any]] = field(default_factory=list)
    received_at: float = field(default_factory=time.perf_counter)


class FakeTeams(ServedFake):
    def __init__(self, *, app_id: str = APP_ID, app_password: str = APP_PASSWORD) -> None:
        self.app_id = app_id
        self.app_password = app_password
        self.key: SigningKey = new_key("RSA")
        self.endorsements = ["msteams"]
        """The channels the published key is endorsed for."""
        self.conversations: set[str] = set()
        self.sent: list[Sent] = []
        self.tokens: set[str] = set()
        self.token_requests = 0
        self.throttled: list[int] = []
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.gateway_url = ""

    # -- setup ---------------------------------------------------------------------------------

    @property
    def openid_url(self) -> str:
        return self.origin + "/.well-known/openidconfiguration"

    @property
    def token_url(self) -> str:
        return self.origin + "/{tenant}/oauth2/v2.0/token"

    @property
    def service_url(self) -> str:
        return self.origin + "/svc/"

    def add_conversation(self, conversation_id: str) -> str:
        self.conversations.add(conversation_id)
        return conversation_id

    def throttle(self, *retry_after_s: int) -> None:
        """The next connector calls answer 429 with these ``Retry-After`` values."""
        with self._lock:
            self.throttled.extend(retry_after_s)

    def messages(self, conversation_id: str) -> list[Sent]:
        """The bot's message activities in a conversation (typing indicators left out)."""
        with self._lock:
            return [
                s
                for s in self.sent
                if s.conversation_id == conversation_id and s.activity.get("type") == "message"
            ]

    def typing(self, conversation_id: str) -> int:
        with self._lock:
            return sum(
                1
                for s in self.sent
                if s.conversation_id == conversation_id and s.activity.get("type") == "typing"
            )

    # -- the services --------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openidconfiguration", self._openid, methods=["GET"]),
                Route("/keys", self._keys, methods=["GET"]),
                Route("/{tenant}/oauth2/v2.0/token", self._token, methods=["POST"]),
                Route(
                    "/svc/v3/conversations/{conversation}/activities",
                    self._activity,
                    methods=["POST"],
                ),
                Route(
                    "/svc/v3/conversations/{conversation}/activities/{activity}",
                    self._activity,
                    methods=["POST", "PUT"],
                ),
            ]
        )

    async def _openid(self, _: Request) -> Response:
        return JSONResponse(
            {
                "issuer": ISSUER,
                "authorization_endpoint": "https://invalid.botframework.com",
                "jwks_uri": self.origin + "/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            }
        )

    async def _keys(self, _: Request) -> Response:
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.private.public_key()))  # type: ignore[arg-type]
        jwk |= {"kid": self.key.kid, "use": "sig", "endorsements": self.endorsements}
        return JSONResponse({"keys": [jwk]})

    async def _token(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode()))
        with self._lock:
            self.token_requests += 1
        if form.get("grant_type") != "client_credentials":
            return _oauth_error(400, "unsupported_grant_type")
        if form.get("client_id") != self.app_id or not hmac.compare_digest(
            form.get("client_secret", ""), self.app_password
        ):
            return _oauth_error(401, "invalid_client")
        if form.get("scope") != SCOPE:
            return _oauth_error(400, "invalid_scope")
        token = "app-" + uuid.uuid4().hex
        with self._lock:
            self.tokens.add(token)
        return JSONResponse(
            {
                "token_type": "Bearer",
                "expires_in": 3599,
                "ext_expires_in": 3599,
                "access_token": token,
            }
        )

    async def _activity(self, request: Request) -> Response:
        conversation = request.path_params["conversation"]
        activity_id = request.path_params.get("activity")
        with self._lock:
            self.calls.append(request.method)
            wait = self.throttled.pop(0) if self.throttled else None
        if wait is not None:
            return _connector_error(
                429, "TooManyRequests", "Too many requests.", {"Retry-After": str(wait)}
            )
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in self.tokens:
            return _connector_error(401, "Unauthorized", "Authorization has been denied.")
        if conversation not in self.conversations:
            return _connector_error(404, "ConversationNotFound", "Conversation not found.")
        activity = json.loads(await request.body())
        with self._lock:
            if request.method == "PUT":
                for sent in self.sent:
                    if sent.id == activity_id:
                        sent.updates.append(activity)
                        return JSONResponse({"id": activity_id})
                return _connector_error(404, "ActivityNotFound", "Activity not found.")
            new = Sent(conversation, activity, f"1{next(self._ids):012d}", activity_id)
            self.sent.append(new)
        return JSONResponse({"id": new.id}, status_code=201)

    # -- the channel calling the bot -----------------------------------------------------------

    def token(self, service_url: str, **changes: Any) -> str:
        """A Bot Framework token for the bot; ``changes`` replace claims (None drops one),
        ``key`` signs with another key."""
        key: SigningKey = changes.pop("key", self.key)
        now = int(time.time())
        claims: dict[str, Any] = {
            "serviceurl": service_url,
            "nbf": now - 5,
            "exp": now + 3600,
            "iss": ISSUER,
            "aud": self.app_id,
        } | changes
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, key.private, algorithm="RS256", headers={"kid": key.kid})

    def send(
        self, activity: dict[str, Any], *, token: str | None = None, **claims: Any
    ) -> httpx.Response:
        bearer = token if token is not None else self.token(str(activity["serviceUrl"]), **claims)
        return httpx.post(
            self.gateway_url + "/teams/messages",
            json=activity,
            headers={"Authorization": f"Bearer {bearer}"} if bearer else {},
            timeout=30,
        )

    def message(
        self,
        object_id: str,
        conversation_id: str,
        text: str,
        *,
        conversation_type: str = "personal",
        **more: Any,
    ) -> dict[str, Any]:
        """A user's message activity, as Teams delivers it."""
        self.conversations.add(conversation_id)
        activity: dict[str, Any] = {
            "type": "message",
            "id": f"{int(time.time() * 1000)}{next(self._ids)}",
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "serviceUrl": self.service_url,
            "channelId": "msteams",
            "from": {"id": "29:1" + object_id[:8], "name": "A user", "aadObjectId": object_id},
            "conversation": {
                "conversationType": conversation_type,
                "tenantId": TENANT,
                "id": conversation_id,
            },
            "recipient": {"id": f"28:{self.app_id}", "name": "Deskpilot"},
            "textFormat": "plain",
            "text": text,
            "locale": "en-US",
            "channelData": {"tenant": {"id": TENANT}},
        }
        return activity | more

    def submit(self, object_id: str, card: Sent, data: dict[str, Any]) -> dict[str, Any]:
        """The press of a card's ``Action.Submit`` with ``data``: a message with ``value``."""
        activity = self.message(object_id, card.conversation_id, "", replyToId=card.id)
        activity.pop("text")
        activity["value"] = data
        return activity


def _oauth_error(status: int, code: str) -> JSONResponse:
    return JSONResponse(
        {"error": code, "error_description": f"AADSTS: {code}", "error_codes": [0]},
        status_code=status,
    )


def _connector_error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def card_actions(sent: Sent) -> list[dict[str, Any]]:
    """Every ``Action.Submit`` of the card ``sent`` carries, in order."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "Action.Submit":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(sent.activity.get("attachments", []))
    return found
