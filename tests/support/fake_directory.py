"""Entra ID's directory as Microsoft Graph v1.0 serves it, the part a Teams or Slack user's groups
are read from: mixed into :class:`tests.support.fake_graph.FakeGraph` (same tokens, throttling and
TLS).

* ``GET /users/{id | userPrincipalName}/transitiveMemberOf/microsoft.graph.group``: the groups the
  user is in, directly or through nested groups (the OData cast leaves out directory roles and
  administrative units). An advanced query: ``$count=true`` needs the header
  ``ConsistencyLevel: eventual`` (400 ``Request_BadRequest`` without it). ``$select`` keeps only
  the named properties (``@odata.type`` always); ``$top`` up to 999 (400 beyond), pages linked by
  ``@odata.nextLink`` with a ``$skiptoken``. An unknown user: 404 ``Request_ResourceNotFound``.
* ``GET /users?$filter=mail eq '...'``: the users with that mail (``$select`` honoured); a filter
  of another form: 400 ``Request_UnsupportedQuery``.
* :meth:`FakeDirectory.delay_directory`: every directory answer comes that many seconds late.
* :meth:`FakeDirectory.deny_directory`: 403 ``Authorization_RequestDenied`` (the app lacks
  ``User.Read.All``). Every directory request is logged in
  :attr:`FakeDirectory.directory_requests` (path and query).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

GROUP_TYPE = "#microsoft.graph.group"
MAX_TOP = 999
_MAIL_FILTER = re.compile(r"^mail eq '((?:[^']|'')*)'$")


@dataclass
class DirectoryUser:
    id: str
    user_principal_name: str
    mail: str | None = None


@dataclass
class DirectoryGroup:
    id: str
    display_name: str
    members: set[str] = field(default_factory=set)
    """Object ids of users and groups that are direct members."""
    sam_account_name: str | None = None


class FakeDirectory:
    """Users, groups (nested) and the two Graph reads of them; state guarded by ``_lock``."""

    users: dict[str, DirectoryUser]
    groups: dict[str, DirectoryGroup]
    directory_requests: list[str]
    _directory_denied: bool

    def init_directory(self) -> None:
        self.users, self.groups, self.directory_requests = {}, {}, []
        self._directory_denied = False
        self._directory_delay_s = 0.0

    def add_user(self, object_id: str, upn: str, mail: str | None = None) -> DirectoryUser:
        user = DirectoryUser(object_id, upn, mail)
        self.users[object_id] = user
        return user

    def add_group(self, object_id: str, name: str, *members: str) -> DirectoryGroup:
        group = DirectoryGroup(object_id, name, set(members))
        self.groups[object_id] = group
        return group

    def deny_directory(self, denied: bool = True) -> None:
        self._directory_denied = denied

    def delay_directory(self, seconds: float) -> None:
        self._directory_delay_s = seconds

    def directory_routes(self) -> list[Route]:
        return [
            Route(
                "/v1.0/users/{user}/transitiveMemberOf/microsoft.graph.group",
                self._transitive_groups,
            ),
            Route("/v1.0/users", self._users),
        ]

    # -- state --------------------------------------------------------------------------------

    def _find_user(self, key: str) -> DirectoryUser | None:
        key = key.lower()
        for user in self.users.values():
            if key in (user.id.lower(), user.user_principal_name.lower()):
                return user
        return None

    def _groups_of(self, member: str) -> list[DirectoryGroup]:
        found: dict[str, DirectoryGroup] = {}
        frontier = {member}
        while frontier:
            direct = [g for g in self.groups.values() if g.members & frontier]
            frontier = {g.id for g in direct if g.id not in found}
            found.update((g.id, g) for g in direct)
        return sorted(found.values(), key=lambda g: g.display_name)

    # -- requests -----------------------------------------------------------------------------

    async def _directory_gate(self, request: Request) -> Response | None:
        self.directory_requests.append(f"{request.url.path}?{request.url.query}")
        if self._directory_delay_s:
            await asyncio.sleep(self._directory_delay_s)
        refused: Response | None = self._gate(request)  # type: ignore[attr-defined]
        if refused is not None:
            return refused
        if self._directory_denied:
            denied = "Insufficient privileges to complete the operation."
            return _error(403, "Authorization_RequestDenied", denied)
        return None

    async def _transitive_groups(self, request: Request) -> Response:
        if (refused := await self._directory_gate(request)) is not None:
            return refused
        query = request.query_params
        if query.get("$count") == "true" and request.headers.get("consistencylevel") != "eventual":
            return _error(
                400,
                "Request_BadRequest",
                "$count is not currently supported without the ConsistencyLevel header.",
            )
        try:
            top = int(query.get("$top", "100"))
        except ValueError:
            return _error(400, "Request_BadRequest", "Invalid page size specified.")
        if not 1 <= top <= MAX_TOP:
            return _error(400, "Request_BadRequest", "Invalid page size specified.")
        with self._lock:  # type: ignore[attr-defined]
            user = self._find_user(request.path_params["user"])
            if user is None:
                return _error(
                    404,
                    "Request_ResourceNotFound",
                    f"Resource '{request.path_params['user']}' does not exist or one of its "
                    "queried reference-property objects are not present.",
                )
            groups = self._groups_of(user.id)
        start = int(query.get("$skiptoken", "0") or 0)
        page = groups[start : start + top]
        selected = [s for s in query.get("$select", "").split(",") if s]
        values = [_selected(_group_json(g), selected) for g in page]
        body: dict[str, Any] = {"value": values}
        if query.get("$count") == "true":
            body["@odata.count"] = len(groups)
        if start + top < len(groups):
            rest = {k: v for k, v in query.items() if k != "$skiptoken"}
            rest["$skiptoken"] = str(start + top)
            body["@odata.nextLink"] = f"{request.url.remove_query_params(list(query))}?" + (
                urlencode(rest)
            )
        return JSONResponse(body)

    async def _users(self, request: Request) -> Response:
        if (refused := await self._directory_gate(request)) is not None:
            return refused
        wanted = _MAIL_FILTER.match(request.query_params.get("$filter", ""))
        if wanted is None:
            return _error(400, "Request_UnsupportedQuery", "Unsupported or invalid query filter.")
        mail = wanted.group(1).replace("''", "'").lower()
        with self._lock:  # type: ignore[attr-defined]
            found = [u for u in self.users.values() if (u.mail or "").lower() == mail]
        selected = [s for s in request.query_params.get("$select", "").split(",") if s]
        values = [
            _selected(
                {"id": u.id, "userPrincipalName": u.user_principal_name, "mail": u.mail},
                selected,
            )
            for u in found
        ]
        return JSONResponse({"value": values})


def _group_json(group: DirectoryGroup) -> dict[str, Any]:
    return {
        "@odata.type": GROUP_TYPE,
        "id": group.id,
        "displayName": group.display_name,
        "onPremisesSamAccountName": group.sam_account_name,
        "securityEnabled": True,
    }


def _selected(item: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    if not fields:
        return item
    return {k: v for k, v in item.items() if k in fields or k == "@odata.type"}


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
