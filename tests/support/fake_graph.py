"""A local Microsoft Graph (SharePoint document libraries) and Entra token endpoint, over HTTPS
(msal accepts only https authorities), for testing the SharePoint source.

Entra, with the shapes Microsoft documents for the client-credentials flow:

* ``GET /{tenant}/v2.0/.well-known/openid-configuration``: ``token_endpoint`` and friends
* ``POST /{tenant}/oauth2/v2.0/token`` (form ``grant_type=client_credentials``, ``client_id``,
  ``client_secret``, ``scope``): ``{"token_type": "Bearer", "expires_in", "access_token"}``, or
  401 ``{"error": "invalid_client", "error_description": "AADSTS7000215: ..."}``

Graph v1.0 (under ``/v1.0``):

* ``GET /sites/{host}:/{path}``: the site (``id`` is ``host,site-guid,web-guid``)
* ``GET /sites/{id}/drives``: ``{"value": [{"id", "name", "driveType": "documentLibrary"}]}``
* a drive's delta query, ``GET /drives/{id}/`` and :data:`DRIVE_DELTA` ``[?token=...]``: pages of
  driveItems (``@odata.nextLink`` to the next page, ``@odata.deltaLink`` after the last). Without a
  token, the drive as it is (no deleted items); with the token of a delta link, only the items
  changed or deleted since (deleted ones with the ``deleted`` facet, ``{"state": "deleted"}``), or
  410 ``resyncRequired`` (with a ``Location`` to enumerate afresh) for a delta or next link Graph no
  longer honours. Pages go by position in time, not by index: an item deleted or changed during an
  enumeration shifts nothing (a changed one is listed again later, as Graph may). With ``Prefer:
  deltashowremovedasdeleted, deltatraversepermissiongaps, deltashowsharingchanges`` an item reported
  because its permissions changed carries ``"@microsoft.graph.sharedChanged": "True"``; the third
  preference without the other two (which Microsoft documents as required with it) is refused 400,
  and with :meth:`FakeGraph.refuse_sharing_changes` refused 403 ``accessDenied`` (what an app
  without ``Sites.FullControl.All`` may meet: Microsoft documents that permission for it, not the
  answer without it).
* ``GET /drives/{d}/items/{i}``, ``/content`` (302 to a pre-authenticated download URL, served
  without a token), ``/permissions`` (``roles``, ``grantedToV2`` with ``user``/``group``/
  ``siteGroup``, ``link.scope``)

The directory (users, their nested groups): :mod:`tests.support.fake_directory`.

Site pages (SharePoint's modern pages, Graph v1.0):

* ``POST /sites/{id}/pages`` (a ``#microsoft.graph.sitePage`` with ``name`` ending ``.aspx``,
  ``title``, ``canvasLayout``): 201 with the page, ``publishingState: {"level": "checkout",
  "versionId": "0.1"}`` (a draft nobody but its author sees) and ``webUrl``; 400
  ``invalidRequest`` for a body that is not such a page, 409 ``nameAlreadyExists``
* ``POST /sites/{id}/pages/{page}/microsoft.graph.sitePage/publish``: 204, logged in
  :attr:`FakeGraph.published` so a test can assert nothing was published

Errors as Graph answers them: ``{"error": {"code", "message"}}`` with 401
``InvalidAuthenticationToken`` (no, unknown or expired token), 403 ``accessDenied``, 404
``itemNotFound``, 429 ``TooManyRequests`` with ``Retry-After``.

Knobs: :meth:`FakeGraph.expire_tokens` (every token issued so far is expired),
:meth:`FakeGraph.deny` (403 on paths containing a string), :meth:`FakeGraph.fail_path` (401, 403
or 503 there), :meth:`FakeGraph.throttle_next`,
:meth:`FakeGraph.fail_deltas_after` (delta pages after the N-th answer 503: a run stopped
midway), :meth:`FakeGraph.expire_drive_delta_tokens` (410 for delta links issued so far),
:meth:`FakeGraph.share_file` (a permission change alone), and the logs
:attr:`FakeGraph.token_requests` and :attr:`FakeGraph.downloads`.

Site pages (reading them) and lists: :mod:`tests.support.fake_graph_pages`.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.fake_directory import FakeDirectory
from tests.support.fake_graph_pages import PagesAndLists, permission_values
from tests.support.fake_graph_pages import graph_error as _error
from tests.support.served import ServedFake, self_signed

TENANT = "contoso-tenant"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
CLIENT_SECRET = "graph-test-secret-value"
HOST = "contoso.sharepoint.com"
DRIVE_DELTA = "root/delta"
"""A drive's delta query, under ``/drives/{id}/`` (Graph's ``driveItem: delta`` on its root)."""
SITE_PATH = "/sites/it"
SITE_ID = f"{HOST},6d3b4c1e-0000-4000-8000-000000000001,6d3b4c1e-0000-4000-8000-000000000002"


@dataclass
class FakeItem:
    id: str
    drive: str
    name: str
    content: bytes
    version: int
    changed_at: int
    deleted: bool = False
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    organization_link: bool = True
    shared_at: int = 0
    """When its permissions last changed (on the emulator's clock)."""


class FakeGraph(FakeDirectory, PagesAndLists, ServedFake):
    def __init__(self, tls_folder: Path, libraries: tuple[str, ...] = ("Documents",)) -> None:
        self.tls = self_signed(tls_folder)
        self.drives = {f"b!drive{i}": name for i, name in enumerate(libraries)}
        self.items: dict[str, FakeItem] = {}
        self.token_requests = 0
        self.downloads: list[str] = []
        self.page_size = 2
        self._clock = itertools.count(1)
        self._ids = itertools.count(1)
        self._tokens: dict[str, bool] = {}  # token -> valid
        self._lock = threading.Lock()
        self._failing: dict[str, int] = {}
        """Path fragment -> the status requests whose path contains it answer."""
        self._refuse_sharing = False
        self.delta_prefers: list[frozenset[str]] = []
        """The ``Prefer`` values of each drive delta request, in order."""
        self._throttle = 0
        self._delta_pages = 0
        self._fail_after: int | None = None
        self._drive_token_floors: dict[str, int] = {}
        self.site_pages: dict[str, dict[str, Any]] = {}
        """Pages created through the API, by id: the JSON they were created with."""
        self.published: list[str] = []
        """Ids of pages the API was asked to publish."""
        self._failing_pages: list[int] = []
        self.init_directory()
        self._init_pages_and_lists()

    @property
    def ca_bundle(self) -> Path:
        assert self.tls is not None
        return self.tls[0]

    @property
    def graph_url(self) -> str:
        return self.origin + "/v1.0"

    # -- content ------------------------------------------------------------------------------

    def add_file(self, name: str, content: bytes, drive: str | None = None, **kw: Any) -> FakeItem:
        with self._lock:
            item = FakeItem(
                id=f"01ITEM{next(self._ids):04d}",
                drive=drive or next(iter(self.drives)),
                name=name,
                content=content,
                version=1,
                changed_at=next(self._clock),
                **kw,
            )
            self.items[item.id] = item
            return item

    def edit_file(self, item_id: str, content: bytes) -> None:
        with self._lock:
            item = self.items[item_id]
            item.content, item.version = content, item.version + 1
            item.changed_at = next(self._clock)

    def delete_file(self, item_id: str) -> None:
        with self._lock:
            item = self.items[item_id]
            item.deleted, item.changed_at = True, next(self._clock)

    def share_file(
        self, item_id: str, *, users: list[str], groups: list[str], organization_link: bool
    ) -> None:
        """Other permissions on a file; its content (``cTag``, ``eTag``) does not change, but
        the next delta reports it (marked ``sharedChanged`` when the request asks)."""
        with self._lock:
            item = self.items[item_id]
            item.users, item.groups, item.organization_link = users, groups, organization_link
            item.changed_at = item.shared_at = next(self._clock)

    # -- knobs --------------------------------------------------------------------------------

    def expire_tokens(self) -> None:
        with self._lock:
            self._tokens = dict.fromkeys(self._tokens, False)

    def deny(self, fragment: str) -> None:
        self.fail_path(fragment, 403)

    def fail_path(self, fragment: str, status: int | None) -> None:
        """Requests whose path contains ``fragment`` answer ``status`` as Graph does (401
        ``InvalidAuthenticationToken`` even to a fresh token, 403 ``accessDenied``, 503
        ``serviceNotAvailable`` with ``Retry-After``) until called again with None."""
        if status is None:
            self._failing.pop(fragment, None)
        else:
            self._failing[fragment] = status

    def refuse_sharing_changes(self) -> None:
        """Drive deltas asking for sharing changes answer 403 from now on."""
        self._refuse_sharing = True

    def throttle_next(self, count: int) -> None:
        self._throttle = count

    def fail_deltas_after(self, pages: int | None) -> None:
        self._fail_after, self._delta_pages = pages, 0

    def expire_drive_delta_tokens(self, drive: str | None = None) -> None:
        """Every delta link issued so far for ``drive`` (None: every drive) answers 410
        ``resyncRequired``."""
        with self._lock:
            now = next(self._clock)
            for expired in [drive] if drive else list(self.drives):
                self._drive_token_floors[expired] = now

    def fail_page_creates(self, count: int, status: int = 503) -> None:
        """The next ``count`` page creations answer ``status`` (503 with ``Retry-After``)."""
        self._failing_pages = [status] * count

    # -- the app ------------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"/{TENANT}/v2.0/.well-known/openid-configuration", self._openid),
                Route(f"/{TENANT}/oauth2/v2.0/token", self._token, methods=["POST"]),
                Route("/v1.0/sites/{site}/pages", self._create_page, methods=["POST"]),
                Route(
                    "/v1.0/sites/{site}/pages/{page}/microsoft.graph.sitePage/publish",
                    self._publish,
                    methods=["POST"],
                ),
                *self.pages_and_lists_routes(),
                Route("/v1.0/sites/{site:path}", self._sites),
                Route(f"/v1.0/drives/{{drive}}/{DRIVE_DELTA}", self._delta),
                Route("/v1.0/drives/{drive}/items/{item}", self._item),
                Route("/v1.0/drives/{drive}/items/{item}/content", self._content),
                Route("/v1.0/drives/{drive}/items/{item}/permissions", self._permissions),
                Route("/download/{item}", self._download),
                *self.directory_routes(),
            ]
        )

    async def _openid(self, request: Request) -> Response:
        base = f"{self.origin}/{TENANT}"
        return JSONResponse(
            {
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "issuer": f"{base}/v2.0",
                "token_endpoint_auth_methods_supported": ["client_secret_post"],
            }
        )

    async def _token(self, request: Request) -> Response:
        form = await request.form()
        with self._lock:
            self.token_requests += 1
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return JSONResponse(
                {
                    "error": "invalid_client",
                    "error_description": "AADSTS7000215: Invalid client secret provided.",
                    "error_codes": [7000215],
                },
                status_code=401,
            )
        token = "eyJ0eXAi." + secrets.token_urlsafe(24)
        with self._lock:
            self._tokens[token] = True
        return JSONResponse(
            {
                "token_type": "Bearer",
                "expires_in": 3599,
                "ext_expires_in": 3599,
                "access_token": token,
            }
        )

    def _gate(self, request: Request) -> Response | None:
        auth = request.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ")
        with self._lock:
            valid = self._tokens.get(token)
            if self._throttle > 0:
                self._throttle -= 1
                return _error(
                    429, "TooManyRequests", "Please retry again later.", {"Retry-After": "1"}
                )
        if not valid:
            message = (
                "Lifetime validation failed, the token is expired."
                if valid is False
                else ("Access token is empty.")
            )
            return _error(401, "InvalidAuthenticationToken", message)
        for fragment, status in self._failing.items():
            if fragment in request.url.path:
                code, message = _FAILURES[status]
                return _error(status, code, message, _RETRY if status == 503 else None)
        return None

    async def _sites(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        site = request.path_params["site"]
        if site == f"{HOST}:{SITE_PATH}":
            return JSONResponse(
                {"id": SITE_ID, "name": "it", "webUrl": f"https://{HOST}{SITE_PATH}"}
            )
        if site == f"{SITE_ID}/drives":
            return JSONResponse(
                {
                    "value": [
                        {"id": d, "name": n, "driveType": "documentLibrary"}
                        for d, n in self.drives.items()
                    ]
                }
            )
        return _error(404, "itemNotFound", "Requested site could not be found")

    async def _create_page(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        if request.path_params["site"] != SITE_ID:
            return _error(404, "itemNotFound", "Requested site could not be found")
        with self._lock:
            if self._failing_pages:
                status = self._failing_pages.pop()
                return _error(status, "serviceNotAvailable", "Service unavailable", _RETRY)
        try:
            sent = await request.json()
        except ValueError:
            return _error(400, "BadRequest", "Unable to read JSON request payload.")
        name = str(sent.get("name", "")) if isinstance(sent, dict) else ""
        if (
            not isinstance(sent, dict)
            or sent.get("@odata.type") != "#microsoft.graph.sitePage"
            or not name.endswith(".aspx")
            or not str(sent.get("title") or "").strip()
        ):
            return _error(400, "invalidRequest", "Invalid request: a sitePage needs name, title")
        with self._lock:
            if any(page["name"] == name for page in self.site_pages.values()):
                return _error(409, "nameAlreadyExists", "The specified item name already exists.")
            page_id = f"6d3b4c1e-0000-4000-9000-{next(self._ids):012d}"
            self.site_pages[page_id] = sent
        return JSONResponse(
            {
                "@odata.context": f"{self.graph_url}/$metadata#sites('{SITE_ID}')/pages/$entity",
                "@odata.type": "#microsoft.graph.sitePage",
                "id": page_id,
                "name": name,
                "title": sent["title"],
                "webUrl": f"SitePages/{name}",
                "pageLayout": sent.get("pageLayout", "article"),
                "publishingState": {"level": "checkout", "versionId": "0.1"},
            },
            status_code=201,
        )

    async def _publish(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        page = request.path_params["page"]
        if page not in self.site_pages:
            return _error(404, "itemNotFound", "The resource could not be found.")
        self.published.append(page)
        return Response(status_code=204)

    async def _delta(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        drive = request.path_params["drive"]
        if drive not in self.drives:
            return _error(404, "itemNotFound", "The resource could not be found.")
        prefer = {
            value.strip().lower()
            for header in request.headers.getlist("prefer")
            for value in header.split(",")
        }
        self.delta_prefers.append(frozenset(prefer))
        sharing = "deltashowsharingchanges" in prefer
        if sharing and self._refuse_sharing:
            return _error(403, "accessDenied", "Access denied")
        if sharing and not {"deltashowremovedasdeleted", "deltatraversepermissiongaps"} <= prefer:
            return _error(
                400,
                "invalidRequest",
                "deltashowsharingchanges requires deltashowremovedasdeleted and "
                "deltatraversepermissiongaps.",
            )
        base = f"{self.graph_url}/drives/{drive}/{DRIVE_DELTA}"
        with self._lock:
            self._delta_pages += 1
            if self._fail_after is not None and self._delta_pages > self._fail_after:
                return _error(503, "serviceNotAvailable", "Service unavailable")
            # Tokens: none (an enumeration's start), "S" (a delta link: changes after S),
            # "S.P.I" (a next link: after position P of a listing since S, "" for an
            # enumeration; issued at I, so it can expire too).
            token = request.query_params.get("token", "")
            since, _, rest = token.partition(".")
            after, _, issued = rest.partition(".")
            link_at = int(issued) if rest else int(since or 0)
            if token and link_at < self._drive_token_floors.get(drive, 0):
                return _error(
                    410,
                    "resyncRequired",
                    "Resync required. Replace any local items with the server's version.",
                    {"Location": base},
                )
            fresh = not since  # an enumeration of what exists: no deleted items
            position = max(int(since or 0), int(after or 0))
            changed = sorted(
                (
                    i
                    for i in self.items.values()
                    if i.drive == drive and i.changed_at > position and not (fresh and i.deleted)
                ),
                key=lambda i: i.changed_at,
            )
            batch = changed[: self.page_size]
            values: list[dict[str, Any]] = []
            if not token:
                values.append({"id": "01ROOT", "name": "root", "root": {}, "folder": {}})
            for item in batch:
                shown = self._item_json(item)
                if sharing and not fresh and item.shared_at > int(since) and not item.deleted:
                    shown["@microsoft.graph.sharedChanged"] = "True"
                values.append(shown)
            issued_now = next(self._clock)
        body: dict[str, Any] = {"value": values}
        if len(changed) > self.page_size:
            following = f"{since}.{batch[-1].changed_at}.{issued_now}"
            body["@odata.nextLink"] = f"{base}?{urlencode({'token': following})}"
        else:
            # Changes after the link's issue: every change so far has an earlier time.
            body["@odata.deltaLink"] = f"{base}?{urlencode({'token': str(issued_now)})}"
        return JSONResponse(body)

    def _item_json(self, item: FakeItem) -> dict[str, Any]:
        if item.deleted:
            return {
                "id": item.id,
                "deleted": {"state": "deleted"},
                "parentReference": {"driveId": item.drive},
            }
        return {
            "id": item.id,
            "name": item.name,
            "eTag": f'"{{{item.id}}},{item.version}"',
            "cTag": f'"c:{{{item.id}}},{item.version}"',
            "size": len(item.content),
            "webUrl": f"https://{HOST}{SITE_PATH}/Shared%20Documents/{item.name}",
            "file": {"mimeType": "application/octet-stream"},
            "parentReference": {"driveId": item.drive},
        }

    def _find(self, request: Request) -> FakeItem | None:
        item = self.items.get(request.path_params["item"])
        if item is None or item.deleted or item.drive != request.path_params["drive"]:
            return None
        return item

    async def _item(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        item = self._find(request)
        if item is None:
            return _error(404, "itemNotFound", "The resource could not be found.")
        return JSONResponse(self._item_json(item))

    async def _content(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        item = self._find(request)
        if item is None:
            return _error(404, "itemNotFound", "The resource could not be found.")
        return RedirectResponse(f"{self.origin}/download/{item.id}?tempauth=x", status_code=302)

    async def _download(self, request: Request) -> Response:
        if request.headers.get("authorization"):
            return Response("a pre-authenticated URL takes no token", status_code=401)
        item = self.items.get(request.path_params["item"])
        if item is None:
            return Response(status_code=404)
        self.downloads.append(item.id)
        return Response(item.content, media_type="application/octet-stream")

    async def _permissions(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        item = self._find(request)
        if item is None:
            return _error(404, "itemNotFound", "The resource could not be found.")
        values = permission_values(item.users, item.groups, item.organization_link)
        return JSONResponse({"value": values})


_RETRY = {"Retry-After": "1"}
_FAILURES = {
    401: ("InvalidAuthenticationToken", "Access token validation failure. Invalid audience."),
    403: ("accessDenied", "Either scp or roles claim need to be present in the token."),
    503: ("serviceNotAvailable", "Service unavailable"),
}
