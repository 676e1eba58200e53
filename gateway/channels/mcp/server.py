"""Deskpilot's tools for agents and systems elsewhere in the company, over MCP at ``/mcp``.

The server is the ``mcp`` SDK's (``MCPServer``, streamable HTTP, stateless, JSON responses),
served by the gateway itself. In front of it :class:`McpAuth` admits only callers with
``Authorization: Bearer`` and one of

* a user token the web chat accepts (:class:`gateway.identity.IdentityResolver`): the caller is
  that user, with the roles of its claims;
* a service client's token (``GATEWAY_MCP_CLIENTS``, compared in constant time): the caller is
  ``mcp:<name>`` with the client's roles.

Anything else is 401 with ``WWW-Authenticate: Bearer``. Every request counts against the
caller's API allowance, every question against their chat allowance (the web chat's buckets,
:mod:`gateway.ratelimit`), and every tool call is written to the audit stream (the tool, the
caller's kind, the outcome; never the arguments).

The tools, each as its user could do in the web chat:

* ``ask``: a question, answered with citations (:meth:`TurnService.ask`: the text goes sealed to
  the redactor like a chat message; retrieval sees only what the caller may read);
* ``search_knowledge_base``: the passages of the knowledge base that answer a query
  (:class:`gateway.search.SearchService`: sealed to the redactor like a chat message, then the
  orchestrator's retrieval as the caller, over the bus's request/reply; no turn);
* ``open_ticket``: hand a problem to a technician (the chat's ticket request), the ticket back;
* ``get_ticket``: a ticket's status (one's own; technicians and admins any);
* ``report_incident``: an ongoing incident, as a status page reports it (technicians, admins;
  its texts go sealed to the redactor, like a chat message, before anything keeps them);
* ``list_incidents``, ``get_incident``: ongoing (and recently resolved) incidents as a status
  page shows them, to anyone admitted; technicians and admins also see the linked tickets' keys,
  the error signatures, the incident's own ticket and category
  (:class:`gateway.incidents.IncidentBoard`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi.concurrency import run_in_threadpool
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from contracts.bus import Bus
from contracts.events import MAX_SEARCH_PASSAGES, AuditRecorded, new_id
from contracts.topics import Topic
from gateway.config import GatewaySettings, mcp_clients
from gateway.conversations import ConversationIndex
from gateway.directory import Directory, with_directory_groups
from gateway.errors import ApiError
from gateway.identity import Identity, IdentityResolver
from gateway.incidents import IncidentBoard, IncidentService, KnownIncident
from gateway.models import INCIDENT_ID_PATTERN, ChatRead, IncidentCreate
from gateway.ratelimit import LimitKind, RateLimiter
from gateway.search import SearchService
from gateway.tickets import TicketReadModel
from gateway.turns import TurnService

log = logging.getLogger("deskpilot.gateway.mcp")

IDENTITY_KEY = "deskpilot.identity"
"""Where :class:`McpAuth` leaves the caller in the request's ASGI scope for the tools."""
REFUSED = {"error_code": "unauthorized", "detail": "A valid bearer token is needed."}


@dataclass(frozen=True)
class McpServices:
    """What the tools use: the gateway's own services."""

    settings: GatewaySettings
    bus: Bus
    turns: TurnService
    conversations: ConversationIndex
    tickets: TicketReadModel
    incidents: IncidentService
    board: IncidentBoard
    search: SearchService
    limiter: RateLimiter | None


class McpAuth:
    """ASGI middleware in front of the MCP endpoint: the caller, or 401."""

    def __init__(
        self,
        app: ASGIApp,
        resolver: IdentityResolver,
        settings: GatewaySettings,
        limiter: RateLimiter | None,
        directory: Directory,
    ) -> None:
        self.app = app
        self.resolver = resolver
        self.limiter = limiter
        self.directory = directory
        self._clients = {
            hashlib.sha256(client.token.get_secret_value().encode()).digest(): Identity(
                user_id=f"mcp:{name}", roles=frozenset(client.roles) | {"employee"}
            )
            for name, client in mcp_clients(settings).items()
        }

    async def identify(self, authorization: str | None) -> Identity | None:
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        digest = hashlib.sha256(token.encode()).digest()
        found: Identity | None = None
        for known, client in self._clients.items():  # every entry compared: constant time
            if hmac.compare_digest(known, digest):
                found = client
        if found is not None:
            return found
        # Off the event loop: a JWKS fetch blocks.
        caller = await run_in_threadpool(self.resolver.caller_of_token, token)
        user = caller.identity
        if user is None or user.source != "token":
            return None
        return await with_directory_groups(user, self.directory)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        identity = await self.identify(request.headers.get("authorization"))
        if identity is None:
            log.warning("MCP request refused", extra={"reason": "credentials"})
            await _json(send, 401, REFUSED, {"WWW-Authenticate": "Bearer"})
            return
        if self.limiter is not None:
            decision = await self.limiter.hit(LimitKind.API, f"token:{identity.user_id}", None)
            if not decision.allowed:
                error = decision.error()
                await _json(send, 429, error.payload(), dict(error.headers))
                return
        scope[IDENTITY_KEY] = identity
        await self.app(scope, receive, send)


async def _json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


def caller_of(ctx: Context) -> Identity:
    """The caller :class:`McpAuth` admitted for this tool call's request."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    identity = scope.get(IDENTITY_KEY) if isinstance(scope, dict) else None
    if not isinstance(identity, Identity):
        raise ToolError("No caller: the request was not authenticated.")
    return identity


def _answer(answer: ChatRead) -> dict[str, Any]:
    """What a tool returns of an answer."""
    body = answer.model_dump(
        mode="json",
        include={
            "answer",
            "action",
            "citations",
            "questions",
            "checklist",
            "ticket",
            "incident",
            "conversation_id",
            "turn_id",
            "redaction_notice",
        },
    )
    return body


STAFF: frozenset[str] = frozenset({"technician", "admin"})
INCIDENT_ID = re.compile(INCIDENT_ID_PATTERN)


def _incident(known: KnownIncident, staff: bool) -> dict[str, Any]:
    """What a tool shows of an incident: what a status page shows, to anyone admitted; to
    technicians and admins also what IT works with."""
    incident = known.incident
    shown: dict[str, Any] = incident.model_dump(
        mode="json",
        include={"id", "title", "status", "affected_services", "latest_update", "url"},
    )
    shown["since"] = shown_time(known.since)
    shown["updated_at"] = shown_time(incident.updated_at)
    shown["resolved"] = incident.over
    shown["linked_tickets"] = len(known.linked_tickets)
    if staff:
        shown |= incident.model_dump(
            mode="json", include={"error_signatures", "ticket_key", "category"}
        )
        shown["linked_ticket_keys"] = sorted(known.linked_tickets)
    return shown


def shown_time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def build(services: McpServices) -> MCPServer:
    """The MCP server and its tools."""
    server = MCPServer(
        name="Deskpilot",
        instructions="IT support: ask questions answered from the company's knowledge base with "
        "citations, search it, open and look up tickets, report and read incidents.",
    )

    async def audit(caller: Identity, tool: str, outcome: str, conversation: str = "") -> None:
        record = AuditRecorded(
            correlation_id=new_id(),
            conversation_id=conversation or "mcp",
            service="gateway",
            action="tool_call",
            reason=f"MCP tool {tool}: {outcome}",
            details={
                "tool": tool,
                "outcome": outcome,
                "caller": "service" if caller.user_id.startswith("mcp:") else "user",
            },
        )
        try:
            await services.bus.publish(Topic.AUDIT, record)
        except OSError:
            log.warning("MCP audit record not written", extra={"tool": tool})

    @asynccontextmanager
    async def failures(caller: Identity, tool: str, awaited: str) -> AsyncIterator[None]:
        """What the gateway refused (``ApiError``) or did not get in time, as an audited tool
        error that says what to do."""
        try:
            yield
        except ApiError as exc:
            await audit(caller, tool, exc.code.value)
            raise ToolError(exc.detail) from None
        except TimeoutError:
            await audit(caller, tool, "timeout")
            raise ToolError(
                f"No {awaited} within {services.settings.turn_timeout_s:.0f} s; try again."
            ) from None

    async def chat_allowed(caller: Identity) -> None:
        if services.limiter is None:
            return
        decision = await services.limiter.hit(LimitKind.CHAT, f"token:{caller.user_id}", None)
        if not decision.allowed:
            raise ToolError(f"Too many questions; try again in {decision.retry_after_s} s.")

    async def turn(
        ctx: Context, tool: str, text: str, conversation_id: str | None, *, ticket: bool = False
    ) -> ChatRead:
        caller = caller_of(ctx)
        await chat_allowed(caller)
        async with failures(caller, tool, "answer"):
            conversation = await services.conversations.resolve(conversation_id, caller.user_id)
            turn_id = new_id()
            answer = await services.turns.ask(
                text,
                conversation,
                caller.user_id,
                turn_id,
                services.settings.turn_timeout_s,
                request_ticket=ticket,
                authenticated=True,
                groups=caller.groups,
            )
        await audit(caller, tool, answer.action.value, answer.conversation_id)
        return answer

    @server.tool()
    async def ask(
        question: str, ctx: Context, conversation_id: str | None = None
    ) -> dict[str, Any]:
        """Ask IT support a question. The answer cites the knowledge base ([n] marks cite
        `citations` n); send `conversation_id` from an earlier answer to follow up."""
        return _answer(await turn(ctx, "ask", question, conversation_id))

    @server.tool()
    async def search_knowledge_base(
        query: str,
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_PASSAGES)] = 5,
    ) -> dict[str, Any]:
        """Search the IT knowledge base (only what the caller may read): the passages that
        best answer `query`, best first, each with its title, URL, section, an excerpt and its
        score (cosine similarity, higher is closer)."""
        caller = caller_of(ctx)
        tool = "search_knowledge_base"
        await chat_allowed(caller)
        async with failures(caller, tool, "results"):
            passages = await services.search.search(
                query,
                caller.user_id,
                caller.groups,
                limit,
                services.settings.turn_timeout_s,
                authenticated=caller.authenticated,
            )
        await audit(caller, tool, "found" if passages else "nothing")
        return {"results": [p.model_dump(mode="json") for p in passages]}

    @server.tool()
    async def open_ticket(
        description: str, ctx: Context, conversation_id: str | None = None
    ) -> dict[str, Any]:
        """Hand a problem to an IT technician: files a ticket with the conversation's context
        and returns it (`ticket`: key, url, status)."""
        return _answer(await turn(ctx, "open_ticket", description, conversation_id, ticket=True))

    @server.tool()
    async def get_ticket(key: str, ctx: Context) -> dict[str, Any]:
        """A ticket's current status and summary: the caller's own tickets (technicians and
        admins: any)."""
        caller = caller_of(ctx)
        record = await services.tickets.get(key) if 0 < len(key) <= 64 else None
        staff = bool(caller.roles & STAFF)
        if record is None or not (staff or record.user_id == caller.user_id):
            await audit(caller, "get_ticket", "unknown")
            raise ToolError("No ticket of yours has that key.")
        await audit(caller, "get_ticket", "read")
        return record.model_dump(
            mode="json", include={"key", "url", "status", "summary", "priority", "links"}
        )

    @server.tool()
    async def report_incident(
        id: str,  # the incident's own field name
        title: str,
        status: str,
        ctx: Context,
        affected_services: list[str] | None = None,
        latest_update: str | None = None,
        resolved: bool = False,
        error_signatures: list[str] | None = None,
        started_at: datetime | None = None,
    ) -> dict[str, Any]:
        """Report an ongoing incident (or its update, same `id`), as a status page would:
        users whose problem matches (a service named, an error code such as `0x800704CF`) are
        told, matching tickets are linked. Technicians and admins only."""
        caller = caller_of(ctx)
        if not caller.roles & STAFF:
            await audit(caller, "report_incident", "forbidden")
            raise ToolError("Only technicians and admins may report incidents.")
        try:
            report = IncidentCreate(
                id=id,
                title=title,
                status=status,
                affected_services=affected_services or [],
                error_signatures=error_signatures or [],
                started_at=started_at,
                latest_update=latest_update,
                resolved=resolved,
            )
        except ValidationError as exc:
            await audit(caller, "report_incident", "invalid")
            # Fields and rules only: the SDK logs a tool's error, and the values are the caller's.
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
                for error in exc.errors()
            )
            raise ToolError(f"Not a valid incident: {problems}") from None
        async with failures(caller, "report_incident", "acknowledgement"):
            accepted = await services.incidents.report(report, source="mcp")
        await audit(caller, "report_incident", "accepted")
        return {"id": accepted.id, "accepted": True}

    @server.tool()
    async def list_incidents(ctx: Context, include_resolved: bool = False) -> dict[str, Any]:
        """The ongoing IT incidents (outages IT knows about), most recently updated first, as
        a status page shows them: title, status, since when, the latest update and how many
        tickets are linked. `include_resolved` adds those resolved in the last hours."""
        caller = caller_of(ctx)
        staff = bool(caller.roles & STAFF)
        known = await services.board.listing(resolved=include_resolved)
        await audit(caller, "list_incidents", "read")
        return {"incidents": [_incident(k, staff) for k in known]}

    @server.tool()
    async def get_incident(id: str, ctx: Context) -> dict[str, Any]:  # the incident's own name
        """One incident by its `id`, ongoing or resolved in the last hours: title, status,
        since when, the latest update and how many tickets are linked."""
        caller = caller_of(ctx)
        known = await services.board.get(id) if INCIDENT_ID.fullmatch(id) else None
        if known is None:
            await audit(caller, "get_incident", "unknown")
            raise ToolError("No ongoing or recent incident has that id.")
        await audit(caller, "get_incident", "read")
        return _incident(known, bool(caller.roles & STAFF))

    return server


def asgi_app(
    server: MCPServer,
    resolver: IdentityResolver,
    settings: GatewaySettings,
    limiter: RateLimiter | None,
    directory: Directory,
) -> ASGIApp:
    """The endpoint: the SDK's streamable HTTP transport (stateless, JSON responses) behind
    :class:`McpAuth`. DNS-rebinding checks are off: a browser on a rebound name cannot add the
    bearer token every request needs."""
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    transport = StreamableHTTPASGIApp(server.session_manager)
    return McpAuth(transport, resolver, settings, limiter, directory)
