"""Slack incoming webhooks: one JSON POST per message (``text`` as the notification's fallback,
``blocks`` as what the channel shows).

Slack answers 200 with the body ``ok``; 400 ``invalid_payload`` (or ``no_text``), 403
``action_prohibited`` or ``invalid_token``, 404 ``no_service`` or ``channel_not_found``, 410
``channel_is_archived``: these are :class:`Undeliverable`, with Slack's word for why (an admin
must fix the webhook). 429 (with ``Retry-After``) and 5xx are waited out and tried again a few
times, then :class:`TryLater`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx

logger = logging.getLogger(__name__)

ATTEMPTS = 3
MAX_WAIT_S = 10.0
"""Longest ``Retry-After`` waited out within one delivery; a longer one goes back to the bus."""


class Undeliverable(RuntimeError):
    """The channel refused the message for good (a wrong address, a revoked webhook)."""


class TryLater(RuntimeError):
    """The channel cannot take the message now (down, throttling): the bus delivers it again."""


def escape(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally: ``&``, ``<`` and ``>`` escaped, so a
    placeholder such as ``<EMAIL_ADDRESS_1>`` is not read as a link or a mention."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackWebhookChannel:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def send(self, url: str, payload: dict[str, Any]) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self.client.post(url, json=payload)
            except httpx.HTTPError as exc:
                raise TryLater(f"cannot reach Slack ({type(exc).__name__})") from None
            status, body = response.status_code, response.text.strip()[:100]
            if status == 200:
                return
            if status != 429 and status < 500:
                raise Undeliverable(f"Slack refused the message (HTTP {status}: {body})")
            wait = _retry_after(response)
            if attempt == ATTEMPTS or wait > MAX_WAIT_S:
                raise TryLater(f"Slack answered HTTP {status} {attempt} times")
            logger.info("slack webhook answered %d; waiting %.1f s", status, wait)
            await asyncio.sleep(wait)


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0
