"""Password reset, the executor: the signed call to the operator's webhook.

The password-reset webhook (what an operator's endpoint implements)
----------------------------------------------------------------------
``POST <ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL>`` with ``Content-Type: application/json`` and the
body ``{"action": "password_reset", "request_id": ..., "timestamp": <unix seconds>,
"user_id": ...}`` (compact JSON, keys sorted). Headers:

- ``X-Deskpilot-Signature: sha256=<hex>``: HMAC-SHA256 keyed with the shared secret
  (``ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET``) over the exact body bytes;
- ``X-Deskpilot-Timestamp``: the body's ``timestamp`` again. The receiver checks that the two
  agree and that the time is recent (five minutes is usual), which stops replays, since the
  body's copy is signed;
- ``Idempotency-Key``: the request id. A retry (after a timeout, a 5xx or a redelivered turn)
  sends the same key, and the receiver must answer it with the first request's outcome rather
  than reset the password again.

Answers: ``200`` with ``{"delivered_to": "<where the new password was sent>"}`` (for example
"your registered mobile phone"); ``401`` for a bad signature or a stale timestamp; ``404`` for an
unknown user; ``409`` while a request with the same key is still being processed; ``422`` when a
key is reused for a different request; ``429`` when rate-limited; ``5xx`` when broken. Any other
field of the answer is ignored, and a new password must never be in it: if one is, it is dropped
unread, and a ``delivered_to`` that seems to carry it is replaced by a neutral phrase.
Connection errors and ``5xx`` answers are retried (same key) up to
``ORCHESTRATOR_PASSWORD_RESET_ATTEMPTS`` times; a timeout is not, as the user is waiting.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import ClassVar

import httpx
from pydantic import SecretStr

from orchestrator.automations.detection import detect_password_reset
from orchestrator.automations.outcomes import (
    Done,
    ExecutionResult,
    Failed,
    FailureReason,
    Outcome,
    UserContext,
    audit_entry,
)
from orchestrator.automations.plugin import Automation, ExecutionRequest, Trigger
from orchestrator.automations.settings import (
    DEFAULT_ARTICLE_URL,
    PASSWORD_RESET,
    AutomationSettings,
)

log = logging.getLogger("deskpilot.orchestrator.automations")

SIGNATURE_HEADER = "X-Deskpilot-Signature"
TIMESTAMP_HEADER = "X-Deskpilot-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"
NEUTRAL_DESTINATION = "the contact details registered for your account"
RETRY_PAUSE_S = 0.2


class PasswordReset(Automation):
    """Reset the signed-in user's account password through the operator's webhook."""

    name: ClassVar[str] = PASSWORD_RESET

    def __init__(
        self,
        url: str,
        secret: SecretStr,
        timeout_s: float = 8.0,
        attempts: int = 2,
        article_url: str = DEFAULT_ARTICLE_URL,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self._secret = secret
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.article_url = article_url
        self._client = client
        self._owns_client = client is None
        self._clock = clock

    @classmethod
    def from_settings(
        cls, settings: AutomationSettings, client: httpx.AsyncClient | None = None
    ) -> PasswordReset:
        if settings.password_reset_webhook_url is None:
            raise ValueError("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL is not set")
        if settings.password_reset_webhook_secret is None:
            raise ValueError("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET is not set")
        return cls(
            url=settings.password_reset_webhook_url,
            secret=settings.password_reset_webhook_secret,
            timeout_s=settings.password_reset_timeout_s,
            attempts=settings.password_reset_attempts,
            article_url=settings.password_reset_article_url,
            client=client,
        )

    # -- texts -------------------------------------------------------------------------------

    def detect(self, text: str) -> Trigger | None:
        kind = detect_password_reset(text)
        return None if kind is None else Trigger(self.name, kind)

    def offer_question(self) -> str:
        return (
            "I can reset your account password for you now. A new password will be sent to "
            "the contact details registered for your account, never shown here. "
            "Shall I reset it? Reply yes to go ahead or no to cancel."
        )

    def self_service(self) -> tuple[str, str]:
        return self.article_url, (
            "I can only reset passwords for users who are signed in, so I can't do it for you "
            "here. You can reset it yourself at the self-service portal in a few minutes, no "
            f"ticket needed. The steps: {self.article_url}"
        )

    def declined_text(self) -> str:
        return "All right, I won't reset your password."

    def failed_text(self, reason: FailureReason) -> str:
        if reason is FailureReason.INVALID_RESPONSE:
            lead = (
                "I asked for your password to be reset, but I couldn't confirm that it worked "
                "or where the new one was sent. If nothing arrives within ten minutes, "
            )
        elif reason is FailureReason.UNKNOWN_USER:
            lead = "I couldn't reset it: the reset service doesn't know your account. "
        elif reason is FailureReason.CONFLICT:
            lead = "A reset for this request is still in progress. If nothing arrives soon, "
        else:
            lead = "I couldn't reset your password just now. "
        follow = "you can" if lead.endswith(", ") else "You can"
        return (
            f"{lead}{follow} reset it yourself at the self-service portal ({self.article_url}), "
            "or I can create a ticket for the service desk."
        )

    # -- the webhook -------------------------------------------------------------------------

    def signed_request(self, request: ExecutionRequest) -> tuple[bytes, dict[str, str]]:
        """The exact body bytes and headers of one call (a retry signs a fresh timestamp)."""
        timestamp = int(self._clock())
        payload = {
            "action": self.name,
            "request_id": request.request_id,
            "timestamp": timestamp,
            "user_id": request.user_id,
        }
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        digest = hmac.new(self._secret.get_secret_value().encode(), body, hashlib.sha256)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            SIGNATURE_HEADER: f"sha256={digest.hexdigest()}",
            TIMESTAMP_HEADER: str(timestamp),
            IDEMPOTENCY_HEADER: request.request_id,
        }
        return body, headers

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s), follow_redirects=False
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def execute(self, request: ExecutionRequest, user: UserContext) -> ExecutionResult:
        status: int | None = None
        reason: FailureReason | None = None
        response: httpx.Response | None = None
        attempt = 0
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                await asyncio.sleep(RETRY_PAUSE_S * (attempt - 1))
            body, headers = self.signed_request(request)
            try:
                response = await self._http().post(
                    self.url, content=body, headers=headers, timeout=self.timeout_s
                )
            except httpx.TimeoutException as exc:
                log.warning(
                    "automation %s request %s: webhook timed out (%s, attempt %d)",
                    self.name, request.request_id, type(exc).__name__, attempt,
                )  # fmt: skip
                reason, response = FailureReason.TIMEOUT, None
                break
            except httpx.HTTPError as exc:
                log.warning(
                    "automation %s request %s: webhook unreachable (%s, attempt %d)",
                    self.name, request.request_id, type(exc).__name__, attempt,
                )  # fmt: skip
                reason, response = FailureReason.UNREACHABLE, None
                continue
            status = response.status_code
            if status >= 500:
                log.warning(
                    "automation %s request %s: webhook answered %d (attempt %d)",
                    self.name, request.request_id, status, attempt,
                )  # fmt: skip
                reason = FailureReason.SERVER_ERROR
                continue
            reason = None
            break
        if response is not None and reason is None:
            reason, delivered_to, withheld = _read_answer(response)
            if reason is None and delivered_to is not None:
                audit = audit_entry(
                    self.name, Outcome.DONE, "webhook confirmed", user, request.request_id,
                    status, attempt, withheld,
                )  # fmt: skip
                log.info(
                    "automation %s request %s: done (status %d, attempt %d, destination %s)",
                    self.name, request.request_id, status, attempt,
                    "withheld" if withheld else "reported",
                )  # fmt: skip
                return Done(
                    action=self.name,
                    delivered_to=delivered_to,
                    text=(
                        "Done: I reset your account password. The new password was sent to "
                        f"{delivered_to}. Sign in with it, then update it wherever it is saved, "
                        "such as the mail app on your phone."
                    ),
                    audit=audit,
                )
        assert reason is not None  # nosec B101 # type narrowing: every branch above sets it
        if reason is FailureReason.UNAUTHORIZED:
            log.error(
                "automation %s request %s: the webhook refused our signature (status %s); "
                "check ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET and the clocks",
                self.name, request.request_id, status,
            )  # fmt: skip
        else:
            log.warning(
                "automation %s request %s: failed, %s (status %s, attempts %d)",
                self.name, request.request_id, reason.value, status, attempt,
            )  # fmt: skip
        return Failed(
            action=self.name,
            reason=reason,
            text=self.failed_text(reason),
            article_url=self.article_url,
            audit=audit_entry(
                self.name, Outcome.FAILED, reason.value, user, request.request_id, status, attempt
            ),
        )


_STATUS_REASONS: Mapping[int, FailureReason] = {
    401: FailureReason.UNAUTHORIZED,
    403: FailureReason.UNAUTHORIZED,
    404: FailureReason.UNKNOWN_USER,
    409: FailureReason.CONFLICT,
    429: FailureReason.RATE_LIMITED,
}
_SECRET_WORDS = re.compile(r"pass ?word|passwd|pwd|passcode|credential|temporary|\btemp\b", re.I)
_MAX_DESTINATION = 120


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _read_answer(response: httpx.Response) -> tuple[FailureReason | None, str | None, bool]:
    """The failure, or where the new password went and whether that phrase was withheld.

    Only ``delivered_to`` is read. A destination that names a password, is too long, or holds
    any other string of the answer (a password the endpoint should not have sent) becomes a
    neutral phrase, so the password can never reach the user, a log or a reply.
    """
    status = response.status_code
    if not 200 <= status < 300:
        return _STATUS_REASONS.get(status, FailureReason.REJECTED), None, False
    try:
        document = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return FailureReason.INVALID_RESPONSE, None, False
    if not isinstance(document, dict):
        return FailureReason.INVALID_RESPONSE, None, False
    delivered = document.get("delivered_to")
    if not isinstance(delivered, str) or not delivered.strip():
        return FailureReason.INVALID_RESPONSE, None, False
    delivered = " ".join(delivered.split())
    others = [
        value
        for key, item in document.items()
        if key != "delivered_to"
        for value in _strings(item)
        if len(value.strip()) >= 4
    ]
    if (
        len(delivered) > _MAX_DESTINATION
        or _SECRET_WORDS.search(delivered)
        or any(value.strip() in delivered for value in others)
        or not delivered.isprintable()
    ):
        return None, NEUTRAL_DESTINATION, True
    return None, delivered, False
