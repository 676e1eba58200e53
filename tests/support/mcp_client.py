"""An MCP client of the gateway's MCP server, as the tests drive it: the ``mcp`` SDK's own client
over streamable HTTP, and what a caller expects to find there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

TOOLS = {
    "ask",
    "search_knowledge_base",
    "open_ticket",
    "get_ticket",
    "report_incident",
    "list_incidents",
    "get_incident",
}
"""The tools the gateway lists to any caller."""


@asynccontextmanager
async def session(url: str, token: str, timeout_s: float = 60) -> AsyncIterator[ClientSession]:
    """An initialised MCP session with the gateway, as ``Authorization: Bearer token``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout_s) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def structured(result: Any) -> dict[str, Any]:
    """A tool's structured result; the test fails if the call was an error."""
    assert not result.is_error, result.content
    content = result.structured_content
    assert isinstance(content, dict), result
    return content
