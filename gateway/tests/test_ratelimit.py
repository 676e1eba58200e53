"""Rate limits: the token-bucket script on a real valkey (windows, refill, per user and per IP,
atomicity under concurrency, what is stored), the client address behind trusted proxies, and the
limits over HTTP (429 with Retry-After) and on the WebSocket (an error frame per refused frame,
the connection kept)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import jwt
import pytest
import redis
import redis.asyncio as aioredis
from fastapi.testclient import TestClient
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from starlette.testclient import WebSocketDenialResponse

from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.ratelimit import (
    KEY_PREFIX,
    Allowance,
    ClientAddress,
    Decision,
    LimitKind,
    RateLimiter,
    kind_of,
)

DB = 15
"""This module's own database for the app tests: no other test package uses it."""
SECRET = "rate-limit-test-secret-0123456789abcdef"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    connection = aioredis.from_url(redis_url)
    yield connection
    await connection.aclose()


def limiter(client: aioredis.Redis, per_user: int, per_ip: int, window_s: float) -> RateLimiter:
    allowance = Allowance(per_user, per_ip, window_s)
    return RateLimiter(client, dict.fromkeys(LimitKind, allowance))


# -- the bucket script -------------------------------------------------------------------------


async def test_a_user_gets_the_window_allowance_then_waits_for_the_refill(
    client: aioredis.Redis,
) -> None:
    limits = limiter(client, per_user=3, per_ip=100, window_s=0.6)  # a token every 0.2 s
    user, ip = unique("user"), unique("ip")
    decisions = [await limits.hit(LimitKind.CHAT, user, ip) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[3] == Decision(False, retry_after_s=1, scope="user")
    # Another user on the same IP is not affected, nor the same user's other kinds.
    assert (await limits.hit(LimitKind.CHAT, unique("user"), ip)).allowed
    assert (await limits.hit(LimitKind.UPLOAD, user, ip)).allowed
    await asyncio.sleep(0.25)
    assert (await limits.hit(LimitKind.CHAT, user, ip)).allowed  # one token came back
    assert not (await limits.hit(LimitKind.CHAT, user, ip)).allowed


async def test_retry_after_says_when_a_token_is_back(client: aioredis.Redis) -> None:
    limits = limiter(client, per_user=2, per_ip=100, window_s=60)  # a token every 30 s
    user = unique("user")
    assert (await limits.hit(LimitKind.API, user, None)).allowed
    assert (await limits.hit(LimitKind.API, user, None)).allowed
    refused = await limits.hit(LimitKind.API, user, None)
    assert refused.scope == "user"
    assert 29 <= refused.retry_after_s <= 30
    assert refused.error().headers == {"Retry-After": str(refused.retry_after_s)}
    assert refused.error().payload() == {
        "error_code": "rate_limited",
        "detail": f"Too many requests; try again in {refused.retry_after_s} s.",
    }


async def test_many_users_from_one_ip_hit_the_ip_limit(client: aioredis.Redis) -> None:
    limits = limiter(client, per_user=10, per_ip=5, window_s=60)
    ip = unique("ip")
    decisions = [await limits.hit(LimitKind.CHAT, unique("user"), ip) for _ in range(7)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 2
    assert {d.scope for d in decisions[5:]} == {"ip"}
    assert (await limits.hit(LimitKind.CHAT, unique("user"), unique("ip"))).allowed
    # Anonymous callers (no user) count against their IP alone.
    assert not (await limits.hit(LimitKind.CHAT, None, ip)).allowed


async def test_a_refused_request_takes_nothing_from_the_other_bucket(
    client: aioredis.Redis,
) -> None:
    limits = limiter(client, per_user=2, per_ip=6, window_s=60)
    noisy, ip = unique("user"), unique("ip")
    for _ in range(10):
        await limits.hit(LimitKind.CHAT, noisy, ip)  # 2 allowed, 8 refused by the user bucket
    others = [await limits.hit(LimitKind.CHAT, unique("user"), ip) for _ in range(5)]
    assert [d.allowed for d in others] == [True] * 4 + [False]  # 6 - 2: the 8 refusals cost 0


async def test_concurrent_requests_never_exceed_the_allowance(client: aioredis.Redis) -> None:
    limits = limiter(client, per_user=20, per_ip=1000, window_s=600)
    user, ip = unique("user"), unique("ip")
    decisions = await asyncio.gather(*(limits.hit(LimitKind.API, user, ip) for _ in range(60)))
    assert sum(d.allowed for d in decisions) == 20


async def test_keys_hold_digests_and_expire_with_their_window(client: aioredis.Redis) -> None:
    limits = limiter(client, per_user=5, per_ip=50, window_s=4)
    user, ip = unique("emp"), "203.0.113.77"
    before = {key async for key in client.scan_iter(match=f"{KEY_PREFIX}chat:*")}
    await limits.hit(LimitKind.CHAT, user, ip)
    after = {key async for key in client.scan_iter(match=f"{KEY_PREFIX}chat:*")}
    keys = [key.decode() for key in after - before]
    assert len(keys) == 2  # the user's bucket and the IP's
    assert not [key for key in keys if user in key or ip in key]
    for key in keys:
        ttl_ms = await client.pttl(key)
        assert 0 < ttl_ms <= 5_000  # a full bucket again after one window (+1 s), then gone


async def test_an_unreachable_redis_lets_requests_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = aioredis.Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    try:
        decision = await limiter(down, 1, 1, 60).hit(LimitKind.CHAT, "u", "ip")
    finally:
        await down.aclose()
    assert decision.allowed
    assert [r.__dict__.get("error") for r in caplog.records] == ["ConnectionError"]


@pytest.mark.parametrize(
    ("method", "path", "kind"),
    [
        ("POST", "/api/chat", LimitKind.CHAT),
        ("POST", "/api/attachments", LimitKind.UPLOAD),
        ("POST", "/api/documents", LimitKind.UPLOAD),
        ("GET", "/api/turns/t-1", LimitKind.API),
        ("GET", "/api/admin/tickets", LimitKind.API),
        ("POST", "/api/feedback", LimitKind.API),
        ("GET", "/ws/chat", LimitKind.API),
        ("GET", "/health", None),
        ("GET", "/", None),
        ("GET", "/static/chat.js", None),
        ("GET", "/docs", None),
    ],
)
def test_which_allowance_a_request_spends(method: str, path: str, kind: LimitKind | None) -> None:
    assert kind_of(method, path) == kind


# -- who the client is ---------------------------------------------------------------------------


def test_without_trusted_proxies_the_peer_is_the_client_whatever_it_forwards() -> None:
    assert ClientAddress().of("198.51.100.7", ["203.0.113.9"]) == "198.51.100.7"
    untrusted = ClientAddress(["10.0.0.0/8"])
    assert untrusted.of("198.51.100.7", ["203.0.113.9"]) == "198.51.100.7"


def test_behind_trusted_proxies_the_first_untrusted_hop_from_the_right_is_the_client() -> None:
    proxies = ClientAddress(["10.0.0.0/8", "192.0.2.1"])
    assert proxies.of("10.1.2.3", ["203.0.113.9"]) == "203.0.113.9"
    # A client that forges the left part of the header gains nothing.
    assert proxies.of("10.1.2.3", ["1.2.3.4, 203.0.113.9"]) == "203.0.113.9"
    assert proxies.of("10.1.2.3", ["1.2.3.4", "203.0.113.9, 192.0.2.1"]) == "203.0.113.9"
    assert proxies.of("10.1.2.3", []) == "10.1.2.3"
    assert proxies.of("10.1.2.3", ["10.9.9.9"]) == "10.9.9.9"  # all hops trusted: the oldest
    assert proxies.of("10.1.2.3", ["not-an-ip, 203.0.113.9"]) == "203.0.113.9"
    assert proxies.of("10.1.2.3", ["203.0.113.9, garbage"]) == "10.1.2.3"
    assert proxies.of("2001:db8::1", ["203.0.113.9"]) == "2001:db8::1"


# -- over HTTP and on the WebSocket --------------------------------------------------------------


@pytest.fixture
def db_url(redis_url: str) -> Iterator[str]:
    url = f"{redis_url.rsplit('/', 1)[0]}/{DB}"
    connection = redis.Redis.from_url(url)
    connection.flushdb()
    yield url
    connection.close()


def settings_for(db_url: str, **overrides: Any) -> GatewaySettings:
    values: dict[str, Any] = {
        "redis_url": db_url,
        "jwt_secret": SECRET,
        "turn_timeout_s": 0.2,
        "instance_id": f"test-{uuid.uuid4().hex[:8]}",
        "heartbeat_interval_s": 0.5,
        "graceful_timeout_s": 5,
        "rate_limit_window_s": 60,
    }
    values.update(overrides)
    return GatewaySettings.model_validate(values)


def user(sub: str) -> dict[str, str]:
    token = jwt.encode({"sub": sub, "exp": int(time.time()) + 300}, SECRET, "HS256")
    return {"Authorization": f"Bearer {token}"}


def test_over_the_limit_http_gets_429_with_retry_after(db_url: str) -> None:
    settings = settings_for(db_url, rate_limit_api_per_user=3, rate_limit_api_per_ip=100)
    with TestClient(create_app(settings)) as http:
        statuses = [http.get("/api/turns/t-1", headers=user("emp-1")).status_code for _ in range(4)]
        assert statuses == [404, 404, 404, 429]
        refused = http.get("/api/turns/t-1", headers=user("emp-1"))
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 20
        assert refused.json() == {
            "error_code": "rate_limited",
            "detail": f"Too many requests; try again in {refused.headers['retry-after']} s.",
        }
        # Per user: a colleague on the same address is served; probes are never limited.
        assert http.get("/api/turns/t-1", headers=user("emp-2")).status_code == 404
        assert http.get("/health").status_code in (200, 503)


def test_anonymous_callers_share_their_ip_allowance(db_url: str) -> None:
    settings = settings_for(db_url, rate_limit_chat_per_ip=2, rate_limit_chat_per_user=50)
    with TestClient(create_app(settings)) as http:
        sent = [
            http.post("/api/chat", json={"text": "vpn drops", "user_id": f"browser-{n}"})
            for n in range(3)
        ]
        assert [r.status_code for r in sent] == [504, 504, 429]  # accepted, accepted, limited
        assert sent[2].headers["retry-after"]
        # The refused message was never published.
        raw = redis.Redis.from_url(db_url)
        try:
            assert raw.xlen("message.received") == 2
        finally:
            raw.close()


def test_the_proxy_header_counts_only_from_a_trusted_proxy(db_url: str) -> None:
    settings = settings_for(db_url, rate_limit_api_per_ip=2, trusted_proxies="10.0.0.0/8")
    # Two apps (each TestClient runs its own event loop) counting in the same Redis.
    other = settings.model_copy(update={"instance_id": f"test-{uuid.uuid4().hex[:8]}"})
    with (
        TestClient(create_app(settings), client=("10.0.0.5", 40000)) as via_proxy,
        TestClient(create_app(other), client=("198.51.100.20", 40000)) as direct,
    ):
        for client_ip in ("203.0.113.1", "203.0.113.2", "203.0.113.3"):
            forwarded = {"X-Forwarded-For": client_ip}
            for _ in range(2):
                assert via_proxy.get("/api/turns/t", headers=forwarded).status_code == 404
            assert via_proxy.get("/api/turns/t", headers=forwarded).status_code == 429
        # From an untrusted peer the header is ignored: rotating it does not help.
        codes = [
            direct.get("/api/turns/t", headers={"X-Forwarded-For": f"203.0.113.{n}"}).status_code
            for n in range(10, 13)
        ]
        assert codes == [404, 404, 429]


def test_disabled_limits_never_refuse(db_url: str) -> None:
    settings = settings_for(db_url, rate_limit_enabled=False, rate_limit_api_per_ip=1)
    with TestClient(create_app(settings)) as http:
        assert {http.get("/api/turns/t").status_code for _ in range(5)} == {404}


def test_websocket_frames_over_the_limit_get_an_error_frame_and_the_socket_stays_open(
    db_url: str,
) -> None:
    settings = settings_for(db_url, rate_limit_chat_per_user=2, rate_limit_window_s=1.0)
    with (
        TestClient(create_app(settings)) as http,
        http.websocket_connect("/ws/chat?conversation_id=c-rl&user=browser-rl") as ws,
    ):
        assert ws.receive_json()["type"] == "ready"
        for n in range(2):
            ws.send_json({"type": "message", "text": "printer jams", "client_id": f"m{n}"})
            assert ws.receive_json()["type"] == "accepted"
            assert ws.receive_json()["stage"] == "redacting"
        ws.send_json({"type": "message", "text": "printer jams", "client_id": "m2"})
        assert ws.receive_json() == {
            "type": "error",
            "error_code": "rate_limited",
            "detail": "Too many requests; try again in 1 s.",
            "retry_after": 1,
            "client_id": "m2",
        }
        time.sleep(0.55)  # half a window: one token back
        ws.send_json({"type": "message", "text": "printer jams", "client_id": "m3"})
        accepted = ws.receive_json()
        assert accepted["type"] == "accepted"
        assert accepted["client_id"] == "m3"


def test_a_websocket_handshake_over_the_limit_is_refused_with_429(db_url: str) -> None:
    settings = settings_for(db_url, rate_limit_api_per_ip=2)
    with TestClient(create_app(settings)) as http:
        for _ in range(2):
            with http.websocket_connect("/ws/chat") as ws:
                assert ws.receive_json()["type"] == "ready"
        with pytest.raises(WebSocketDenialResponse) as refused, http.websocket_connect("/ws/chat"):
            pass
        assert refused.value.status_code == 429
        assert int(refused.value.headers["retry-after"]) >= 1
        assert refused.value.json()["error_code"] == "rate_limited"
