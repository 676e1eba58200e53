"""Who is asking: signed user tokens verified at the gateway, their roles, and anonymous ids.

A client may send ``Authorization: Bearer <JWT>`` (``?token=`` on the WebSocket). Two kinds of
verifier exist, chosen by configuration:

* :class:`JwksVerifier` (production): an OIDC access or ID token signed by the identity
  provider with an asymmetric key (RS256/ES256 by default) published at its JWKS URL, with the
  configured issuer and audience. Keys are cached (:class:`JwksCache`): fetched once per lifetime,
  never per request, and a token naming an unknown ``kid`` makes the cache fetch again at most
  once per ``min_refresh_s``, so a rotated key is picked up within seconds while a stream of
  forged ``kid`` values cannot make the gateway hammer the identity provider.
* :class:`HS256Verifier` (simple setups): a shared secret.

Either way a valid token makes its ``sub`` the user and its role claim (:class:`RoleMapper`) the
user's roles (``employee``, ``technician``, ``admin``). No token keeps the embedded default,
anonymous chat, never authenticated. An anonymous user is ``anon:<random>``, and the gateway is
the only one that names them: it issues each anonymous browser (or API client) a signed
anonymous token (:class:`AnonymousIds`), presented like a user token, so nobody can claim
another's anonymous id. Any invalid token is refused with one generic 401 whatever check failed,
so a caller cannot probe which part of a forged token was wrong; only the failure's category is
logged, never the token or its claims.

The algorithm is never the token's choice: the JWKS verifier accepts only the configured
asymmetric algorithms, and the key's type must fit the algorithm (an RSA key never verifies an
HMAC, so a token "signed" with the public key as an HS256 secret is refused), while the HS256
verifier accepts HS256 only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

import jwt
from redis.asyncio import Redis

from contracts.readers import MAX_GROUPS, valid_principal
from gateway.config import ASYMMETRIC_ALGORITHMS, GatewaySettings, secret_value
from gateway.errors import ApiError, ErrorCode

log = logging.getLogger("deskpilot.gateway.identity")

OBJECT_ID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
"""An Entra object id (a GUID)."""

MAX_SUBJECT_LENGTH = 128
"""The longest user id the API accepts anywhere (``ChatCreate.user_id``)."""

REFUSED_DETAIL = "The access token is not valid."
"""The only thing a caller learns about a refused token."""

Role = Literal["employee", "technician", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)
DEFAULT_ROLE_MAP: dict[str, Role] = {role: role for role in ROLES}
"""IdP role names to Deskpilot roles when none is configured: the names themselves."""

_KEY_TYPE = {"RS": "RSA", "PS": "RSA", "ES": "EC"}
_EC_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}

FailureKind = Literal[
    "malformed",
    "signature",
    "algorithm",
    "unknown_key",
    "keys_unavailable",
    "expired",
    "not_yet_valid",
    "audience",
    "issuer",
    "claims",
]


EMPLOYEE: frozenset[Role] = frozenset({"employee"})


@dataclass(frozen=True)
class Identity:
    """A verified caller. ``user_id`` is the token's subject; ``source`` says whether it came
    from a user token, from the break-glass admin token (which is a credential, not a person:
    it never chats as anyone), or from an anonymous token the gateway issued (a person without
    a name or any role: it owns what it made and nothing else)."""

    user_id: str
    authenticated: bool = True
    roles: frozenset[Role] = EMPLOYEE
    source: Literal["token", "admin_token", "anonymous"] = "token"
    groups: tuple[str, ...] = ()
    """The groups the token lists (see :class:`GroupReader`); never any for anonymous users."""
    overage_id: str | None = None
    """The Entra object id (``oid``) of a user whose groups did not fit in the token (Entra's
    overage claim): :func:`gateway.directory.with_directory_groups` asks the directory."""


ADMIN_TOKEN_IDENTITY = Identity(
    user_id="admin-token", authenticated=False, roles=frozenset({"admin"}), source="admin_token"
)


@dataclass(frozen=True)
class Caller:
    """What the request's ``Authorization`` header amounts to, before any route judges it:
    an identity, a refusal (``refused`` says why, for logs), or neither (anonymous)."""

    identity: Identity | None = None
    refused: FailureKind | None = None


ANONYMOUS = Caller()


class InvalidToken(Exception):
    """A token was presented and refused; ``kind`` says which check failed, for logs only."""

    def __init__(self, kind: FailureKind) -> None:
        super().__init__(kind)
        self.kind: FailureKind = kind


class TokenVerifier(Protocol):
    """Turns a presented token into an identity, or raises :class:`InvalidToken`."""

    def verify(self, token: str) -> Identity: ...


# -- roles ---------------------------------------------------------------------------------------


class RoleMapper:
    """Reads the roles claim and maps the identity provider's names to Deskpilot's.

    ``claim`` is a claim name (``roles``, ``https://northwind.example/roles``) or, when no claim
    has that exact name, a dotted path into nested claims (``realm_access.roles``). Its value may
    be a list of names or one space-separated string (OAuth ``scope`` style). Names missing from
    ``mapping`` are ignored. Every verified token is at least an employee."""

    def __init__(self, claim: str = "roles", mapping: Mapping[str, Role] | None = None) -> None:
        self.claim = claim
        self.mapping = dict(DEFAULT_ROLE_MAP if mapping is None else mapping)

    def roles(self, claims: Mapping[str, Any]) -> frozenset[Role]:
        value = _claim(claims, self.claim)
        if isinstance(value, str):
            names: Iterable[Any] = value.split()
        elif isinstance(value, list):
            names = value
        else:
            names = ()
        known = [name for name in names if isinstance(name, str) and name in self.mapping]
        mapped = {self.mapping[name] for name in known}
        return EMPLOYEE | mapped


def _claim(claims: Mapping[str, Any], name: str) -> Any:
    """A claim by its exact name or, when no claim has that name, by a dotted path."""
    value: Any = claims.get(name)
    if value is None and "." in name:
        value = claims
        for part in name.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
    return value


class GroupReader:
    """Reads the reader's groups from the token (``groups`` by default, where Entra ID puts the
    user's group object ids when the app registration asks for them).

    The groups decide which documents a user may read, so only what is surely a group id is
    kept: a claim that is not a list gives no groups (also a missing claim, and Entra's
    "overage" form for users in more than 200 groups, which names a Graph query instead of the
    groups: :meth:`overage` then gives the user's object id, for the directory to list them);
    entries that are not strings, empty, longer than
    :data:`contracts.readers.MAX_PRINCIPAL_LENGTH`, not printable or containing ``|`` are dropped;
    beyond :data:`contracts.readers.MAX_GROUPS` entries the rest are dropped. Dropping a group
    only ever hides documents, never shows more, so a malformed claim cannot widen access; the
    token itself stays valid (its signature was checked), and the drop is logged without the
    values."""

    def __init__(self, claim: str = "groups") -> None:
        self.claim = claim

    def groups(self, claims: Mapping[str, Any]) -> tuple[str, ...]:
        value = _claim(claims, self.claim)
        if value is None:
            return ()
        if not isinstance(value, list):
            log.warning("groups claim is not a list; the user gets no groups")
            return ()
        kept = list(dict.fromkeys(item for item in value if valid_principal(item)))
        dropped = len(value) - len(kept)
        if len(kept) > MAX_GROUPS:
            dropped += len(kept) - MAX_GROUPS
            kept = kept[:MAX_GROUPS]
        if dropped:
            log.warning(
                "groups claim: %d entries dropped (invalid, repeated or over the cap)", dropped
            )
        return tuple(kept)

    def overage(self, claims: Mapping[str, Any]) -> str | None:
        """The user's object id when the token says their groups did not fit in it: no groups
        claim, ``_claim_names`` naming it (Entra's overage), and an ``oid`` that is an object
        id. None otherwise."""
        names = claims.get("_claim_names")
        if _claim(claims, self.claim) is not None or not isinstance(names, Mapping):
            return None
        object_id = claims.get("oid")
        if self.claim not in names or not isinstance(object_id, str):
            return None
        return object_id.lower() if OBJECT_ID.fullmatch(object_id) else None


def _identity_of(claims: Mapping[str, Any], roles: RoleMapper, groups: GroupReader) -> Identity:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidToken("claims")
    if len(subject) > MAX_SUBJECT_LENGTH or not subject.isprintable():
        raise InvalidToken("claims")
    return Identity(
        user_id=subject,
        roles=roles.roles(claims),
        groups=groups.groups(claims),
        overage_id=groups.overage(claims),
    )


def _decode(
    token: str,
    key: Any,
    algorithms: list[str],
    *,
    audience: str | None,
    issuer: str | None,
    leeway_s: float,
) -> dict[str, Any]:
    required = ["exp", "sub"]
    if audience is not None:
        required.append("aud")
    if issuer is not None:
        required.append("iss")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=algorithms,
            audience=audience,
            issuer=issuer,
            leeway=leeway_s,
            options={"require": required},
        )
    except jwt.PyJWTError as exc:
        raise InvalidToken(_failure_kind(exc)) from None
    return claims


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


# -- shared secret -------------------------------------------------------------------------------


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
        roles: RoleMapper | None = None,
        groups: GroupReader | None = None,
    ) -> None:
        if not secret:
            raise ValueError("an HS256 verifier needs a secret")
        self._secret = secret
        self.audience = audience
        self.issuer = issuer
        self.leeway_s = leeway_s
        self.roles = roles or RoleMapper()
        self.groups = groups or GroupReader()

    def verify(self, token: str) -> Identity:
        claims = _decode(
            token,
            self._secret,
            list(self.ALGORITHMS),
            audience=self.audience,
            issuer=self.issuer,
            leeway_s=self.leeway_s,
        )
        return _identity_of(claims, self.roles, self.groups)


# -- JWKS ----------------------------------------------------------------------------------------

MAX_JWKS_BYTES = 512 * 1024


def fetch_url(url: str, timeout_s: float) -> bytes:
    """GET ``url`` and return its body (at most :data:`MAX_JWKS_BYTES`); raises ``OSError`` or
    ``ValueError`` on any failure. Blocking: callers run it off the event loop."""
    # The URL is the operator's GATEWAY_JWT_JWKS_URL, which the settings hold to https (or http
    # on loopback), never a caller's.
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310  # nosec B310
        if response.status != 200:
            raise ValueError(f"JWKS answered {response.status}")
        body: bytes = response.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise ValueError("JWKS document too large")
    return body


@dataclass(frozen=True)
class _Key:
    jwk: jwt.PyJWK
    declared_alg: str | None
    curve: str | None
    endorsements: tuple[str, ...] = ()
    """What the publisher endorses the key for (the Bot Framework's channel ids), if it says."""


class JwksCache:
    """The identity provider's signing keys, fetched from its JWKS URL and cached.

    * Keys are fetched on first use and again once ``lifetime_s`` has passed, not per request.
    * A ``kid`` that is not in the cached set triggers one refetch, unless the last fetch (or
      attempt) is younger than ``min_refresh_s``: key rotation works within seconds, and random
      ``kid`` values in forged tokens cost the identity provider at most one request per
      ``min_refresh_s``.
    * When a refresh fails, the keys already known stay in use (an outage of the identity
      provider does not log everyone out); with none known, tokens cannot be verified at all
      (``keys_unavailable``).
    * Thread-safe, and one fetch at a time. Tokens whose key is known never wait: the lookup
      takes no lock, and while one thread refreshes an expired set the others keep using it.
      Only a token whose key is not known waits for the fetch in flight, and uses its result.
    """

    def __init__(
        self,
        url: str,
        *,
        lifetime_s: float = 600.0,
        min_refresh_s: float = 30.0,
        timeout_s: float = 5.0,
        fetch: Callable[[str, float], bytes] = fetch_url,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.lifetime_s = lifetime_s
        self.min_refresh_s = min_refresh_s
        self.timeout_s = timeout_s
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str | None, _Key] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self.fetches = 0
        """How many fetches were attempted (for tests and diagnostics)."""

    def key(self, kid: str | None) -> _Key:
        """The key a token's ``kid`` names (a token without ``kid`` only when the set holds a
        single key); raises :class:`InvalidToken` (``unknown_key``/``keys_unavailable``)."""
        found = self._lookup(kid)
        if found is not None:
            if not self._expired(self._clock()):
                return found  # the common case: no lock, no fetch
            # Expired but known: one thread refreshes, the others go on with the known key
            # instead of queueing behind a fetch that may take up to the timeout.
            if not self._lock.acquire(blocking=False):
                return found
            try:
                self._refresh(self._clock())
            finally:
                self._lock.release()
            found = self._lookup(kid)
            if found is not None:
                return found
        with self._lock:
            now = self._clock()
            if self._expired(now):
                self._refresh(now)
            found = self._lookup(kid)
            if found is None and self._may_refetch(now):
                self._refresh(now)
                found = self._lookup(kid)
            if found is not None:
                return found
            raise InvalidToken("unknown_key" if self._keys else "keys_unavailable")

    def _expired(self, now: float) -> bool:
        return self._fetched_at is None or now - self._fetched_at >= self.lifetime_s

    def _may_refetch(self, now: float) -> bool:
        return self._attempted_at is None or now - self._attempted_at >= self.min_refresh_s

    def _lookup(self, kid: str | None) -> _Key | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    def _refresh(self, now: float) -> None:
        if not self._may_refetch(now):
            return  # failed (or fetched) moments ago: keep what is known
        self._attempted_at = now
        self.fetches += 1
        try:
            keys = self._parse(self._fetch(self.url, self.timeout_s))
        except (OSError, ValueError) as exc:
            log.warning(
                "JWKS fetch failed",
                extra={"error": type(exc).__name__, "keys_known": len(self._keys)},
            )
            return
        self._keys = keys
        self._fetched_at = now
        log.info("JWKS fetched", extra={"keys": len(keys)})

    @staticmethod
    def _parse(body: bytes) -> dict[str | None, _Key]:
        document = json.loads(body)
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError("not a JWK set")
        keys: dict[str | None, _Key] = {}
        for entry in document["keys"]:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue  # encryption keys and junk never verify signatures
            try:
                jwk = jwt.PyJWK(entry)
            except jwt.PyJWTError:
                continue  # a key type this build cannot use; the others still work
            kid, declared, curve = entry.get("kid"), entry.get("alg"), entry.get("crv")
            endorsed = entry.get("endorsements")
            keys[kid if isinstance(kid, str) else None] = _Key(
                jwk,
                declared if isinstance(declared, str) else None,
                curve if isinstance(curve, str) else None,
                tuple(e for e in endorsed if isinstance(e, str))
                if isinstance(endorsed, list)
                else (),
            )
        if not keys:
            raise ValueError("no usable signing key in the JWK set")
        return keys


class JwksVerifier:
    """Verifies tokens signed by the identity provider with a key from its JWKS.

    The header's ``alg`` must be one of ``algorithms`` (asymmetric only), fit the key's type
    (and curve), and equal the key's own ``alg`` when the JWK declares one; ``exp``, ``sub``,
    ``aud`` and ``iss`` are required and checked."""

    def __init__(
        self,
        keys: JwksCache,
        *,
        audience: str,
        issuer: str,
        algorithms: Iterable[str] = ("RS256", "ES256"),
        leeway_s: float = 0.0,
        roles: RoleMapper | None = None,
        groups: GroupReader | None = None,
    ) -> None:
        self.keys = keys
        self.audience = audience
        self.issuer = issuer
        self.algorithms = frozenset(algorithms)
        unsafe = self.algorithms - ASYMMETRIC_ALGORITHMS
        if unsafe or not self.algorithms:
            raise ValueError(f"a JWKS verifier takes asymmetric algorithms only, not {unsafe}")
        self.leeway_s = leeway_s
        self.roles = roles or RoleMapper()
        self.groups = groups or GroupReader()

    def verify(self, token: str) -> Identity:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("malformed") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            raise InvalidToken("algorithm")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("malformed")
        key = self.keys.key(kid)
        if not _fits(key, algorithm):
            raise InvalidToken("algorithm")
        claims = _decode(
            token,
            key.jwk.key,
            [algorithm],
            audience=self.audience,
            issuer=self.issuer,
            leeway_s=self.leeway_s,
        )
        return _identity_of(claims, self.roles, self.groups)


def _fits(key: _Key, algorithm: str) -> bool:
    if key.declared_alg is not None and key.declared_alg != algorithm:
        return False
    if key.jwk.key_type != _KEY_TYPE.get(algorithm[:2]):
        return False
    curve = _EC_CURVE.get(algorithm)
    return curve is None or key.curve == curve


# -- resolving a request's caller ----------------------------------------------------------------


class IdentityResolver:
    """What the routes use: turns a request's credentials into a :class:`Caller`.

    ``DESKPILOT_ADMIN_TOKEN`` is the break-glass and service credential: it is checked first, in
    constant time, and stands for the admin role (it is not a person, so it never chats as
    anyone); empty disables it. A token whose header names the anonymous key is verified by
    :attr:`anonymous` (set once the gateway has its key) and by nothing else. Without a
    configured verifier every other token is ignored and the caller is anonymous, exactly as
    before identities existed."""

    def __init__(  # nosec B107 # empty is no admin token at all
        self,
        verifier: TokenVerifier | None,
        admin_token: str = "",
        anonymous: AnonymousIds | None = None,
    ) -> None:
        self.verifier = verifier
        self.anonymous = anonymous
        admin_token = admin_token.strip()
        self._admin_digest = hashlib.sha256(admin_token.encode()).digest() if admin_token else None

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> IdentityResolver:
        resolver = cls._from_settings(settings)
        anonymous_key = secret_value(settings.anonymous_key)
        if anonymous_key:
            # Else the gateway's lifespan sets the key it keeps in Redis.
            resolver.anonymous = AnonymousIds(anonymous_key.encode(), settings.anonymous_ttl_s)
        return resolver

    @classmethod
    def _from_settings(cls, settings: GatewaySettings) -> IdentityResolver:
        roles = RoleMapper(settings.jwt_roles_claim, settings.jwt_role_map)
        groups = GroupReader(settings.jwt_groups_claim)
        admin_token = settings.admin_token.get_secret_value()
        if settings.jwt_jwks_url:
            # The settings insist on both with a JWKS URL.
            assert settings.jwt_audience is not None  # nosec B101 # type narrowing: the settings require both
            assert settings.jwt_issuer is not None  # nosec B101 # type narrowing, as above
            cache = JwksCache(
                settings.jwt_jwks_url,
                lifetime_s=settings.jwt_jwks_lifetime_s,
                min_refresh_s=settings.jwt_jwks_min_refresh_s,
                timeout_s=settings.jwt_jwks_timeout_s,
            )
            verifier: TokenVerifier = JwksVerifier(
                cache,
                audience=settings.jwt_audience,
                issuer=settings.jwt_issuer,
                algorithms=settings.jwt_algorithms,
                leeway_s=settings.jwt_leeway_s,
                roles=roles,
                groups=groups,
            )
            return cls(verifier, admin_token)
        secret = secret_value(settings.jwt_secret)
        if not secret:
            return cls(None, admin_token)
        return cls(
            HS256Verifier(
                secret.encode(),
                audience=settings.jwt_audience,
                issuer=settings.jwt_issuer,
                leeway_s=settings.jwt_leeway_s,
                roles=roles,
                groups=groups,
            ),
            admin_token,
        )

    @property
    def enabled(self) -> bool:
        return self.verifier is not None

    def caller_of_token(self, token: str | None) -> Caller:
        """A user or anonymous token alone (the WebSocket's ``token`` parameter); never the
        admin token."""
        if token and is_anonymous_token(token):
            return self.anonymous_caller(token)
        if token is None or self.verifier is None:
            return ANONYMOUS
        try:
            if not token:
                raise InvalidToken("malformed")
            return Caller(identity=self.verifier.verify(token))
        except InvalidToken as exc:
            return Caller(refused=exc.kind)

    def anonymous_caller(self, token: str) -> Caller:
        """An anonymous token's caller: its user, or refused (never a user token's identity)."""
        if self.anonymous is None:
            return Caller(refused="keys_unavailable")
        try:
            return Caller(identity=self.anonymous.verify(token))
        except InvalidToken as exc:
            return Caller(refused=exc.kind)

    def caller_of_header(self, authorization: str | None) -> Caller:
        """The caller an ``Authorization`` header names. Only the ``Bearer`` scheme carries an
        identity; another scheme (a reverse proxy's Basic credentials) is not ours and leaves
        the caller anonymous."""
        if authorization is None:
            return ANONYMOUS
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return ANONYMOUS
        token = token.strip()
        if self._admin_digest is not None and secrets.compare_digest(
            hashlib.sha256(token.encode()).digest(), self._admin_digest
        ):
            return Caller(identity=ADMIN_TOKEN_IDENTITY)
        return self.caller_of_token(token)

    def resolve_token(self, token: str | None) -> Identity | None:
        """The user a bare token names, None when anonymous; a 401 :class:`ApiError` (or 503
        when the identity provider's keys cannot be had) for a token that does not verify."""
        return user_identity(self.caller_of_token(token))

    def resolve_header(self, authorization: str | None) -> Identity | None:
        """As :meth:`resolve_token`, from an ``Authorization`` header; the admin token is not a
        user, so it resolves to None here."""
        return user_identity(self.caller_of_header(authorization))


def refuse(caller: Caller, detail: str = REFUSED_DETAIL) -> ApiError:
    """The error for a caller whose credentials were refused (or missing), logged by category.

    The identity provider's keys being unreachable is an outage, not the caller's fault: 503."""
    reason = caller.refused or "missing"
    log.warning("access token refused", extra={"reason": reason})
    if reason == "keys_unavailable":
        return ApiError(
            ErrorCode.IDENTITY_UNAVAILABLE,
            "Sign-in cannot be checked right now; try again shortly.",
            headers={"Retry-After": "5"},
        )
    return ApiError(ErrorCode.UNAUTHORIZED, detail)


def user_identity(caller: Caller) -> Identity | None:
    """The user a caller is, for chat and attachments: a token's subject, or None (anonymous,
    the admin token included); raises the refusal of a token that did not verify."""
    if caller.refused is not None:
        raise refuse(caller)
    identity = caller.identity
    return identity if identity is not None and identity.source == "token" else None


def require_roles(caller: Caller, allowed: Iterable[Role], detail: str) -> Identity:
    """The caller when it holds one of ``allowed`` (admin always qualifies): 401 with
    ``detail`` without valid credentials, 403 with valid ones that lack the role."""
    identity = caller.identity
    if identity is None or identity.source == "anonymous":
        raise refuse(caller, detail)
    wanted = {*allowed, "admin"}
    if not identity.roles & wanted:
        log.warning("role refused", extra={"reason": "forbidden", "required": sorted(wanted)})
        raise ApiError(ErrorCode.FORBIDDEN, "This account is not allowed to do that.")
    return identity


# -- anonymous users -----------------------------------------------------------------------------

ANONYMOUS_PREFIX = "anon:"
ANONYMOUS_KID = "deskpilot-anonymous"
"""The ``kid`` of anonymous tokens: tells them apart from user tokens before any verification."""
ANONYMOUS_AUDIENCE = "deskpilot:anonymous"
ANONYMOUS_ISSUER = "deskpilot-gateway"
MIN_ANONYMOUS_KEY_BYTES = 32
_ANONYMOUS_SUBJECT = re.compile(r"anon:[A-Za-z0-9_-]{22}")


@dataclass(frozen=True)
class AnonymousToken:
    """An issued anonymous token, the user id it names and when it expires (epoch seconds)."""

    token: str
    user_id: str
    expires_at: int


class AnonymousIds:
    """Issues and verifies anonymous tokens.

    An anonymous token is an HS256 JWT signed with the gateway's own anonymous key (never the
    user tokens' secret), with a ``kid``, audience and issuer of its own, whose subject is
    ``anon:`` and 128 random bits. Only the gateway can make one, so the anonymous user it names
    cannot be claimed by anyone who was not given the token; it expires ``ttl_s`` after it was
    issued, and every WebSocket connection that presents a valid one gets a renewed one for the
    same user. Rotating the key (``GATEWAY_ANONYMOUS_KEY``) turns every anonymous user into a
    stranger to what they made before."""

    def __init__(self, key: bytes, ttl_s: int, *, clock: Callable[[], float] = time.time) -> None:
        if len(key) < MIN_ANONYMOUS_KEY_BYTES:
            raise ValueError(f"the anonymous key needs at least {MIN_ANONYMOUS_KEY_BYTES} bytes")
        self._key = key
        self.ttl_s = ttl_s
        self._clock = clock

    @staticmethod
    def new_user_id() -> str:
        """A fresh anonymous user id, ``anon:`` and 128 random bits (22 URL-safe characters)."""
        return ANONYMOUS_PREFIX + secrets.token_urlsafe(16)

    def issue(self, user_id: str | None = None) -> AnonymousToken:
        """A token for ``user_id`` (renewal) or for a new anonymous user."""
        subject = user_id or self.new_user_id()
        if not _ANONYMOUS_SUBJECT.fullmatch(subject):
            raise ValueError("not an anonymous user id")
        now = int(self._clock())
        expires_at = now + self.ttl_s
        claims = {
            "sub": subject,
            "aud": ANONYMOUS_AUDIENCE,
            "iss": ANONYMOUS_ISSUER,
            "iat": now,
            "exp": expires_at,
        }
        token = jwt.encode(claims, self._key, algorithm="HS256", headers={"kid": ANONYMOUS_KID})
        return AnonymousToken(token, subject, expires_at)

    def verify(self, token: str) -> Identity:
        """The anonymous user a token names; raises :class:`InvalidToken` for anything else
        (another key, an edited subject, expired, another audience or issuer)."""
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=["HS256"],
                audience=ANONYMOUS_AUDIENCE,
                issuer=ANONYMOUS_ISSUER,
                options={"require": ["exp", "sub", "aud", "iss"]},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(_failure_kind(exc)) from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not _ANONYMOUS_SUBJECT.fullmatch(subject):
            raise InvalidToken("claims")
        return Identity(user_id=subject, authenticated=False, roles=frozenset(), source="anonymous")


ANONYMOUS_KEY = "deskpilot:gateway:anonymous-key"
"""Where the gateway keeps its anonymous key when none is configured."""


async def anonymous_ids_from_redis(client: Redis, ttl_s: int) -> AnonymousIds:
    """The anonymous key every replica shares: made (256 random bits) by whichever gateway
    needs it first, kept in Redis without expiry, so anonymous users stay themselves across
    restarts and replicas."""
    for _ in range(3):
        await client.set(ANONYMOUS_KEY, secrets.token_hex(32), nx=True)
        stored = await client.get(ANONYMOUS_KEY)
        if stored:
            key = stored if isinstance(stored, bytes) else str(stored).encode()
            return AnonymousIds(key, ttl_s)
    raise RuntimeError("the anonymous key could not be kept in Redis")


def is_anonymous_token(token: str) -> bool:
    """Whether a presented token claims to be one of the gateway's anonymous tokens (its
    header's ``kid``); says nothing about whether it is valid."""
    try:
        return jwt.get_unverified_header(token).get("kid") == ANONYMOUS_KID
    except jwt.PyJWTError:
        return False


def owner_identity(caller: Caller) -> Identity | None:
    """Who owns what a caller makes (conversations, turns, attachments): a user token's
    subject or an anonymous token's user; None for a caller without either (the admin token
    included); raises the refusal of a token that did not verify."""
    if caller.refused is not None:
        raise refuse(caller)
    identity = caller.identity
    if identity is None or identity.source == "admin_token":
        return None
    return identity


# -- logs ----------------------------------------------------------------------------------------

_TOKEN_QUERY = re.compile(r"([?&](?:token|user)=)[^&\s\"']*")
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access")
"""Uvicorn's loggers that write request paths with their query strings (``/ws/chat?token=``)."""


class TokenQueryFilter(logging.Filter):
    """Withholds ``token=`` and ``user=`` query values (a user token, an anonymous token)
    from log lines that quote a request path."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_QUERY.sub(r"\1<withheld>", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        if isinstance(record.msg, str) and ("token=" in record.msg or "user=" in record.msg):
            record.msg = _TOKEN_QUERY.sub(r"\1<withheld>", record.msg)
        return True


def withhold_tokens_in_server_logs() -> None:
    """Install :class:`TokenQueryFilter` on the server's loggers (once per process)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, TokenQueryFilter) for existing in logger.filters):
            logger.addFilter(TokenQueryFilter())
