"""User tokens: HS256 JWTs with a shared secret, and tokens of an identity provider verified
against its JWKS (served by a fake provider over real HTTP on loopback: caching, key rotation,
unknown key ids, outages, algorithm confusion), refused with one generic 401 whatever is wrong,
the reason logged as a category and never the token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import ValidationError

from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode
from gateway.identity import (
    REFUSED_DETAIL,
    HS256Verifier,
    Identity,
    IdentityResolver,
    InvalidToken,
    JwksCache,
    JwksVerifier,
    TokenQueryFilter,
)
from gateway.tests.hs256_tokens import AUDIENCE, ISSUER, SECRET, token, verifier
from tests.support.fake_idp import FakeIdP, new_key


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
        ("127.0.0.1:5000", f"/ws/chat?conversation_id=c1&token={token()}&user={token()}"),
        None,
    )
    assert TokenQueryFilter().filter(record)
    assert record.getMessage() == (
        '127.0.0.1:5000 - "WebSocket /ws/chat?conversation_id=c1&token=<withheld>'
        '&user=<withheld>" [accepted]'
    )


# -- tokens from an identity provider's JWKS --------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def idp() -> Iterator[FakeIdP]:
    with FakeIdP() as provider:
        yield provider


@pytest.fixture
def clock() -> Clock:
    return Clock()


def jwks_verifier(
    idp: FakeIdP, clock: Clock, *, lifetime_s: float = 600, min_refresh_s: float = 30
) -> JwksVerifier:
    cache = JwksCache(idp.jwks_url, lifetime_s=lifetime_s, min_refresh_s=min_refresh_s, clock=clock)
    return JwksVerifier(cache, audience=idp.audience, issuer=idp.issuer)


def jwks_refusal(presented: str, check: JwksVerifier) -> str:
    with pytest.raises(InvalidToken) as caught:
        check.verify(presented)
    return caught.value.kind


def test_a_token_signed_with_a_published_key_gives_its_subject_and_roles(
    idp: FakeIdP, clock: Clock
) -> None:
    identity = jwks_verifier(idp, clock).verify(idp.issue("emp-7", roles=["technician"]))
    assert identity == Identity(user_id="emp-7", roles=frozenset({"employee", "technician"}))


def test_es256_keys_work_too(clock: Clock) -> None:
    with FakeIdP(kind="EC") as ec_idp:
        assert ec_idp.active.algorithm == "ES256"
        assert jwks_verifier(ec_idp, clock).verify(ec_idp.issue("emp-8")).user_id == "emp-8"


def test_keys_are_fetched_once_per_lifetime_not_per_request(idp: FakeIdP, clock: Clock) -> None:
    check = jwks_verifier(idp, clock, lifetime_s=600)
    for n in range(50):
        assert check.verify(idp.issue(f"emp-{n}")).user_id == f"emp-{n}"
    assert idp.jwks_requests == 1
    clock.now += 601
    check.verify(idp.issue())
    assert idp.jwks_requests == 2


def test_key_rotation_old_kid_new_kid_then_the_old_key_retired(idp: FakeIdP, clock: Clock) -> None:
    check = jwks_verifier(idp, clock, lifetime_s=600, min_refresh_s=30)
    old = idp.active
    old_token = idp.issue("emp-old")
    assert check.verify(old_token).user_id == "emp-old"
    assert idp.jwks_requests == 1

    new = idp.rotate()
    new_token = idp.issue("emp-new")
    assert jwt.get_unverified_header(new_token)["kid"] == new.kid != old.kid
    # An unknown kid: one refetch, at once (the last fetch is older than min_refresh_s).
    clock.now += 31
    assert check.verify(new_token).user_id == "emp-new"
    assert idp.jwks_requests == 2
    # Both keys are published during the overlap: neither token costs a fetch.
    assert check.verify(old_token).user_id == "emp-old"
    assert check.verify(new_token).user_id == "emp-new"
    assert idp.jwks_requests == 2

    idp.retire(old.kid)
    clock.now += 601  # the cached set expires and is fetched again, without the old key
    assert jwks_refusal(old_token, check) == "unknown_key"
    assert check.verify(new_token).user_id == "emp-new"


def test_unknown_kids_refetch_at_most_once_per_min_refresh(idp: FakeIdP, clock: Clock) -> None:
    check = jwks_verifier(idp, clock, min_refresh_s=30)
    check.verify(idp.issue())
    assert idp.jwks_requests == 1
    clock.now += 31
    stranger = new_key("RSA")
    forged = [idp.issue(key=stranger, headers={"kid": f"forged-{n}"}) for n in range(20)]
    assert {jwks_refusal(token, check) for token in forged} == {"unknown_key"}
    assert idp.jwks_requests == 2  # one refetch for twenty unknown kids
    clock.now += 10
    assert jwks_refusal(forged[0], check) == "unknown_key"
    assert idp.jwks_requests == 2
    clock.now += 30
    assert jwks_refusal(forged[0], check) == "unknown_key"
    assert idp.jwks_requests == 3


def test_a_key_rotated_in_right_after_a_fetch_is_found_after_min_refresh(
    idp: FakeIdP, clock: Clock
) -> None:
    check = jwks_verifier(idp, clock, min_refresh_s=30)
    check.verify(idp.issue())
    idp.rotate()
    early = idp.issue("emp-early")
    assert jwks_refusal(early, check) == "unknown_key"  # fetched a moment ago: no refetch yet
    clock.now += 30
    assert check.verify(early).user_id == "emp-early"


def test_an_unreachable_idp_keeps_the_known_keys_and_is_not_hammered(
    idp: FakeIdP, clock: Clock
) -> None:
    check = jwks_verifier(idp, clock, lifetime_s=600, min_refresh_s=30)
    token = idp.issue(expires_in=3600)
    check.verify(token)
    idp.down = True
    clock.now += 601
    for _ in range(10):
        assert check.verify(token).user_id == "emp-1042"  # stale keys beat logging everyone out
    assert idp.jwks_requests == 1  # the 503s are not counted as JWKS requests; one attempt made
    assert check.keys.fetches == 2


def test_without_any_key_tokens_cannot_be_verified_and_say_so(idp: FakeIdP, clock: Clock) -> None:
    idp.fail_next(500)
    check = jwks_verifier(idp, clock)
    assert jwks_refusal(idp.issue(), check) == "keys_unavailable"
    resolver = IdentityResolver(check)
    with pytest.raises(ApiError) as caught:
        resolver.resolve_token(idp.issue())
    assert caught.value.code is ErrorCode.IDENTITY_UNAVAILABLE  # 503: an outage, not a refusal
    assert caught.value.headers == {"Retry-After": "5"}
    clock.now += 31
    assert check.verify(idp.issue()).user_id == "emp-1042"


@pytest.mark.parametrize(
    ("claims", "kind"),
    [
        ({"exp": int(time.time()) - 60}, "expired"),
        ({"aud": "api://payroll"}, "audience"),
        ({"aud": None}, "audience"),
        ({"iss": "https://login.evil.example"}, "issuer"),
        ({"iss": None}, "issuer"),
        ({"sub": None}, "claims"),
        ({"nbf": int(time.time()) + 3600}, "not_yet_valid"),
    ],
    ids=["expired", "audience", "no-aud", "issuer", "no-iss", "no-sub", "not-yet-valid"],
)
def test_provider_tokens_with_wrong_claims_are_refused(
    idp: FakeIdP, clock: Clock, claims: dict[str, Any], kind: str
) -> None:
    assert jwks_refusal(idp.issue(**claims), jwks_verifier(idp, clock)) == kind


def test_a_tampered_provider_token_is_refused(idp: FakeIdP, clock: Clock) -> None:
    header, payload, signature = idp.issue(roles=["employee"]).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["roles"] = ["admin"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert jwks_refusal(f"{header}.{forged}.{signature}", jwks_verifier(idp, clock)) == "signature"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_signed(header: dict[str, Any], claims: dict[str, Any], secret: bytes) -> str:
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def claims_of(idp: FakeIdP, **overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": idp.issuer, "aud": idp.audience, "sub": "emp-1", "exp": now + 300} | overrides


def test_alg_none_is_refused(idp: FakeIdP, clock: Clock) -> None:
    unsigned = jwt.encode(claims_of(idp), None, algorithm="none", headers={"kid": idp.active.kid})
    assert jwks_refusal(unsigned, jwks_verifier(idp, clock)) == "algorithm"
    assert jwks_refusal(unsigned.rstrip("."), jwks_verifier(idp, clock)) in {
        "malformed",
        "algorithm",
    }


def test_hs256_signed_with_the_public_key_is_refused(idp: FakeIdP, clock: Clock) -> None:
    # The classic confusion: the attacker "signs" with HMAC, using the public key as the secret.
    public = idp.active.private.public_key()
    pem = public.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    jwk_json = json.dumps(idp.active.public_jwk()).encode()
    check = jwks_verifier(idp, clock)
    for secret in (pem, jwk_json):
        forged = hand_signed(
            {"alg": "HS256", "typ": "JWT", "kid": idp.active.kid},
            claims_of(idp, roles=["admin"]),
            secret,
        )
        assert jwks_refusal(forged, check) == "algorithm"
    assert idp.jwks_requests == 0  # refused on the header, before any key is looked up


def test_a_key_type_that_does_not_fit_the_algorithm_is_refused(clock: Clock) -> None:
    with FakeIdP(kind="EC") as ec_idp:
        rsa_key = new_key("RSA", kid=ec_idp.active.kid)  # the EC key's kid, an RSA signature
        token = ec_idp.issue(key=rsa_key)
        assert jwt.get_unverified_header(token)["alg"] == "RS256"
        assert jwks_refusal(token, jwks_verifier(ec_idp, clock)) == "algorithm"


def test_a_key_embedded_in_the_token_header_is_never_trusted(idp: FakeIdP, clock: Clock) -> None:
    attacker = new_key("RSA", kid=idp.active.kid)
    token = idp.issue(
        roles=["admin"], key=attacker, headers={"jwk": attacker.public_jwk(), "jku": "http://x"}
    )
    assert jwks_refusal(token, jwks_verifier(idp, clock)) == "signature"


def test_a_jwks_verifier_refuses_symmetric_algorithms() -> None:
    cache = JwksCache("https://login.northwind.example/keys")
    with pytest.raises(ValueError, match="asymmetric"):
        JwksVerifier(cache, audience="a", issuer="i", algorithms=["RS256", "HS256"])


def test_the_resolver_uses_the_jwks_from_settings_and_logs_only_categories(
    idp: FakeIdP, caplog: pytest.LogCaptureFixture
) -> None:
    settings = GatewaySettings(
        jwt_jwks_url=idp.jwks_url, jwt_issuer=idp.issuer, jwt_audience=idp.audience
    )
    resolver = IdentityResolver.from_settings(settings)
    assert isinstance(resolver.verifier, JwksVerifier)
    admin = idp.issue("emp-9", roles=["admin"])
    assert resolver.resolve_header(f"Bearer {admin}") == Identity(
        user_id="emp-9", roles=frozenset({"employee", "admin"})
    )
    caplog.set_level(logging.INFO, logger="deskpilot.gateway.identity")
    forged = idp.issue("emp-9", roles=["admin"], key=new_key("RSA", kid=idp.active.kid))
    with pytest.raises(ApiError) as caught:
        resolver.resolve_header(f"Bearer {forged}")
    assert caught.value.payload() == {"error_code": "unauthorized", "detail": REFUSED_DETAIL}
    [line] = [r for r in caplog.records if r.getMessage() == "access token refused"]
    assert line.__dict__["reason"] == "signature"
    logged = json.dumps([r.__dict__ for r in caplog.records], default=str)
    assert forged not in logged
    assert forged.split(".")[2] not in logged


def test_jwks_settings_are_checked_at_start() -> None:
    good = {
        "jwt_jwks_url": "https://login.northwind.example/discovery/keys",
        "jwt_issuer": "https://login.northwind.example",
        "jwt_audience": "api://deskpilot",
    }
    assert GatewaySettings(**good).jwt_algorithms == ["RS256", "ES256"]
    assert GatewaySettings(**good, jwt_algorithms="ES256,PS256").jwt_algorithms == [
        "ES256",
        "PS256",
    ]
    loopback = good | {"jwt_jwks_url": "http://127.0.0.1:9000/jwks"}
    assert GatewaySettings(**loopback).jwt_jwks_url == "http://127.0.0.1:9000/jwks"
    for change, message in [
        ({"jwt_jwks_url": "http://login.northwind.example/keys"}, "https"),
        ({"jwt_jwks_url": "file:///etc/keys.json"}, "https"),
        ({"jwt_issuer": None}, "GATEWAY_JWT_ISSUER"),
        ({"jwt_audience": None}, "GATEWAY_JWT_AUDIENCE"),
        ({"jwt_secret": SECRET}, "not both"),
        ({"jwt_algorithms": "RS256,HS256"}, "HS256"),
        ({"jwt_algorithms": "none"}, "none"),
    ]:
        with pytest.raises(ValidationError, match=message):
            GatewaySettings(**(good | change))


def test_a_slow_refresh_never_holds_up_tokens_whose_key_is_known(
    idp: FakeIdP, clock: Clock
) -> None:
    check = jwks_verifier(idp, clock, lifetime_s=600)
    token = idp.issue()
    check.verify(token)
    clock.now += 601  # the set expired: the next verification refreshes it
    idp.delay_s = 1.0
    refreshing = threading.Thread(target=check.verify, args=(token,))
    refreshing.start()
    try:
        wait = time.monotonic() + 5
        while idp.jwks_requests < 2:  # the refresh is in flight
            assert time.monotonic() < wait
            time.sleep(0.01)
        started = time.perf_counter()
        assert check.verify(token).user_id == "emp-1042"
        assert time.perf_counter() - started < 0.5  # did not queue behind the 1 s fetch
    finally:
        refreshing.join(5)
    assert idp.jwks_requests == 2
