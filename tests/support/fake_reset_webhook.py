"""A local password-reset webhook over real HTTP, implementing the protocol documented in
``orchestrator/automations/webhook.py`` as an operator's endpoint would.

``POST /hooks/password-reset`` with a JSON body ``{"action", "request_id", "timestamp",
"user_id"}`` and the headers ``X-Deskpilot-Signature: sha256=<hex>`` (HMAC-SHA256 of the exact
body bytes with the shared secret), ``X-Deskpilot-Timestamp`` (unix seconds, equal to the body's,
at most ``max_skew_s`` from now) and ``Idempotency-Key``. It checks, in this order:

====================================================  ======  ==========================
what                                                  status  ``error``
====================================================  ======  ==========================
another path / another method                         404/405 ``not_found`` / ``method_not_allowed``
not ``application/json``                              415     ``unsupported_media_type``
a fault set with :meth:`fail_next`                    chosen  ``injected_fault``
signature missing, malformed or wrong                 401     ``invalid_signature``
timestamp missing, not the body's, or stale           401     ``invalid_timestamp``
body not the documented JSON                          400     ``invalid_payload``
no ``Idempotency-Key``                                400     ``missing_idempotency_key``
an action other than ``password_reset``               422     ``unsupported_action``
the key reused for another request                    422     ``idempotency_key_reused``
the key's first request still running                 409     ``request_in_progress``
an unknown user (when ``users`` is set)               404     ``unknown_user``
====================================================  ======  ==========================

Then it resets (records a :class:`Reset`, after ``delay_s`` when slowed) and answers ``200
{"delivered_to": ...}``. A repeated key with the same request is answered with the stored
outcome and ``Idempotent-Replayed: true``, without resetting again. Every request is recorded
(:attr:`FakeResetWebhook.requests`), whatever its outcome. Fault knobs: :meth:`fail_next` (500,
401, 503...), ``delay_s`` (slow), ``leak_password`` (the answer wrongly carries the new
password), ``raw_answer`` (a 200 whose body is given as is, such as invalid JSON). It is a
Starlette app served by :mod:`tests.support.served`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.served import ServedFake

PATH = "/hooks/password-reset"
# What a misbehaving endpoint would send back: a new password it should never disclose.
LEAKED_PASSWORD = "Tmp-Wx7!qLp2-Zr9"


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 0
    error: str | None = None

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


@dataclass(frozen=True)
class Reset:
    user_id: str
    request_id: str
    idempotency_key: str


@dataclass
class _Stored:
    fingerprint: tuple[str, str, str]
    status: int = 0
    answer: dict[str, Any] = field(default_factory=dict)
    done: bool = False


class FakeResetWebhook(ServedFake):
    """The operator's endpoint; ``with FakeResetWebhook(secret) as hook:`` serves it at
    ``hook.url``."""

    def __init__(
        self,
        secret: str,
        delivered_to: str = "your registered mobile phone",
        users: set[str] | None = None,
        max_skew_s: float = 300,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secret = secret
        self.delivered_to = delivered_to
        self.users = users
        self.max_skew_s = max_skew_s
        self.clock = clock
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.resets: list[Reset] = []
        self._keys: dict[str, _Stored] = {}
        self._faults: list[int] = []
        self.delay_s = 0.0
        self.leak_password = False
        self.raw_answer: bytes | None = None

    @property
    def url(self) -> str:
        return self.base_url + PATH

    # -- driving it ------------------------------------------------------------------------

    def reset_state(self) -> None:
        """Forget requests, resets, keys and faults (between tests sharing one server)."""
        with self._lock:
            self.requests.clear()
            self.resets.clear()
            self._keys.clear()
            self._faults.clear()
        self.delay_s = 0.0
        self.leak_password = False
        self.raw_answer = None
        self.users = None

    def fail_next(self, count: int, status: int = 500) -> None:
        """Answer the next ``count`` requests with ``status`` before looking at them."""
        with self._lock:
            self._faults.extend([status] * count)

    def sign(self, body: bytes) -> str:
        return "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()

    # -- serving ---------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        # Other paths and methods are recorded and answered in the protocol's words too.
        return Starlette(
            routes=[Route(PATH, self._serve, methods=["POST"])],
            exception_handlers={404: self._serve, 405: self._serve},
        )

    async def _serve(self, request: Request, exc: Exception | None = None) -> Response:
        record = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers=dict(request.headers.items()),
            body=await request.body(),
        )
        status, headers, body = await self.handle(record)
        return Response(body, status_code=status, headers=headers, media_type="application/json")

    async def handle(self, record: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        status, headers, answer = await self._decide(record)
        body = json.dumps(answer).encode() if answer is not None else self.raw_answer or b""
        record.status = status
        if answer is not None and "error" in answer:
            record.error = str(answer["error"])
        return status, headers, body

    async def _decide(
        self, record: RecordedRequest
    ) -> tuple[int, dict[str, str], dict[str, Any] | None]:
        with self._lock:
            self.requests.append(record)
            fault = self._faults.pop(0) if self._faults else None
        if record.path != PATH:
            return _error(404, "not_found", "no such hook")
        if record.method != "POST":
            return _error(405, "method_not_allowed", "POST only")
        content_type = (record.header("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _error(415, "unsupported_media_type", "send application/json")
        if fault is not None:
            return _error(fault, "injected_fault", "fault injected by the test")
        signature = record.header("X-Deskpilot-Signature") or ""
        if not hmac.compare_digest(signature.encode(), self.sign(record.body).encode()):
            return _error(401, "invalid_signature", "signature does not match the body")
        stamp = record.header("X-Deskpilot-Timestamp") or ""
        if not stamp.isdigit() or abs(self.clock() - int(stamp)) > self.max_skew_s:
            return _error(401, "invalid_timestamp", "timestamp missing or not recent")
        try:
            payload = json.loads(record.body)
        except ValueError:
            return _error(400, "invalid_payload", "body is not JSON")
        if (
            not isinstance(payload, dict)
            or not all(isinstance(payload.get(k), str) for k in ("action", "request_id", "user_id"))
            or not isinstance(payload.get("timestamp"), int)
        ):
            return _error(400, "invalid_payload", "action, request_id, user_id and timestamp")
        if payload["timestamp"] != int(stamp):
            return _error(401, "invalid_timestamp", "header and body timestamps differ")
        key = record.header("Idempotency-Key")
        if not key:
            return _error(400, "missing_idempotency_key", "Idempotency-Key is required")
        if payload["action"] != "password_reset":
            return _error(422, "unsupported_action", "only password_reset")
        fingerprint = (payload["action"], payload["user_id"], payload["request_id"])
        with self._lock:
            stored = self._keys.get(key)
            if stored is not None:
                if stored.fingerprint != fingerprint:
                    return _error(422, "idempotency_key_reused", "key used for another request")
                if not stored.done:
                    return _error(409, "request_in_progress", "the first request is running")
                return stored.status, {"Idempotent-Replayed": "true"}, dict(stored.answer)
            stored = self._keys[key] = _Stored(fingerprint)
        if self.users is not None and payload["user_id"] not in self.users:
            status, headers, answer = _error(404, "unknown_user", "no such user")
        else:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            with self._lock:
                self.resets.append(Reset(payload["user_id"], payload["request_id"], key))
            status, headers = 200, {}
            answer = {"delivered_to": self.delivered_to, "request_id": payload["request_id"]}
            if self.leak_password:
                answer["temporary_password"] = LEAKED_PASSWORD
            if self.raw_answer is not None:
                answer = None
        with self._lock:
            stored.status, stored.answer, stored.done = status, dict(answer or {}), True
        return status, headers, answer


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    return status, {}, {"error": code, "message": message}
