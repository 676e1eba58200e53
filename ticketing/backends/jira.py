"""Jira Cloud or Server/Data Center through the ``jira`` library (REST API v2).

The library is blocking, so each call runs in a thread (:func:`asyncio.to_thread`). Its own
retries are off (``max_retries=0``): the ticketing service's durable retry path decides when to
try again, so a Jira outage never holds a bus message for minutes.

Errors are mapped to the interface's kinds (see :mod:`ticketing.backends.base`): 401/403 is an
auth error, logged once per occurrence with the settings an operator must check (never the
token); 429, 5xx and connection errors are transient; 400 is a rejection carrying Jira's
``errorMessages`` and ``errors``; 404 is a missing ticket. Exceptions of the library are never
logged or chained as they are: their text can quote request and response bodies.

Idempotency: the key is stored on the issue twice, as a label (``dp-idem-<digest>``, searchable
with JQL) and as the issue entity property ``deskpilot`` (the key's whole SHA-256, the
requester's id, an opaque reference of the conversation, category, queue and incident).
:meth:`JiraBackend.create` searches by the label before filing. Entity properties are readable by
everyone who may browse the issue, so neither the conversation id nor the turn id the key names is
stored there: issues read back carry no conversation id (the ticketing service adds the one it
knows, see :mod:`ticketing.conversations`).
"""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import requests
from jira import JIRA, JIRAError

from contracts.events import TicketRecord
from ticketing.backends.base import (
    DESKPILOT_LABEL,
    BackendAuthError,
    BackendError,
    BackendRejected,
    BackendUnavailable,
    TicketBackend,
    TicketDraft,
    TicketNotFound,
    TicketQuery,
    conversation_reference,
    idempotency_label,
    request_reference,
    require_label_alphabet,
)
from ticketing.config import JiraConfig

log = logging.getLogger("deskpilot.ticketing.jira")

T = TypeVar("T")

ISSUE_FIELDS = (
    "summary,description,status,labels,components,priority,issuelinks,comment,attachment,"
    "created,updated"
)
DONE_NAMES = frozenset({"done", "closed", "resolved"})


class JiraBackend(TicketBackend):
    name: ClassVar[str] = "jira"

    def __init__(self, config: JiraConfig) -> None:
        self.config = config
        self._client: JIRA | None = None
        self._client_lock = threading.Lock()
        self._done_statuses: dict[str, bool] = {}
        self._site = urlsplit(config.base_url).netloc or config.base_url

    # -- the client and its errors ---------------------------------------------------------

    def _jira(self) -> JIRA:
        with self._client_lock:
            if self._client is None:
                self._client = JIRA(
                    server=self.config.base_url,
                    basic_auth=(self.config.email, self.config.api_token.get_secret_value()),
                    max_retries=0,
                    timeout=self.config.timeout_s,
                    get_server_info=True,
                    options={"check_update": False},
                )
            return self._client

    async def _call(self, operation: str, work: Callable[[JIRA], T]) -> T:
        try:
            return await asyncio.to_thread(lambda: work(self._jira()))
        except JIRAError as exc:
            error = self._map_error(operation, exc)
        except requests.RequestException as exc:
            error = BackendUnavailable(f"Jira {operation}: {type(exc).__name__}")
        raise error

    def _map_error(self, operation: str, exc: JIRAError) -> BackendError:
        status = exc.status_code
        if status in (401, 403):
            log.error(
                "Jira refused Deskpilot's credentials: check JIRA_EMAIL and JIRA_API_TOKEN (an "
                "API token of that account, not its password), that the account may browse and "
                "create issues in project JIRA_PROJECT_KEY, and JIRA_BASE_URL; tickets are kept "
                "and retried meanwhile",
                extra={"operation": operation, "http_status": status, "jira_site": self._site},
            )
            return BackendAuthError(f"Jira {operation}: HTTP {status} (credentials refused)")
        if status == 404:
            return TicketNotFound(f"Jira {operation}: HTTP 404")
        if status is None or status == 429 or status >= 500:
            retry_after = _retry_after(exc.response)
            return BackendUnavailable(
                f"Jira {operation}: HTTP {status if status is not None else 'no response'}",
                retry_after_s=retry_after,
            )
        messages, errors = _jira_errors(exc.response)
        return BackendRejected(f"Jira {operation}: HTTP {status}", messages, errors)

    async def close(self) -> None:
        client = self._client
        if client is not None:
            await asyncio.to_thread(client.close)
            self._client = None

    async def check(self) -> bool:
        try:
            await self._call("myself", lambda jira: jira.myself())
        except BackendError:
            return False
        return True

    # -- reading ---------------------------------------------------------------------------

    def _record(self, raw: dict[str, Any]) -> TicketRecord:
        fields: dict[str, Any] = raw.get("fields") or {}
        status = fields.get("status") or {}
        status_name = str(status.get("name") or "Open")
        category = (status.get("statusCategory") or {}).get("key")
        if category:
            self._done_statuses[status_name] = category == "done"
        stored: dict[str, Any] = (raw.get("properties") or {}).get(self.config.property_key) or {}
        links = []
        for link in fields.get("issuelinks") or []:
            other = link.get("outwardIssue") or link.get("inwardIssue") or {}
            if other.get("key"):
                links.append(str(other["key"]))
        comments = [
            str(c.get("body") or "") for c in (fields.get("comment") or {}).get("comments") or []
        ]
        key = str(raw["key"])
        return TicketRecord(
            key=key,
            url=f"{self.config.base_url.rstrip('/')}/browse/{key}",
            status=status_name,
            summary=str(fields.get("summary") or ""),
            description=str(fields.get("description") or ""),
            labels=[str(x) for x in fields.get("labels") or []],
            category=stored.get("category"),
            queue=stored.get("queue"),
            priority=(fields.get("priority") or {}).get("name"),
            user_id=stored.get("user_id"),
            # Only issues filed before the property held a reference carry the id.
            conversation_id=stored.get("conversation_id"),
            incident_id=stored.get("incident_id"),
            links=sorted(set(links)),
            comments=comments,
            created_at=_when(fields.get("created")),
            updated_at=_when(fields.get("updated")),
        )

    def _issue_raw(self, jira: JIRA, key: str) -> dict[str, Any]:
        issue = jira.issue(key, fields=ISSUE_FIELDS, properties=self.config.property_key)
        raw: dict[str, Any] = issue.raw
        return raw

    async def get(self, key: str) -> TicketRecord:
        return self._record(await self._call("get issue", lambda j: self._issue_raw(j, key)))

    def _jql(self, query: TicketQuery) -> str:
        clauses = [f'project = "{self.config.project_key}"']
        clauses += [f'labels = "{value}"' for value in [DESKPILOT_LABEL, *query.labels]]
        if query.open_only:
            clauses.append("statusCategory != Done")
        return " AND ".join(clauses) + " ORDER BY created DESC"

    async def _search_raw(self, query: TicketQuery) -> list[dict[str, Any]]:
        jql = self._jql(query)

        def work(jira: JIRA) -> dict[str, Any]:
            result: Any = jira.search_issues(
                jql,
                maxResults=query.limit,
                fields=ISSUE_FIELDS.split(","),
                properties=self.config.property_key,
                json_result=True,
            )
            return dict(result)

        found = await self._call("search", work)
        return list(found.get("issues") or [])

    async def search(self, query: TicketQuery) -> list[TicketRecord]:
        return [self._record(raw) for raw in await self._search_raw(query)]

    async def attachments(self, key: str) -> list[tuple[str, int]]:
        raw = await self._call("get issue", lambda j: self._issue_raw(j, key))
        return [
            (str(a.get("filename")), int(a.get("size") or 0))
            for a in (raw.get("fields") or {}).get("attachment") or []
        ]

    async def find_by_idempotency_key(self, idempotency_key: str) -> TicketRecord | None:
        found = await self._search_raw(
            TicketQuery(labels=[idempotency_label(idempotency_key)], limit=5)
        )
        for raw in reversed(found):  # oldest first: the first filing wins
            stored = (raw.get("properties") or {}).get(self.config.property_key)
            # No property yet: filed, but the process stopped before storing it; the label (a
            # digest of the key) is the proof, and create() stores the property then.
            if (
                stored is None
                or stored.get("request") == request_reference(idempotency_key)
                # Filed before the key was stored as a digest.
                or stored.get("idempotency_key") == idempotency_key
            ):
                return self._record(raw)
        return None

    def is_done(self, record: TicketRecord) -> bool:
        known = self._done_statuses.get(record.status)
        return known if known is not None else record.status.lower() in DONE_NAMES

    # -- writing ---------------------------------------------------------------------------

    async def create(self, draft: TicketDraft) -> TicketRecord:
        existing = await self.find_by_idempotency_key(draft.idempotency_key)
        if existing is not None:
            await self._store_property(existing.key, draft)
            return await self.get(existing.key)
        fields: dict[str, Any] = {
            "project": {"key": self.config.project_key},
            "issuetype": {"name": self.config.issue_type},
            "summary": draft.summary,
            "description": draft.description,
            "labels": list(
                dict.fromkeys(
                    [DESKPILOT_LABEL, *draft.labels, idempotency_label(draft.idempotency_key)]
                )
            ),
        }
        if draft.components:
            fields["components"] = [{"name": name} for name in draft.components]
        if draft.priority:
            fields["priority"] = {"name": draft.priority}
        created = await self._call(
            "create issue", lambda j: j.create_issue(fields=fields, prefetch=False)
        )
        key = str(created.key)
        await self._store_property(key, draft)
        return await self.get(key)

    async def _store_property(self, key: str, draft: TicketDraft) -> None:
        value = {
            "request": request_reference(draft.idempotency_key),
            "user_id": draft.user_id,
            "conversation": (
                conversation_reference(draft.conversation_id) if draft.conversation_id else None
            ),
            "incident_id": draft.incident_id,
            "category": draft.category,
            "queue": draft.queue,
        }
        await self._call(
            "set property",
            lambda j: j.add_issue_property(key, self.config.property_key, value),
        )

    async def update(
        self,
        key: str,
        *,
        summary: str | None = None,
        description: str | None = None,
        add_labels: list[str] | None = None,
    ) -> TicketRecord:
        fields: dict[str, Any] = {}
        if summary is not None:
            fields["summary"] = summary
        if description is not None:
            fields["description"] = description
        update: dict[str, Any] = {}
        if add_labels:
            require_label_alphabet(add_labels)
            update["labels"] = [{"add": value} for value in add_labels]

        def work(jira: JIRA) -> None:
            issue = jira.issue(key, fields="summary")
            issue.update(fields=fields, update=update)

        if fields or update:
            await self._call("update issue", work)
        return await self.get(key)

    async def comment(self, key: str, body: str) -> None:
        await self._call("add comment", lambda j: j.add_comment(key, body))

    async def link(self, key: str, other_key: str) -> None:
        await self._call(
            "link issues",
            lambda j: j.create_issue_link(
                type=self.config.link_type, inwardIssue=key, outwardIssue=other_key
            ),
        )

    async def add_attachment(self, key: str, filename: str, content: bytes) -> str:
        attachment = await self._call(
            "add attachment",
            lambda j: j.add_attachment(key, io.BytesIO(content), filename=filename),
        )
        return str(attachment.id)

    async def resolve(self, key: str) -> TicketRecord:
        await self._call(
            "transition issue", lambda j: j.transition_issue(key, self.config.done_transition)
        )
        return await self.get(key)


def _when(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _retry_after(response: Any) -> float | None:
    if response is None:
        return None
    value = getattr(response, "headers", {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _jira_errors(response: Any) -> tuple[list[str], dict[str, str]]:
    """Jira's ``{"errorMessages": [...], "errors": {field: message}}``, when the body has it."""
    try:
        body = response.json() if response is not None else {}
    except ValueError:
        return [], {}
    if not isinstance(body, dict):
        return [], {}
    messages = [str(m) for m in body.get("errorMessages") or []]
    errors = {str(k): str(v) for k, v in (body.get("errors") or {}).items()}
    return messages, errors
