"""Who is asking: an optional signed token on chat requests, verified at the gateway.

A client may send ``Authorization: Bearer <JWT>`` (``?token=`` on the WebSocket). A valid token
makes its ``sub`` the message's user id and marks it authenticated; no token keeps today's
anonymous behaviour; any invalid token is refused with one generic 401, whatever check failed, so
a caller cannot probe which part of a forged token was wrong. Only the failure's category is
logged, never the token or its claims.

For now tokens are HS256 with a shared secret (``GATEWAY_JWT_SECRET``). The verifier is a small
class behind :class:`TokenVerifier` so an OIDC/JWKS verifier can take its place later without
touching the routes.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal, Protocol

import jwt

from gateway.config import GatewaySettings, secret_value
from gateway.errors import ApiError, ErrorCode

log = logging.getLogger("deskpilot.gateway.identity")

MAX_SUBJECT_LENGTH = 128
"""The longest user id the API accepts anywhere (``ChatCreate.user_id``)."""

REFUSED_DETAIL = "The access token is not valid."
"""The only thing a caller learns about a refused token."""

FailureKind = Literal[
    "malformed",
    "signature",
    "expired",
    "not_yet_valid",
    "audience",
    "issuer",
    "claims",
]


@dataclass(frozen=True)
class Identity:
    """The verified caller: ``user_id`` is the token's subject."""

    user_id: str
    authenticated: bool = True


class InvalidToken(Exception):
    """A token was presented and refused; ``kind`` says which check failed, for logs only."""

    def __init__(self, kind: FailureKind) -> None:
        super().__init__(kind)
        self.kind: FailureKind = kind


class TokenVerifier(Protocol):
    """Turns a presented token into an identity, or raises :class:`InvalidToken`."""

    def verify(self, token: str) -> Identity: ...


class HS256Verifier:
    """Verifies HS256 JWTs signed with a shared secret; ``exp`` and ``sub`` are required, and
    ``aud``/``iss`` when an audience/issuer is configured (a token carrying an audience is
    refused when none is configured). Only HS256 is accepted, never the token's own choice."""

    ALGORITHMS = ("HS256",)

    def __init__(
        self,
        secret: bytes,
        *,
        audience: str | None = None,
        issuer: str | None = None,
        leeway_s: float = 0.0,
    ) -> None:
        if not secret:
            raise ValueError("an HS256 verifier needs a secret")
        self._secret = secret
        self.audience = audience
        self.issuer = issuer
        self.leeway_s = leeway_s

    def verify(self, token: str) -> Identity:
        required = ["exp", "sub"]
        if self.audience is not None:
            required.append("aud")
        if self.issuer is not None:
            required.append("iss")
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=list(self.ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": required},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(_failure_kind(exc)) from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject.strip():
            raise InvalidToken("claims")
        if len(subject) > MAX_SUBJECT_LENGTH or not subject.isprintable():
            raise InvalidToken("claims")
        return Identity(user_id=subject)


def _failure_kind(exc: jwt.PyJWTError) -> FailureKind:
    # Order matters: the specific errors subclass the generic ones (ExpiredSignatureError and
    # InvalidSignatureError are DecodeErrors or InvalidTokenErrors).
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "not_yet_valid"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "signature"
    if isinstance(exc, jwt.InvalidAudienceError):
        return "audience"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "issuer"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        if exc.claim == "aud":
            return "audience"
        return "issuer" if exc.claim == "iss" else "claims"
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return "signature"
    if isinstance(exc, jwt.DecodeError):
        return "malformed"
    return "claims"


class IdentityResolver:
    """What the routes use: no token is anonymous (``None``), a valid one an :class:`Identity`,
    anything else a 401 :class:`ApiError` with one generic detail."""

    def __init__(self, verifier: TokenVerifier | None) -> None:
        self.verifier = verifier

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> IdentityResolver:
        secret = secret_value(settings.jwt_secret)
        if not secret:
            return cls(None)
        return cls(
            HS256Verifier(
                secret.encode(),
                audience=settings.jwt_audience,
                issuer=settings.jwt_issuer,
                leeway_s=settings.jwt_leeway_s,
            )
        )

    @property
    def enabled(self) -> bool:
        return self.verifier is not None

    def resolve_token(self, token: str | None) -> Identity | None:
        """The caller's identity from a bare token (the WebSocket's ``token`` parameter).

        Without a configured verifier every caller is anonymous and a token is ignored, exactly
        as before identities existed."""
        if token is None or self.verifier is None:
            return None
        try:
            if not token:
                raise InvalidToken("malformed")
            return self.verifier.verify(token)
        except InvalidToken as exc:
            log.warning("access token refused", extra={"reason": exc.kind})
            raise ApiError(ErrorCode.UNAUTHORIZED, REFUSED_DETAIL) from None

    def resolve_header(self, authorization: str | None) -> Identity | None:
        """The caller's identity from an ``Authorization`` header. Only the ``Bearer`` scheme
        carries an identity; another scheme (a reverse proxy's Basic credentials) is not ours
        and leaves the caller anonymous."""
        if authorization is None:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.resolve_token(token.strip())


_TOKEN_QUERY = re.compile(r"([?&]token=)[^&\s\"']*")
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access")
"""Uvicorn's loggers that write request paths with their query strings (``/ws/chat?token=``)."""


class TokenQueryFilter(logging.Filter):
    """Withholds ``token=`` query values from log lines that quote a request path."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_QUERY.sub(r"\1<withheld>", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        if isinstance(record.msg, str) and "token=" in record.msg:
            record.msg = _TOKEN_QUERY.sub(r"\1<withheld>", record.msg)
        return True


def withhold_tokens_in_server_logs() -> None:
    """Install :class:`TokenQueryFilter` on the server's loggers (once per process)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, TokenQueryFilter) for existing in logger.filters):
            logger.addFilter(TokenQueryFilter())
