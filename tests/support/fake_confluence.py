"""A local Confluence Cloud (REST API v2, and the v1 restrictions endpoint) over real HTTP, for
testing the Confluence source.

Endpoints, with the shapes Atlassian documents (all under the wiki root ``/wiki``):

* ``GET /api/v2/spaces?keys=K``: ``{"results": [{"id", "key", "name"}], "_links": {}}``
* ``GET /api/v2/spaces/{id}/pages?limit=N&cursor=C``: pages without bodies, ``{"results":
  [{"id", "status", "title", "spaceId", "version": {"number"}, "_links": {"webui"}}],
  "_links": {"next": "/wiki/api/v2/spaces/{id}/pages?cursor=...&limit=N", "base"}}`` (no
  ``next`` on the last page); the cursor is opaque to the client
* ``GET /api/v2/pages/{id}?body-format=storage``: one page with ``body.storage.value``
* ``GET /rest/api/content/{id}/restriction/byOperation/read``: ``{"operation": "read",
  "restrictions": {"user": {"results": [{"accountId"}]}, "group": {"results": [{"name",
  "id"}]}}}``

* ``POST /api/v2/pages`` (JSON ``spaceId``, ``status`` ``current`` or ``draft``, ``title``,
  ``body: {"representation": "storage", "value"}``): 200 with the page, its ``_links``
  (``webui``, ``editui``, ``tinyui``, ``base``); one created ``current`` is logged in
  :attr:`FakeConfluence.published`, so a test can assert nothing was published. Pages are never
  updated through the API (Deskpilot only writes drafts): no ``PUT`` is served (405).

Errors: 401 with an empty body for wrong basic auth (e-mail:API token), 404 ``{"errors":
[{"status": 404, "code": "NOT_FOUND", ...}]}`` for an unknown page or space, 429 with
``Retry-After`` (seconds) when throttled.

Errors of page creation, as v2 shapes them (``{"errors": [{"status", "code", "title",
"detail"}]}``): 400 ``INVALID_REQUEST_PARAMETER`` (no title, an unknown status or body
representation), 403 ``FORBIDDEN`` in a space where :meth:`FakeConfluence.deny_drafts` took the
account's "Add page" permission, 404 for an unknown space id.

Fault knobs: :meth:`FakeConfluence.fail_creates` (the next N creations answer a 5xx, its
code and title the status's standard reason: 502 ``BAD_GATEWAY``, "Bad Gateway"),
:meth:`FakeConfluence.throttle_next` (the next N requests answer 429 with a
Retry-After), :meth:`FakeConfluence.fail_page` (a page's body read answers 500),
:meth:`FakeConfluence.fail_after` (after N body reads every body read answers 503 without
Retry-After: the run stops, as when the service goes down mid-sync), and
:attr:`FakeConfluence.requests`, a log of every request path.
"""

from __future__ import annotations

import base64
import itertools
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.served import ServedFake

EMAIL = "deskpilot-bot@northwind.example"
TOKEN = "ATATT-confluence-test-token"
WIKI = "/wiki"


@dataclass
class FakePage:
    id: str
    space: str
    title: str
    body: str
    version: int = 1
    read_users: list[str] = field(default_factory=list)
    read_groups: list[str] = field(default_factory=list)


class FakeConfluence(ServedFake):
    def __init__(self, spaces: dict[str, str] | None = None) -> None:
        self.spaces = spaces or {"IT": "Information Technology"}
        self._space_ids = {key: str(1000 + i) for i, key in enumerate(self.spaces)}
        self.pages: dict[str, FakePage] = {}
        self.requests: list[str] = []
        self.body_reads: list[str] = []
        self._ids = itertools.count(5001)
        self._lock = threading.Lock()
        self._throttle = 0
        self._retry_after = "1"
        self._failing_pages: set[str] = set()
        self._fail_after: int | None = None
        self.drafts: dict[str, dict[str, Any]] = {}
        """Pages created through the API, by id: the JSON they were created with."""
        self.published: list[str] = []
        """Ids of pages the API was asked to make current (published)."""
        self._denied_spaces: set[str] = set()
        self._failing_creates: list[int] = []

    @property
    def base_url(self) -> str:
        return self.origin + WIKI

    # -- content ------------------------------------------------------------------------------

    def add_page(self, space: str, title: str, body: str, **kwargs: Any) -> FakePage:
        with self._lock:
            page = FakePage(str(next(self._ids)), space, title, body, **kwargs)
            self.pages[page.id] = page
            return page

    def edit_page(
        self,
        page_id: str,
        *,
        body: str | None = None,
        title: str | None = None,
        read_groups: list[str] | None = None,
    ) -> None:
        """An edit as Confluence records it: a new version number."""
        with self._lock:
            page = self.pages[page_id]
            page.body = body if body is not None else page.body
            page.title = title if title is not None else page.title
            if read_groups is not None:
                page.read_groups = read_groups
            page.version += 1

    def delete_page(self, page_id: str) -> None:
        with self._lock:
            del self.pages[page_id]

    # -- faults -------------------------------------------------------------------------------

    def throttle_next(self, count: int, retry_after: str = "1") -> None:
        self._throttle, self._retry_after = count, retry_after

    def fail_page(self, page_id: str) -> None:
        self._failing_pages.add(page_id)

    def fail_after(self, body_reads: int | None) -> None:
        self._fail_after = body_reads

    def deny_drafts(self, space: str) -> None:
        """The account loses the space permission "Add page" in ``space``."""
        self._denied_spaces.add(space)

    def fail_creates(self, count: int, status: int = 500) -> None:
        self._failing_creates = [status] * count

    # -- the app ------------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"{WIKI}/api/v2/spaces", self._spaces),
                Route(f"{WIKI}/api/v2/spaces/{{space_id}}/pages", self._space_pages),
                Route(f"{WIKI}/api/v2/pages", self._create_page, methods=["POST"]),
                Route(f"{WIKI}/api/v2/pages/{{page_id}}", self._page),
                Route(
                    f"{WIKI}/rest/api/content/{{page_id}}/restriction/byOperation/read",
                    self._restrictions,
                ),
            ]
        )

    def _gate(self, request: Request) -> Response | None:
        self.requests.append(
            request.url.path + (f"?{request.url.query}" if request.url.query else "")
        )
        expected = "Basic " + base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return Response(status_code=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
        with self._lock:
            if self._throttle > 0:
                self._throttle -= 1
                return JSONResponse(
                    {"message": "Rate limit exceeded"},
                    status_code=429,
                    headers={"Retry-After": self._retry_after},
                )
        return None

    async def _spaces(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        keys = request.query_params.getlist("keys")
        results = [
            {"id": self._space_ids[key], "key": key, "name": self.spaces[key]}
            for key in keys
            if key in self.spaces
        ]
        return JSONResponse({"results": results, "_links": {"base": self.base_url}})

    async def _space_pages(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        space_id = request.path_params["space_id"]
        key = next((k for k, v in self._space_ids.items() if v == space_id), None)
        if key is None:
            return _not_found()
        limit = min(int(request.query_params.get("limit", "25")), 250)
        cursor = request.query_params.get("cursor")
        after = base64.urlsafe_b64decode(cursor.encode()).decode() if cursor else ""
        with self._lock:
            pages = sorted(
                (p for p in self.pages.values() if p.space == key), key=lambda p: int(p.id)
            )
        pages = [p for p in pages if not after or int(p.id) > int(after)]
        batch, rest = pages[:limit], pages[limit:]
        links: dict[str, str] = {"base": self.base_url}
        if rest:
            token = base64.urlsafe_b64encode(batch[-1].id.encode()).decode()
            query = urlencode({"cursor": token, "limit": limit})
            links["next"] = f"{WIKI}/api/v2/spaces/{space_id}/pages?{query}"
        return JSONResponse(
            {"results": [self._summary(p) for p in batch], "_links": links},
            headers={"Link": f'<{links["next"]}>; rel="next"'} if rest else {},
        )

    async def _page(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        page_id = request.path_params["page_id"]
        with self._lock:
            page = self.pages.get(page_id)
            if self._fail_after is not None and len(self.body_reads) >= self._fail_after:
                return JSONResponse({"message": "Service Unavailable"}, status_code=503)
            if page is not None and page_id in self._failing_pages:
                return JSONResponse({"message": "Internal Server Error"}, status_code=500)
            if page is None:
                return _not_found()
            self.body_reads.append(page_id)
        summary = self._summary(page)
        summary["body"] = {"storage": {"value": page.body, "representation": "storage"}}
        return JSONResponse(summary)

    async def _restrictions(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        page = self.pages.get(request.path_params["page_id"])
        if page is None:
            return _not_found()
        users = [{"type": "known", "accountId": account} for account in page.read_users]
        groups = [{"type": "group", "name": name, "id": f"g-{name}"} for name in page.read_groups]
        return JSONResponse(
            {
                "operation": "read",
                "restrictions": {
                    "user": {"results": users, "start": 0, "limit": 200, "size": len(users)},
                    "group": {"results": groups, "start": 0, "limit": 200, "size": len(groups)},
                },
                "_links": {"base": self.base_url},
            }
        )

    async def _create_page(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        with self._lock:
            if self._failing_creates:
                reason = HTTPStatus(self._failing_creates.pop())
                return _errors(reason.value, reason.name, reason.phrase)
        try:
            sent = await request.json()
        except ValueError:
            return _errors(400, "INVALID_REQUEST_PARAMETER", "Invalid JSON body")
        if not isinstance(sent, dict):
            return _errors(400, "INVALID_REQUEST_PARAMETER", "Invalid JSON body")
        key = next((k for k, v in self._space_ids.items() if v == str(sent.get("spaceId"))), None)
        if key is None:
            return _errors(404, "NOT_FOUND", "Space not found")
        if key in self._denied_spaces:
            return _errors(
                403, "FORBIDDEN", "User does not have permission to create content in this space"
            )
        body = sent.get("body") or {}
        if (
            not str(sent.get("title") or "").strip()
            or sent.get("status", "current") not in ("current", "draft")
            or body.get("representation") not in ("storage", "atlas_doc_format", "wiki")
        ):
            return _errors(400, "INVALID_REQUEST_PARAMETER", "Invalid page: title, status, body")
        with self._lock:
            page = FakePage(str(next(self._ids)), key, sent["title"], str(body.get("value", "")))
            status = sent.get("status", "current")
            if status == "current":
                self.pages[page.id] = page
                self.published.append(page.id)
            self.drafts[page.id] = sent
        summary = self._summary(page)
        summary["status"] = status
        summary["_links"] |= {
            "editui": f"/pages/resumedraft.action?draftId={page.id}",
            "tinyui": f"/x/{page.id}",
            "base": self.base_url,
        }
        if status == "draft":
            summary["_links"]["webui"] = f"/spaces/{key}/pages/edit-v2/{page.id}"
        return JSONResponse(summary)

    def _summary(self, page: FakePage) -> dict[str, Any]:
        return {
            "id": page.id,
            "status": "current",
            "title": page.title,
            "spaceId": self._space_ids[page.space],
            "version": {"number": page.version, "message": "", "minorEdit": False},
            "_links": {"webui": f"/spaces/{page.space}/pages/{page.id}"},
        }


def _not_found() -> Response:
    return _errors(404, "NOT_FOUND", "Not Found")


def _errors(status: int, code: str, title: str) -> Response:
    return JSONResponse(
        {"errors": [{"status": status, "code": code, "title": title, "detail": None}]},
        status_code=status,
    )
