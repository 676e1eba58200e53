"""The Slack Web API as the Slack channel uses it, through ``slack_sdk``'s async client.

Two clients share the bot token: one retries what Slack says to retry (429 with
``Retry-After``, 5xx, dropped connections) with the SDK's own retry handlers, for answers,
which must arrive; the other never waits, for what belongs in Slack's three-second
acknowledgement (the "looking into it" placeholder, ephemeral notices). Every failure becomes
:class:`SlackFailure`, saying whether trying again later may help (``transient``) or not (a
channel the bot is not in, a revoked token: logged and given up).

The SDK's own logger stays at INFO: its debug lines quote request headers (the token).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

log = logging.getLogger("deskpilot.gateway.slack")
_sdk_log = logging.getLogger("deskpilot.gateway.slack.sdk")
_sdk_log.setLevel(logging.INFO)

TIMEOUT_S = 10


class SlackFailure(Exception):
    """A Web API call that failed; ``error`` is Slack's code (``ratelimited``,
    ``channel_not_found``, ...) or the transport's exception name."""

    def __init__(self, error: str, *, transient: bool) -> None:
        super().__init__(error)
        self.error = error
        self.transient = transient


def _failure(exc: Exception) -> SlackFailure:
    if isinstance(exc, SlackApiError):
        status = exc.response.status_code
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        error = str(data.get("error") or f"http_{status}")
        # The patient client's retry handler waits out a 429's Retry-After; the quick one never
        # waits. Either way the wait is the SDK's: the failure only says whether to try later.
        return SlackFailure(error, transient=status == 429 or status >= 500)
    return SlackFailure(type(exc).__name__, transient=True)


class SlackApi:
    """The Web API calls the channel makes."""

    def __init__(self, token: str, base_url: str, *, retries: int = 2) -> None:
        handlers = [
            AsyncRateLimitErrorRetryHandler(max_retry_count=retries),
            AsyncServerErrorRetryHandler(max_retry_count=retries),
            AsyncConnectionErrorRetryHandler(max_retry_count=retries),
        ]
        common: dict[str, Any] = {
            "token": token,
            "base_url": base_url,
            "timeout": TIMEOUT_S,
            "logger": _sdk_log,
        }
        self.patient = AsyncWebClient(retry_handlers=handlers, **common)
        self.quick = AsyncWebClient(retry_handlers=[], **common)

    async def _call(self, client: AsyncWebClient, method: str, **args: Any) -> dict[str, Any]:
        """``method`` (the SDK's name, ``chat_postMessage``) with ``args``."""
        try:
            response = await getattr(client, method)(**args)
        except (SlackApiError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            failure = _failure(exc)
            log.warning(
                "Slack call failed",
                extra={"method": method, "error": failure.error, "transient": failure.transient},
            )
            raise failure from None
        data = response.data
        return data if isinstance(data, dict) else {}

    async def post(
        self,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
        quick: bool = False,
    ) -> str:
        """Post a message (in a thread when ``thread_ts``); returns its ``ts``."""
        args: dict[str, Any] = {"channel": channel, "text": text}
        if thread_ts:
            args["thread_ts"] = thread_ts
        if blocks is not None:
            args["blocks"] = blocks
        data = await self._call(self.quick if quick else self.patient, "chat_postMessage", **args)
        return str(data.get("ts") or "")

    async def update(
        self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        """Replace a message the bot posted (blocks omitted: its blocks are removed)."""
        args: dict[str, Any] = {"channel": channel, "ts": ts, "text": text, "blocks": blocks or []}
        await self._call(self.patient if blocks else self.quick, "chat_update", **args)

    async def ephemeral(self, channel: str, user: str, text: str) -> None:
        """A message only ``user`` sees (a notice: never retried, never fatal)."""
        # Logged by _call; a notice that did not arrive costs nothing else.
        with contextlib.suppress(SlackFailure):
            await self._call(
                self.quick, "chat_postEphemeral", channel=channel, user=user, text=text
            )

    async def email_of(self, user: str) -> str | None:
        """The user's profile email (users.info, scope ``users:read.email``); None for a
        deleted user, a bot, or a profile without one."""
        data = await self._call(self.quick, "users_info", user=user)
        found = data.get("user")
        if not isinstance(found, dict) or found.get("deleted") or found.get("is_bot"):
            return None
        profile = found.get("profile")
        email = profile.get("email") if isinstance(profile, dict) else None
        return email.strip().lower() if isinstance(email, str) and "@" in email else None

    async def respond(self, response_url: str, body: dict[str, Any]) -> None:
        """Post to a slash command's ``response_url`` (the caller checked where it points)."""
        webhook = AsyncWebhookClient(response_url, timeout=TIMEOUT_S, logger=_sdk_log)
        try:
            response = await webhook.send_dict(body)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _failure(exc) from None
        if response.status_code != 200:
            transient = response.status_code == 429 or response.status_code >= 500
            log.warning(
                "Slack response_url refused",
                extra={"status": response.status_code, "transient": transient},
            )
            raise SlackFailure(f"http_{response.status_code}", transient=transient)
