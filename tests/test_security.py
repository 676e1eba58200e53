"""Security on the running stack: the whole stack as ``deskpilot up`` starts it, its gateway
verifying tokens against a fake OIDC identity provider's JWKS over real HTTP on loopback, with
small rate limits. Everything goes through the public API, as an attacker would.

* Missing, expired, wrong-audience, tampered, unsigned and foreign tokens: one generic 401, and
  nothing reaches the bus; the gateway's log names the reason's category, never the token.
* Role escalation: an employee on admin endpoints gets 403; a token claiming admin but signed
  with another key gets 401; a real admin token is let in.
* Rate limits: 429 with Retry-After over HTTP, and on the WebSocket an ``error`` frame with
  ``rate_limited`` and ``retry_after`` while the connection keeps working.
* Every caller: another client (no credentials, an anonymous user, another employee, the admin
  token) gets the 404 of an unknown id for an employee's turn, attachment and conversation, and
  a conversation of its own on the WebSocket; replayed (expired) and forged tokens reach
  nothing; the WebSocket opens only for the gateway's own pages; ``deskpilot up`` has no known
  admin token.
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
from tests.support.stack import log_records, new_user, running_stack

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


async def test_over_the_api_limit_any_endpoint_gets_429(stack: Stack, idp: FakeIdP) -> None:
    headers = bearer(user(idp))
    # All at once: one at a time, a loaded machine takes longer than the bucket needs to refill
    # a token (one per window / allowance, 5 s here).
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30) as client:
        responses = await asyncio.gather(
            *(client.get(f"/api/turns/{uuid4().hex}") for _ in range(API_PER_USER + 1))
        )
    statuses = sorted(response.status_code for response in responses)
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


# -- every caller: conversations, turns and attachments are their owner's ------------------------

LOG = b"2026-11-25 10:00:01 ERROR vpnagent: connect failed 0x800704cf\n"


def ws_url(stack: Stack, query: str = "") -> str:
    return stack.url.replace("http://", "ws://") + "/ws/chat" + (f"?{query}" if query else "")


async def converse(url: str, *texts: str, **connect: Any) -> tuple[dict[str, Any], list[Any]]:
    """Open the chat, say each text and wait for its answer: the ready frame and the answers."""
    answers = []
    async with websockets.connect(url, **connect) as socket:
        ready = json.loads(await socket.recv())
        for text in texts:
            await socket.send(json.dumps({"type": "message", "text": text}))
            while (frame := json.loads(await asyncio.wait_for(socket.recv(), 90)))["type"] not in (
                "answer",
                "error",
            ):
                pass
            answers.append(frame)
    return ready, answers


def conversation_members(stack: Stack, conversation_id: str) -> set[bytes]:
    client = redis.Redis.from_url(stack.redis_url)
    try:
        members: set[bytes] = set(
            client.smembers(f"deskpilot:gateway:conversation:{conversation_id}")
        )  # type: ignore[arg-type]
        return members
    finally:
        client.close()


def same_404(response: httpx.Response, unknown: httpx.Response, hidden: str, shown: str) -> None:
    assert response.status_code == unknown.status_code == 404
    assert response.text == unknown.text.replace(shown, hidden)


async def test_another_client_reaches_nothing_of_an_employees_conversation(
    stack: Stack, idp: FakeIdP
) -> None:
    victim = user(idp)
    ready, [answer] = await converse(ws_url(stack, f"token={victim}"), QUESTION)
    conversation, turn = ready["conversation_id"], answer["turn_id"]
    attached = httpx.post(
        f"{stack.url}/api/attachments",
        files={"file": ("vpn.log", LOG)},
        data={"conversation_id": conversation},
        headers=bearer(victim),
        timeout=90,
    )
    assert attached.status_code == 200, attached.text
    attachment = attached.json()["id"]
    members = conversation_members(stack, conversation)

    # The victim reads their own turn and attachment.
    mine = httpx.get(f"{stack.url}/api/turns/{turn}", headers=bearer(victim), timeout=30)
    assert mine.json()["status"] == "done"
    assert (
        httpx.get(
            f"{stack.url}/api/attachments/{attachment}", headers=bearer(victim), timeout=30
        ).status_code
        == 200
    )

    strangers = {
        "no credentials": {},
        "an anonymous user": new_user(stack).headers,
        "another employee": bearer(user(idp)),
        "the break-glass admin token": bearer(ADMIN_TOKEN),
    }
    unknown = uuid4().hex
    for name, headers in strangers.items():
        for path, hidden in (
            (f"/api/turns/{turn}", turn),
            (f"/api/attachments/{attachment}", attachment),
        ):
            response = httpx.get(stack.url + path, headers=headers, timeout=30)
            known = httpx.get(
                stack.url + path.replace(hidden, unknown), headers=headers, timeout=30
            )
            same_404(response, known, hidden, unknown)
        hijack = httpx.post(
            f"{stack.url}/api/chat",
            json={"text": "yes please file the ticket", "conversation_id": conversation},
            headers=headers,
            timeout=30,
        )
        nobody = httpx.post(
            f"{stack.url}/api/chat",
            json={"text": "yes please file the ticket", "conversation_id": unknown},
            headers=headers,
            timeout=30,
        )
        same_404(hijack, nobody, conversation, unknown)
        assert hijack.json()["error_code"] == "unknown_conversation", name

    # Over the WebSocket the stranger lands in a conversation of their own. (A fresh anonymous
    # user: the one above spent its chat allowance on the attempts above.)
    fresh = new_user(stack).token
    for query in (
        f"conversation_id={conversation}",
        f"conversation_id={conversation}&user={fresh}",
    ):
        hijacked, [reply] = await converse(ws_url(stack, query), "yes please file the ticket")
        assert hijacked["conversation_id"] != conversation
        assert reply["type"] == "answer", reply
        assert reply["conversation_id"] != conversation
    assert conversation_members(stack, conversation) == members


async def test_a_replayed_or_forged_credential_reaches_nothing(stack: Stack, idp: FakeIdP) -> None:
    victim = user(idp, expires_in=3)
    _, [answer] = await converse(ws_url(stack, f"token={victim}"), QUESTION)
    turn = answer["turn_id"]
    anonymous_ready, [anonymous_answer] = await converse(ws_url(stack), QUESTION)
    anonymous_token = anonymous_ready["anonymous_token"]
    # The anonymous user comes back with its token, to the same conversation.
    again, _ = await converse(
        ws_url(
            stack, f"conversation_id={anonymous_ready['conversation_id']}&user={anonymous_token}"
        )
    )
    assert again["conversation_id"] == anonymous_ready["conversation_id"]

    await asyncio.sleep(4)  # the victim's token has expired (no leeway on this stack)
    replayed = httpx.get(f"{stack.url}/api/turns/{turn}", headers=bearer(victim), timeout=30)
    assert (replayed.status_code, replayed.json()) == (401, REFUSED)
    try:
        async with websockets.connect(ws_url(stack, f"token={victim}")):
            status = 101
    except websockets.InvalidStatus as refused:
        status = refused.response.status_code
    assert status == 401

    # Anonymous tokens: edited, signed by someone else, or a bare self-chosen id.
    header, payload, _ = anonymous_token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forgeries = {
        "edited subject": tampered(anonymous_token, sub="anon:" + "A" * 22),
        "another key": jwt.encode(
            claims,
            "another-gateways-key-0123456789abcdef",
            "HS256",
            headers={"kid": "deskpilot-anonymous"},
        ),
        "unsigned": f"{header}.{payload}.",
        "self-chosen id": claims["sub"],
    }
    anonymous_turn = anonymous_answer["turn_id"]
    for name, forged in forgeries.items():
        read = httpx.get(
            f"{stack.url}/api/turns/{anonymous_turn}", headers=bearer(forged), timeout=30
        )
        assert read.status_code in (401, 404), name
        hijacked, _ = await converse(
            ws_url(stack, f"conversation_id={anonymous_ready['conversation_id']}&user={forged}")
        )
        assert hijacked["conversation_id"] != anonymous_ready["conversation_id"], name
    # Nor is an anonymous token any use on admin paths.
    admin = httpx.get(f"{stack.url}/api/admin/tickets", headers=bearer(anonymous_token), timeout=30)
    assert (admin.status_code, admin.json()) == (401, ADMIN_REFUSED)


async def test_the_websocket_opens_only_for_the_gateways_own_pages(stack: Stack) -> None:
    async def handshake(origin: str | None) -> int:
        try:
            async with websockets.connect(ws_url(stack), origin=origin) as socket:  # type: ignore[arg-type]
                assert json.loads(await socket.recv())["type"] == "ready"
                return 101
        except websockets.InvalidStatus as refused:
            return int(refused.response.status_code)

    assert await handshake(stack.url) == 101  # the chat page itself
    assert await handshake(None) == 101  # a program: no Origin (see gateway/origins.py)
    for origin in ("https://evil.example", "http://127.0.0.1:1", "null"):
        assert await handshake(origin) == 403, origin


def test_a_generated_admin_token_is_fresh_each_run() -> None:
    from contracts.settings import ServiceSettings
    from deploy.runner import generated_admin_token

    unset = ServiceSettings(admin_token="")
    first, second = generated_admin_token(unset), generated_admin_token(unset)
    assert first
    assert second
    assert first != second
    assert generated_admin_token(ServiceSettings(admin_token="an-operators-own-token-0123")) is None
