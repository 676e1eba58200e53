"""Verifying that a request comes from Slack: the app's signing secret, version ``v0``.

Slack signs each request with ``X-Slack-Signature: v0=<hex HMAC-SHA256>`` of
``v0:<X-Slack-Request-Timestamp>:<raw body>`` under the app's signing secret. A request is
accepted only when the timestamp is within :data:`WINDOW_S` of the gateway's clock (either
way) and the signature matches, compared in constant time. The body must be the bytes as
received, before any parsing, so the routes read it themselves.

A signature is valid for the whole window, so the routes also refuse a second request with the
same signature (:class:`gateway.channels.slack.adapter.SeenRequests`): a captured request
cannot be replayed within the window, and outside it the timestamp refuses it.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from typing import Literal

VERSION = "v0"
WINDOW_S = 300
"""How far a request's timestamp may be from now: five minutes, as Slack documents."""
SIGNATURE_HEADER = "x-slack-signature"
TIMESTAMP_HEADER = "x-slack-request-timestamp"

Refusal = Literal["missing", "malformed", "stale", "signature"]


class SignatureRefused(Exception):
    """A request that is not Slack's; ``reason`` is for logs only, never the caller."""

    def __init__(self, reason: Refusal) -> None:
        super().__init__(reason)
        self.reason: Refusal = reason


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Slack-Signature`` value Slack sends for ``body`` at ``timestamp``."""
    base = f"{VERSION}:{timestamp}:".encode() + body
    return f"{VERSION}=" + hmac.new(secret, base, hashlib.sha256).hexdigest()


class SlackSignature:
    """Checks requests against the app's signing secret."""

    def __init__(
        self, secret: bytes, *, window_s: int = WINDOW_S, clock: Callable[[], float] = time.time
    ) -> None:
        if not secret:
            raise ValueError("a Slack signature check needs the signing secret")
        self._secret = secret
        self.window_s = window_s
        self._clock = clock

    def verify(self, headers: Mapping[str, str], body: bytes) -> int:
        """The request's timestamp when ``body`` with these headers is Slack's; raises
        :class:`SignatureRefused` otherwise. ``headers`` must be case-insensitive (Starlette's
        are) or lower-case."""
        timestamp = headers.get(TIMESTAMP_HEADER)
        signature = headers.get(SIGNATURE_HEADER)
        if not timestamp or not signature:
            raise SignatureRefused("missing")
        # Digits only: int() would also take "+1e3", " 12", "1_000" or Unicode digits.
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
            raise SignatureRefused("malformed")
        at = int(timestamp)
        if abs(self._clock() - at) > self.window_s:
            raise SignatureRefused("stale")
        expected = sign(self._secret, timestamp, body)
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise SignatureRefused("signature")
        return at
