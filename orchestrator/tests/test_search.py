"""Searches from other systems: the orchestrator's retrieval on a real Chroma collection with the
real query encoder, answered over a real valkey on the asking gateway's reply stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import SearchRequested, TurnReply
from contracts.readers import Readers
from contracts.settings import ServiceSettings
from contracts.topics import Topic, reply_stream
from orchestrator import handlers, search
from orchestrator.embedding import QueryEncoder
from orchestrator.retrieval import Retriever
from orchestrator.tests.articles import ARTICLES, VPN_BODY, VPN_URL, add, new_collection, put

REPLIES = reply_stream("gw-test")


@pytest.fixture
def retriever(tmp_path: Path, encoder: QueryEncoder) -> Retriever:
    collection = new_collection(tmp_path)
    for url, title, section, body in ARTICLES:
        add(collection, encoder, url, title, section, body)
    add(collection, encoder, VPN_URL, "Install the VPN client", "On Windows", VPN_BODY)
    return Retriever(encoder, collection)


def request(query: str, limit: int = 3, reply_to: str = REPLIES, **fields: Any) -> SearchRequested:
    return SearchRequested(
        correlation_id="search-1",
        conversation_id="search-1",
        user_id="mcp:itsm",
        authenticated=True,
        query=query,
        limit=limit,
        reply_to=reply_to,
        **fields,
    )


async def test_the_best_passages_come_first_with_what_a_caller_cites(
    retriever: Retriever,
) -> None:
    found = await search.search(retriever, request("my printer is not in the list", limit=2))

    assert len(found) == 2
    best = found[0]
    assert (best.url, best.title) == ("https://kb.example/printer", "Add a network printer")
    assert best.section == "Add a network printer"
    assert best.snippet.startswith("Every floor has a shared laser printer.")
    assert found[1].url != best.url  # one chunk per article here
    assert 0.0 < best.score <= 1.0


async def test_the_limit_bounds_the_passages(retriever: Retriever) -> None:
    assert len(await search.search(retriever, request("password", limit=1))) == 1
    assert len(await search.search(retriever, request("password", limit=20))) == 5


@pytest.fixture
async def bus(fresh_redis_url: str, retriever: Retriever) -> AsyncIterator[Bus]:
    settings = ServiceSettings(redis_url=fresh_redis_url, graceful_timeout_s=5)
    running = Bus(settings, "orchestrator")
    handlers.register_search(running, retriever, concurrency=1)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


async def replies(client: aioredis.Redis, stream: str, count: int = 1) -> list[TurnReply]:
    deadline = time.monotonic() + 30
    while len(entries := await client.xrange(stream)) < count:
        assert time.monotonic() < deadline, "no reply in time"
        await asyncio.sleep(0.05)
    return [decode_entry(fields, TurnReply) for _, fields in entries]


async def test_a_search_request_is_answered_on_the_gateways_reply_stream(
    bus: Bus, fresh_redis_url: str
) -> None:
    client = aioredis.from_url(fresh_redis_url)
    try:
        asked = request("licence server LX-7731", groups=["it-staff"])
        await bus.publish(Topic.SEARCH_REQUESTED, asked)
        [reply] = await replies(client, REPLIES)
        # A redelivered request answers with the same event, which the gateway de-duplicates.
        await bus.publish(Topic.SEARCH_REQUESTED, asked)
        again = await replies(client, REPLIES, 2)
    finally:
        await client.aclose()

    assert reply.kind == "search"
    assert reply.correlation_id == "search-1"
    assert reply.passages is not None
    assert reply.passages[0].url == "https://kb.example/licence"
    assert again[1].event_id == reply.event_id


async def test_a_request_naming_another_stream_is_not_answered_there(
    bus: Bus, fresh_redis_url: str
) -> None:
    client = aioredis.from_url(fresh_redis_url)
    try:
        await bus.publish(Topic.SEARCH_REQUESTED, request("printer", reply_to=Topic.TICKET_EVENTS))
        await bus.publish(Topic.SEARCH_REQUESTED, request("printer"))
        await replies(client, REPLIES)  # handled in order: the first was dropped by now
        assert await client.xlen(Topic.TICKET_EVENTS) == 0
    finally:
        await client.aclose()


async def test_a_search_shows_only_what_its_caller_may_read(
    retriever: Retriever, encoder: QueryEncoder
) -> None:
    put(
        retriever.collection,
        encoder,
        "https://wiki.example/it/printer-admin",
        "Printer fleet administration",
        "Printer fleet administration",
        "Printer fleet admins reset a printer's queue from the Lark console with the fleet key.",
        Readers(public=False, groups=("printer-admins",)),
    )
    question = "reset a printer queue from the console"
    admins = await search.search(retriever, request(question, limit=5, groups=["printer-admins"]))
    others = await search.search(retriever, request(question, limit=5, groups=["it-staff"]))
    anonymous = await search.search(
        retriever,
        request(question, limit=5, groups=["printer-admins"]).model_copy(
            update={"authenticated": False}
        ),
    )
    assert admins[0].url == "https://wiki.example/it/printer-admin"
    for found in (others, anonymous):
        assert found, "the public articles are still found"
        assert not [p for p in found if "printer-admin" in p.url or "Lark" in p.snippet]
