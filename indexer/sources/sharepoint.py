"""SharePoint Online as a knowledge source: a site's pages, configured lists and document
libraries, through Microsoft Graph.

Auth is app-only (client credentials) through ``msal``: its token cache hands out the same token
until it expires; a Graph 401 (a token revoked or expired early) drops it and asks once for a new
one, and a second 401 stops the run. A 403 says which application permission the app lacks.

Plain httpx, not ``msgraph-sdk``: the sync needs six GETs (the site by path, its drives, a drive's
delta pages, an item, its content, its permissions) whose paging links it must keep as cursors
between runs and whose throttling (429/503 with ``Retry-After``) must behave as for every source
(:mod:`indexer.sources.http`); the SDK's generated request builders and its own retry handler
(with kiota and azure-identity under it) would hide exactly those links and waits.

Incremental by drive delta queries: the first run pages through ``/drives/{id}/root/delta`` by
``@odata.nextLink`` to the ``@odata.deltaLink``, which is kept per drive; later runs start from it
and get only what changed, deleted items with the ``deleted`` facet. The cursor (every drive's delta
link, and the next link of the drive being read) moves page by page, only once the page is
committed. An enumeration from a drive's start (its first sync, or after Graph's 410
``resyncRequired`` on a kept link) names every file that exists and no deleted one: its pages are a
complete listing of the drive's keys (:attr:`ChangePage.scope`), so the sync removes at its end what
it did not name; a run stopped midway keeps "enumerating" in the cursor and resumes as one (the keys
it named so far are in Redis). The drive delta asks for sharing changes (:data:`SHARING_CHANGES`): a
file Graph marks ``sharedChanged`` has its readers read with the listing and made part of its
version, so its chunks get its new readers. Microsoft documents ``Sites.FullControl.All`` for
that: a delta Graph refuses with the preference (HTTP 403) is read without it for the rest of
the run, with a warning in the run's log (``sharing_changes`` false never asks). Files: .docx
(python-docx, headings kept), .pdf, .md, .html, .txt (the indexer's extractor); other files are
not listed.

Configured lists are read the same way, by list item delta queries
(``/sites/{id}/lists/{list}/items/delta?$expand=fields``), their delta links kept beside the
drives'. Site pages have no delta query: every run lists them
(``/sites/{id}/pages/microsoft.graph.sitePage``, by ``@odata.nextLink``) with their ``eTag``,
``lastModifiedDateTime`` and readers (read every run) as the version, so an unchanged page is
skipped without being read and a page whose permissions alone changed is re-indexed; each
listing is a complete listing of the pages' keys, so a page it misses is deleted. A run goes
pages, then lists, then drives; the cursor remembers which of these feeds the run has
finished, so a run resumed midway does not read them again.

Each run resolves its configuration before it lists anything (the site, the configured lists by
name, the libraries by name) and then says which key prefixes it covers
(:meth:`SharePointSource.covered`): ``page/`` when ``pages`` is on, each list's and each
library's. The sync removes at the end of a complete run what lies under none of them (a library
or list taken out of the configuration, the pages switched off); their delta links are dropped
from the cursor at once, so a library configured again is enumerated from its start and indexed
afresh. A run that cannot resolve its configuration (Graph down, a 401 or 403, a library not
found) stops before it lists, and removes nothing.

Who may read: a file's and a page's Graph permissions (a page is a file of the site's Site Pages
library: ``/sites/{id}/lists/{list}/drive``, then the file by name); a list item's readers come
from the list's configuration, as Graph v1.0 reports no permissions for list items.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from indexer.extract import ExtractedDocument, UnsupportedDocument, extract_bytes
from indexer.extract.docx import UnreadableDocx, extract_docx
from indexer.sources.base import (
    Change,
    ChangePage,
    DocumentError,
    Draft,
    DraftError,
    DraftLink,
    Readers,
    Source,
    SourceError,
)
from indexer.sources.config import SharePointConfig, SharePointList
from indexer.sources.drafts import draft_html
from indexer.sources.http import TooLarge, Unavailable, json_object, send
from indexer.sources.sharepoint_pages import (
    LIST_PREFIX,
    PAGE_PREFIX,
    list_item_change,
    list_item_document,
    list_item_key,
    page_change,
    page_document,
    page_key,
)

logger = logging.getLogger(__name__)

SYSTEM = "Microsoft Graph"
SCOPES = ["https://graph.microsoft.com/.default"]
SUFFIXES = frozenset({".docx", ".pdf", ".md", ".markdown", ".html", ".htm", ".txt"})
_ID = re.compile(r"^[A-Za-z0-9!._-]{1,200}$")
PERMISSION = {
    "site": "Sites.Read.All",
    "drives": "Sites.Read.All (or Files.Read.All)",
    "delta": "Files.Read.All (or Sites.Read.All)",
    "item": "Files.Read.All (or Sites.Read.All)",
    "permissions": "Sites.Read.All",
    "pages": "Sites.Read.All",
    "lists": "Sites.Read.All",
}
PAGES_FEED = "pages"
LIST_FEED = "list:"
SHARING_CHANGES = "deltashowremovedasdeleted, deltatraversepermissiongaps, deltashowsharingchanges"
"""The drive delta's ``Prefer`` header: Graph then marks the items it reports because their
permissions changed with :data:`SHARED_CHANGED` (Microsoft requires the first two preferences
with the third)."""
SHARED_CHANGED = "@microsoft.graph.sharedChanged"


@dataclass(frozen=True, slots=True)
class FeedPage:
    """A page of one feed (the pages listing, a list's or a drive's delta query): its changes,
    the link that resumes the feed after it (None: restart the feed, or it is finished), and at
    the feed's end what to keep for the next run (a delta link; "" for the pages listing).

    ``complete``: the page belongs to an enumeration of the feed from its start (a first sync,
    a resync Graph asked for, every pages listing), which names every item that exists;
    ``restart``: such an enumeration starts with this page. ``present``: keys listed that have
    no change to apply (see :attr:`ChangePage.present`)."""

    changes: tuple[Change, ...]
    next_link: str | None
    end: str | None = None
    complete: bool = False
    restart: bool = False
    present: tuple[str, ...] = ()


Feed = Callable[[str | None, bool], Iterator[FeedPage]]
"""A feed from a kept link (None: from its start); the flag says the link continues an
enumeration from the start (a resync stopped midway)."""


@dataclass(frozen=True, slots=True)
class ListMapping:
    """A configured list as found on the site: its id and its columns' internal names."""

    list_id: str
    config: SharePointList
    title: str
    body: list[tuple[str, str]]
    """(display name, internal name) of each body column."""

    def tag(self) -> str:
        """A short digest of what makes an item's document and readers."""
        made = json.dumps(
            [self.title, self.body, self.config.readers().fingerprint()], sort_keys=True
        )
        return hashlib.sha256(made.encode()).hexdigest()[:12]


READ_ROLES = frozenset({"read", "write", "owner", "sp.full control"})


class SharePointSource(Source):
    kind = "sharepoint"
    lists_everything = False  # delta queries report deletions

    def __init__(self, config: SharePointConfig, app: Any = None) -> None:
        super().__init__(config.name)
        self.config = config
        self.graph = str(config.graph_url).rstrip("/")
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(config.ca_bundle)) if config.ca_bundle else True
        )
        # Redirects are followed by hand: a file's content redirects to a pre-authenticated
        # download URL, which gets no token.
        self.client = httpx.Client(timeout=config.timeout_s, verify=verify)
        # msal gets its own httpx client: with its default requests session, a
        # REQUESTS_CA_BUNDLE in the environment would override `ca_bundle`.
        self._login = httpx.Client(timeout=config.timeout_s, verify=verify)
        self._app: Any = app  # made at the first token: msal reads the tenant's metadata then
        self._token: str | None = None
        self._site: dict[str, Any] | None = None
        self._lists: dict[str, ListMapping] | None = None
        self._drive_ids: list[tuple[str, str]] | None = None
        self._covered: tuple[str, ...] | None = None
        self._listed_items: dict[str, dict[str, Any]] = {}
        """List items as the delta page listed them (with fields), so fetch need not ask again."""
        self._page_files: dict[str, tuple[str, str]] = {}
        """A fetched page's key -> (its Site Pages list id, its file name), for its readers."""
        self._page_drives: dict[str, str] = {}
        self._page_items: dict[tuple[str, str], str] = {}
        self._sharing_refused = False
        """Graph refused a drive delta with :data:`SHARING_CHANGES` this run (HTTP 403)."""
        self._listed_readers: dict[str, Readers] = {}
        """Readers read while listing (every page's; a file's whose sharing changed), by key, for
        the listing page being synced."""

    def close(self) -> None:
        self.client.close()
        self._login.close()

    # -- auth and requests -------------------------------------------------------------------

    @property
    def app(self) -> Any:
        """The msal client; making it reads the tenant's OpenID metadata from the login host,
        so a host that cannot be reached stops the run with a :class:`SourceError`."""
        if self._app is None:
            import msal

            config = self.config
            try:
                self._app = msal.ConfidentialClientApplication(
                    config.client_id,
                    client_credential=config.client_secret.get_secret_value(),
                    authority=f"{str(config.authority_host).rstrip('/')}/{config.tenant_id}",
                    instance_discovery=False,  # no call to the global discovery endpoint
                    http_client=self._login,
                )
            except (httpx.HTTPError, ValueError) as exc:
                raise SourceError(
                    f"cannot read the tenant's metadata from {config.authority_host} "
                    f"({type(exc).__name__}): check tenant_id and authority_host"
                ) from None
        return self._app

    def _access_token(self, *, fresh: bool = False) -> str:
        if fresh:
            self.app.remove_tokens_for_client()
        try:
            result = self.app.acquire_token_for_client(scopes=SCOPES)
        except httpx.HTTPError as exc:
            raise SourceError(f"cannot reach the login host ({type(exc).__name__})") from None
        token = result.get("access_token") if isinstance(result, dict) else None
        if not token:
            code = result.get("error", "no token") if isinstance(result, dict) else "no token"
            raise SourceError(
                f"Microsoft Entra gave no token ({code}): check tenant_id, client_id and "
                "client_secret"
            )
        self._token = str(token)
        return self._token

    def _get(
        self, url: str, what: str, headers: dict[str, str] | None = None, *, denied: bool = False
    ) -> httpx.Response:
        """GET ``url`` (on Graph's host only) with a token, refreshed once on a 401; a 403 is
        an error naming the permission to grant, or returned with ``denied``."""
        response = self._authorized("GET", url, headers=headers)
        if response.status_code == 403 and not denied:
            raise SourceError(
                f"Microsoft Graph denied access (HTTP 403): grant the app the application "
                f"permission {PERMISSION[what]} and an administrator's consent"
            )
        return response

    def _authorized(
        self, method: str, url: str, headers: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        """One request to Graph's own host with a token, asked afresh once on a 401."""
        self._check_host(url)
        token = self._token or self._access_token()
        for attempt in (1, 2):
            response = send(
                self.client,
                self.config,
                method,
                url,
                system=SYSTEM,
                headers={
                    **(headers or {}),
                    "Authorization": f"Bearer {token}",
                    "Accept": "application/json",
                },
                **kwargs,
            )
            if response.status_code != 401:
                break
            if attempt == 1:
                token = self._access_token(fresh=True)
        if response.status_code == 401:
            raise SourceError("Microsoft Graph refused a freshly issued token (HTTP 401)")
        return response

    def _json(self, url: str, what: str) -> dict[str, Any]:
        return self._ok_json(self._response(url, what), what)

    def _response(
        self, url: str, what: str, headers: dict[str, str] | None = None, *, denied: bool = False
    ) -> httpx.Response:
        try:
            return self._get(url, what, headers, denied=denied)
        except TooLarge as exc:
            raise SourceError(f"a Graph response was too large: {exc}") from None

    @staticmethod
    def _ok_json(response: httpx.Response, what: str) -> dict[str, Any]:
        if response.status_code != 200:
            raise SourceError(f"Microsoft Graph answered HTTP {response.status_code} ({what})")
        return json_object(response, SYSTEM, SourceError)

    def _check_host(self, url: str) -> None:
        """Links Graph returns (next, delta, download) are followed with the token only on
        Graph's own origin."""
        parts, graph = urlsplit(url), urlsplit(self.graph)
        if (parts.scheme, parts.netloc) != (graph.scheme, graph.netloc):
            raise SourceError("Microsoft Graph returned a link to another host; refused")

    # -- listing -----------------------------------------------------------------------------

    def _site_id(self) -> str:
        if self._site is None:
            host, path = self.config.site.split(":", 1)
            self._site = self._json(f"{self.graph}/sites/{quote(host)}:{quote(path)}", "site")
        return quote(str(self._site["id"]), safe="")

    def _all(self, url: str, what: str) -> list[dict[str, Any]]:
        """Every value of a collection, through its ``@odata.nextLink`` pages."""
        values: list[dict[str, Any]] = []
        while url:
            body = self._json(url, what)
            values += [v for v in body.get("value", []) if isinstance(v, dict)]
            url = str(body.get("@odata.nextLink") or "")
        return values

    def _drives(self) -> list[tuple[str, str]]:
        """The configured libraries (every one, when none is named) as (drive id, name); a
        drive whose id could not make keys of its own (one that could pass for the pages' or
        lists' prefix) is ignored, and a library named in the configuration but not found
        stops the run."""
        drives = self._all(f"{self.graph}/sites/{self._site_id()}/drives", "drives")
        wanted = set(self.config.libraries)
        found = [
            (str(drive.get("id")), str(drive.get("name", "")))
            for drive in drives
            if drive.get("driveType", "documentLibrary") == "documentLibrary"
            and (not wanted or drive.get("name") in wanted)
            and _ID.fullmatch(str(drive.get("id")))
            and f"{drive.get('id')}/" not in (PAGE_PREFIX, LIST_PREFIX)
        ]
        missing = wanted - {name for _, name in found}
        if missing:
            raise SourceError(f"the site has no document library named {sorted(missing)}")
        return sorted(found)

    def _resolved_drives(self) -> list[tuple[str, str]]:
        if self._drive_ids is None:
            self._drive_ids = self._drives()
        return self._drive_ids

    def covered(self) -> tuple[str, ...] | None:
        """The pages' prefix (when ``pages`` is on), each configured list's and each library's
        found by name, once this run's listing resolved them all; None before, or when it could
        not (the site, a list or a library could not be read)."""
        return self._covered

    def _resolve_lists(self) -> dict[str, ListMapping]:
        """The configured lists by id, their columns resolved to the internal names ``fields``
        are keyed by; a list or column the site lacks stops the run, naming it."""
        if not self.config.lists:
            return {}
        site = self._site_id()
        found = self._all(f"{self.graph}/sites/{site}/lists", "lists")
        mappings: dict[str, ListMapping] = {}
        for wanted in self.config.lists:
            match = next(
                (
                    found_list
                    for found_list in found
                    if wanted.list_name in (found_list.get("displayName"), found_list.get("name"))
                ),
                None,
            )
            if match is None or not _ID.fullmatch(str(match.get("id", ""))):
                raise SourceError(f"the site has no list named {wanted.list_name!r}")
            list_id = str(match["id"])
            columns = self._all(f"{self.graph}/sites/{site}/lists/{list_id}/columns", "lists")
            internal: dict[str, str] = {}
            for column in columns:
                for label in (column.get("name"), column.get("displayName")):
                    if label and column.get("name"):
                        internal.setdefault(str(label), str(column["name"]))
            named = [wanted.title, *wanted.body]
            unknown = [column for column in named if column not in internal]
            if unknown:
                shown = sorted({str(c.get("displayName") or c.get("name")) for c in columns})
                raise SourceError(
                    f"the list {wanted.list_name!r} has no column named {unknown}; its columns: "
                    f"{', '.join(shown)[:300]}"
                )
            mappings[list_id] = ListMapping(
                list_id,
                wanted,
                internal[wanted.title],
                [(column, internal[column]) for column in wanted.body],
            )
        return mappings

    def _mappings(self) -> dict[str, ListMapping]:
        if self._lists is None:
            self._lists = self._resolve_lists()
        return self._lists

    def changes(self, cursor: str | None) -> Iterator[ChangePage]:
        """Pages, then each configured list, then each library; see the module's docstring."""
        state: dict[str, Any] = json.loads(cursor) if cursor else {}
        deltas: dict[str, str] = dict(state.get("deltas", {}))
        done: list[str] = list(state.get("done", []))
        current, following = state.get("current"), state.get("next")
        enumerating = bool(state.get("complete"))
        # Read afresh each run; what the configuration covers is known once all of it is.
        self._site, self._lists, self._drive_ids, self._covered = None, None, None, None
        self._sharing_refused = False
        feeds: list[tuple[str, str, Feed]] = []
        if self.config.pages:
            feeds.append((PAGES_FEED, PAGE_PREFIX, lambda _link, _complete: self._page_listing()))
        for list_id, mapping in self._mappings().items():
            # Keyed by the list's settings too: other columns or readers start the list afresh
            # (a delta link would report none of its unchanged items) and change every version.
            tag = mapping.tag()
            url = f"{self.graph}/sites/{self._site_id()}/lists/{list_id}/items/delta?$expand=fields"
            feeds.append(
                (
                    f"{LIST_FEED}{list_id}:{tag}",
                    list_item_key(list_id, ""),
                    self._delta_feed(url, "lists", _list_change(list_id, tag)),
                )
            )
        for drive_id, _ in self._resolved_drives():
            url = f"{self.graph}/drives/{quote(drive_id, safe='')}/root/delta"
            feeds.append(
                (
                    drive_id,
                    f"{drive_id}/",
                    self._delta_feed(
                        url,
                        "delta",
                        self._drive_change(drive_id),
                        SHARING_CHANGES if self.config.sharing_changes else None,
                    ),
                )
            )
        # A list or library no longer configured loses its delta link: configured again, it is
        # enumerated from its start (its documents were removed meanwhile).
        keys = {key for key, _, _ in feeds}
        deltas = {k: v for k, v in deltas.items() if k in keys}
        self._covered = tuple(scope for _, scope, _ in feeds)
        todo = [feed for feed in feeds if feed[0] not in done]
        if not todo:
            # What was left of a stopped run is no longer configured: the run is over, and the
            # next one reads every feed again.
            yield ChangePage((), json.dumps({"deltas": deltas, "done": []}), last=True)
        for index, (key, scope, feed) in enumerate(todo):
            resuming = key == current and bool(following)
            start = following if resuming else deltas.get(key)
            for page in feed(start or None, resuming and enumerating):
                if page.end is not None:
                    done.append(key)
                    if page.end:
                        deltas[key] = page.end
                last = page.end is not None and index == len(todo) - 1
                resume = {
                    "deltas": deltas,
                    "done": [] if last else done,
                    "current": key if page.next_link else None,
                    "next": page.next_link,
                    # A resync stopped midway continues as one: its end sweeps the feed.
                    "complete": page.complete and bool(page.next_link),
                }
                yield ChangePage(
                    page.changes,
                    json.dumps(resume),
                    last=last,
                    scope=scope if page.complete else None,
                    scope_first=page.restart,
                    scope_last=page.complete and page.end is not None,
                    present=page.present,
                )

    def _delta_response(
        self, url: str, what: str, headers: dict[str, str] | None
    ) -> httpx.Response:
        """A delta page; asked without ``headers`` (the sharing changes' preference) from the
        first time Graph refuses it with them, so an app without the permission Microsoft
        documents for it still syncs (a 403 without them is the usual permission error)."""
        if headers and not self._sharing_refused:
            response = self._response(url, what, headers, denied=True)
            if response.status_code != 403:
                return response
            self._sharing_refused = True
            logger.warning(
                "%s: Microsoft Graph refused the library delta with permission changes (HTTP "
                "403); reading it without them: a file's new readers take effect when its "
                "content changes (grant Sites.FullControl.All, or set sharing_changes false)",
                self.name,
            )
        return self._response(url, what)

    def _delta_feed(
        self,
        first: str,
        what: str,
        to_change: Callable[[dict[str, Any]], Change | None],
        prefer: str | None = None,
    ) -> Feed:
        """Pages of a delta query from ``link`` (a kept delta or next link; None: the first
        enumeration): changes, the next link, and after the last page its delta link. An
        enumeration from ``first`` (the first sync, or Graph's 410 ``resyncRequired`` on a kept
        link) is a complete listing: its end sweeps what it did not name. ``prefer``: the
        request's ``Prefer`` header."""
        headers = {"Prefer": prefer} if prefer else None

        def pages(link: str | None, continuing: bool) -> Iterator[FeedPage]:
            url, complete, restart = link or first, continuing or not link, not link
            resynced = False
            while url:
                response = self._delta_response(url, what, headers)
                if response.status_code == 410 and url != first and not resynced:
                    # 410 resyncRequired: the kept link is too old. Enumerate afresh; what is
                    # unchanged is then skipped by its version, so nothing is embedded again,
                    # and what the enumeration does not name was deleted meanwhile.
                    logger.warning("%s: Graph asks for a full resync (HTTP 410)", self.name)
                    url, complete, restart, resynced = first, True, True, True
                    continue
                body = self._ok_json(response, what)
                self._listed_items, self._listed_readers = {}, {}
                changes: list[Change] = []
                for item in body.get("value", []):
                    change = to_change(item)
                    if change is not None:
                        changes.append(change)
                        if change.key.startswith(LIST_PREFIX) and "fields" in item:
                            self._listed_items[change.key] = item
                next_link = body.get("@odata.nextLink")
                url = str(next_link or "")
                end = None if url else str(body.get("@odata.deltaLink") or "")
                yield FeedPage(tuple(changes), url or None, end, complete, restart)
                restart = False

        return pages

    def _page_listing(self) -> Iterator[FeedPage]:
        """Every page of the site (no delta query exists for pages), each listing complete: the
        sync deletes the pages it does not name."""
        url = f"{self.graph}/sites/{self._site_id()}/pages/microsoft.graph.sitePage"
        restart = True
        while url:
            body = self._json(url, "pages")
            self._listed_readers = {}
            changes: list[Change] = []
            present: list[str] = []
            for page in body.get("value", []):
                page_id = str(page.get("id", "")) if isinstance(page, dict) else ""
                if not _ID.fullmatch(page_id):
                    continue
                try:
                    change = self._listed_page(page)
                except DocumentError as exc:
                    logger.warning("%s: page %s skipped: %s", self.name, page_id, exc)
                    change = None
                if change is not None:
                    changes.append(change)
                else:
                    present.append(page_key(page_id))  # kept, even if unusable now
            url = str(body.get("@odata.nextLink") or "")
            # Not resumable from the middle: a resumed run lists the pages again from the start
            # (the committed ones are then unchanged, so nothing is read twice).
            end = None if url else ""
            yield FeedPage(tuple(changes), None, end, True, restart, tuple(present))
            restart = False

    def _listed_page(self, page: dict[str, Any]) -> Change | None:
        """A published page's change, its version also naming its readers (read now, every
        run): a permission change alone makes the page changed, so it takes effect at once."""
        change = page_change(page)
        if change is None:
            return None
        parent = page.get("parentReference") or {}
        list_id, name = str(parent.get("listId") or ""), str(page.get("name") or "")
        try:
            if not _ID.fullmatch(list_id) or not name or "/" in name:
                raise DocumentError("listed without its library or name")
            readers = self._page_file_readers(list_id, name)
        except DocumentError as exc:
            # Indexed (or failed, and counted) through fetch and permissions like any change.
            logger.warning("%s: readers of page %s: %s", self.name, page.get("id"), exc)
            return change
        self._listed_readers[change.key] = readers
        return Change(change.key, f"{change.version}#{_digest(readers)}")

    def _drive_change(self, drive_id: str) -> Callable[[dict[str, Any]], Change | None]:
        return lambda item: self._file_change(drive_id, item)

    def _file_change(self, drive_id: str, item: dict[str, Any]) -> Change | None:
        """A library file's change: its version is its ``cTag`` (its content); when Graph marks
        it ``@microsoft.graph.sharedChanged`` (its permissions changed, asked for with
        :data:`SHARING_CHANGES`) its readers, read now, are part of it, so the file is read
        again and its chunks carry its new readers."""
        key = f"{drive_id}/{item.get('id', '')}"
        if "deleted" in item:
            return Change(key, "", deleted=True)
        name = str(item.get("name", ""))
        if "file" not in item or PurePosixPath(name).suffix.lower() not in SUFFIXES:
            return None  # folders, the root, files of other types
        change = Change(key, str(item.get("cTag") or item.get("eTag") or ""))
        if str(item.get(SHARED_CHANGED, "")).lower() != "true":
            return change
        try:
            readers = self._file_readers(self._item_url(key))
        except DocumentError as exc:
            # Read again (and counted failed if it fails) through fetch and permissions.
            logger.warning("%s: readers of file %s: %s", self.name, key, exc)
            return Change(key, f"{change.version}#shared")
        self._listed_readers[key] = readers
        return Change(key, f"{change.version}#{_digest(readers)}")

    # -- documents ---------------------------------------------------------------------------

    def _item_url(self, key: str) -> str:
        drive_id, _, item_id = key.partition("/")
        if not (_ID.fullmatch(drive_id) and _ID.fullmatch(item_id)):
            raise DocumentError(f"not a drive item key: {key[:60]!r}")
        return f"{self.graph}/drives/{drive_id}/items/{item_id}"

    def fetch(self, change: Change) -> ExtractedDocument:
        """The document; one of a part no longer configured (a failed one retried) is not read:
        it fails until the run's end removes it."""
        if change.key.startswith(PAGE_PREFIX):
            if not self.config.pages:
                raise DocumentError("the site's pages are not configured")
            return self._fetch_page(change.key)
        if change.key.startswith(LIST_PREFIX):
            return self._fetch_list_item(change.key)
        url = self._item_url(change.key)
        drive_id = change.key.partition("/")[0]
        if drive_id not in {found for found, _ in self._resolved_drives()}:
            raise DocumentError(f"not a file of a configured library: {change.key[:80]!r}")
        meta_response = self._get(url, "item")
        if meta_response.status_code != 200:
            raise DocumentError(f"Microsoft Graph answered HTTP {meta_response.status_code}")
        meta = json_object(meta_response, SYSTEM, DocumentError)
        name = str(meta.get("name", "document"))
        web_url = str(meta.get("webUrl") or url)
        content = self._get(f"{url}/content", "item")
        location = content.headers.get("Location")
        if content.status_code in (301, 302, 303, 307) and location:
            if urlsplit(location).scheme != "https" and urlsplit(self.graph).scheme == "https":
                raise DocumentError("the file's download URL is not https; refused")
            content = send(self.client, self.config, "GET", location, system=SYSTEM)
        if content.status_code != 200:
            raise DocumentError(f"the file's content: HTTP {content.status_code}")
        try:
            if name.lower().endswith(".docx"):
                return extract_docx(
                    content.content, fallback_title=PurePosixPath(name).stem, url=web_url
                )
            return extract_bytes(content.content, name, web_url)
        except (UnreadableDocx, UnsupportedDocument) as exc:
            raise DocumentError(str(exc)) from None

    def permissions(self, change: Change) -> Readers:
        if change.key.startswith(LIST_PREFIX):
            return self._list_of(change.key).config.readers()
        if change.key.startswith(PAGE_PREFIX):
            listed = self._listed_readers.pop(change.key, None)
            if listed is not None:
                return listed
            if change.key not in self._page_files:
                raise DocumentError("the page's readers are read after the page")
            return self._page_file_readers(*self._page_files.pop(change.key))
        listed = self._listed_readers.pop(change.key, None)
        return listed if listed is not None else self._file_readers(self._item_url(change.key))

    def _fetch_page(self, key: str) -> ExtractedDocument:
        page_id = key.removeprefix(PAGE_PREFIX)
        if not _ID.fullmatch(page_id):
            raise DocumentError(f"not a page key: {key[:60]!r}")
        url = f"{self.graph}/sites/{self._site_id()}/pages/{page_id}/microsoft.graph.sitePage"
        response = self._get(f"{url}?$expand=canvasLayout", "pages")
        if response.status_code != 200:
            raise DocumentError(f"Microsoft Graph answered HTTP {response.status_code}")
        page = json_object(response, SYSTEM, DocumentError)
        parent = page.get("parentReference") or {}
        list_id, name = str(parent.get("listId") or ""), str(page.get("name") or "")
        if not _ID.fullmatch(list_id) or not name or "/" in name:
            raise DocumentError("Microsoft Graph returned the page without its library or name")
        self._page_files[key] = (list_id, name)
        return page_document(page, url)

    def _page_file_readers(self, list_id: str, name: str) -> Readers:
        """Who may read a page: the permissions of its file in the Site Pages library (the
        library's drive, then the file by name; both kept for later runs)."""
        if list_id not in self._page_drives:
            drive = self._json(
                f"{self.graph}/sites/{self._site_id()}/lists/{list_id}/drive", "permissions"
            )
            self._page_drives[list_id] = str(drive.get("id", ""))
        drive_id = self._page_drives[list_id]
        item_id = self._page_items.get((drive_id, name))
        if item_id is None:
            response = self._get(
                f"{self.graph}/drives/{quote(drive_id, safe='')}/root:/{quote(name, safe='')}",
                "permissions",
            )
            if response.status_code != 200:
                raise DocumentError(f"the page's file: HTTP {response.status_code}")
            item_id = str(json_object(response, SYSTEM, DocumentError).get("id", ""))
            self._page_items[(drive_id, name)] = item_id
        return self._file_readers(self._item_url(f"{drive_id}/{item_id}"))

    def _list_of(self, key: str) -> ListMapping:
        list_id, _, item_id = key.removeprefix(LIST_PREFIX).partition("/")
        mapping = self._mappings().get(list_id)
        if mapping is None or not _ID.fullmatch(item_id):
            # A list no longer configured: its items fail until the run's end removes them.
            raise DocumentError(f"not an item of a configured list: {key[:80]!r}")
        return mapping

    def _fetch_list_item(self, key: str) -> ExtractedDocument:
        mapping = self._list_of(key)
        item_id = key.rpartition("/")[2]
        url = f"{self.graph}/sites/{self._site_id()}/lists/{mapping.list_id}/items/{item_id}"
        item = self._listed_items.pop(key, None)
        if item is None:
            response = self._get(f"{url}?$expand=fields", "lists")
            if response.status_code != 200:
                raise DocumentError(f"Microsoft Graph answered HTTP {response.status_code}")
            item = json_object(response, SYSTEM, DocumentError)
        return list_item_document(item, mapping.title, mapping.body, url)

    def _file_readers(self, url: str) -> Readers:
        response = self._get(f"{url}/permissions", "permissions")
        if response.status_code != 200:
            raise DocumentError(f"the file's permissions: HTTP {response.status_code}")
        users: list[str] = []
        groups: list[str] = []
        public = False
        for permission in json_object(response, SYSTEM, DocumentError).get("value", []):
            if not READ_ROLES & {str(role).lower() for role in permission.get("roles", [])}:
                continue
            if (permission.get("link") or {}).get("scope") in ("organization", "anonymous"):
                public = True
            grants = [permission.get("grantedToV2") or {}]
            grants += permission.get("grantedToIdentitiesV2") or []
            for grant in grants:
                if "user" in grant and grant["user"].get("id"):
                    users.append(str(grant["user"]["id"]))
                for kind in ("group", "siteGroup"):
                    if kind in grant and (grant[kind].get("id") or grant[kind].get("displayName")):
                        groups.append(str(grant[kind].get("id") or grant[kind]["displayName"]))
        return Readers(
            public=public, users=tuple(sorted(set(users))), groups=tuple(sorted(set(groups)))
        )

    # -- drafts ------------------------------------------------------------------------------

    def write_draft(self, draft: Draft) -> DraftLink:
        """An unpublished site page (``POST /sites/{id}/pages``, a ``sitePage`` with one text
        web part). Graph creates it checked out as a draft (minor version 0.1) and nothing here
        calls ``publish``: a person opens the link, reviews and publishes it."""
        host, path = self.config.site.split(":", 1)
        try:
            site = self._json(f"{self.graph}/sites/{quote(host)}:{quote(path)}", "site")
            response = self._authorized(
                "POST",
                f"{self.graph}/sites/{quote(str(site['id']), safe='')}/pages",
                json=site_page(draft),
            )
        except SourceError as exc:
            raise DraftError(str(exc), retry=isinstance(exc, Unavailable)) from None
        if response.status_code == 403:
            raise DraftError(
                f"Microsoft Graph denied the draft (HTTP 403): grant the app the application "
                f"permission {DRAFT_PERMISSION} and an administrator's consent",
                missing_permission=DRAFT_PERMISSION,
            )
        if response.status_code not in (200, 201):
            raise DraftError(
                f"Microsoft Graph answered HTTP {response.status_code} when writing the draft"
                f"{_graph_error(response)}",
                retry=response.status_code >= 500,
            )
        page = json_object(response, SYSTEM, DraftError)
        web_url = str(page.get("webUrl") or "")
        if not urlsplit(web_url).scheme:  # Graph may answer it relative to the site
            web_url = f"{str(site.get('webUrl', '')).rstrip('/')}/{web_url.lstrip('/')}"
        return DraftLink(str(page.get("id", "")), web_url)


DRAFT_PERMISSION = "Sites.ReadWrite.All"


def site_page(draft: Draft) -> dict[str, Any]:
    """The ``sitePage`` Graph creates: an article layout, one full-width text web part."""
    name = re.sub(r"[^a-z0-9]+", "-", draft.title.lower()).strip("-")[:60] or "proposal"
    return {
        "@odata.type": "#microsoft.graph.sitePage",
        "name": f"{name}-{draft.key[:8]}.aspx",
        "title": draft.title,
        "pageLayout": "article",
        "showComments": True,
        "showRecommendedPages": False,
        "canvasLayout": {
            "horizontalSections": [
                {
                    "layout": "oneColumn",
                    "id": "1",
                    "emphasis": "none",
                    "columns": [
                        {
                            "id": "1",
                            "width": 12,
                            "webparts": [
                                {
                                    "@odata.type": "#microsoft.graph.textWebPart",
                                    "innerHtml": draft_html(draft),
                                }
                            ],
                        }
                    ],
                }
            ]
        },
    }


def _graph_error(response: httpx.Response) -> str:
    """Graph's own words for a refused request (``error.message``), shortened."""
    try:
        message = str((response.json().get("error") or {}).get("message") or "")
    except (ValueError, AttributeError):
        message = ""
    return f": {message[:200]}" if message else ""


def _digest(readers: Readers) -> str:
    """A short digest of who may read, for a version that must change when they do."""
    return hashlib.sha256(readers.fingerprint().encode()).hexdigest()[:12]


def _list_change(list_id: str, tag: str) -> Callable[[dict[str, Any]], Change | None]:
    return lambda item: list_item_change(list_id, item, tag)
