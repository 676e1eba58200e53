"""The MCP server's searches and incidents on the shared stack, through the ``mcp`` SDK's own
client: a search answered by the orchestrator's retrieval over the bus, an incident reported with
personal data and a secret in it that no stream or log shows in clear, and callers without valid
credentials refused before anything reaches the bus."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any
from uuid import uuid4

import httpx
import pytest
import redis
from mcp.client.session import ClientSession

from deploy.runner import Stack
from tests.support.mcp_client import TOOLS, session, structured
from tests.support.stack import SHARED_MCP_NOC_TOKEN, SHARED_MCP_TOKEN

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]

KB_HOST = "https://it.northwind.example/"
"""Where the shared stack's knowledge base (the demo articles) lives."""
RAW_AND_REQUESTS = ("message.received", "search.received", "search.requested", "incident.received")


def everything_on_streams(client: redis.Redis) -> bytes:
    """Every entry of every stream of the stack's Redis (dead letters and replies included)."""
    found = []
    for stream in client.scan_iter(_type="stream", count=1000):
        for _, fields in client.xrange(stream):
            found.append(b"".join(k + v for k, v in fields.items()))
    return b"\n".join(found)


def everything_logged(stack: Stack) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (stack.data_dir / "logs").glob("*"))


async def test_the_sdks_client_searches_the_knowledge_base_through_the_orchestrator(
    stack: Stack,
) -> None:
    email = f"ana.{uuid4().hex[:10]}@fastmail.com"
    async with session(stack.url, SHARED_MCP_TOKEN) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool(
            "search_knowledge_base",
            {"query": f"How do I reset my VPN password? I am {email}", "limit": 4},
        )
    assert tools == TOOLS
    passages = structured(result)["results"]
    assert 1 <= len(passages) <= 4
    for passage in passages:
        assert passage["url"].startswith(KB_HOST), passage
        assert passage["title"]
        assert passage["snippet"]
        assert 0.0 < passage["score"] <= 1.0
    assert any("vpn" in p["title"].lower() for p in passages), passages
    client_redis = redis.Redis.from_url(stack.redis_url)
    assert email.encode() not in everything_on_streams(client_redis)
    assert email not in everything_logged(stack)


def incident_recorded(client: redis.Redis, incident_id: str) -> bool:
    """The orchestrator keeps the incident (its own key, read here as an operator would)."""
    return bool(client.exists(f"deskpilot:orchestrator:incident:{{incidents}}:id:{incident_id}"))


async def listed(client: ClientSession, incident_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        shown = structured(await client.call_tool("list_incidents", {"include_resolved": True}))
        for incident in shown["incidents"]:
            if incident["id"] == incident_id:
                return dict(incident)
        await asyncio.sleep(0.2)
    raise AssertionError(f"{incident_id} never listed")


async def test_an_incidents_personal_data_and_secrets_reach_no_stream_and_no_log(
    stack: Stack,
) -> None:
    incident_id = f"inc-mcp-{uuid4().hex[:8]}"
    email = f"plotter.{uuid4().hex[:10]}@fastmail.com"
    phone = "+44 20 7946 0958"
    api_key = "sk_live_" + secrets.token_hex(12)
    report = {
        "id": incident_id,
        "title": f"Plotter queue stalled, reported by {email}",
        "status": "investigating",
        "affected_services": ["Plotter queue"],
        "latest_update": f"Vendor rotated key {api_key}; call {phone} for news.",
    }
    async with session(stack.url, SHARED_MCP_NOC_TOKEN) as noc:
        accepted = structured(await noc.call_tool("report_incident", report))
    assert accepted == {"id": incident_id, "accepted": True}
    async with session(stack.url, SHARED_MCP_TOKEN) as employee:
        shown = await listed(employee, incident_id)
    # Recorded, redacted: by the gateway (read back) and the orchestrator (matched on).
    assert shown["title"] == "Plotter queue stalled, reported by <EMAIL_ADDRESS_1>"
    assert shown["status"] == "investigating"
    assert "linked_ticket_keys" not in shown  # an employee sees what a status page shows
    client = redis.Redis.from_url(stack.redis_url)
    deadline = time.monotonic() + 30
    while not incident_recorded(client, incident_id):
        assert time.monotonic() < deadline, "the orchestrator never recorded the incident"
        await asyncio.sleep(0.2)
    try:
        on_streams = everything_on_streams(client)
        logged = everything_logged(stack)
        for value in (email, phone, api_key, api_key[8:]):
            assert value.encode() not in on_streams, value
            assert value not in logged, value
    finally:
        async with session(stack.url, SHARED_MCP_NOC_TOKEN) as noc:
            over = report | {"status": "resolved", "resolved": True, "latest_update": "Fixed."}
            structured(await noc.call_tool("report_incident", over))


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer forged-token-0123456789abcdef0123456789", f"Basic {SHARED_MCP_TOKEN}"],
    ids=["missing", "forged", "not-bearer"],
)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_knowledge_base", {"query": "forged search"}),
        ("report_incident", {"id": "inc-forged", "title": "forged", "status": "investigating"}),
        ("list_incidents", {}),
    ],
)
def test_a_caller_without_valid_credentials_is_refused_and_nothing_reaches_the_bus(
    stack: Stack, authorization: str | None, tool: str, arguments: dict[str, Any]
) -> None:
    client = redis.Redis.from_url(stack.redis_url)

    def added() -> dict[str, int]:
        return {
            stream: int(client.xinfo_stream(stream)["entries-added"])
            for stream in RAW_AND_REQUESTS
            if client.exists(stream)
        }

    before = added()
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    response = httpx.post(stack.url + "/mcp", json=call, headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert added() == before
