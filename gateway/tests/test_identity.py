"""User tokens: HS256 JWTs with ``sub`` and ``exp``, refused with one generic 401 whatever is
wrong, the reason logged as a category and never the token."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import jwt
import pytest
from pydantic import ValidationError

from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode
from gateway.identity import (
    REFUSED_DETAIL,
    HS256Verifier,
    Identity,
    IdentityResolver,
    InvalidToken,
    TokenQueryFilter,
)

SECRET = "s3cret-for-tests-only-0123456789abcdef"
AUDIENCE = "deskpilot"
ISSUER = "https://login.northwind.example"


def token(secret: str = SECRET, algorithm: str = "HS256", **claims: Any) -> str:
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
    options: dict[str, Any] = {"audience": AUDIENCE, "issuer": ISSUER, "leeway_s": 0.0}
    options.update(overrides)
    return HS256Verifier(SECRET.encode(), **options)


def refusal(presented: str, check: HS256Verifier | None = None) -> str:
    with pytest.raises(InvalidToken) as caught:
        (check or verifier()).verify(presented)
    return caught.value.kind


def test_a_valid_token_gives_its_subject() -> None:
    assert verifier().verify(token()) == Identity(user_id="emp-1042", authenticated=True)


def test_an_expired_token_is_refused() -> None:
    assert refusal(token(exp=int(time.time()) - 60)) == "expired"


def test_the_leeway_forgives_a_little_clock_skew_only() -> None:
    just_expired = token(exp=int(time.time()) - 5)
    assert verifier(leeway_s=30).verify(just_expired).user_id == "emp-1042"
    assert refusal(token(exp=int(time.time()) - 60), verifier(leeway_s=30)) == "expired"


def test_a_token_for_another_audience_is_refused() -> None:
    assert refusal(token(aud="payroll")) == "audience"
    assert refusal(token(aud=None)) == "audience"  # an audience is configured: aud is required


def test_a_token_with_an_audience_is_refused_when_none_is_configured() -> None:
    assert refusal(token(), verifier(audience=None)) == "audience"
    assert verifier(audience=None).verify(token(aud=None)).user_id == "emp-1042"


def test_a_token_from_another_issuer_is_refused() -> None:
    assert refusal(token(iss="https://evil.example")) == "issuer"
    assert refusal(token(iss=None)) == "issuer"


def test_a_token_signed_with_another_secret_is_refused() -> None:
    assert refusal(token(secret="another-secret-that-is-long-enough-0123")) == "signature"


def test_a_tampered_payload_is_refused() -> None:
    header, payload, signature = token().split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert refusal(f"{header}.{forged}.{signature}") == "signature"


@pytest.mark.parametrize("algorithm", ["HS384", "HS512"])
def test_only_hs256_is_accepted_even_with_the_right_secret(algorithm: str) -> None:
    assert refusal(token(algorithm=algorithm, secret=SECRET + "x" * 40)) == "signature"


def test_an_unsigned_token_is_refused() -> None:
    unsigned = jwt.encode({"sub": "emp-1", "exp": int(time.time()) + 60}, None, algorithm="none")
    assert refusal(unsigned, verifier(audience=None, issuer=None)) == "signature"


@pytest.mark.parametrize(
    ("claims", "kind"),
    [
        ({"sub": None}, "claims"),
        ({"exp": None}, "claims"),
        ({"sub": ""}, "claims"),
        ({"sub": "   "}, "claims"),
        ({"sub": 1042}, "claims"),
        ({"sub": "x" * 129}, "claims"),
        ({"sub": "emp\n1042"}, "claims"),
        ({"nbf": int(time.time()) + 3600}, "not_yet_valid"),
    ],
)
def test_claims_that_do_not_name_a_user_are_refused(claims: dict[str, Any], kind: str) -> None:
    assert refusal(token(**claims)) == kind


@pytest.mark.parametrize("garbage", ["not-a-jwt", "a.b.c", "Zm9v.YmFy", "."])
def test_garbage_is_refused_as_malformed(garbage: str) -> None:
    assert refusal(garbage) == "malformed"


def resolver() -> IdentityResolver:
    return IdentityResolver.from_settings(
        GatewaySettings(jwt_secret=SECRET, jwt_audience=AUDIENCE, jwt_issuer=ISSUER, jwt_leeway_s=0)
    )


def test_no_token_is_anonymous() -> None:
    assert resolver().resolve_header(None) is None
    assert resolver().resolve_token(None) is None


def test_a_header_with_another_scheme_is_not_a_user_token() -> None:
    # A reverse proxy's Basic credentials are not ours to judge.
    assert resolver().resolve_header("Basic dXNlcjpwYXNz") is None


def test_bearer_is_case_insensitive_and_trimmed() -> None:
    identity = resolver().resolve_header(f"  bearer   {token()} ")
    assert identity == Identity(user_id="emp-1042")


def test_without_a_secret_everyone_is_anonymous_and_tokens_are_ignored() -> None:
    disabled = IdentityResolver.from_settings(GatewaySettings())
    assert disabled.enabled is False
    assert disabled.resolve_header(f"Bearer {token()}") is None
    assert disabled.resolve_token("anything") is None


def test_every_refusal_looks_the_same_and_logs_only_its_category(
    caplog: pytest.LogCaptureFixture,
) -> None:
    presented = {
        "expired": token(exp=int(time.time()) - 60),
        "audience": token(aud="payroll"),
        "signature": token(secret="another-secret-that-is-long-enough-0123"),
        "claims": token(sub=None),
        "malformed": "",
    }
    caplog.set_level(logging.INFO, logger="deskpilot.gateway.identity")
    payloads = set()
    for kind, value in presented.items():
        caplog.clear()
        with pytest.raises(ApiError) as caught:
            resolver().resolve_header(f"Bearer {value}")
        assert caught.value.code is ErrorCode.UNAUTHORIZED
        payloads.add(json.dumps(caught.value.payload(), sort_keys=True))
        [line] = caplog.records
        assert line.__dict__["reason"] == kind
        logged = json.dumps(line.__dict__, default=str)
        assert not value or value not in logged
        assert "emp-1042" not in logged
    assert payloads == {json.dumps({"detail": REFUSED_DETAIL, "error_code": "unauthorized"})}


def test_a_short_secret_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="at least 32 bytes"):
        GatewaySettings(jwt_secret="too-short")


def test_production_refuses_a_placeholder_incident_token_but_allows_none() -> None:
    production = {"environment": "production", "admin_token": "a-real-admin-token-0123456789"}
    with pytest.raises(ValidationError, match="GATEWAY_INCIDENT_TOKEN"):
        GatewaySettings(**production, incident_token="change-me")
    assert GatewaySettings(**production).incident_token is None
    configured = GatewaySettings(**production, incident_token="t" * 32).incident_token
    assert configured is not None
    assert configured.get_secret_value() == "t" * 32


def test_tokens_in_query_strings_are_withheld_from_server_logs() -> None:
    record = logging.LogRecord(
        "uvicorn.error",
        logging.INFO,
        __file__,
        1,
        '%s - "WebSocket %s" [accepted]',
        ("127.0.0.1:5000", f"/ws/chat?conversation_id=c1&token={token()}"),
        None,
    )
    assert TokenQueryFilter().filter(record)
    assert record.getMessage() == (
        '127.0.0.1:5000 - "WebSocket /ws/chat?conversation_id=c1&token=<withheld>" [accepted]'
    )
