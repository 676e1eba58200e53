"""The Bot Connector API as the Teams channel uses it: replies, updates and typing indicators,
sent with an app token from the client-credentials grant.

The token (``GATEWAY_TEAMS_TOKEN_URL``, scope ``https://api.botframework.com/.default``) is
cached until a minute before it expires and asked for again when the connector answers 401. A
429 or 503 is waited out as its ``Retry-After`` says (at most :data:`MAX_WAIT_S`, twice), then
reported as transient (:class:`ConnectorFailure`); other 4xx are for good. The conversation
endpoint is the activity's ``serviceUrl``, which the caller checked against the signed token and
the configured prefixes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import quote

import httpx

from gateway.retry_after import retry_after_s

log = logging.getLogger("deskpilot.gateway.teams")

SCOPE = "https://api.botframework.com/.default"
MAX_WAIT_S = 10.0
RETRIES = 2
TIMEOUT_S = 10.0


class ConnectorFailure(Exception):
    def __init__(self, error: str, *, transient: bool) -> None:
        super().__init__(error)
        self.error = error
        self.transient = transient


class BotConnector:
    """Sends activities to Teams conversations."""

    def __init__(
        self,
        app_id: str,
        app_password: str,
        token_url: str,
        *,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.app_id = app_id
        self._password = app_password
        self.token_url = token_url
        self.client = client or httpx.AsyncClient(timeout=TIMEOUT_S)
        self._token: str | None = None
        self._expires_at = 0.0
        self._token_lock = asyncio.Lock()

    async def _app_token(self, *, renew: bool = False) -> str:
        async with self._token_lock:
            if self._token and not renew and time.monotonic() < self._expires_at:
                return self._token
            form = {
                "grant_type": "client_credentials",
                "client_id": self.app_id,
                "client_secret": self._password,
                "scope": SCOPE,
            }
            try:
                response = await self.client.post(self.token_url, data=form)
            except httpx.HTTPError as exc:
                raise ConnectorFailure(type(exc).__name__, transient=True) from None
            if response.status_code != 200:
                # The identity platform's error body names no secret; its code is enough.
                code = _json(response).get("error", f"http_{response.status_code}")
                log.warning("Teams app token refused", extra={"error": str(code)})
                raise ConnectorFailure(str(code), transient=response.status_code >= 500)
            body = _json(response)
            token, lifetime = body.get("access_token"), body.get("expires_in", 3600)
            if not isinstance(token, str) or not token:
                raise ConnectorFailure("no_access_token", transient=True)
            self._token = token
            self._expires_at = time.monotonic() + max(0.0, float(lifetime) - 60)
            return token

    async def _send(self, method: str, url: str, activity: dict[str, Any]) -> dict[str, Any]:
        renewed = False
        for attempt in range(RETRIES + 1):
            token = await self._app_token(renew=renewed)
            try:
                response = await self.client.request(
                    method, url, json=activity, headers={"Authorization": f"Bearer {token}"}
                )
            except httpx.HTTPError as exc:
                if attempt == RETRIES:
                    raise ConnectorFailure(type(exc).__name__, transient=True) from None
                continue
            status = response.status_code
            if status in (200, 201, 202):
                return _json(response)
            if status == 401 and not renewed:
                renewed = True  # the token was revoked or expired early: one new one
                continue
            if status in (429, 503) and attempt < RETRIES:
                wait = retry_after_s(
                    response.headers.get("retry-after"), default=1.0, cap=MAX_WAIT_S
                )
                await asyncio.sleep(wait)
                continue
            error = _json(response).get("error")
            code = error.get("code") if isinstance(error, dict) else None
            transient = status in (429, 503) or status >= 500
            log.warning(
                "Teams connector refused",
                extra={"status": status, "error": str(code), "transient": transient},
            )
            raise ConnectorFailure(str(code or f"http_{status}"), transient=transient)
        raise ConnectorFailure("retries_exhausted", transient=True)

    @staticmethod
    def _activities(service_url: str, conversation_id: str) -> str:
        conversation = quote(conversation_id, safe="")
        return f"{service_url.rstrip('/')}/v3/conversations/{conversation}/activities"

    async def reply(
        self, service_url: str, conversation_id: str, reply_to: str | None, activity: dict[str, Any]
    ) -> str:
        """Send ``activity`` in the conversation (as a reply to ``reply_to``); its id."""
        url = self._activities(service_url, conversation_id)
        if reply_to:
            url += "/" + quote(reply_to, safe="")
        return str((await self._send("POST", url, activity)).get("id") or "")

    async def update(
        self, service_url: str, conversation_id: str, activity_id: str, activity: dict[str, Any]
    ) -> None:
        url = self._activities(service_url, conversation_id) + "/" + quote(activity_id, safe="")
        await self._send("PUT", url, activity | {"id": activity_id})


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
