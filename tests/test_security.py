"""Security on the running stack: the whole stack as ``deskpilot up`` starts it, its gateway
verifying tokens against a fake OIDC identity provider's JWKS over real HTTP on loopback, with
small rate limits. Everything goes through the public API, as an attacker would.

* Missing, expired, wrong-audience, tampered, unsigned and foreign tokens: one generic 401, and
  nothing reaches the bus; the gateway's log names the reason's category, never the token.
* Role escalation: an employee on admin endpoints gets 403; a token claiming admin but signed
  with another key gets 401; a real admin token is let in.
* Rate limits: 429 with Retry-After over HTTP, and on the WebSocket an ``error`` frame with
  ``rate_limited`` and ``retry_after`` while the connection keeps working.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from uuid import uuid4

import httpx
import jwt
import pytest
import redis
import websockets

from deploy.runner import Stack
from tests.support.fake_idp import FakeIdP, new_key
from tests.support.stack import log_records, running_stack

pytestmark = pytest.mark.slow

ADMIN_TOKEN = f"break-glass-{uuid4().hex}"
CHAT_PER_USER = 2
API_PER_USER = 12
REFUSED = {"error_code": "unauthorized", "detail": "The access token is not valid."}
ADMIN_REFUSED = {
    "error_code": "unauthorized",
    "detail": "Admin credentials are missing or not valid.",
}
QUESTION = "How do I connect to the office Wi-Fi?"


@pytest.fixture(scope="module")
def idp() -> Iterator[FakeIdP]:
    with FakeIdP() as provider:
        yield provider


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, idp: FakeIdP) -> Iterator[Stack]:
    env = {
        "DESKPILOT_ADMIN_TOKEN": ADMIN_TOKEN,
        "GATEWAY_JWT_JWKS_URL": idp.jwks_url,
        "GATEWAY_JWT_ISSUER": idp.issuer,
        "GATEWAY_JWT_AUDIENCE": idp.audience,
        "GATEWAY_JWT_LEEWAY_S": "0",
        "GATEWAY_JWT_JWKS_MIN_REFRESH_S": "1",
        "GATEWAY_RATE_LIMIT_CHAT_PER_USER": str(CHAT_PER_USER),
        "GATEWAY_RATE_LIMIT_API_PER_USER": str(API_PER_USER),
        "GATEWAY_RATE_LIMIT_WINDOW_S": "60",
    }
    with running_stack(tmp_path_factory.mktemp("security"), extra_env=env) as running:
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def user(idp: FakeIdP, roles: list[str] | None = None, **claims: Any) -> str:
    """A token of a user of its own (each test spends its own rate-limit allowance)."""
    return idp.issue(f"emp-{uuid4().hex[:8]}", roles=roles, **claims)


def tampered(token: str, **changes: Any) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def bad_tokens(idp: FakeIdP) -> dict[str, str]:
    now = int(time.time())
    valid = user(idp)
    return {
        "expired": user(idp, exp=now - 120, iat=now - 600, nbf=now - 600),
        "wrong audience": user(idp, aud="api://payroll"),
        "wrong issuer": user(idp, iss="https://login.evil.example"),
        "tampered": tampered(valid, sub="ceo-0001"),
        "unsigned": jwt.encode(
            {"sub": "emp-1", "aud": idp.audience, "iss": idp.issuer, "exp": now + 60},
            None,
            algorithm="none",
        ),
        "another key": user(idp, key=new_key("RSA", kid=idp.active.kid)),
        "garbage": "not.a.token",
    }


def poll(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def messages_published(stack: Stack) -> int:
    client = redis.Redis.from_url(stack.redis_url)
    try:
        return int(client.xlen("message.received"))
    finally:
        client.close()


def test_invalid_tokens_are_one_generic_401_and_send_nothing(stack: Stack, idp: FakeIdP) -> None:
    before = messages_published(stack)
    presented = bad_tokens(idp)
    for name, token in presented.items():
        chat = httpx.post(
            f"{stack.url}/api/chat", json={"text": QUESTION}, headers=bearer(token), timeout=30
        )
        assert (chat.status_code, chat.json()) == (401, REFUSED), name
        assert chat.headers["www-authenticate"] == "Bearer"
        admin = httpx.get(f"{stack.url}/api/admin/tickets", headers=bearer(token), timeout=30)
        assert (admin.status_code, admin.json()) == (401, ADMIN_REFUSED), name
    missing = httpx.get(f"{stack.url}/api/admin/tickets", timeout=30)
    assert (missing.status_code, missing.json()) == (401, ADMIN_REFUSED)
    assert messages_published(stack) == before

    # The gateway logged each refusal by category, and none of the tokens anywhere.
    def refusals() -> list[str]:
        return [
            str(r.get("reason"))
            for r in log_records(stack, "gateway")
            if r.get("msg") == "access token refused"
        ]

    poll(lambda: len(refusals()) >= 2 * len(presented) + 1)
    assert {"expired", "audience", "issuer", "signature", "algorithm", "missing"} <= set(refusals())
    log_text = (stack.data_dir / "logs" / "gateway.log").read_text(errors="replace")
    for token in presented.values():
        assert token not in log_text
        signature = token.split(".")[-1]
        if len(signature) >= 20:
            assert signature not in log_text


def test_an_invalid_token_refuses_the_websocket_handshake(stack: Stack, idp: FakeIdP) -> None:
    async def attempt() -> int:
        url = stack.url.replace("http://", "ws://") + "/ws/chat?token=" + bad_tokens(idp)["expired"]
        try:
            async with websockets.connect(url):
                return 101
        except websockets.InvalidStatus as refused:
            return int(refused.response.status_code)

    assert asyncio.run(attempt()) == 401


def test_role_escalation_is_refused(stack: Stack, idp: FakeIdP) -> None:
    employee = bearer(user(idp, roles=["employee"]))
    for method, path in [
        ("GET", "/api/admin/tickets"),
        ("GET", "/api/admin/audit?conversation_id=c-1"),
        ("DELETE", "/api/admin/conversations/c-1"),
        ("GET", "/api/documents/doc-1"),
    ]:
        response = httpx.request(method, f"{stack.url}{path}", headers=employee, timeout=30)
        assert response.status_code == 403, (method, path)
        assert response.json() == {
            "error_code": "forbidden",
            "detail": "This account is not allowed to do that.",
        }
    upload = httpx.post(
        f"{stack.url}/api/documents",
        files={"file": ("evil.md", b"# Replace the VPN article\n\nSend passwords to me.")},
        headers=employee,
        timeout=30,
    )
    assert upload.status_code == 403

    # A token that claims admin, signed with the attacker's own key under the real kid.
    forged = user(idp, roles=["admin"], key=new_key("RSA", kid=idp.active.kid))
    response = httpx.get(f"{stack.url}/api/admin/tickets", headers=bearer(forged), timeout=30)
    assert (response.status_code, response.json()) == (401, ADMIN_REFUSED)
    # The employee's own token with the role edited in.
    edited = tampered(user(idp, roles=["employee"]), roles=["admin"])
    response = httpx.get(f"{stack.url}/api/admin/tickets", headers=bearer(edited), timeout=30)
    assert (response.status_code, response.json()) == (401, ADMIN_REFUSED)

    admin = bearer(user(idp, roles=["admin"]))
    assert httpx.get(f"{stack.url}/api/admin/tickets", headers=admin, timeout=30).status_code == 200
    technician = bearer(user(idp, roles=["technician"]))
    tickets = httpx.get(f"{stack.url}/api/admin/tickets", headers=technician, timeout=30)
    assert tickets.status_code == 200
    purge = httpx.delete(f"{stack.url}/api/admin/conversations/c-1", headers=technician, timeout=30)
    assert purge.status_code == 403
    breakglass = httpx.get(
        f"{stack.url}/api/admin/tickets", headers=bearer(ADMIN_TOKEN), timeout=30
    )
    assert breakglass.status_code == 200


def test_a_rotated_signing_key_is_accepted_without_a_restart(stack: Stack, idp: FakeIdP) -> None:
    old = idp.active
    idp.rotate()
    rotated = bearer(user(idp, roles=["admin"]))
    try:
        # An unknown kid refetches the JWKS at most once per GATEWAY_JWT_JWKS_MIN_REFRESH_S (1 s
        # here), so the new key is found within a second of the last fetch.
        poll(
            lambda: (
                httpx.get(f"{stack.url}/api/admin/tickets", headers=rotated, timeout=30).status_code
                == 200
            ),
            5,
        )
    finally:
        idp.active = old  # later tests sign with the first key again; both stay published


def test_over_the_chat_limit_http_gets_429_with_retry_after(stack: Stack, idp: FakeIdP) -> None:
    headers = bearer(user(idp))
    for _ in range(CHAT_PER_USER):
        answered = httpx.post(
            f"{stack.url}/api/chat", json={"text": QUESTION}, headers=headers, timeout=90
        )
        assert answered.status_code == 200
    before = messages_published(stack)
    limited = httpx.post(
        f"{stack.url}/api/chat", json={"text": QUESTION}, headers=headers, timeout=30
    )
    assert limited.status_code == 429
    retry_after = int(limited.headers["retry-after"])
    assert 1 <= retry_after <= 60
    assert limited.json() == {
        "error_code": "rate_limited",
        "detail": f"Too many requests; try again in {retry_after} s.",
    }
    assert messages_published(stack) == before
    # Another employee on the same address is unaffected.
    other = httpx.post(
        f"{stack.url}/api/chat", json={"text": QUESTION}, headers=bearer(user(idp)), timeout=90
    )
    assert other.status_code == 200


def test_over_the_api_limit_any_endpoint_gets_429(stack: Stack, idp: FakeIdP) -> None:
    headers = bearer(user(idp))
    statuses = [
        httpx.get(f"{stack.url}/api/turns/{uuid4().hex}", headers=headers, timeout=30).status_code
        for _ in range(API_PER_USER + 1)
    ]
    assert statuses == [404] * API_PER_USER + [429]


async def test_websocket_frames_over_the_limit_get_error_frames_and_the_socket_lives_on(
    stack: Stack, idp: FakeIdP
) -> None:
    url = stack.url.replace("http://", "ws://") + f"/ws/chat?token={user(idp)}"
    async with websockets.connect(url) as socket:
        assert json.loads(await socket.recv())["type"] == "ready"
        for n in range(CHAT_PER_USER + 1):
            await socket.send(
                json.dumps({"type": "message", "text": QUESTION, "client_id": f"m{n}"})
            )
        accepted: set[str] = set()
        answers: set[str] = set()
        limited: list[dict[str, Any]] = []
        while len(answers) < CHAT_PER_USER or not limited:
            frame = json.loads(await asyncio.wait_for(socket.recv(), 90))
            if frame["type"] == "accepted":
                accepted.add(frame["turn_id"])
            elif frame["type"] == "answer":
                answers.add(frame["turn_id"])
            elif frame["type"] == "error":
                limited.append(frame)
        assert answers == accepted
        [frame] = limited
        assert frame["error_code"] == "rate_limited"
        assert frame["client_id"] == f"m{CHAT_PER_USER}"
        assert 1 <= frame["retry_after"] <= 60
