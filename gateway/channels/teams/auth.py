"""Verifying that an activity comes from the Bot Framework, as its documentation requires.

Every request carries ``Authorization: Bearer <JWT>``. The token must be signed (RS256) by a key
published at the ``jwks_uri`` of the Bot Framework's OpenID metadata
(``GATEWAY_TEAMS_OPENID_URL``), name the Bot Framework as ``iss`` and the bot's app id as
``aud``, be within its ``exp``/``nbf`` (five minutes of clock skew allowed), and carry a
``serviceurl`` claim equal to the activity's ``serviceUrl``, so a token issued for one
conversation endpoint cannot send the gateway's replies elsewhere; and the key must be
endorsed (its JWK's ``endorsements``) for the activity's ``channelId``. Keys are cached as user
tokens' are (:class:`gateway.identity.JwksCache`: fetched once per lifetime, an unknown ``kid``
fetches again at most once per ``min_refresh_s``).

Blocking (the metadata and key fetches): callers run :meth:`BotFrameworkAuth.verify` off the
event loop.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import jwt

from gateway.identity import InvalidToken, JwksCache, fetch_url

LEEWAY_S = 300
ALGORITHM = "RS256"
SERVICE_URL_CLAIM = "serviceurl"
"""The claim that names the conversation endpoint the token was issued for."""


class BotFrameworkAuth:
    """Checks the Bot Framework's token of an incoming activity."""

    def __init__(
        self,
        app_id: str,
        *,
        openid_url: str,
        issuer: str,
        fetch: Callable[[str, float], bytes] = fetch_url,
        min_refresh_s: float = 30.0,
    ) -> None:
        self.app_id = app_id
        self.openid_url = openid_url
        self.issuer = issuer
        self._fetch = fetch
        self._min_refresh_s = min_refresh_s
        self._lock = threading.Lock()
        self._keys: JwksCache | None = None

    def _cache(self) -> JwksCache:
        with self._lock:
            if self._keys is None:
                try:
                    metadata = json.loads(self._fetch(self.openid_url, 5.0))
                except (OSError, ValueError):
                    raise InvalidToken("keys_unavailable") from None
                uri = metadata.get("jwks_uri") if isinstance(metadata, dict) else None
                if not isinstance(uri, str) or not uri.startswith(("https://", "http://127.")):
                    raise InvalidToken("keys_unavailable")
                self._keys = JwksCache(uri, fetch=self._fetch, min_refresh_s=self._min_refresh_s)
            return self._keys

    def verify(
        self, authorization: str | None, service_url: str, channel_id: str = "msteams"
    ) -> dict[str, Any]:
        """The token's claims; raises :class:`InvalidToken` (``kind`` for logs) otherwise.
        The signing key must be endorsed for the activity's ``channel_id``."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise InvalidToken("malformed")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("malformed") from None
        if header.get("alg") != ALGORITHM:
            raise InvalidToken("algorithm")
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise InvalidToken("malformed")
        key = self._cache().key(kid)
        if key.jwk.key_type != "RSA":
            raise InvalidToken("algorithm")
        if channel_id not in key.endorsements:
            raise InvalidToken("unknown_key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.jwk.key,
                algorithms=[ALGORITHM],
                audience=self.app_id,
                issuer=self.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("audience") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("issuer") from None
        except jwt.PyJWTError:
            raise InvalidToken("signature") from None
        if claims.get(SERVICE_URL_CLAIM) != service_url:
            raise InvalidToken("claims")
        return claims
