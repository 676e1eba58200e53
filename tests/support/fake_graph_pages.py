"""Site pages and lists of the Graph emulator (:class:`tests.support.fake_graph.FakeGraph` mixes
this in), with the shapes Microsoft documents for Graph v1.0:

* ``GET /sites/{id}/pages/microsoft.graph.sitePage``: the site's pages, ``$top`` at a time
  (``@odata.nextLink`` with a ``$skiptoken`` to the rest); each with ``id``, ``name``,
  ``title``, ``webUrl``, ``eTag`` (``"{GUID},N"``), ``lastModifiedDateTime``,
  ``parentReference`` (``siteId``, ``listId`` of the Site Pages library) and
  ``publishingState`` (``published``, or ``checkout`` for a draft). Drafts written through
  ``POST /sites/{id}/pages`` are listed too, checked out.
* ``GET /sites/{id}/pages/{page}/microsoft.graph.sitePage?$expand=canvasLayout``: the page with
  ``canvasLayout.horizontalSections[].columns[].webparts[]``, text web parts
  (``#microsoft.graph.textWebPart``) carrying ``innerHtml``; other web parts (an image) carry
  ``webPartType`` and ``data`` only.
* ``GET /sites/{id}/lists``: the site's lists (``id``, ``name``, ``displayName``,
  ``list.template``); ``/lists/{list}/columns`` (``name`` is what ``fields`` are keyed by,
  ``displayName`` what people see); ``/lists/{list}/drive`` (document libraries only: the Site
  Pages library's drive, 404 for a generic list).
* ``GET /sites/{id}/lists/{list}/items/delta[?token=...]`` (``$expand=fields``): listItems with
  ``id``, ``eTag``, ``lastModifiedDateTime``, ``webUrl`` and ``fields``, by ``@odata.nextLink``
  to the ``@odata.deltaLink``; deleted items as ``{"id", "deleted": {"state": "deleted"}}``
  (only with a delta link's token: an enumeration from the start lists what exists).
  ``GET /sites/{id}/lists/{list}/items/{item}?$expand=fields``: one item (404 when deleted).
* ``GET /drives/{site-pages-drive}/root:/{name}`` and ``/drives/{...}/items/{id}/permissions``:
  a page's file in the Site Pages library and who may read it.

Knobs: :meth:`PagesAndLists.throttle_page_listing` (the next listings answer 429 with
``Retry-After``), :meth:`PagesAndLists.fail_list_deltas_after` (503 from then on),
:meth:`PagesAndLists.expire_list_delta_tokens` (410 ``resyncRequired`` for delta links issued
so far); the logs :attr:`PagesAndLists.page_reads` and :attr:`PagesAndLists.list_item_reads`.
"""

from __future__ import annotations

import datetime
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SITE_PAGES_LIST = "0a1b2c3d-0000-4000-8000-00000000a001"
SITE_PAGES_DRIVE = "b!sitepages"
_EPOCH = datetime.datetime(2026, 1, 5, 8, 0, tzinfo=datetime.UTC)


@dataclass
class FakeSitePage:
    """A modern page: horizontal sections of columns of text web parts (their innerHtml)."""

    id: str
    name: str
    title: str
    sections: list[list[list[str]]]
    version: int
    changed_at: int
    published: bool = True
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    organization_link: bool = True


@dataclass
class FakeListItem:
    id: str
    fields: dict[str, str]
    version: int
    changed_at: int
    deleted: bool = False


@dataclass
class FakeList:
    id: str
    display_name: str
    columns: dict[str, str]
    """Internal name -> display name."""
    items: dict[str, FakeListItem] = field(default_factory=dict)


class PagesAndLists:
    """The pages and lists half of the emulator; :class:`FakeGraph` provides the gate (tokens,
    denials, throttling), the clock, the lock and the origin."""

    _lock: threading.Lock
    _clock: Iterator[int]
    page_size: int
    site_pages: dict[str, dict[str, Any]]
    graph_url: str
    _gate: Callable[[Request], Response | None]

    def _init_pages_and_lists(self) -> None:
        self.pages: dict[str, FakeSitePage] = {}
        self.lists: dict[str, FakeList] = {}
        self.page_reads: list[str] = []
        self.list_item_reads: list[str] = []
        self._page_ids = itertools.count(1)
        self._throttled_listings = 0
        self._list_deltas_left: int | None = None
        self._token_floor = 0

    # -- content ------------------------------------------------------------------------------

    def add_page(self, title: str, sections: list[list[list[str]]], **kw: Any) -> FakeSitePage:
        with self._lock:
            number = next(self._page_ids)
            page = FakeSitePage(
                id=f"f45354cb-d634-45df-8b88-{number:012d}",
                name=f"{title.replace(' ', '-')}.aspx",
                title=title,
                sections=sections,
                version=1,
                changed_at=next(self._clock),
                **kw,
            )
            self.pages[page.id] = page
            return page

    def edit_page(self, page_id: str, sections: list[list[list[str]]]) -> None:
        with self._lock:
            page = self.pages[page_id]
            page.sections, page.version = sections, page.version + 1
            page.changed_at = next(self._clock)

    def share_page(self, page_id: str, *, groups: list[str], organization_link: bool) -> None:
        """Other permissions on the page's file; the page itself (its eTag) does not change."""
        with self._lock:
            page = self.pages[page_id]
            page.groups, page.organization_link = groups, organization_link

    def delete_page(self, page_id: str) -> None:
        with self._lock:
            del self.pages[page_id]

    def add_list(self, display_name: str, columns: dict[str, str]) -> FakeList:
        with self._lock:
            number = len(self.lists) + 1
            made = FakeList(f"7e2a9c40-0000-4000-8000-{number:012d}", display_name, columns)
            self.lists[made.id] = made
            return made

    def add_list_item(self, list_id: str, fields: dict[str, str]) -> FakeListItem:
        with self._lock:
            items = self.lists[list_id].items
            item = FakeListItem(str(len(items) + 1), fields, 1, next(self._clock))
            items[item.id] = item
            return item

    def edit_list_item(self, list_id: str, item_id: str, fields: dict[str, str]) -> None:
        with self._lock:
            item = self.lists[list_id].items[item_id]
            item.fields = {**item.fields, **fields}
            item.version, item.changed_at = item.version + 1, next(self._clock)

    def delete_list_item(self, list_id: str, item_id: str) -> None:
        with self._lock:
            item = self.lists[list_id].items[item_id]
            item.deleted, item.changed_at = True, next(self._clock)

    def throttle_page_listing(self, count: int) -> None:
        """The next ``count`` requests for the pages listing answer 429 with Retry-After."""
        self._throttled_listings = count

    def expire_list_delta_tokens(self) -> None:
        """Every list delta token issued so far answers 410 ``resyncRequired``."""
        with self._lock:
            self._token_floor = next(self._clock)

    def fail_list_deltas_after(self, pages: int | None) -> None:
        """List delta pages after the next ``pages`` answer 503 (a run stopped midway)."""
        self._list_deltas_left = pages

    # -- routes -------------------------------------------------------------------------------

    def pages_and_lists_routes(self) -> list[Route]:
        site = "/v1.0/sites/{site}"
        return [
            Route(f"{site}/pages/microsoft.graph.sitePage", self._list_pages),
            Route(f"{site}/pages/{{page}}/microsoft.graph.sitePage", self._get_page),
            Route(f"{site}/lists", self._lists),
            Route(f"{site}/lists/{{list}}/columns", self._columns),
            Route(f"{site}/lists/{{list}}/drive", self._list_drive),
            Route(f"{site}/lists/{{list}}/items/delta", self._list_delta),
            Route(f"{site}/lists/{{list}}/items/{{item}}", self._list_item),
            Route(f"/v1.0/drives/{SITE_PAGES_DRIVE}/root:/{{name}}", self._page_file),
            Route(
                f"/v1.0/drives/{SITE_PAGES_DRIVE}/items/{{item}}/permissions",
                self._page_permissions,
            ),
        ]

    def _refused(self, request: Request) -> Response | None:
        if (refused := self._gate(request)) is not None:
            return refused
        from tests.support.fake_graph import SITE_ID

        if request.path_params["site"] != SITE_ID:
            return graph_error(404, "itemNotFound", "Requested site could not be found")
        return None

    def _page_json(self, page: FakeSitePage, *, canvas: bool) -> dict[str, Any]:
        from tests.support.fake_graph import HOST, SITE_ID, SITE_PATH

        modified = _EPOCH + datetime.timedelta(minutes=page.changed_at)
        body: dict[str, Any] = {
            "@odata.type": "#microsoft.graph.sitePage",
            "id": page.id,
            "name": page.name,
            "title": page.title,
            "webUrl": f"https://{HOST}{SITE_PATH}/SitePages/{quote(page.name)}",
            "eTag": f'"{{{page.id.upper()}}},{page.version}"',
            "lastModifiedDateTime": modified.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "pageLayout": "article",
            "parentReference": {"siteId": SITE_ID.split(",")[1], "listId": SITE_PAGES_LIST},
            "publishingState": (
                {"level": "published", "versionId": f"{page.version}.0"}
                if page.published
                else {"level": "checkout", "versionId": f"0.{page.version}"}
            ),
        }
        if canvas:
            body["canvasLayout"] = {
                "horizontalSections": [
                    {
                        "layout": "oneColumn" if len(columns) == 1 else "twoColumns",
                        "id": str(number),
                        "emphasis": "none",
                        "columns": [
                            {
                                "id": str(column_number),
                                "width": 12 // len(columns),
                                "webparts": [_webpart(html) for html in column],
                            }
                            for column_number, column in enumerate(columns, 1)
                        ],
                    }
                    for number, columns in enumerate(page.sections, 1)
                ]
            }
        return body

    async def _list_pages(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        with self._lock:
            if self._throttled_listings > 0:
                self._throttled_listings -= 1
                return graph_error(429, "TooManyRequests", "Please retry again later.", _RETRY)
            listed = [self._page_json(p, canvas=False) for p in self.pages.values()]
            drafts = [
                {**sent, "id": page_id, "publishingState": {"level": "checkout"}}
                for page_id, sent in self.site_pages.items()
                if isinstance(sent, dict)
            ]
        listed += [{k: v for k, v in d.items() if k != "canvasLayout"} for d in drafts]
        top = int(request.query_params.get("$top") or self.page_size)
        start = int(request.query_params.get("$skiptoken") or 0)
        body: dict[str, Any] = {"value": listed[start : start + top]}
        if start + top < len(listed):
            query = urlencode({"$top": top, "$skiptoken": start + top})
            body["@odata.nextLink"] = (
                f"{self.graph_url}/sites/{request.path_params['site']}/pages/"
                f"microsoft.graph.sitePage?{query}"
            )
        return JSONResponse(body)

    async def _get_page(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        page = self.pages.get(request.path_params["page"])
        if page is None:
            return graph_error(404, "itemNotFound", "The resource could not be found.")
        self.page_reads.append(page.id)
        canvas = "canvasLayout" in request.query_params.get("$expand", "")
        return JSONResponse(self._page_json(page, canvas=canvas))

    async def _lists(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        values = [
            {
                "id": SITE_PAGES_LIST,
                "name": "SitePages",
                "displayName": "Site Pages",
                "list": {"template": "webPageLibrary"},
            },
        ]
        values += [
            {
                "id": made.id,
                "name": made.display_name.replace(" ", ""),
                "displayName": made.display_name,
                "list": {"template": "genericList"},
            }
            for made in self.lists.values()
        ]
        return JSONResponse({"value": values})

    def _list(self, request: Request) -> FakeList | None:
        return self.lists.get(request.path_params["list"])

    async def _columns(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        made = self._list(request)
        if made is None:
            return graph_error(404, "itemNotFound", "List does not exist.")
        columns = [{"name": "Title", "displayName": "Title"}] if "Title" not in made.columns else []
        columns += [{"name": n, "displayName": d} for n, d in made.columns.items()]
        return JSONResponse({"value": columns})

    async def _list_drive(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if request.path_params["list"] != SITE_PAGES_LIST:
            return graph_error(404, "itemNotFound", "The resource could not be found.")
        return JSONResponse(
            {"id": SITE_PAGES_DRIVE, "name": "Site Pages", "driveType": "documentLibrary"}
        )

    def _list_item_json(self, made: FakeList, item: FakeListItem) -> dict[str, Any]:
        from tests.support.fake_graph import HOST, SITE_PATH

        if item.deleted:
            return {"id": item.id, "deleted": {"state": "deleted"}}
        modified = _EPOCH + datetime.timedelta(minutes=item.changed_at)
        return {
            "id": item.id,
            "eTag": f'"{made.id}-{item.id},{item.version}"',
            "lastModifiedDateTime": modified.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "webUrl": f"https://{HOST}{SITE_PATH}/Lists/{made.display_name.replace(' ', '')}/"
            f"DispForm.aspx?ID={item.id}",
            "fields": {"@odata.etag": f'"{made.id}-{item.id},{item.version}"', **item.fields},
        }

    async def _list_delta(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        made = self._list(request)
        if made is None:
            return graph_error(404, "itemNotFound", "List does not exist.")
        token = request.query_params.get("token", "")
        since, _, page = token.partition(".")
        since_at, start = int(since or 0), int(page or 0)
        with self._lock:
            if token and not page and since_at < self._token_floor:  # a delta link's token
                return graph_error(
                    410,
                    "resyncRequired",
                    "Resync required. Replace any local items with the server's version.",
                    {"Location": f"{request.url.remove_query_params('token')}"},
                )
            if self._list_deltas_left is not None:
                if self._list_deltas_left <= 0:
                    return graph_error(503, "serviceNotAvailable", "Service unavailable", _RETRY)
                self._list_deltas_left -= 1
            fresh = not since  # an enumeration of what exists: no deleted items
            changed = sorted(
                (
                    i
                    for i in made.items.values()
                    if i.changed_at > since_at and not (fresh and i.deleted)
                ),
                key=lambda i: i.changed_at,
            )
            now = max((i.changed_at for i in made.items.values()), default=since_at)
            values = [
                self._list_item_json(made, i) for i in changed[start : start + self.page_size]
            ]
        base = f"{self.graph_url}/sites/{request.path_params['site']}/lists/{made.id}/items/delta"
        body: dict[str, Any] = {"value": values}
        if start + self.page_size < len(changed):
            query = urlencode({"token": f"{since}.{start + self.page_size}"})
            body["@odata.nextLink"] = f"{base}?$expand=fields&{query}"
        else:
            body["@odata.deltaLink"] = f"{base}?$expand=fields&{urlencode({'token': str(now)})}"
        return JSONResponse(body)

    async def _list_item(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        made = self._list(request)
        item = made.items.get(request.path_params["item"]) if made else None
        if made is None or item is None or item.deleted:
            return graph_error(404, "itemNotFound", "Item does not exist.")
        self.list_item_reads.append(f"{made.id}/{item.id}")
        return JSONResponse(self._list_item_json(made, item))

    def _page_by_name(self, name: str) -> FakeSitePage | None:
        return next((p for p in self.pages.values() if p.name == name), None)

    async def _page_file(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        page = self._page_by_name(request.path_params["name"])
        if page is None:
            return graph_error(404, "itemNotFound", "The resource could not be found.")
        return JSONResponse({"id": f"01PAGE{page.id[-6:]}", "name": page.name, "file": {}})

    async def _page_permissions(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        item = request.path_params["item"]
        page = next((p for p in self.pages.values() if f"01PAGE{p.id[-6:]}" == item), None)
        if page is None:
            return graph_error(404, "itemNotFound", "The resource could not be found.")
        values = permission_values(page.users, page.groups, page.organization_link)
        return JSONResponse({"value": values})


_RETRY = {"Retry-After": "1"}


def _webpart(html: str) -> dict[str, Any]:
    """A text web part; for ``"image:..."`` an image web part, which has no text; for
    ``"links:a|b"`` a Quick links web part whose link titles are searchable plain texts."""
    if html.startswith("links:"):
        titles = html.removeprefix("links:").split("|")
        return {
            "@odata.type": "#microsoft.graph.standardWebPart",
            "id": "c70391ea-0b10-4ee9-b2b4-006d3fcad0cd",
            "webPartType": "c70391ea-0b10-4ee9-b2b4-006d3fcad0cd",
            "data": {
                "title": "Quick links",
                "serverProcessedContent": {
                    "searchablePlainTexts": [
                        {"key": f"items[{i}].title", "value": t} for i, t in enumerate(titles)
                    ],
                    "links": [{"key": "baseUrl", "value": "https://contoso.sharepoint.com"}],
                },
            },
        }
    if html.startswith("image:"):
        return {
            "@odata.type": "#microsoft.graph.standardWebPart",
            "id": "d1d91016-032f-456d-98a4-721247c305e8",
            "webPartType": "d1d91016-032f-456d-98a4-721247c305e8",
            "data": {"title": "Image", "properties": {"imageSourceType": 2}},
        }
    return {"@odata.type": "#microsoft.graph.textWebPart", "id": "tw1", "innerHtml": html}


def permission_values(
    users: list[str], groups: list[str], organization_link: bool
) -> list[dict[str, Any]]:
    """A driveItem's ``permissions`` as Graph lists them: an organisation-wide view link, and
    read grants to users and groups (``grantedToV2``)."""
    values: list[dict[str, Any]] = []
    if organization_link:
        values.append(
            {"id": "link1", "roles": ["read"], "link": {"scope": "organization", "type": "view"}}
        )
    values += [
        {"id": f"u-{u}", "roles": ["read"], "grantedToV2": {"user": {"id": u}}} for u in users
    ]
    values += [
        {"id": f"g-{g}", "roles": ["read"], "grantedToV2": {"group": {"id": g}}} for g in groups
    ]
    return values


def graph_error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    """An error as Graph answers it: ``{"error": {"code", "message"}}``."""
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )
