"""Tokens signed with a shared secret (HS256), with the audience and issuer a verifier checks, and
that verifier, for the tests of user tokens and of the groups they carry."""

from __future__ import annotations

import time
from typing import Any

import jwt

from gateway.identity import HS256Verifier

SECRET = "s3cret-for-tests-only-0123456789abcdef"
AUDIENCE = "deskpilot"
ISSUER = "https://login.northwind.example"


def token(secret: str = SECRET, algorithm: str = "HS256", **claims: Any) -> str:
    """A token of ``emp-1042`` for five minutes, signed with ``secret``; ``claims`` add or
    replace claims (``None`` leaves one out)."""
    now = int(time.time())
    payload: dict[str, Any] = {
        "sub": "emp-1042",
        "aud": AUDIENCE,
        "iss": ISSUER,
        "iat": now,
        "exp": now + 300,
    }
    payload.update(claims)
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, secret, algorithm)


def verifier(**overrides: Any) -> HS256Verifier:
    """The verifier of :func:`token`'s tokens (no leeway); ``overrides`` change its options."""
    options: dict[str, Any] = {"audience": AUDIENCE, "issuer": ISSUER, "leeway_s": 0.0}
    options.update(overrides)
    return HS256Verifier(SECRET.encode(), **options)
