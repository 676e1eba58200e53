"""The MCP server, driven by the ``mcp`` SDK's own client over streamable HTTP, against the
gateway on a real server and a real valkey (the tests answer as the orchestrator would)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from redis import Redis

from contracts.events import (
    AuditRecorded,
    Incident,
    IncidentReceived,
    IncidentReported,
    Passage,
    SearchReceived,
    TicketChange,
    TicketEvent,
    TicketRecord,
    TicketRef,
    TurnReply,
)
from contracts.topics import Group, Topic, reply_stream
from gateway.config import GatewaySettings
from gateway.incidents import NAMESPACE as INCIDENT_BOARD
from gateway.tests.conftest import (
    ADMIN_TOKEN,
    JWT_SECRET,
    KB_URL,
    answer_next,
    gateway_settings,
    handled_by_the_gateway,
    publish,
    questions,
    serve,
    stream_events,
    user_token,
)
from tests.support import wait_until_sync
from tests.support.mcp_client import TOOLS, session, structured

SERVICE_TOKEN = "itsm-agent-token-0123456789abcdefghij"
NOC_TOKEN = "noc-monitoring-token-0123456789abcdefgh"


MCP_SETTINGS: dict[str, Any] = {
    "mcp_enabled": True,
    "mcp_clients": json.dumps(
        {
            "itsm": {"token": SERVICE_TOKEN, "roles": ["employee"]},
            "noc": {"token": NOC_TOKEN, "roles": ["technician"]},
        }
    ),
    "jwt_secret": JWT_SECRET,
}


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return MCP_SETTINGS


@pytest.fixture
def gateway(settings: GatewaySettings) -> Iterator[str]:
    with serve(settings) as url:
        yield url


@pytest.fixture(scope="module")
def refusing_gateway(module_redis_url: str) -> Iterator[tuple[str, Redis]]:
    """One gateway, on a database of its own, for the tests whose every call is refused: what
    one call wrote, the next test's check of the streams would find."""
    with serve(gateway_settings(module_redis_url, **MCP_SETTINGS)) as url:
        client = Redis.from_url(module_redis_url)
        try:
            yield url, client
        finally:
            client.close()


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


PASSAGE = Passage(
    title="VPN password reset", url=KB_URL, section="Reset", snippet="steps", score=0.71
)


def searches(raw: Redis) -> list[SearchReceived]:
    return stream_events(raw, Topic.SEARCH_RECEIVED, SearchReceived)


def found_next(settings: GatewaySettings, raw: Redis, passages: list[Passage]) -> SearchReceived:
    """Wait for the next search on the bus and answer it as the orchestrator would."""
    search = wait_until_sync(lambda: searches(raw) and searches(raw)[-1])
    reply = TurnReply(
        kind="search",
        correlation_id=search.correlation_id,
        conversation_id=search.conversation_id,
        passages=passages,
    )
    publish(settings, reply_stream(settings.instance_id), [reply])
    return search


async def test_search_asks_the_orchestrator_and_returns_its_passages(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    query = "vpn fails for ana@northwind.example"
    async with session(gateway, SERVICE_TOKEN) as client:
        call = asyncio.create_task(
            client.call_tool("search_knowledge_base", {"query": query, "limit": 3})
        )
        search = await asyncio.to_thread(found_next, settings, raw, [PASSAGE])
        result = structured(await call)
    assert result == {"results": [PASSAGE.model_dump(mode="json")]}
    # The caller, for retrieval's permissions; the query only sealed, for the redactor.
    assert (search.user_id, search.groups, search.limit) == ("mcp:itsm", [], 3)
    assert search.authenticated is True
    assert search.query == query
    assert search.reply_to == reply_stream(settings.instance_id)
    [(_, stored)] = raw.xrange(Topic.SEARCH_RECEIVED)
    assert b"northwind" not in b"".join(stored.values())
    assert questions(raw) == []  # no turn
    audit = stream_events(raw, Topic.AUDIT, AuditRecorded)
    [record] = [a for a in audit if a.action == "tool_call"]
    assert record.details == {
        "tool": "search_knowledge_base",
        "outcome": "found",
        "caller": "service",
    }
    assert "vpn" not in record.model_dump_json()


async def test_a_users_ask_and_search_carry_the_groups_of_their_token(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    """Retrieval's permissions: an employee's MCP calls read what their groups may read, as
    their web chat does."""
    token = user_token("emp-7", groups=["it-staff", "finance"])
    async with session(gateway, token) as client:
        call = asyncio.create_task(client.call_tool("ask", {"question": "Where is the budget?"}))
        message = await asyncio.to_thread(answer_next, settings, raw, 1)
        structured(await call)
        call = asyncio.create_task(client.call_tool("search_knowledge_base", {"query": "budget"}))
        search = await asyncio.to_thread(found_next, settings, raw, [PASSAGE])
        structured(await call)
    assert (message.user_id, sorted(message.groups)) == ("emp-7", ["finance", "it-staff"])
    assert (search.user_id, sorted(search.groups)) == ("emp-7", ["finance", "it-staff"])
    assert message.authenticated
    assert search.authenticated


@pytest.mark.parametrize(
    "arguments",
    [{"query": ""}, {"query": "   "}, {"query": "vpn", "limit": 0}, {"query": "vpn", "limit": 21}],
)
async def test_a_search_the_gateway_cannot_run_is_an_error_and_reaches_nothing(
    gateway: str, raw: Redis, arguments: dict[str, Any]
) -> None:
    async with session(gateway, SERVICE_TOKEN) as client:
        result = await client.call_tool("search_knowledge_base", arguments)
    assert result.is_error
    assert searches(raw) == []


async def test_a_search_too_long_is_refused(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    query = "x" * (settings.max_message_bytes + 1)
    async with session(gateway, SERVICE_TOKEN) as client:
        result = await client.call_tool("search_knowledge_base", {"query": query})
    assert result.is_error
    assert "limit" in str(result.content)
    assert searches(raw) == []


async def test_a_search_nobody_answers_ends_in_an_audited_error(
    make_settings: Any, raw: Redis
) -> None:
    clients = {"itsm": {"token": SERVICE_TOKEN, "roles": ["employee"]}}
    impatient = make_settings(mcp_enabled=True, mcp_clients=json.dumps(clients), turn_timeout_s=1)
    with serve(impatient) as url:
        async with session(url, SERVICE_TOKEN) as client:
            result = await client.call_tool("search_knowledge_base", {"query": "vpn"})
    assert result.is_error
    assert "No results within 1 s; try again." in str(result.content)
    audit = stream_events(raw, Topic.AUDIT, AuditRecorded)
    [record] = [a for a in audit if a.action == "tool_call"]
    assert record.details["outcome"] == "timeout"


async def test_searches_count_against_the_callers_chat_allowance(
    make_settings: Any, raw: Redis
) -> None:
    clients = {"itsm": {"token": SERVICE_TOKEN, "roles": ["employee"]}}
    limited = make_settings(
        mcp_enabled=True, mcp_clients=json.dumps(clients), rate_limit_chat_per_user=1
    )
    with serve(limited) as url:
        async with session(url, SERVICE_TOKEN) as client:
            first = asyncio.create_task(client.call_tool("search_knowledge_base", {"query": "vpn"}))
            await asyncio.to_thread(found_next, limited, raw, [])
            assert structured(await first) == {"results": []}
            second = await client.call_tool("search_knowledge_base", {"query": "vpn again"})
    assert second.is_error
    assert "try again in" in str(second.content)
    assert len(searches(raw)) == 1


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
    incident = {
        "id": "inc-1",
        "title": "VPN down, call 020 7946 0958",
        "status": "investigating",
        "error_signatures": ["0x800704CF"],
        "started_at": "2026-11-27T08:00:00Z",
    }
    async with session(gateway, SERVICE_TOKEN) as itsm:
        refused = await itsm.call_tool("report_incident", incident)
    assert refused.is_error
    assert raw.xlen(Topic.INCIDENT_RECEIVED) == 0
    async with session(gateway, NOC_TOKEN) as noc:
        accepted = structured(await noc.call_tool("report_incident", incident))
    assert accepted == {"id": "inc-1", "accepted": True}
    # Sealed for the redactor, which publishes it redacted; nothing of it in clear on the way.
    [reported] = stream_events(raw, Topic.INCIDENT_RECEIVED, IncidentReceived)
    assert (reported.incident.title, reported.source) == (incident["title"], "mcp")
    assert reported.incident.error_signatures == ["0x800704CF"]
    assert reported.incident.started_at == datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    [(_, stored)] = raw.xrange(Topic.INCIDENT_RECEIVED)
    assert b"020 7946 0958" not in b"".join(stored.values())
    assert raw.xlen(Topic.INCIDENT_REPORTED) == 0


async def test_an_invalid_incident_is_refused_without_its_text_in_the_logs(
    gateway: str, raw: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    title = "VPN down, ask ana.quist@northwind.example " + "x" * 500
    async with session(gateway, NOC_TOKEN) as noc:
        result = await noc.call_tool(
            "report_incident", {"id": "inc 1 with spaces", "title": title, "status": "down"}
        )
    assert result.is_error
    shown = str(result.content)
    assert "title: String should have at most 500 characters" in shown
    assert "id: String should match pattern" in shown
    assert "ana.quist" not in shown
    client_side = ("mcp.client", "httpx2", "httpcore2")  # this test's own client
    logged = [r for r in caplog.records if not r.name.startswith(client_side)]
    assert any(r.name.startswith("mcp.server") for r in logged)  # the server's were captured
    assert not [r.name for r in logged if "ana.quist" in r.getMessage()]
    assert raw.xlen(Topic.INCIDENT_RECEIVED) == 0
    audit = stream_events(raw, Topic.AUDIT, AuditRecorded)
    assert [a.details["outcome"] for a in audit if a.action == "tool_call"] == ["invalid"]


def incident_on_the_bus(settings: GatewaySettings, **fields: Any) -> Incident:
    """An incident as the redactor or the status-page watcher publishes it."""
    values: dict[str, Any] = {
        "id": "inc-9",
        "title": "VPN gateway unreachable",
        "status": "investigating",
        "affected_services": ["VPN"],
        "error_signatures": ["0x800704CF"],
        "started_at": "2026-11-27T08:55:00Z",
        "latest_update": "Failing over to the second gateway.",
        "ticket_key": "IT-1",
        "category": "connectivity",
    }
    incident = Incident.model_validate(values | fields)
    event = IncidentReported(
        correlation_id=incident.id, conversation_id=incident.id, incident=incident
    )
    publish(settings, Topic.INCIDENT_REPORTED, [event])
    return incident


def linked(settings: GatewaySettings, incident_id: str, *keys: str) -> None:
    events = [
        TicketEvent(
            correlation_id=incident_id,
            conversation_id=f"conv-{key}",
            change=TicketChange.LINKED,
            ticket=TicketRef(key=key, url=f"https://jira.example/browse/{key}", status="Open"),
            incident_id=incident_id,
        )
        for key in keys
    ]
    publish(settings, Topic.TICKET_EVENTS, events)


async def listed(client: ClientSession, count: int, **arguments: Any) -> list[dict[str, Any]]:
    """``list_incidents`` once it shows ``count`` incidents (the gateway reads them off the bus)."""
    for _ in range(100):
        incidents = structured(await client.call_tool("list_incidents", arguments))["incidents"]
        if len(incidents) == count:
            return list(incidents)
        await asyncio.sleep(0.1)
    raise AssertionError(f"never {count} incidents")


def test_incidents_are_kept_as_long_as_the_gateway_settings_say(
    monkeypatch: pytest.MonkeyPatch, make_settings: Any, raw: Redis
) -> None:
    monkeypatch.setenv("GATEWAY_INCIDENT_RESOLVED_KEEP_S", "120")
    monkeypatch.setenv("GATEWAY_INCIDENT_STALE_AFTER_S", "600")
    settings = make_settings()
    with serve(settings):
        incident_on_the_bus(settings)
        incident_on_the_bus(settings, id="inc-10", status="resolved")
        wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.INCIDENT_REPORTED))
    assert 590 < raw.ttl(f"{INCIDENT_BOARD}:record:inc-9") <= 600
    assert 110 < raw.ttl(f"{INCIDENT_BOARD}:record:inc-10") <= 120


async def test_anyone_admitted_reads_ongoing_incidents_as_a_status_page_shows_them(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    await asyncio.to_thread(incident_on_the_bus, settings)
    await asyncio.to_thread(linked, settings, "inc-9", "IT-20", "IT-21")
    await asyncio.to_thread(
        wait_until_sync, lambda: handled_by_the_gateway(raw, Topic.TICKET_EVENTS)
    )
    async with session(gateway, user_token("emp-1042")) as employee:
        [shown] = await listed(employee, 1)
        one = structured(await employee.call_tool("get_incident", {"id": "inc-9"}))
    assert (
        shown
        == one
        == {
            "id": "inc-9",
            "title": "VPN gateway unreachable",
            "status": "investigating",
            "affected_services": ["VPN"],
            "latest_update": "Failing over to the second gateway.",
            "url": None,
            "since": "2026-11-27T08:55:00+00:00",
            "updated_at": None,
            "resolved": False,
            "linked_tickets": 2,
        }
    )
    async with session(gateway, NOC_TOKEN) as noc:
        [staff] = await listed(noc, 1)
    assert staff == shown | {
        "linked_ticket_keys": ["IT-20", "IT-21"],
        "error_signatures": ["0x800704CF"],
        "ticket_key": "IT-1",
        "category": "connectivity",
    }
    audit = stream_events(raw, Topic.AUDIT, AuditRecorded)
    tools = [a.details["tool"] for a in audit if a.action == "tool_call"]
    assert tools.count("list_incidents") >= 2
    assert "get_incident" in tools


async def test_the_newest_report_wins_and_resolved_ones_leave_the_list(
    gateway: str, settings: GatewaySettings, raw: Redis
) -> None:
    await asyncio.to_thread(
        incident_on_the_bus, settings, status="identified", updated_at="2026-11-27T09:10:00Z"
    )
    # An older report arriving late changes nothing.
    await asyncio.to_thread(
        incident_on_the_bus, settings, status="investigating", updated_at="2026-11-27T09:00:00Z"
    )
    await asyncio.to_thread(
        incident_on_the_bus, settings, id="inc-10", title="Printers offline", status="monitoring"
    )
    await asyncio.to_thread(
        wait_until_sync, lambda: handled_by_the_gateway(raw, Topic.INCIDENT_REPORTED)
    )
    async with session(gateway, SERVICE_TOKEN) as client:
        shown = await listed(client, 2)
        assert {i["id"]: i["status"] for i in shown} == {
            "inc-9": "identified",
            "inc-10": "monitoring",
        }
        await asyncio.to_thread(
            incident_on_the_bus, settings, status="resolved", updated_at="2026-11-27T10:00:00Z"
        )
        [still] = await listed(client, 1)
        assert still["id"] == "inc-10"
        with_resolved = await listed(client, 2, include_resolved=True)
        over = structured(await client.call_tool("get_incident", {"id": "inc-9"}))
    assert {i["id"] for i in with_resolved} == {"inc-9", "inc-10"}
    assert (over["status"], over["resolved"]) == ("resolved", True)


async def test_an_incident_without_a_start_is_shown_since_its_first_report(
    gateway: str, settings: GatewaySettings
) -> None:
    first = "2026-11-27T07:00:00Z"
    await asyncio.to_thread(
        incident_on_the_bus, settings, id="inc-11", started_at=None, updated_at=first
    )
    await asyncio.to_thread(
        incident_on_the_bus,
        settings,
        id="inc-11",
        started_at=None,
        updated_at="2026-11-27T07:30:00Z",
        status="identified",
    )
    async with session(gateway, SERVICE_TOKEN) as client:
        for _ in range(100):
            [shown] = await listed(client, 1)
            if shown["status"] == "identified":
                break
            await asyncio.sleep(0.1)
    assert shown["status"] == "identified"
    assert shown["since"] == "2026-11-27T07:00:00+00:00"
    assert shown["updated_at"] == "2026-11-27T07:30:00+00:00"


@pytest.mark.parametrize("incident_id", ["inc-404", "", "x" * 5000, "inc-9 OR *", "../inc-9"])
async def test_an_unknown_or_odd_incident_id_is_an_error(
    gateway: str, settings: GatewaySettings, raw: Redis, incident_id: str
) -> None:
    await asyncio.to_thread(incident_on_the_bus, settings)
    await asyncio.to_thread(
        wait_until_sync, lambda: handled_by_the_gateway(raw, Topic.INCIDENT_REPORTED)
    )
    async with session(gateway, SERVICE_TOKEN) as client:
        result = await client.call_tool("get_incident", {"id": incident_id})
    assert result.is_error
    assert "No ongoing or recent incident has that id." in str(result.content)


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
        f"Bearer {ADMIN_TOKEN}",  # a credential, not a person: it calls no tools
    ],
)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("ask", {"question": "forged"}),
        ("search_knowledge_base", {"query": "forged"}),
        ("list_incidents", {}),
        ("get_incident", {"id": "inc-1"}),
        ("report_incident", {"id": "inc-1", "title": "forged", "status": "investigating"}),
    ],
)
def test_a_caller_without_valid_credentials_is_refused_and_nothing_reaches_the_bus(
    refusing_gateway: tuple[str, Redis],
    authorization: str | None,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    gateway, raw = refusing_gateway
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
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
    written = {s: raw.xlen(s) for s in raw.scan_iter(_type="stream")}
    assert not any(written.values()), written  # no stream holds anything, not even audit


def test_without_mcp_enabled_there_is_no_endpoint(make_settings: Any) -> None:
    from gateway.app import create_app

    app = create_app(make_settings(mcp_enabled=False))
    assert "/mcp" not in {getattr(route, "path", "") for route in app.routes}


def test_without_mcp_enabled_no_incident_is_kept(make_settings: Any, raw: Redis) -> None:
    """MCP is the incident board's only reader: with MCP off the gateway keeps no incident and
    leaves incident.reported unread in its group (for the board, should MCP be switched on)."""
    settings = make_settings(mcp_enabled=False)
    with serve(settings):
        incident_on_the_bus(settings)
        linked(settings, "inc-9", "IT-7")
        wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.TICKET_EVENTS))
    groups: Any = raw.xinfo_groups(Topic.INCIDENT_REPORTED)
    [gateway] = [g for g in groups if g["name"] == Group.GATEWAY.encode()]
    assert (gateway["lag"], gateway["pending"]) == (1, 0)
    assert not list(raw.scan_iter(match=f"{INCIDENT_BOARD}*"))
