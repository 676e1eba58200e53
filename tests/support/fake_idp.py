"""A local OpenID Connect identity provider over real HTTP, for tests: it publishes its signing
keys as a JWK Set (RFC 7517) and issues tokens signed with them, as Entra ID, Okta or Keycloak
would. It is a Starlette app served by :mod:`tests.support.served`.

``GET /.well-known/openid-configuration`` answers the discovery document (``issuer``,
``jwks_uri``, ``id_token_signing_alg_values_supported``); ``GET /jwks`` the public keys, each
with ``kty``, ``use: "sig"``, ``kid`` and ``alg``, with ``Cache-Control: max-age``. Any other
path is a 404 and any other method a 405, with an OAuth-style JSON error body.

Key rotation works as at real providers: :meth:`FakeIdP.rotate` adds a new key and signs with it
from then on while the old one stays published until :meth:`FakeIdP.retire` removes it. Fault
knobs: :meth:`fail_next` (answer the next JWKS requests with a status, such as 500 or 503),
``down`` (every GET refused with 503), ``delay_s`` (a slow JWKS answer). Every JWKS
request is counted (:attr:`FakeIdP.jwks_requests`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.served import ServedFake

KeyKind = Literal["RSA", "EC"]
AUDIENCE = "api://deskpilot"


@dataclass
class SigningKey:
    kid: str
    kind: KeyKind
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    @property
    def algorithm(self) -> str:
        return "RS256" if self.kind == "RSA" else "ES256"

    def public_jwk(self) -> dict[str, Any]:
        if isinstance(self.private, rsa.RSAPrivateKey):
            jwk = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        else:
            jwk = json.loads(ECAlgorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "use": "sig", "alg": self.algorithm}


def new_key(kind: KeyKind = "RSA", kid: str | None = None) -> SigningKey:
    """A fresh key pair (RSA 2048 or EC P-256), not yet published anywhere."""
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if kind == "RSA":
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        private = ec.generate_private_key(ec.SECP256R1())
    return SigningKey(kid or uuid.uuid4().hex[:16], kind, private)


class FakeIdP(ServedFake):
    """The provider and its keys; ``with FakeIdP() as idp:`` serves it at ``idp.issuer``."""

    def __init__(self, audience: str = AUDIENCE, kind: KeyKind = "RSA") -> None:
        self.audience = audience
        self._lock = threading.Lock()
        self.keys: list[SigningKey] = [new_key(kind)]
        self.active: SigningKey = self.keys[0]
        self.jwks_requests = 0
        self.down = False
        self.delay_s = 0.0
        self._faults: list[int] = []

    # -- keys and tokens -------------------------------------------------------------------

    @property
    def issuer(self) -> str:
        return self.base_url

    @property
    def jwks_url(self) -> str:
        return self.base_url + "/jwks"

    def rotate(self, kind: KeyKind = "RSA") -> SigningKey:
        """Publish a new key and sign with it from now on; the old one stays published."""
        key = new_key(kind)
        with self._lock:
            self.keys.append(key)
            self.active = key
        return key

    def retire(self, kid: str) -> None:
        """Stop publishing a key (tokens it signed no longer verify once caches refresh)."""
        with self._lock:
            self.keys = [key for key in self.keys if key.kid != kid]

    def issue(
        self,
        sub: str = "emp-1042",
        *,
        roles: list[str] | str | None = None,
        key: SigningKey | None = None,
        expires_in: float = 300,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A token as the provider issues it: ``iss``, ``aud``, ``sub``, ``iat``, ``exp`` (and
        ``roles`` when given), signed with the active key unless ``key`` is another; ``claims``
        set to None are left out, others override."""
        signer = key or self.active
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": sub,
            "iat": now,
            "nbf": now,
            "exp": now + int(expires_in),
        }
        if roles is not None:
            payload["roles"] = roles
        payload.update(claims)
        return jwt.encode(
            {k: v for k, v in payload.items() if v is not None},
            signer.private,
            algorithm=signer.algorithm,
            headers={"kid": signer.kid, **(headers or {})},
        )

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            return {"keys": [key.public_jwk() for key in self.keys]}

    def fail_next(self, *statuses: int) -> None:
        """Answer the next JWKS requests with these statuses, in order."""
        with self._lock:
            self._faults.extend(statuses)

    def _next_fault(self) -> int | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    # -- server ----------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._discovery, methods=["GET"]),
                Route("/jwks", self._jwks, methods=["GET"]),
            ],
            exception_handlers={404: self._no_route, 405: self._no_route},
        )

    def _down(self) -> Response | None:
        return _answer(503, {"error": "temporarily_unavailable"}) if self.down else None

    async def _discovery(self, request: Request) -> Response:
        if refused := self._down():
            return refused
        return _answer(
            200,
            {
                "issuer": self.issuer,
                "jwks_uri": self.jwks_url,
                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            },
        )

    async def _jwks(self, request: Request) -> Response:
        if refused := self._down():
            return refused
        with self._lock:
            self.jwks_requests += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        fault = self._next_fault()
        if fault is not None:
            return _answer(fault, {"error": "server_error"})
        return _answer(200, self.jwks(), {"Cache-Control": "public, max-age=3600"})

    async def _no_route(self, request: Request, exc: Exception) -> Response:
        """Starlette's 404 and 405, in the provider's words: only GET is served."""
        if request.method not in ("GET", "HEAD"):
            return _answer(405, {"error": "method_not_allowed"}, {"Allow": "GET"})
        if refused := self._down():
            return refused
        return _answer(404, {"error": "not_found"})


def _answer(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(body, status_code=status, headers=headers)
