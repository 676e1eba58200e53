"""SharePoint Online as a knowledge source: a site's document libraries, through Microsoft Graph.

Auth is app-only (client credentials) through ``msal``: its token cache hands out the same token
until it expires; a Graph 401 (a token revoked or expired early) drops it and asks once for a new
one, and a second 401 stops the run. A 403 says which application permission the app lacks.

Plain httpx, not ``msgraph-sdk``: the sync needs six GETs (the site by path, its drives, a drive's
delta pages, an item, its content, its permissions) whose paging links it must keep as cursors
between runs and whose throttling (429/503 with ``Retry-After``) must behave as for every source
(:mod:`indexer.sources.http`); the SDK's generated request builders and its own retry handler
(with kiota and azure-identity under it) would hide exactly those links and waits.

Incremental by drive delta queries: the first run pages through ``/drives/{id}/root/delta`` by
``@odata.nextLink`` to the ``@odata.deltaLink``, which is kept per drive; later runs start from
it and get only what changed, deleted items with the ``deleted`` facet. The cursor (every
drive's delta link, and the next link of the drive being read) moves page by page, only once the
page is committed. Files: .docx (python-docx, headings kept), .pdf, .md, .html, .txt (the
indexer's extractor); other files are not listed.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Iterator
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
from indexer.sources.config import SharePointConfig
from indexer.sources.drafts import draft_html
from indexer.sources.http import TooLarge, Unavailable, json_object, send

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
}
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

    def _get(self, url: str, what: str) -> httpx.Response:
        """GET ``url`` (on Graph's host only) with a token, refreshed once on a 401."""
        response = self._authorized("GET", url)
        if response.status_code == 403:
            raise SourceError(
                f"Microsoft Graph denied access (HTTP 403): grant the app the application "
                f"permission {PERMISSION[what]} and an administrator's consent"
            )
        return response

    def _authorized(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
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
                headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
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
        try:
            response = self._get(url, what)
        except TooLarge as exc:
            raise SourceError(f"a Graph response was too large: {exc}") from None
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

    def _drives(self) -> list[tuple[str, str]]:
        host, path = self.config.site.split(":", 1)
        site = self._json(f"{self.graph}/sites/{quote(host)}:{quote(path)}", "site")
        drives = self._json(
            f"{self.graph}/sites/{quote(str(site['id']), safe='')}/drives", "drives"
        )
        wanted = set(self.config.libraries)
        found = [
            (str(drive["id"]), str(drive.get("name", "")))
            for drive in drives.get("value", [])
            if drive.get("driveType", "documentLibrary") == "documentLibrary"
            and (not wanted or drive.get("name") in wanted)
        ]
        missing = wanted - {name for _, name in found}
        if missing:
            raise SourceError(f"the site has no document library named {sorted(missing)}")
        return sorted(found)

    def changes(self, cursor: str | None) -> Iterator[ChangePage]:
        state: dict[str, Any] = json.loads(cursor) if cursor else {}
        deltas: dict[str, str] = dict(state.get("deltas", {}))
        current, following = state.get("current"), state.get("next")
        drives = self._drives()
        for index, (drive_id, _) in enumerate(drives):
            if current is not None and current != drive_id and drive_id < current:
                continue  # done earlier in this run: its delta link is kept
            link = following if drive_id == current and following else deltas.get(drive_id)
            link = link or f"{self.graph}/drives/{quote(drive_id, safe='')}/root/delta"
            while link:
                body = self._json(link, "delta")
                changes = tuple(self._change(drive_id, item) for item in body.get("value", []))
                next_link = body.get("@odata.nextLink")
                if next_link:
                    resume = {"deltas": deltas, "current": drive_id, "next": next_link}
                    link = next_link
                else:
                    deltas[drive_id] = str(body.get("@odata.deltaLink") or "")
                    resume = {"deltas": deltas, "current": None, "next": None}
                    link = ""
                last = not link and index == len(drives) - 1
                yield ChangePage(
                    tuple(c for c in changes if c is not None), json.dumps(resume), last=last
                )
            current = None

    @staticmethod
    def _change(drive_id: str, item: dict[str, Any]) -> Change | None:
        key = f"{drive_id}/{item.get('id', '')}"
        if "deleted" in item:
            return Change(key, "", deleted=True)
        name = str(item.get("name", ""))
        if "file" not in item or PurePosixPath(name).suffix.lower() not in SUFFIXES:
            return None  # folders, the root, files of other types
        return Change(key, str(item.get("cTag") or item.get("eTag") or ""))

    # -- documents ---------------------------------------------------------------------------

    def _item_url(self, key: str) -> str:
        drive_id, _, item_id = key.partition("/")
        if not (_ID.fullmatch(drive_id) and _ID.fullmatch(item_id)):
            raise DocumentError(f"not a drive item key: {key[:60]!r}")
        return f"{self.graph}/drives/{drive_id}/items/{item_id}"

    def fetch(self, change: Change) -> ExtractedDocument:
        url = self._item_url(change.key)
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
        response = self._get(f"{self._item_url(change.key)}/permissions", "permissions")
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
