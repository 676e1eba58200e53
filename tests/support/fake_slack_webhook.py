"""A local Slack incoming webhook over real HTTP, for the ticketing service's notices.

As Slack documents incoming webhooks: ``POST /services/T.../B.../<secret>`` with a JSON body
holding ``text`` and/or ``blocks``. Answers (plain text bodies, as Slack sends them):

* 200 ``ok``: posted (kept in :attr:`FakeSlackWebhook.posts`)
* 400 ``invalid_payload`` (not JSON, not an object, blocks not a list) or ``no_text``
* 403 ``invalid_token`` (an unknown webhook), or ``action_prohibited`` (:meth:`prohibit`)
* 404 ``no_service`` (a revoked webhook, :meth:`revoke`)
* 410 ``channel_is_archived`` (:meth:`archive`)
* 429 ``rate_limited`` with ``Retry-After`` (seconds) for the next N posts (:meth:`throttle_next`)
* 500 ``rollup_error`` for the next N posts (:meth:`fail_next`)
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from tests.support.served import ServedFake

TEAM, BOT = "T0DESKPLT", "B0NOTICES"


class FakeSlackWebhook(ServedFake):
    def __init__(self) -> None:
        self.secret = secrets.token_hex(12)
        self.posts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._throttle = 0
        self._retry_after = "1"
        self._failures = 0
        self._state: str | None = None  # None, "revoked", "archived", "prohibited"

    @property
    def url(self) -> str:
        """The webhook's URL, as Slack hands it out (the path is the secret)."""
        return f"{self.origin}/services/{TEAM}/{BOT}/{self.secret}"

    def throttle_next(self, count: int, retry_after: str = "1") -> None:
        self._throttle, self._retry_after = count, retry_after

    def fail_next(self, count: int) -> None:
        self._failures = count

    def revoke(self) -> None:
        self._state = "revoked"

    def archive(self) -> None:
        self._state = "archived"

    def prohibit(self) -> None:
        self._state = "prohibited"

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[Route("/services/{team}/{bot}/{secret}", self._post, methods=["POST"])]
        )

    async def _post(self, request: Request) -> Response:
        params = request.path_params
        if (params["team"], params["bot"], params["secret"]) != (TEAM, BOT, self.secret):
            return PlainTextResponse("invalid_token", status_code=403)
        refused = {
            "revoked": (404, "no_service"),
            "archived": (410, "channel_is_archived"),
            "prohibited": (403, "action_prohibited"),
        }.get(self._state or "")
        if refused is not None:
            return PlainTextResponse(refused[1], status_code=refused[0])
        with self._lock:
            if self._throttle > 0:
                self._throttle -= 1
                return PlainTextResponse(
                    "rate_limited", status_code=429, headers={"Retry-After": self._retry_after}
                )
            if self._failures > 0:
                self._failures -= 1
                return PlainTextResponse("rollup_error", status_code=500)
        try:
            payload = await request.json()
        except ValueError:
            return PlainTextResponse("invalid_payload", status_code=400)
        if not isinstance(payload, dict) or not isinstance(payload.get("blocks", []), list):
            return PlainTextResponse("invalid_payload", status_code=400)
        if not payload.get("text") and not payload.get("blocks"):
            return PlainTextResponse("no_text", status_code=400)
        with self._lock:
            self.posts.append(payload)
        return PlainTextResponse("ok")
