"""Rate limits per user and per client IP, counted in Redis so every gateway replica shares them.

Each limit is a token bucket: it holds one window's allowance (``GATEWAY_RATE_LIMIT_*``) and
refills evenly over ``GATEWAY_RATE_LIMIT_WINDOW_S``, so a burst up to the allowance is fine and a
steady rate above allowance/window is not. One Lua script checks every bucket a request counts
against (the user's and the IP's) and takes a token from each only when all have one, atomically,
with Redis's own clock (replicas' clocks never disagree). A refused request takes nothing, and
its ``retry_after_s`` is when the emptiest bucket will hold a token again.

Three kinds of request have their own allowances: chat messages (``POST /api/chat`` and each
WebSocket message frame), uploads (``POST /api/attachments``, ``POST /api/documents``), and every
other API call (WebSocket connections included). The user is a verified token's subject, the
break-glass admin token, or an anonymous user the gateway issued a token to; callers without
credentials count against their IP only. Redis being unreachable lets requests through (the
limiter must not be what takes the chat down; the request itself then fails or succeeds on its
own).

Keys hold a digest of the user or IP, never the value, and expire once their bucket is full again.
All of them share one hash tag, so the script runs on Redis Cluster too.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode

log = logging.getLogger("deskpilot.gateway.ratelimit")

KEY_PREFIX = "deskpilot:ratelimit:{gw}:"

# KEYS: the buckets. ARGV: per bucket, its capacity and its refill rate in tokens per ms.
# Returns {1, 0, 0} when allowed (a token taken from every bucket), else {0, wait_ms, index}
# with the bucket that needs the longest wait.
BUCKET_SCRIPT = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local levels = {}
local wait, blocked = 0, 0
for i = 1, #KEYS do
  local capacity = tonumber(ARGV[2 * i - 1])
  local per_ms = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local tokens, ts = tonumber(state[1]), tonumber(state[2])
  if tokens == nil or ts == nil then
    tokens, ts = capacity, now
  end
  if now > ts then
    tokens = math.min(capacity, tokens + (now - ts) * per_ms)
  end
  levels[i] = tokens
  if tokens < 1 then
    local need = math.ceil((1 - tokens) / per_ms)
    if need > wait then
      wait, blocked = need, i
    end
  end
end
if blocked > 0 then
  return {0, wait, blocked}
end
for i = 1, #KEYS do
  local capacity = tonumber(ARGV[2 * i - 1])
  local per_ms = tonumber(ARGV[2 * i])
  redis.call('HSET', KEYS[i], 'tokens', tostring(levels[i] - 1), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[i], math.ceil(capacity / per_ms) + 1000)
end
return {1, 0, 0}
"""


class LimitKind(StrEnum):
    CHAT = "chat"
    UPLOAD = "upload"
    API = "api"


UPLOAD_PATHS = frozenset({"/api/attachments", "/api/documents"})


def kind_of(method: str, path: str) -> LimitKind | None:
    """Which allowance an HTTP request counts against; None for what is not the API (the chat
    page, static files, ``/health`` for probes, the OpenAPI pages)."""
    if not (path.startswith("/api/") or path.startswith("/ws/")):
        return None
    if method == "POST" and path.rstrip("/") == "/api/chat":
        return LimitKind.CHAT
    if method == "POST" and path.rstrip("/") in UPLOAD_PATHS:
        return LimitKind.UPLOAD
    return LimitKind.API


@dataclass(frozen=True)
class Allowance:
    """``per_user`` and ``per_ip`` requests per ``window_s``."""

    per_user: int
    per_ip: int
    window_s: float


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0
    """Whole seconds until a retry can succeed (at least 1 when refused)."""
    scope: str | None = None
    """Which bucket refused: ``user`` or ``ip`` (for logs)."""

    def error(self) -> ApiError:
        """The 429 for a refused HTTP request."""
        return ApiError(
            ErrorCode.RATE_LIMITED,
            f"Too many requests; try again in {self.retry_after_s} s.",
            headers={"Retry-After": str(self.retry_after_s)},
        )


ALLOWED = Decision(True)


class RateLimiter:
    """Checks and counts requests against the buckets of their user and IP."""

    def __init__(self, redis: Redis, allowances: Mapping[LimitKind, Allowance]) -> None:
        self.redis = redis
        self.allowances = dict(allowances)
        self._script = redis.register_script(BUCKET_SCRIPT)

    @classmethod
    def from_settings(cls, redis: Redis, settings: GatewaySettings) -> RateLimiter | None:
        """The limiter the settings ask for; None when rate limits are off."""
        if not settings.rate_limit_enabled:
            return None
        window = settings.rate_limit_window_s
        return cls(
            redis,
            {
                LimitKind.CHAT: Allowance(
                    settings.rate_limit_chat_per_user, settings.rate_limit_chat_per_ip, window
                ),
                LimitKind.UPLOAD: Allowance(
                    settings.rate_limit_upload_per_user, settings.rate_limit_upload_per_ip, window
                ),
                LimitKind.API: Allowance(
                    settings.rate_limit_api_per_user, settings.rate_limit_api_per_ip, window
                ),
            },
        )

    async def hit(self, kind: LimitKind, user: str | None, ip: str | None) -> Decision:
        """Count one request of ``kind`` by ``user`` (None: anonymous) from ``ip``."""
        allowance = self.allowances[kind]
        buckets: list[tuple[str, str, int]] = []
        if user:
            buckets.append(("user", _key(kind, "user", user), allowance.per_user))
        if ip:
            buckets.append(("ip", _key(kind, "ip", ip), allowance.per_ip))
        if not buckets:
            return ALLOWED
        args: list[float] = []
        for _, _, capacity in buckets:
            args += [capacity, capacity / (allowance.window_s * 1000)]
        try:
            allowed, wait_ms, index = await self._script(
                keys=[key for _, key, _ in buckets], args=args
            )
        except RedisError as exc:
            log.warning("rate limit not checked", extra={"error": type(exc).__name__})
            return ALLOWED
        if allowed:
            return ALLOWED
        scope = buckets[int(index) - 1][0]
        retry_after = max(1, math.ceil(int(wait_ms) / 1000))
        log.info("rate limited", extra={"kind": kind.value, "scope": scope})
        return Decision(False, retry_after, scope)


def _key(kind: LimitKind, scope: str, value: str) -> str:
    digest = hashlib.sha256(f"{scope}\0{value}".encode()).hexdigest()[:32]
    return f"{KEY_PREFIX}{kind.value}:{scope}:{digest}"


# -- who and where -------------------------------------------------------------------------------


class ClientAddress:
    """The client's IP: the socket's peer, unless the peer is a trusted reverse proxy, in which
    case ``X-Forwarded-For`` is read from the right, skipping trusted proxies, and the first
    address that is not one of them is the client. A forged left part of the header therefore
    never counts; only the hops the trusted proxies appended do."""

    def __init__(self, trusted: Iterable[str] = ()) -> None:
        self.trusted = [ipaddress.ip_network(net, strict=False) for net in trusted]

    def _is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.trusted)

    def of(self, peer: str | None, forwarded_for: Iterable[str] = ()) -> str | None:
        if peer is None or not self.trusted or not self._is_trusted(peer):
            return peer
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
        client = peer
        for hop in reversed(hops):
            try:
                ipaddress.ip_address(hop)
            except ValueError:
                break  # garbage: the address before it is the last one to trust
            client = hop
            if not self._is_trusted(hop):
                break
        return client
