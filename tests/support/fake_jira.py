"""A local Jira (REST API v2) over real HTTP, for testing the Jira ticket backend.

It implements the endpoints the ``jira`` library calls for Deskpilot, with the request and
response shapes and the errors Atlassian documents:

* ``GET serverInfo``, ``GET myself``, ``GET field``, ``GET issueLinkType``
* ``POST issue`` (201 ``{"id", "key", "self"}``), ``GET issue/{key}`` (``fields`` and
  ``properties`` parameters), ``PUT issue/{key}`` (204; ``fields`` and ``update`` with label
  ``add``/``remove`` and comment ``add``)
* ``POST issue/{key}/comment`` (201), ``POST issueLink`` (201, empty body)
* ``GET``/``POST search`` (Server/Data Center) and ``GET``/``POST search/jql`` (Cloud), with a
  JQL subset: ``project = X``, ``labels = x``, ``labels in (x, y)``, ``reporter =
  currentUser()``, ``statusCategory = / != Done``, ``key = X``, joined by ``AND``, and ``ORDER
  BY created DESC|ASC``
* ``GET``/``PUT issue/{key}/properties/{propertyKey}`` (PUT: 201 created, 200 updated)
* ``POST issue/{key}/attachments``: needs ``X-Atlassian-Token: no-check`` (else 403) and a
  multipart ``file`` part; answers the list of attachments created
* ``GET``/``POST issue/{key}/transitions`` (POST: 204)

Errors: 400 ``{"errorMessages": [...], "errors": {field: message}}`` for missing or invalid
fields (summary required, single line, under 255 characters; description within 32,767; labels
without spaces; known components, priorities and issue types), 401 for wrong basic auth
(e-mail:API token), 404 ``{"errorMessages": ["Issue does not exist or you do not have
permission to see it."], "errors": {}}``, 429 with ``Retry-After``.

What Jira would render: :func:`split_noformat` splits wiki text the way Jira's renderer reads
``{noformat}`` blocks (a tag opens a block, the next tag of any case closes it, an unclosed one
is markup), and :func:`live_markup` lists whatever in the markup part is not one of the plain
forms Deskpilot writes itself, so a test can assert that user text arrived inert.

Fault knobs: :meth:`FakeJira.fail_next` (the next N requests answer 500, 503 or 429),
:meth:`FakeJira.reject_credentials` (every request 401), and :attr:`FakeJira.requests`, a log of
every request. It is a Starlette app served by :mod:`tests.support.served`.

    with FakeJira() as jira:
        ...  # JIRA_BASE_URL=jira.base_url, JIRA_EMAIL=jira.email, JIRA_API_TOKEN=jira.token
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import itertools
import json
import re
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.served import ServedFake

EMAIL = "deskpilot-bot@northwind.example"
TOKEN = "ATATT-test-token-0123456789"
NOT_FOUND = "Issue does not exist or you do not have permission to see it."
MAX_DESCRIPTION = 32_767
MAX_SUMMARY = 255
API = "/rest/api/2"

STATUS_CATEGORIES = {
    "new": {"id": 2, "key": "new", "colorName": "blue-gray", "name": "To Do"},
    "indeterminate": {
        "id": 4,
        "key": "indeterminate",
        "colorName": "yellow",
        "name": "In Progress",
    },
    "done": {"id": 3, "key": "done", "colorName": "green", "name": "Done"},
}
STATUSES = {  # name -> (id, category)
    "To Do": ("10000", "new"),
    "In Progress": ("3", "indeterminate"),
    "Done": ("10001", "done"),
}
TRANSITIONS = {"11": "To Do", "21": "In Progress", "31": "Done"}
LINK_TYPES = [
    {"id": "10000", "name": "Blocks", "inward": "is blocked by", "outward": "blocks"},
    {"id": "10001", "name": "Cloners", "inward": "is cloned by", "outward": "clones"},
    {"id": "10002", "name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"},
    {"id": "10003", "name": "Relates", "inward": "relates to", "outward": "relates to"},
]
PRIORITIES = {"Highest": "1", "High": "2", "Medium": "3", "Low": "4", "Lowest": "5"}
ISSUE_TYPES = {"Task": "10001", "Bug": "10002", "Incident": "10003"}
FIELDS = [
    ("summary", "Summary"),
    ("description", "Description"),
    ("status", "Status"),
    ("labels", "Labels"),
    ("components", "Component/s"),
    ("priority", "Priority"),
    ("issuetype", "Issue Type"),
    ("project", "Project"),
    ("issuelinks", "Linked Issues"),
    ("comment", "Comment"),
    ("attachment", "Attachment"),
    ("created", "Created"),
    ("updated", "Updated"),
    ("reporter", "Reporter"),
]


_NOFORMAT_TAG = re.compile(r"\{noformat(?::[^}]*)?\}", re.IGNORECASE)
_MARKUP_CHARACTERS = re.compile(r"[{}\[\]!|~^*_+?#@\\]")
_EMOTICON = re.compile(r"\((?:[a-z/!?+*-]|on|off|\*[rgby]?)\)|[:;]-?[()PpDd]")
_BLOCK_START = re.compile(r"^(?:-{2,}|bq\.|h[1-6]\.|[#|>-])")


def split_noformat(text: str) -> tuple[str, str]:
    """``(markup, verbatim)``: what Jira renders as wiki markup and what it shows verbatim in
    ``{noformat}`` blocks. A tag (any case, with or without parameters) opens a block and the
    next one closes it; a tag left open is rendered as markup, with everything after it."""
    tags = list(_NOFORMAT_TAG.finditer(text))
    markup: list[str] = []
    verbatim: list[str] = []
    position = 0
    for opening, closing in zip(tags[::2], tags[1::2], strict=False):
        markup.append(text[position : opening.start()])
        verbatim.append(text[opening.end() : closing.start()])
        position = closing.end()
    markup.append(text[position:])
    return "\n".join(markup), "\n".join(verbatim)


def live_markup(
    text: str, *, headings: tuple[str, ...] = (), links: tuple[str, ...] = ()
) -> list[str]:
    """The lines of ``text``'s markup part (see :func:`split_noformat`) that Jira would render
    as anything but plain words: headings other than ``h3. <one of headings>``, markup
    characters (braces, brackets, bangs, pipes, emphasis, mentions, escapes), emoticons, block
    starts (rules, quotes, lists other than a leading ``* ``, tables) and URLs other than
    ``links``, each given as a whole word."""
    markup, _ = split_noformat(text)
    problems = []
    for line in markup.split("\n"):
        if not line.strip():
            continue
        if line.startswith("h3. ") and line[4:] in headings:
            continue
        rest = line.removeprefix("* ")
        words = [w for w in rest.split(" ") if w not in links]
        plain = " ".join(words)
        if (
            _BLOCK_START.match(rest)
            or _MARKUP_CHARACTERS.search(plain)
            or _EMOTICON.search(plain)
            or "://" in plain
            or "www." in plain.lower()
        ):
            problems.append(line)
    return problems


class JiraError(Exception):
    """Answered as Jira's error body with ``status``."""

    def __init__(
        self, status: int, messages: list[str] | None = None, errors: dict[str, str] | None = None
    ) -> None:
        super().__init__(status)
        self.status = status
        self.body = {"errorMessages": messages or [], "errors": errors or {}}


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int = 0

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Issue:
    id: str
    key: str
    fields: dict[str, Any]
    status: str = "To Do"
    reporter: str = EMAIL
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    updated: datetime = field(default_factory=lambda: datetime.now(UTC))
    properties: dict[str, Any] = field(default_factory=dict)
    comments: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)


def _jira_time(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}+0000"


Action = Callable[[], tuple[int, Any]]
"""What a request asks for, once it passed the faults and the authentication."""


class FakeJira(ServedFake):
    """The server and its state; thread-safe (the server answers on its own thread while the
    test drives the state from another)."""

    def __init__(
        self,
        *,
        project_key: str = "IT",
        components: tuple[str, ...] = ("Network", "Identity", "Hardware", "Service Desk"),
        deployment_type: str = "Server",
        email: str = EMAIL,
        token: str = TOKEN,
    ) -> None:
        self.project_key = project_key
        self.components = set(components)
        self.deployment_type = deployment_type
        self.email = email
        self.token = token
        self.requests: list[RecordedRequest] = []
        self.issues: dict[str, Issue] = {}
        self._lock = threading.RLock()
        self._ids = itertools.count(10001)
        self._numbers = itertools.count(1)
        self._faults: list[tuple[int, str | None]] = []
        self._credentials_rejected = False
        self._clock_offset = 0

    # -- lifecycle -------------------------------------------------------------------------

    def closed_port_url(self) -> str:
        """A loopback URL nobody listens on (connection refused)."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return f"http://127.0.0.1:{port}"

    # -- knobs -----------------------------------------------------------------------------

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.issues.clear()
            self._faults.clear()
            self._credentials_rejected = False
            self._numbers = itertools.count(1)

    def fail_next(self, count: int, status: int = 500, retry_after: str | None = None) -> None:
        """The next ``count`` requests answer ``status`` (500, 503 or 429 with Retry-After)."""
        with self._lock:
            self._faults.extend([(status, retry_after)] * count)

    def reject_credentials(self, rejected: bool = True) -> None:
        """Every request answers 401, as Jira does for a revoked API token."""
        with self._lock:
            self._credentials_rejected = rejected

    def set_status(self, key: str, status: str) -> None:
        """What a technician does in Jira's UI."""
        with self._lock:
            self.issues[key].status = status
            self.issues[key].updated = self._now()

    def calls(self, method: str, pattern: str) -> list[RecordedRequest]:
        """Recorded requests of ``method`` whose path matches the regular expression."""
        with self._lock:
            return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    def _now(self) -> datetime:
        # Strictly increasing, so "ORDER BY created" is deterministic within a test.
        self._clock_offset += 1
        return datetime.now(UTC) + timedelta(milliseconds=self._clock_offset)

    # -- request handling (called on the server's thread) ---------------------------------

    def build_app(self) -> Starlette:
        routes: list[tuple[str, str, Callable[..., tuple[int, Any]]]] = [
            ("GET", "serverInfo", self._server_info),
            ("GET", "myself", self._myself),
            ("GET", "field", self._fields),
            ("GET", "issueLinkType", self._link_types),
            ("POST", "issue", self._create),
            ("GET", "issue/{key}", self._get),
            ("PUT", "issue/{key}", self._edit),
            ("POST", "issue/{key}/comment", self._comment),
            ("POST", "issueLink", self._link),
            ("GET", "search", self._search),
            ("POST", "search", self._search),
            ("GET", "search/jql", self._search_jql),
            ("POST", "search/jql", self._search_jql),
            ("GET", "issue/{key}/properties/{name}", self._get_property),
            ("PUT", "issue/{key}/properties/{name}", self._put_property),
            ("POST", "issue/{key}/attachments", self._attach),
            ("GET", "issue/{key}/transitions", self._transitions),
            ("POST", "issue/{key}/transitions", self._transition),
        ]
        app = Starlette(
            routes=[
                Route(f"{API}/{path}", self._endpoint(action), methods=[verb])
                for verb, path, action in routes
            ],
            exception_handlers={404: self._no_route, 405: self._no_route},
        )
        app.router.redirect_slashes = False  # Jira answers 404, it does not redirect
        return app

    def _endpoint(
        self, action: Callable[..., tuple[int, Any]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            req = await _recorded(request)
            return self._answer(req, lambda: action(req, **request.path_params))

        return endpoint

    async def _no_route(self, request: Request, exc: Exception) -> Response:
        """Starlette's 404 and 405 in Jira's error shape, after the faults and the auth."""
        req = await _recorded(request)
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        message = "Method not allowed" if status == 405 else f"No resource at {req.path}"

        def refuse() -> tuple[int, Any]:
            raise JiraError(status, [message])

        return self._answer(req, refuse)

    def _answer(self, req: RecordedRequest, action: Action) -> Response:
        status, payload, headers = self.handle(req, action)
        req.status = status
        if payload is None:
            return Response(status_code=status, headers=headers)
        return Response(
            json.dumps(payload),
            status_code=status,
            headers=headers,
            media_type="application/json;charset=UTF-8",
        )

    def handle(self, req: RecordedRequest, action: Action) -> tuple[int, Any, dict[str, str]]:
        """Record ``req``, then answer a scripted fault, a 401, or what ``action`` returns."""
        with self._lock:
            self.requests.append(req)
            if self._faults:
                status, retry_after = self._faults.pop(0)
                headers = {"Retry-After": retry_after} if retry_after else {}
                message = "Rate limit exceeded." if status == 429 else "Internal server error"
                return status, {"errorMessages": [message], "errors": {}}, headers
            if not self._authenticated(req.headers.get("authorization", "")):
                return (
                    401,
                    {"errorMessages": ["You are not authenticated."], "errors": {}},
                    {"WWW-Authenticate": 'Basic realm="protected-area"'},
                )
            try:
                status, body = action()
            except JiraError as exc:
                return exc.status, exc.body, {}
            return status, body, {}

    def _authenticated(self, header: str) -> bool:
        if self._credentials_rejected or not header.lower().startswith("basic "):
            return False
        try:
            decoded = base64.b64decode(header[6:].strip()).decode()
        except ValueError:
            return False
        return decoded == f"{self.email}:{self.token}"

    # -- endpoints -------------------------------------------------------------------------

    def _server_info(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, {
            "baseUrl": self.base_url,
            "version": "9.12.0",
            "versionNumbers": [9, 12, 0],
            "deploymentType": self.deployment_type,
            "buildNumber": 9120000,
            "serverTitle": "Fake Jira",
        }

    def _myself(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, {
            "self": f"{self.base_url}/rest/api/2/user?accountId=5b10a2844c20165700ede21g",
            "accountId": "5b10a2844c20165700ede21g",
            "emailAddress": self.email,
            "displayName": "Deskpilot",
            "active": True,
        }

    def _fields(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, [
            {"id": fid, "key": fid, "name": name, "custom": False, "clauseNames": [fid]}
            for fid, name in FIELDS
        ]

    def _link_types(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, {
            "issueLinkTypes": [
                {**t, "self": f"{self.base_url}/rest/api/2/issueLinkType/{t['id']}"}
                for t in LINK_TYPES
            ]
        }

    def _issue(self, key: str) -> Issue:
        issue = self.issues.get(key) or next((i for i in self.issues.values() if i.id == key), None)
        if issue is None:
            raise JiraError(404, [NOT_FOUND])
        return issue

    def _body(self, req: RecordedRequest) -> dict[str, Any]:
        try:
            body = req.json()
        except ValueError as exc:
            raise JiraError(400, ["Unexpected character in the request body."]) from exc
        if not isinstance(body, dict):
            raise JiraError(400, ["Request body must be a JSON object."])
        return body

    def _check_fields(self, fields: dict[str, Any], creating: bool) -> dict[str, str]:
        errors: dict[str, str] = {}
        if creating:
            project = fields.get("project") or {}
            if project.get("key") != self.project_key and project.get("id") != "10000":
                errors["project"] = "Specify a valid project ID or key"
            issue_type = fields.get("issuetype") or {}
            if (
                issue_type.get("name") not in ISSUE_TYPES
                and issue_type.get("id") not in ISSUE_TYPES.values()
            ):
                errors["issuetype"] = "Specify a valid issue type"
        if creating or "summary" in fields:
            summary = fields.get("summary")
            if not isinstance(summary, str) or not summary.strip():
                errors["summary"] = "You must specify a summary of the issue."
            elif "\n" in summary or "\r" in summary:
                errors["summary"] = "The summary is invalid because it contains newline characters."
            elif len(summary) > MAX_SUMMARY:
                errors["summary"] = "Summary must be less than 255 characters."
        description = fields.get("description")
        if description is not None and (
            not isinstance(description, str) or len(description) > MAX_DESCRIPTION
        ):
            errors["description"] = (
                "The entered text is too long. It exceeds the allowed limit of 32,767 characters."
            )
        for value in fields.get("labels") or []:
            if not isinstance(value, str) or " " in value or not value:
                errors["labels"] = f"The label '{value}' contains spaces which is invalid."
            elif len(value) > 255:
                errors["labels"] = "The label must not exceed 255 characters."
        for component in fields.get("components") or []:
            if component.get("name") not in self.components:
                errors["components"] = f"Component name '{component.get('name')}' is not valid"
        if "priority" in fields and (fields["priority"] or {}).get("name") not in PRIORITIES:
            errors["priority"] = "Specify the Priority (name) in the string format"
        return errors

    def _create(self, req: RecordedRequest) -> tuple[int, Any]:
        body = self._body(req)
        fields = body.get("fields")
        if not isinstance(fields, dict):
            raise JiraError(400, ["Issue fields are required."])
        errors = self._check_fields(fields, creating=True)
        if errors:
            raise JiraError(400, [], errors)
        issue_id = str(next(self._ids))
        key = f"{self.project_key}-{next(self._numbers)}"
        now = self._now()
        kept = {
            "summary": fields["summary"],
            "description": fields.get("description"),
            "labels": list(fields.get("labels") or []),
            "components": [{"name": c["name"]} for c in fields.get("components") or []],
            "priority": (fields.get("priority") or {"name": "Medium"}),
            "issuetype": fields["issuetype"],
        }
        self.issues[key] = Issue(
            id=issue_id, key=key, fields=kept, reporter=self.email, created=now, updated=now
        )
        return 201, {
            "id": issue_id,
            "key": key,
            "self": f"{self.base_url}/rest/api/2/issue/{issue_id}",
        }

    def _render(self, issue: Issue, wanted: list[str] | None, properties: list[str]) -> Any:
        status_id, category = STATUSES[issue.status]
        full: dict[str, Any] = {
            "summary": issue.fields["summary"],
            "description": issue.fields["description"],
            "labels": list(issue.fields["labels"]),
            "components": [
                {"self": f"{self.base_url}/rest/api/2/component/1", "id": "1", "name": c["name"]}
                for c in issue.fields["components"]
            ],
            "priority": {
                "name": issue.fields["priority"]["name"],
                "id": PRIORITIES.get(issue.fields["priority"]["name"], "3"),
            },
            "issuetype": {"name": issue.fields["issuetype"].get("name", "Task")},
            "project": {"key": self.project_key, "id": "10000"},
            "status": {
                "self": f"{self.base_url}/rest/api/2/status/{status_id}",
                "id": status_id,
                "name": issue.status,
                "statusCategory": STATUS_CATEGORIES[category],
            },
            "reporter": {"emailAddress": issue.reporter, "displayName": "Deskpilot"},
            "issuelinks": issue.links,
            "comment": {
                "comments": issue.comments,
                "maxResults": len(issue.comments),
                "total": len(issue.comments),
                "startAt": 0,
            },
            "attachment": issue.attachments,
            "created": _jira_time(issue.created),
            "updated": _jira_time(issue.updated),
        }
        if wanted is not None and "*all" not in wanted:
            full = {k: v for k, v in full.items() if k in wanted}
        rendered: dict[str, Any] = {
            "expand": "renderedFields,names,schema,operations,editmeta,changelog",
            "id": issue.id,
            "self": f"{self.base_url}/rest/api/2/issue/{issue.id}",
            "key": issue.key,
            "fields": full,
        }
        if properties:
            rendered["properties"] = {
                k: v for k, v in issue.properties.items() if k in properties or "*all" in properties
            }
        return rendered

    @staticmethod
    def _list_param(values: list[str] | None) -> list[str] | None:
        if values is None:
            return None
        return [part.strip() for value in values for part in value.split(",") if part.strip()]

    def _get(self, req: RecordedRequest, key: str) -> tuple[int, Any]:
        issue = self._issue(key)
        wanted = self._list_param(req.query.get("fields"))
        properties = self._list_param(req.query.get("properties")) or []
        return 200, self._render(issue, wanted, properties)

    def _edit(self, req: RecordedRequest, key: str) -> tuple[int, Any]:
        issue = self._issue(key)
        body = self._body(req)
        fields = dict(body.get("fields") or {})
        update = body.get("update") or {}
        labels = list(fields.get("labels", issue.fields["labels"]))
        for operation in update.get("labels") or []:
            if "add" in operation and operation["add"] not in labels:
                labels.append(operation["add"])
            if "remove" in operation and operation["remove"] in labels:
                labels.remove(operation["remove"])
            if "set" in operation:
                labels = list(operation["set"])
        fields["labels"] = labels
        errors = self._check_fields(fields, creating=False)
        if errors:
            raise JiraError(400, [], errors)
        for name in ("summary", "description", "labels", "components", "priority"):
            if name in fields:
                issue.fields[name] = fields[name]
        for operation in update.get("comment") or []:
            if "add" in operation:
                self._add_comment(issue, str(operation["add"].get("body", "")))
        issue.updated = self._now()
        return 204, None

    def _add_comment(self, issue: Issue, body: str) -> dict[str, Any]:
        now = _jira_time(self._now())
        comment_id = str(next(self._ids))
        comment = {
            "self": f"{self.base_url}/rest/api/2/issue/{issue.id}/comment/{comment_id}",
            "id": comment_id,
            "author": {"emailAddress": self.email, "displayName": "Deskpilot"},
            "body": body,
            "created": now,
            "updated": now,
        }
        issue.comments.append(comment)
        issue.updated = self._now()
        return comment

    def _comment(self, req: RecordedRequest, key: str) -> tuple[int, Any]:
        issue = self._issue(key)
        body = self._body(req)
        text = body.get("body")
        if not isinstance(text, str) or not text.strip():
            raise JiraError(400, [], {"comment": "Comment body can not be empty!"})
        return 201, self._add_comment(issue, text)

    def _link(self, req: RecordedRequest) -> tuple[int, Any]:
        body = self._body(req)
        type_name = (body.get("type") or {}).get("name")
        link_type = next((t for t in LINK_TYPES if t["name"] == type_name), None)
        if link_type is None:
            raise JiraError(404, [f"No issue link type with name '{type_name}' found."])
        inward = self._issue((body.get("inwardIssue") or {}).get("key", ""))
        outward = self._issue((body.get("outwardIssue") or {}).get("key", ""))
        if inward.key == outward.key:
            raise JiraError(400, ["You cannot link an issue to itself."])
        link_id = str(next(self._ids))
        kind = {**link_type, "self": f"{self.base_url}/rest/api/2/issueLinkType/{link_type['id']}"}
        inward.links.append(
            {"id": link_id, "type": kind, "outwardIssue": {"id": outward.id, "key": outward.key}}
        )
        outward.links.append(
            {"id": link_id, "type": kind, "inwardIssue": {"id": inward.id, "key": inward.key}}
        )
        if body.get("comment") and body["comment"].get("body"):
            self._add_comment(inward, str(body["comment"]["body"]))
        return 201, None

    # -- search ----------------------------------------------------------------------------

    def _search_params(self, req: RecordedRequest) -> dict[str, Any]:
        if req.method == "POST":
            return self._body(req)
        params: dict[str, Any] = {k: v[-1] for k, v in req.query.items()}
        for name in ("fields", "properties"):
            if name in req.query:
                params[name] = self._list_param(req.query[name])
        return params

    def _matching(self, params: dict[str, Any]) -> tuple[list[Issue], list[str] | None, list[str]]:
        jql = str(params.get("jql") or "")
        issues = query_jql(jql, list(self.issues.values()), self.project_key, self.email)
        fields = params.get("fields")
        if isinstance(fields, str):
            fields = [f.strip() for f in fields.split(",")]
        properties = params.get("properties") or []
        if isinstance(properties, str):
            properties = [p.strip() for p in properties.split(",")]
        return issues, fields, properties

    def _search(self, req: RecordedRequest) -> tuple[int, Any]:
        params = self._search_params(req)
        issues, fields, properties = self._matching(params)
        start = int(params.get("startAt") or 0)
        size = int(params.get("maxResults") or 50)
        page = issues[start : start + size]
        return 200, {
            "expand": "names,schema",
            "startAt": start,
            "maxResults": size,
            "total": len(issues),
            "issues": [self._render(i, fields, properties) for i in page],
        }

    def _search_jql(self, req: RecordedRequest) -> tuple[int, Any]:
        params = self._search_params(req)
        issues, fields, properties = self._matching(params)
        start = int(params.get("nextPageToken") or 0)
        size = int(params.get("maxResults") or 50)
        page = issues[start : start + size]
        more = start + size < len(issues)
        body: dict[str, Any] = {
            "issues": [self._render(i, fields, properties) for i in page],
            "isLast": not more,
        }
        if more:
            body["nextPageToken"] = str(start + size)
        return 200, body

    # -- properties, attachments, transitions ----------------------------------------------

    def _get_property(self, req: RecordedRequest, key: str, name: str) -> tuple[int, Any]:
        issue = self._issue(key)
        if name not in issue.properties:
            raise JiraError(404, [f"The property with key '{name}' does not exist."])
        return 200, {"key": name, "value": issue.properties[name]}

    def _put_property(self, req: RecordedRequest, key: str, name: str) -> tuple[int, Any]:
        issue = self._issue(key)
        if len(name) > 255:
            raise JiraError(400, ["The property key is too long."])
        try:
            value = req.json()
        except ValueError as exc:
            raise JiraError(400, ["The property value is not valid JSON."]) from exc
        created = name not in issue.properties
        issue.properties[name] = value
        return (201 if created else 200), None

    def _attach(self, req: RecordedRequest, key: str) -> tuple[int, Any]:
        if req.headers.get("x-atlassian-token", "").lower() != "no-check":
            raise JiraError(403, ["XSRF check failed"])
        issue = self._issue(key)
        content_type = req.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            raise JiraError(415, ["Unsupported Media Type"])
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + req.body
        )
        created = []
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") != "file":
                continue
            payload = part.get_payload(decode=True) or b""
            attachment_id = str(next(self._ids))
            attachment = {
                "self": f"{self.base_url}/rest/api/2/attachment/{attachment_id}",
                "id": attachment_id,
                "filename": part.get_filename() or "file",
                "author": {"emailAddress": self.email, "displayName": "Deskpilot"},
                "created": _jira_time(self._now()),
                "size": len(payload),
                "mimeType": part.get_content_type(),
                "content": f"{self.base_url}/secure/attachment/{attachment_id}/",
            }
            issue.attachments.append(attachment)
            created.append(attachment)
        if not created:
            raise JiraError(400, ["No file was attached: the multipart part must be named file."])
        issue.updated = self._now()
        return 200, created

    def _transitions(self, req: RecordedRequest, key: str) -> tuple[int, Any]:
        self._issue(key)
        transitions = []
        for transition_id, name in TRANSITIONS.items():
            status_id, category = STATUSES[name]
            transitions.append(
                {
                    "id": transition_id,
                    "name": name,
                    "to": {
                        "id": status_id,
                        "name": name,
                        "statusCategory": STATUS_CATEGORIES[category],
                    },
                }
            )
        return 200, {"expand": "transitions", "transitions": transitions}

    def _transition(self, req: RecordedRequest, key: str) -> tuple[int, Any]:
        issue = self._issue(key)
        body = self._body(req)
        transition_id = str((body.get("transition") or {}).get("id", ""))
        if transition_id not in TRANSITIONS:
            raise JiraError(400, [f"Transition id '{transition_id}' is not valid for this issue."])
        issue.status = TRANSITIONS[transition_id]
        update = body.get("update") or {}
        for operation in update.get("comment") or []:
            if "add" in operation:
                self._add_comment(issue, str(operation["add"].get("body", "")))
        issue.updated = self._now()
        return 204, None


# -- the JQL subset ---------------------------------------------------------------------------

_CLAUSE = re.compile(
    r"""\s*(?P<field>[A-Za-z]+)\s*(?P<op>!=|=|\bin\b|\bnot\s+in\b)\s*
        (?P<value>"[^"]*"|\([^)]*\)|currentUser\(\)|[A-Za-z0-9_.\-]+)\s*""",
    re.IGNORECASE | re.VERBOSE,
)


def _values(raw: str) -> list[str]:
    if raw.startswith("("):
        return [v.strip().strip('"') for v in raw[1:-1].split(",") if v.strip()]
    return [raw.strip('"')]


def query_jql(jql: str, issues: list[Issue], project_key: str, current_user: str) -> list[Issue]:
    """Filter and order ``issues`` by the JQL subset; 400 for anything outside it."""
    order = "DESC"
    text = jql.strip()
    match = re.search(r"\s+ORDER\s+BY\s+created(?:\s+(ASC|DESC))?\s*$", text, re.IGNORECASE)
    if match:
        order = (match.group(1) or "ASC").upper()
        text = text[: match.start()]
    elif re.search(r"ORDER\s+BY", text, re.IGNORECASE):
        raise JiraError(400, ["Error in the JQL Query: only ORDER BY created is supported."])
    clauses = re.split(r"\s+AND\s+", text.strip(), flags=re.IGNORECASE) if text.strip() else []
    found = list(issues)
    for clause in clauses:
        parsed = _CLAUSE.fullmatch(clause)
        if parsed is None:
            raise JiraError(400, [f"Error in the JQL Query: cannot parse '{clause}'."])
        name = parsed["field"].lower()
        op = re.sub(r"\s+", " ", parsed["op"].lower())
        values = _values(parsed["value"])
        negate = op in ("!=", "not in")

        def test(issue: Issue, name: str = name, values: list[str] = values) -> bool:
            if name == "project":
                return project_key in values
            if name == "labels":
                return any(v in issue.fields["labels"] for v in values)
            if name == "key":
                return issue.key in values
            if name == "reporter":
                wanted = [current_user if v == "currentUser()" else v for v in values]
                return issue.reporter in wanted
            if name == "statuscategory":
                category = STATUS_CATEGORIES[STATUSES[issue.status][1]]
                names = (str(category["name"]).lower(), str(category["key"]))
                return any(v.lower() in names for v in values)
            if name == "status":
                return issue.status.lower() in (v.lower() for v in values)
            raise JiraError(400, [f"Field '{name}' does not exist or you do not have permission."])

        found = [i for i in found if test(i) != negate]
    found.sort(key=lambda i: i.created, reverse=order == "DESC")
    return found


async def _recorded(request: Request) -> RecordedRequest:
    return RecordedRequest(
        method=request.method,
        path=request.url.path,
        query=parse_qs(request.url.query, keep_blank_values=True),
        headers=dict(request.headers.items()),
        body=await request.body(),
    )
