"""The company directory: which groups a Teams or Slack user is in (Microsoft Entra ID, read
through Microsoft Graph).

The web chat's reader brings their groups in their token. Teams and Slack bring no token of the
user, only who they are (an Entra object id, a Slack profile's e-mail address), so without the
directory the same person would read fewer pages in Teams than in the browser. With
``GATEWAY_DIRECTORY_TENANT_ID`` set, :class:`GraphDirectory` asks Graph for the user's groups,
direct and nested (``GET /users/{id or userPrincipalName}/transitiveMemberOf`` cast to
``microsoft.graph.group``, an advanced query: ``$count=true`` and ``ConsistencyLevel:
eventual``), as an app (client credentials through ``msal``; application permission
``User.Read.All``). An e-mail address that is no user principal name is looked up by ``mail``.

Groups are what the permission filter compares with the sources' readers, so this errs towards
fewer groups, never more:

* The answer is cached in Redis per user for ``GATEWAY_DIRECTORY_CACHE_S`` (the key is a digest
  of the user, never the address); a user the directory does not know is cached with no groups.
* A slow, throttled or failing directory gives the turn no groups (it reads what anyone may
  read) and is not asked again for a while: ``Retry-After`` on a 429 or 503, half a minute after
  other failures, a minute after a 403 (whose log names the permission to grant). Nothing of a
  failure is cached, so the next turn after the pause asks again.
* Only the configured field of a group (its object id by default) is kept, only values that are
  valid principals (:func:`contracts.readers.valid_principal`), at most
  :data:`contracts.readers.MAX_GROUPS`, and paging links are followed only on Graph's own origin.

The web chat and MCP callers bring their groups in their token, except a user in more groups
than Entra puts in a token (200): the token then carries an "overage" claim instead, and
:func:`with_directory_groups` asks the directory for that user's groups by their object id.

The principal is never logged: a Slack principal is a person's e-mail address.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import re
import ssl
import time
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlsplit

import httpx
import redis.asyncio as aioredis

from contracts.readers import MAX_GROUPS, valid_principal
from gateway.config import GatewaySettings, secret_value
from gateway.identity import OBJECT_ID, Identity
from gateway.retry_after import retry_after_s

log = logging.getLogger("deskpilot.gateway.directory")

CACHE_PREFIX = "deskpilot:gateway:directory:groups:"
SCOPES = ["https://graph.microsoft.com/.default"]
PERMISSION = "User.Read.All"
PAGE_SIZE = 999
"""Graph's largest page for directory objects."""
FAILURE_PAUSE_S = 30.0
DENIED_PAUSE_S = 60.0
MAX_PAUSE_S = 300.0
EMAIL = re.compile(r"[^@\s/\\?#%\"<>]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


class Directory(Protocol):
    """Where a channel user's groups come from."""

    async def groups_of(self, principal: str) -> tuple[str, ...]:
        """The groups of ``principal`` (an Entra object id or an e-mail address); none when
        the directory does not know them or cannot say now."""
        ...


class NoDirectory:
    """No directory configured: channel users have no groups."""

    async def groups_of(self, principal: str) -> tuple[str, ...]:
        return ()


class Unavailable(Exception):
    """The directory cannot answer now; ask again after ``pause_s``."""

    def __init__(self, reason: str, pause_s: float = FAILURE_PAUSE_S) -> None:
        super().__init__(reason)
        self.pause_s = pause_s


def _kind(principal: str) -> str | None:
    if OBJECT_ID.fullmatch(principal):
        return "object_id"
    if len(principal) <= 254 and EMAIL.fullmatch(principal):
        return "email"
    return None


def _graph_code(response: httpx.Response) -> str:
    try:
        error = response.json().get("error", {})
        code = error.get("code") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        code = None
    return str(code)[:80] if code else "no error code"


class GraphDirectory:
    """Entra ID through Microsoft Graph, app-only, cached in Redis."""

    def __init__(
        self,
        settings: GatewaySettings,
        client: aioredis.Redis,
        *,
        msal_app: Any = None,
    ) -> None:
        self.settings = settings
        self.client = client
        self.graph = settings.directory_graph_url.rstrip("/")
        self.field = settings.directory_group_field
        self.cache_s = settings.directory_cache_s
        self.page_size = PAGE_SIZE
        bundle = settings.directory_ca_bundle
        verify: Any = ssl.create_default_context(cafile=str(bundle)) if bundle else True
        timeout = httpx.Timeout(settings.directory_timeout_s)
        self.http = httpx.AsyncClient(timeout=timeout, verify=verify, follow_redirects=False)
        self._login = httpx.Client(timeout=timeout, verify=verify)
        self._app = msal_app
        self._token: str | None = None
        self._paused_until = 0.0

    async def aclose(self) -> None:
        await self.http.aclose()
        self._login.close()

    # -- the public side ----------------------------------------------------------------------

    async def groups_of(self, principal: str) -> tuple[str, ...]:
        kind = _kind(principal)
        if kind is None:
            return ()  # a Slack id (`slack:T:U`) or anything else the directory cannot name
        key = CACHE_PREFIX + hashlib.sha256(principal.lower().encode()).hexdigest()
        cached = await self.client.get(key)
        if cached is not None:
            return tuple(json.loads(cached))
        if time.monotonic() < self._paused_until:
            return ()
        try:
            groups = await asyncio.wait_for(
                self._lookup(principal, kind), self.settings.directory_timeout_s * 3
            )
        except (Unavailable, TimeoutError) as exc:
            pause = exc.pause_s if isinstance(exc, Unavailable) else FAILURE_PAUSE_S
            self._paused_until = time.monotonic() + pause
            reason = str(exc) or "no answer in time"
            log.warning(
                "directory lookup failed (%s): this turn has no groups; next try in %.0f s",
                reason,
                pause,
            )
            return ()
        await self.client.set(key, json.dumps(groups), ex=self.cache_s)
        return groups

    # -- Graph --------------------------------------------------------------------------------

    async def _lookup(self, principal: str, kind: str) -> tuple[str, ...]:
        user = principal.lower() if kind == "object_id" else principal
        groups = await self._memberships(user)
        if groups is None and kind == "email":
            # Not a user principal name: the address may still be a user's mail.
            object_id = await self._user_by_mail(principal)
            groups = await self._memberships(object_id) if object_id else None
        return groups or ()

    async def _memberships(self, user: str) -> tuple[str, ...] | None:
        """The user's groups; None when the directory has no such user."""
        url: str | None = (
            f"{self.graph}/users/{quote(user, safe='@')}/transitiveMemberOf/microsoft.graph.group"
            f"?$count=true&$select=id,{self.field}&$top={self.page_size}"
        )
        kept: list[str] = []
        dropped = 0
        for _ in range(-(-MAX_GROUPS // self.page_size) + 1):
            if url is None or len(kept) >= MAX_GROUPS:
                break
            body = await self._get(url)
            if body is None:
                return None
            for item in body.get("value") or []:
                value = item.get(self.field) if isinstance(item, dict) else None
                if isinstance(value, str) and valid_principal(value) and value not in kept:
                    kept.append(value)
                elif value is not None:
                    dropped += 1
            link = body.get("@odata.nextLink")
            url = link if isinstance(link, str) else None
        if dropped:
            log.warning("directory: %d group values dropped (not valid ids)", dropped)
        return tuple(kept[:MAX_GROUPS])

    async def _user_by_mail(self, address: str) -> str | None:
        literal = address.replace("'", "''")  # an OData string: a quote is doubled
        query = {"$filter": f"mail eq '{literal}'", "$select": "id"}
        url = f"{self.graph}/users?{urlencode(query, safe='$@', quote_via=quote)}"
        body = await self._get(url)
        users = (body or {}).get("value") or []
        ids = [u.get("id") for u in users if isinstance(u, dict)]
        found = [i for i in ids if isinstance(i, str) and OBJECT_ID.fullmatch(i)]
        return found[0].lower() if len(found) == 1 else None

    async def _get(self, url: str) -> dict[str, Any] | None:
        """One GET on Graph's own origin with the app's token (asked afresh once on a 401);
        None on a 404."""
        if urlsplit(url)[:2] != urlsplit(self.graph)[:2]:
            raise Unavailable("Graph returned a link to another host")
        for attempt in (1, 2):
            token = self._token or await self._access_token(fresh=attempt == 2)
            try:
                headers = {"Authorization": f"Bearer {token}", "ConsistencyLevel": "eventual"}
                response = await self.http.get(url, headers=headers)
            except httpx.HTTPError as exc:
                raise Unavailable(f"Graph not reachable: {type(exc).__name__}") from None
            if response.status_code == 401 and attempt == 1:
                self._token = None
                continue
            break
        status = response.status_code
        if status == 200:
            try:
                body = response.json()
            except ValueError:
                raise Unavailable("Graph answered something that is not JSON") from None
            if not isinstance(body, dict):
                raise Unavailable("Graph answered something that is not a JSON object")
            return body
        if status == 404:
            return None
        if status in (429, 503, 504):
            pause = retry_after_s(
                response.headers.get("retry-after"),
                default=FAILURE_PAUSE_S,
                cap=MAX_PAUSE_S,
                floor=1.0,
            )
            raise Unavailable(f"Graph answered HTTP {status}", pause)
        if status == 403:
            raise Unavailable(
                f"Graph denied access (HTTP 403, {_graph_code(response)}): grant the app the "
                f"application permission {PERMISSION} and an administrator's consent",
                DENIED_PAUSE_S,
            )
        raise Unavailable(f"Graph answered HTTP {status} ({_graph_code(response)})")

    async def _access_token(self, *, fresh: bool) -> str:
        def acquire() -> Any:
            app = self._msal()
            if fresh:
                app.remove_tokens_for_client()
            return app.acquire_token_for_client(scopes=SCOPES)

        try:
            result = await asyncio.to_thread(acquire)
        except (httpx.HTTPError, ValueError) as exc:
            raise Unavailable(f"no token from the login host: {type(exc).__name__}") from None
        token = result.get("access_token") if isinstance(result, dict) else None
        if not token:
            error = result.get("error", "no token") if isinstance(result, dict) else "no token"
            raise Unavailable(
                f"Microsoft Entra gave no token ({str(error)[:80]}): check "
                "GATEWAY_DIRECTORY_TENANT_ID, _CLIENT_ID and _CLIENT_SECRET",
                DENIED_PAUSE_S,
            )
        self._token = str(token)
        return self._token

    def _msal(self) -> Any:
        """The msal client (made on first use: that reads the tenant's OpenID metadata)."""
        if self._app is None:
            import msal

            settings = self.settings
            self._app = msal.ConfidentialClientApplication(
                str(settings.directory_client_id),
                client_credential=secret_value(settings.directory_client_secret),
                authority=f"{settings.directory_authority_host.rstrip('/')}/"
                f"{settings.directory_tenant_id}",
                instance_discovery=False,
                http_client=self._login,
            )
        return self._app


async def with_directory_groups(identity: Identity | None, directory: Directory) -> Identity | None:
    """``identity`` with the directory's groups when its token's did not fit in it (Entra's
    overage claim, :attr:`Identity.overage_id`); as it is otherwise."""
    if identity is None or identity.overage_id is None:
        return identity
    groups = await directory.groups_of(identity.overage_id)
    return dataclasses.replace(identity, groups=groups, overage_id=None)


def build(settings: GatewaySettings, client: aioredis.Redis) -> GraphDirectory | NoDirectory:
    """The directory the settings name (Graph with a tenant), else none."""
    if settings.directory_tenant_id:
        return GraphDirectory(settings, client)
    return NoDirectory()
