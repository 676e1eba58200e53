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

Errors: 401 with an empty body for wrong basic auth (e-mail:API token), 404 ``{"errors":
[{"status": 404, "code": "NOT_FOUND", ...}]}`` for an unknown page or space, 429 with
``Retry-After`` (seconds) when throttled.

Fault knobs: :meth:`FakeConfluence.throttle_next` (the next N requests answer 429 with a
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

    # -- the app ------------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"{WIKI}/api/v2/spaces", self._spaces),
                Route(f"{WIKI}/api/v2/spaces/{{space_id}}/pages", self._space_pages),
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
    return JSONResponse(
        {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Not Found", "detail": None}]},
        status_code=404,
    )
