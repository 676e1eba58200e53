"""The MCP server, driven by the ``mcp`` SDK's own client over streamable HTTP, against the
gateway on a real server and a real valkey (the tests answer as the orchestrator would)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from redis import Redis

from contracts.events import (
    AuditRecorded,
    IncidentReported,
    MessageReceived,
    TicketChange,
    TicketEvent,
    TicketRecord,
)
from contracts.topics import Topic
from gateway.config import GatewaySettings
from gateway.tests.conftest import JWT_SECRET, publish, serve, stream_events, user_token
from gateway.tests.test_slack import KB_URL, answer, questions
from tests.support import wait_until_sync

SERVICE_TOKEN = "itsm-agent-token-0123456789abcdefghij"
NOC_TOKEN = "noc-monitoring-token-0123456789abcdefgh"
TOOLS = {"ask", "search_knowledge_base", "open_ticket", "get_ticket", "report_incident"}


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    clients = {
        "itsm": {"token": SERVICE_TOKEN, "roles": ["employee"]},
        "noc": {"token": NOC_TOKEN, "roles": ["technician"]},
    }
    return {"mcp_enabled": True, "mcp_clients": json.dumps(clients), "jwt_secret": JWT_SECRET}


@pytest.fixture
def gateway(settings: GatewaySettings) -> Iterator[str]:
    with serve(settings) as url:
        yield url


@asynccontextmanager
async def session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An initialised MCP session with the gateway, as ``Authorization: Bearer token``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def answer_next(
    settings: GatewaySettings, raw: Redis, count: int, **fields: Any
) -> MessageReceived:
    """Wait for the ``count``-th question on the bus and answer it (in a thread: it blocks)."""
    message = wait_until_sync(lambda: len(questions(raw)) >= count and questions(raw)[count - 1])
    answer(settings, message, **fields)
    return message


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    content = result.structured_content
    assert isinstance(content, dict), result
    return content


async def test_the_sdks_client_lists_the_tools(gateway: str) -> None:
    async with session(gateway, SERVICE_TOKEN) as client:
        tools = await client.list_tools()
    assert {tool.name for tool in tools.tools} == TOOLS
    ask = next(tool for tool in tools.tools if tool.name == "ask")
    assert ask.input_schema["required"] == ["question"]


async def test_ask_is_a_turn_of_the_caller_answered_with_citations(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    async with session(gateway, SERVICE_TOKEN) as client:
        call = asyncio.create_task(
            client.call_tool("ask", {"question": "How do I reset my VPN password?"})
        )
        message = await asyncio.to_thread(answer_next, settings, raw, 1)
        result = structured(await call)
    assert message.user_id == "mcp:itsm"
    assert message.authenticated is True
    assert message.text == "How do I reset my VPN password?"  # sealed for the redactor
    assert result["citations"][0]["url"] == KB_URL
    assert result["answer"].endswith("[1].")
    assert result["turn_id"] == message.correlation_id
    audit = stream_events(raw, Topic.AUDIT, AuditRecorded)
    [record] = [a for a in audit if a.action == "tool_call"]
    assert record.details == {"tool": "ask", "outcome": "answer", "caller": "service"}
    assert "VPN" not in record.model_dump_json()  # the question is not audited


async def test_a_follow_up_continues_the_callers_conversation_and_nobody_elses(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    token = user_token("emp-1042")
    async with session(gateway, token) as client:
        first = asyncio.create_task(client.call_tool("ask", {"question": "VPN drops"}))
        asked = await asyncio.to_thread(answer_next, settings, raw, 1)
        conversation = structured(await first)["conversation_id"]
        again = asyncio.create_task(
            client.call_tool("ask", {"question": "still", "conversation_id": conversation})
        )
        follow_up = await asyncio.to_thread(answer_next, settings, raw, 2)
        await again
    assert asked.user_id == follow_up.user_id == "emp-1042"
    assert follow_up.conversation_id == conversation
    async with session(gateway, SERVICE_TOKEN) as other:
        refused = await other.call_tool("ask", {"question": "x", "conversation_id": conversation})
    assert refused.is_error
    assert len(questions(raw)) == 2


async def test_search_returns_the_cited_passages(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    async with session(gateway, SERVICE_TOKEN) as client:
        call = asyncio.create_task(client.call_tool("search_knowledge_base", {"query": "vpn"}))
        await asyncio.to_thread(answer_next, settings, raw, 1)
        result = structured(await call)
    assert result["results"] == [
        {"n": 1, "url": KB_URL, "title": "VPN password reset", "snippet": "steps"}
    ]


async def test_open_ticket_asks_for_a_technician(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    ticket = {"key": "IT-7", "url": "https://jira.example/browse/IT-7", "status": "Open"}
    async with session(gateway, SERVICE_TOKEN) as client:
        call = asyncio.create_task(
            client.call_tool("open_ticket", {"description": "Laptop will not boot"})
        )
        message = await asyncio.to_thread(
            answer_next, settings, raw, 1, action="escalated", ticket=ticket
        )
        result = structured(await call)
    assert message.request_ticket is True
    assert result["ticket"] == ticket


def ticket_of(settings: GatewaySettings, key: str, user: str) -> None:
    record = TicketRecord(
        key=key,
        url=f"https://jira.example/browse/{key}",
        status="Open",
        summary="VPN drops",
        user_id=user,
    )
    event = TicketEvent(
        correlation_id="t", conversation_id="c", change=TicketChange.CREATED, record=record
    )
    publish(settings, Topic.TICKET_EVENTS, [event])


async def readable(client: ClientSession, key: str) -> dict[str, Any]:
    """``get_ticket`` once the gateway's read model has the ticket (it is fed from the bus)."""
    for _ in range(100):
        result = await client.call_tool("get_ticket", {"key": key})
        if not result.is_error:
            return structured(result)
        await asyncio.sleep(0.1)
    raise AssertionError(f"{key} never readable")


async def test_a_ticket_is_read_by_its_owner_and_technicians_only(
    gateway: str, settings: GatewaySettings
) -> None:
    await asyncio.to_thread(ticket_of, settings, "IT-9", "someone-else")
    await asyncio.to_thread(ticket_of, settings, "IT-10", "mcp:itsm")
    async with session(gateway, NOC_TOKEN) as noc:
        assert (await readable(noc, "IT-9"))["key"] == "IT-9"
    async with session(gateway, SERVICE_TOKEN) as itsm:
        assert (await readable(itsm, "IT-10"))["status"] == "Open"
        assert (await itsm.call_tool("get_ticket", {"key": "IT-9"})).is_error
        assert (await itsm.call_tool("get_ticket", {"key": "x" * 5000})).is_error


async def test_only_technicians_report_incidents(gateway: str, raw: Redis) -> None:
    incident = {"id": "inc-1", "title": "VPN down", "status": "investigating"}
    async with session(gateway, SERVICE_TOKEN) as itsm:
        refused = await itsm.call_tool("report_incident", incident)
    assert refused.is_error
    assert raw.xlen(Topic.INCIDENT_REPORTED) == 0
    async with session(gateway, NOC_TOKEN) as noc:
        accepted = structured(await noc.call_tool("report_incident", incident))
    assert accepted == {"id": "inc-1", "accepted": True}
    [reported] = stream_events(raw, Topic.INCIDENT_REPORTED, IncidentReported)
    assert reported.incident.title == "VPN down"


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer",
        "Bearer not-a-client-token-0123456789abcdef",
        f"Basic {SERVICE_TOKEN}",
        f"Bearer {SERVICE_TOKEN}x",
        f"Bearer {user_token('emp-1', exp=1)}",  # expired
        f"Bearer {user_token('emp-1', secret='another-secret-0123456789abcdef0123')}",
    ],
)
def test_a_caller_without_valid_credentials_is_refused_and_nothing_reaches_the_bus(
    gateway: str, raw: Redis, authorization: str | None
) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "ask", "arguments": {"question": "forged"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    response = httpx.post(gateway + "/mcp", json=call, headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {
        "error_code": "unauthorized",
        "detail": "A valid bearer token is needed.",
    }
    assert questions(raw) == []


def test_without_mcp_enabled_there_is_no_endpoint(make_settings: Any) -> None:
    from gateway.app import create_app

    app = create_app(make_settings(mcp_enabled=False))
    assert "/mcp" not in {getattr(route, "path", "") for route in app.routes}
