"""Confluence as a knowledge source: the pages of configured spaces, with their restrictions.

Cloud, over its REST API v2 (plain httpx: the handful of GETs below need no client library, and
``atlassian-python-api`` would add a dependency tree and its own retry policy for them, while
throttling and size caps must behave the same for every source, see :mod:`indexer.sources.http`):

* ``GET /api/v2/spaces?keys=KEY`` resolves a space key to its id;
* ``GET /api/v2/spaces/{id}/pages`` lists its pages (id, title, ``version.number``) page by
  page; the next page is the ``_links.next`` the API returns (a relative URL with a ``cursor``);
* ``GET /api/v2/pages/{id}?body-format=storage`` reads one page's body (storage-format XHTML);
* ``GET /rest/api/content/{id}/restriction/byOperation/read`` (v1: v2 has no restrictions
  endpoint) lists the users (account ids) and groups (names) a page's read restriction allows.

The listing carries no bodies, so a page whose version number is the one indexed costs nothing
more. Confluence reports no deletions: every run lists every page, and a page not listed by a
complete run is deleted (:attr:`ConfluenceSource.lists_everything`); so is every page of a space
taken out of ``spaces`` (a run stopped midway and resumed after such a change lists anew).

Storage XHTML becomes HTML the indexer's extractor already reads: the ``code`` macro a ``<pre>``
block with its language, the ``info``/``note``/``warning``/``tip``/``panel`` macros a block that
keeps the panel's kind ("Note: ...") and title, other macros (table of contents, Jira issue
lists) are dropped, links and user mentions keep their text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from bs4 import BeautifulSoup, Tag

from indexer.extract import ExtractedDocument, extract_html
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
from indexer.sources.config import ConfluenceConfig
from indexer.sources.drafts import draft_html
from indexer.sources.http import TooLarge, Unavailable, json_object, send

SYSTEM = "Confluence"
PANELS = {"info": "Info", "note": "Note", "warning": "Warning", "tip": "Tip", "panel": ""}


class ConfluenceSource(Source):
    kind = "confluence"
    lists_everything = True

    def __init__(self, config: ConfluenceConfig, client: httpx.Client | None = None) -> None:
        super().__init__(config.name)
        self.config = config
        self.base = str(config.base_url).rstrip("/")
        self.client = client or httpx.Client(
            auth=httpx.BasicAuth(config.email, config.api_token.get_secret_value()),
            headers={"Accept": "application/json"},
            timeout=config.timeout_s,
            follow_redirects=False,
        )
        self._space_ids: dict[str, str] = {}
        self._titles: dict[str, str] = {}

    def close(self) -> None:
        self.client.close()

    # -- listing -----------------------------------------------------------------------------

    def changes(self, cursor: str | None) -> Iterator[ChangePage]:
        """Every page of every configured space; the cursor is the spaces listed, the one being
        listed and the next link within it. A run stopped midway whose spaces have changed
        since (one removed, added or moved) starts its listing over, saying so
        (:attr:`ChangePage.scope_first`): a space no longer configured must not count as
        listed, and none still configured may be skipped."""
        spaces = list(self.config.spaces)
        position: dict[str, Any] = json.loads(cursor) if cursor else {}
        # Also a position that names no space (a cursor of an older release): never skip one.
        restart = position.get("spaces") != spaces or position.get("space") not in range(
            len(spaces)
        )
        if restart:
            position = {"space": 0, "next": None}
        index = int(position["space"])
        next_link: str | None = position.get("next")
        while index < len(spaces):
            if next_link is None:
                space_id = self._space_id(spaces[index])
                query = urlencode({"limit": self.config.page_size, "status": "current"})
                next_link = f"/api/v2/spaces/{space_id}/pages?{query}"
            body = self._get_listing(next_link)
            changes = []
            for page in body.get("results", []):
                key = str(page["id"])
                self._titles[key] = str(page.get("title", ""))
                changes.append(Change(key, str(page.get("version", {}).get("number", ""))))
            following = (body.get("_links") or {}).get("next")
            next_link = self._relative(following) if following else None
            if next_link is None:
                index += 1
            last = index >= len(spaces)
            resume = {"spaces": spaces, "space": index, "next": next_link}
            yield ChangePage(
                tuple(changes),
                None if last else json.dumps(resume),
                last=last,
                scope_first=restart and bool(cursor),
            )
            restart = False

    def _space_id(self, key: str) -> str:
        if key not in self._space_ids:
            body = self._get_listing("/api/v2/spaces?" + urlencode({"keys": key}))
            results = body.get("results") or []
            if not results:
                raise SourceError(
                    f"Confluence has no space {key!r} visible to this account (check `spaces`)"
                )
            self._space_ids[key] = str(results[0]["id"])
        return self._space_ids[key]

    def _relative(self, link: str) -> str:
        """A ``_links.next`` as a path under the wiki root: the API returns it relative to the
        site (``/wiki/api/v2/...``); an absolute link to another host is refused."""
        parts = urlsplit(link)
        if parts.scheme or parts.netloc:
            base = urlsplit(self.base)
            if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
                raise SourceError("Confluence returned a next link to another host; refused")
        path = parts.path
        base_path = urlsplit(self.base).path.rstrip("/")
        if base_path and path.startswith(base_path + "/"):
            path = path[len(base_path) :]
        return path + (f"?{parts.query}" if parts.query else "")

    def _get_listing(self, path: str) -> dict[str, Any]:
        try:
            response = send(self.client, self.config, "GET", self.base + path, system=SYSTEM)
        except TooLarge as exc:
            raise SourceError(f"a Confluence listing was too large: {exc}") from None
        if response.status_code != 200:
            raise SourceError(_status_message(response))
        return json_object(response, SYSTEM, SourceError)

    # -- documents ---------------------------------------------------------------------------

    def fetch(self, change: Change) -> ExtractedDocument:
        page = self._get_document(f"/api/v2/pages/{_page_id(change.key)}?body-format=storage")
        title = str(page.get("title") or self._titles.get(change.key) or f"Page {change.key}")
        storage = ((page.get("body") or {}).get("storage") or {}).get("value") or ""
        webui = (page.get("_links") or {}).get("webui") or f"/pages/{change.key}"
        url = self.base + webui if webui.startswith("/") else webui
        return storage_to_document(storage, title=title, url=url)

    def permissions(self, change: Change) -> Readers:
        found = self._get_document(
            f"/rest/api/content/{_page_id(change.key)}/restriction/byOperation/read"
        )
        restrictions = found.get("restrictions") or {}
        users = [
            str(user.get("accountId") or user.get("username") or user.get("userKey"))
            for user in (restrictions.get("user") or {}).get("results") or []
        ]
        groups = [
            str(group.get("name") or group.get("id"))
            for group in (restrictions.get("group") or {}).get("results") or []
        ]
        # No read restriction: whoever may read the space may read the page.
        return Readers(public=not users and not groups, users=tuple(users), groups=tuple(groups))

    def _get_document(self, path: str) -> dict[str, Any]:
        """One page's resource: a refused credential stops the run, anything else fails only
        this page."""
        response = send(self.client, self.config, "GET", self.base + path, system=SYSTEM)
        if response.status_code == 401:
            raise SourceError(_status_message(response))
        if response.status_code != 200:
            raise DocumentError(_status_message(response))
        return json_object(response, SYSTEM, DocumentError)

    # -- drafts ------------------------------------------------------------------------------

    def write_draft(self, draft: Draft) -> DraftLink:
        """A draft page in the first configured space (``POST /api/v2/pages`` with status
        ``draft``: saved, visible to its author and to whoever they share it with, never
        published); the link opens it in the editor."""
        space = self.config.spaces[0]
        try:
            space_id = self._space_id(space)
        except SourceError as exc:  # unreachable (retried), or the credentials or the space
            raise DraftError(str(exc), retry=isinstance(exc, Unavailable)) from None
        try:
            response = send(
                self.client,
                self.config,
                "POST",
                self.base + "/api/v2/pages",
                system=SYSTEM,
                json={
                    "spaceId": space_id,
                    "status": "draft",
                    "title": draft.title,
                    "body": {"representation": "storage", "value": draft_html(draft)},
                },
            )
        except SourceError as exc:  # unreachable, throttled beyond patience: try again later
            raise DraftError(str(exc), retry=isinstance(exc, Unavailable)) from None
        if response.status_code == 403:
            raise DraftError(
                f"Confluence denied the draft (HTTP 403): the account lacks the space "
                f"permission 'Add page' in {space}",
                missing_permission=f"Add page ({space})",
            )
        if response.status_code not in (200, 201):
            raise DraftError(
                f"{_status_message(response)} when writing the draft{_error_detail(response)}",
                retry=response.status_code >= 500,
            )
        page = json_object(response, SYSTEM, DraftError)
        links = page.get("_links") or {}
        where = str(links.get("editui") or links.get("webui") or f"/pages/{page.get('id')}")
        return DraftLink(
            str(page.get("id", "")), self.base + where if where.startswith("/") else where
        )


def _error_detail(response: httpx.Response) -> str:
    """Confluence's own words for a refused request (v2: ``errors[].title``), shortened."""
    try:
        errors = response.json().get("errors") or []
        title = str(errors[0].get("title") or "") if errors else ""
    except (ValueError, AttributeError, IndexError):
        title = ""
    return f": {title[:200]}" if title else ""


def storage_to_document(storage: str, *, title: str, url: str) -> ExtractedDocument:
    """A page's storage-format XHTML as an extracted document (sections by heading, code blocks
    and panels kept), through the indexer's HTML extractor."""
    soup = BeautifulSoup(storage, "html.parser")
    for macro in soup.find_all("ac:structured-macro"):
        if isinstance(macro, Tag):
            _replace_macro(soup, macro)
    for tag in soup.find_all(["ac:link", "ac:emoticon", "ri:user", "ri:page", "ac:image"]):
        if isinstance(tag, Tag):
            tag.unwrap()
    page = soup.new_tag("html")
    head = soup.new_tag("head")
    title_tag = soup.new_tag("title")
    title_tag.string = title
    head.append(title_tag)
    body = soup.new_tag("body")
    body.extend(list(soup.contents))
    page.extend([head, body])
    return extract_html(str(page), fallback_title=title, fallback_url=url)


def _replace_macro(soup: BeautifulSoup, macro: Tag) -> None:
    name = str(macro.get("ac:name", ""))
    if name in ("code", "noformat"):
        language = ""
        for parameter in macro.find_all("ac:parameter", recursive=False):
            if isinstance(parameter, Tag) and parameter.get("ac:name") == "language":
                language = parameter.get_text(strip=True)
        text_body = macro.find("ac:plain-text-body")
        pre = soup.new_tag("pre")
        code = soup.new_tag("code")
        if language:
            code["class"] = f"language-{language}"
        code.string = text_body.get_text() if text_body else ""
        pre.append(code)
        macro.replace_with(pre)
    elif name in PANELS:
        label = PANELS[name]
        panel_title = ""
        for parameter in macro.find_all("ac:parameter", recursive=False):
            if isinstance(parameter, Tag) and parameter.get("ac:name") == "title":
                panel_title = parameter.get_text(strip=True)
        div = soup.new_tag("div")
        heading = ": ".join(part for part in (label, panel_title) if part)
        rich = macro.find("ac:rich-text-body")
        if heading:
            lead = soup.new_tag("p")
            strong = soup.new_tag("strong")
            strong.string = heading
            lead.append(strong)
            div.append(lead)
        if isinstance(rich, Tag):
            div.extend(list(rich.contents))
        macro.replace_with(div)
    else:
        macro.decompose()


def _page_id(key: str) -> str:
    """A page id as Confluence numbers them: digits only, so a key can never change the path."""
    if not key.isdigit():
        raise DocumentError(f"not a Confluence page id: {key[:40]!r}")
    return key


def _status_message(response: httpx.Response) -> str:
    status = response.status_code
    if status == 401:
        return "Confluence refused the credentials (HTTP 401): check `email` and `api_token`"
    if status == 403:
        return "Confluence denied access (HTTP 403): the account cannot read this space or page"
    if status == 404:
        return "Confluence has no such page or space (HTTP 404), or the account cannot see it"
    return f"Confluence answered HTTP {status}"
