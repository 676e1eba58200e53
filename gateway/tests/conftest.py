"""Fixtures and helpers of the gateway's tests: the app ``create_app`` builds, on a real valkey,
and the callers and services that talk to it.

Each test that runs the app gets a database of its own on the session's server (the root
conftest's ``fresh_redis_url``): the gateway's streams and keys have fixed names, so a test starts
from an empty database without flushing anything another test holds.

* ``settings``: :func:`gateway_settings` on the test's database with the module's
  ``settings_overrides`` (a module overrides that fixture to configure what it tests);
  ``make_settings`` builds more of them, for a second app or one setting changed.
* ``client``: a ``TestClient`` around the app with its lifespan run (bus connected, consumers
  subscribed, the anonymous key loaded); :func:`serve` runs the app on a real uvicorn server
  instead, for a browser or for requests that must really run side by side.
* ``raw`` (sync) and ``redis`` (async): clients on the test's database for its own reads and
  writes.
* Callers: :func:`admin`, :func:`bearer`, :func:`user_token` and :func:`user_headers` (HS256
  tokens signed with :data:`JWT_SECRET`), :func:`anonymous_user`.
* The other services' side: :func:`publish` (as another service would, through a bus of its
  own), :func:`stream_events`, :func:`handled_by_the_gateway`, :func:`answered_turn` (a turn
  sent and answered as the orchestrator would answer it), and for the channels' turns
  :func:`questions` and :func:`one_question` (what reached the bus), :func:`answer` and
  :func:`answer_next` (answered as the orchestrator would).
* :data:`INJECTION`, markup the admin page must show as text; :func:`admin_page` in Chromium.
* Helpers of other kinds live beside this file (``hs256_tokens.py``) or, used beyond the
  gateway's tests, in ``tests/support`` (``mcp_client.py``: the MCP SDK's client).

Tests wait with :func:`tests.support.wait_until` / :func:`tests.support.wait_until_sync`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

import jwt
import pytest
import redis.asyncio as aioredis
import uvicorn
from fastapi.testclient import TestClient
from redis import Redis

from contracts.bus import Bus, decode_entry
from contracts.events import (
    Action,
    AnswerBody,
    AuditRecorded,
    Citation,
    Event,
    MessageReceived,
    TurnReply,
)
from contracts.topics import Group, Topic, reply_stream
from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.conversations import INDEX_PREFIX
from gateway.turns import Submitted, TurnStore
from tests.support import free_port, wait_until_sync
from tests.support.stack import StackUser

E = TypeVar("E", bound=Event)

ADMIN_TOKEN = "admin-token-for-gateway-tests-0123456789"
"""The admin token of every test app (``DESKPILOT_ADMIN_TOKEN``)."""
JWT_SECRET = "jwt-secret-for-gateway-tests-0123456789abcdef"
"""What :func:`user_token` signs with; a module whose app takes user tokens sets ``jwt_secret``
to it in its ``settings_overrides``."""

# -- settings and the app ------------------------------------------------------------------------


def gateway_settings(redis_url: str, **overrides: Any) -> GatewaySettings:
    """Settings of a test app on ``redis_url``: :data:`ADMIN_TOKEN`, an instance (so a reply
    stream) of its own, heartbeats and shutdown short enough for tests; ``overrides`` on top."""
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "admin_token": ADMIN_TOKEN,
        "instance_id": f"test-{uuid4().hex[:8]}",
        "heartbeat_interval_s": 0.5,
        "graceful_timeout_s": 5,
    }
    return GatewaySettings.model_validate(values | overrides)


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    """What this module's app differs in from :func:`gateway_settings`: a module that tests
    something configurable overrides this fixture."""
    return {}


@pytest.fixture
def make_settings(
    fresh_redis_url: str, settings_overrides: dict[str, Any]
) -> Callable[..., GatewaySettings]:
    """Settings on the test's database with the module's overrides and the call's on top; each
    call is another gateway instance (an instance id of its own)."""

    def make(**more: Any) -> GatewaySettings:
        return gateway_settings(fresh_redis_url, **(settings_overrides | more))

    return make


@pytest.fixture
def settings(make_settings: Callable[..., GatewaySettings]) -> GatewaySettings:
    return make_settings()


@pytest.fixture
def client(settings: GatewaySettings) -> Iterator[TestClient]:
    """The app, lifespan run, behind a ``TestClient`` (an error inside a request fails the test
    with its traceback)."""
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@contextmanager
def serve(settings: GatewaySettings) -> Iterator[str]:
    """The app on a real uvicorn server on a free loopback port, in a thread; yields its URL."""
    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until_sync(lambda: server.started or not thread.is_alive(), 30)
        assert server.started, "the gateway's server stopped before it started"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


INJECTION = '<img src=x onerror="window.__pwned=1">'
"""Markup that runs a script if a page shows it unescaped: what an admin page must show as text."""

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic"]


@contextmanager
def admin_page(
    url: str, chromium: Path, errors: list[str], width: int = 1100, height: int = 900
) -> Iterator[Any]:
    """The admin page of the gateway at ``url`` in the system Chromium, signed in with the admin
    token; the page's script errors are appended to ``errors``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{url}/admin")
            page.fill("#admin-token", ADMIN_TOKEN)
            page.click("#signin button[type=submit]")
            yield page
        finally:
            browser.close()


# -- Redis ---------------------------------------------------------------------------------------


@pytest.fixture
def raw(fresh_redis_url: str) -> Iterator[Redis]:
    """A client on the test's database (bytes in, bytes out), the one ``settings`` names."""
    with Redis.from_url(fresh_redis_url) as connection:
        yield connection


@pytest.fixture
async def redis(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """An async client on the test's database, the one ``settings`` names."""
    async with aioredis.from_url(fresh_redis_url) as connection:
        yield connection


# -- callers -------------------------------------------------------------------------------------


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def admin() -> dict[str, str]:
    """The headers of whoever holds the admin token."""
    return bearer(ADMIN_TOKEN)


def user_token(sub: str | None = "emp-1042", *, secret: str = JWT_SECRET, **claims: Any) -> str:
    """An HS256 user token for ``sub``, valid for five minutes; ``claims`` add to or replace the
    payload's (a None leaves that claim out)."""
    payload: dict[str, Any] = {"sub": sub, "exp": int(time.time()) + 300} | claims
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, secret, "HS256")


def user_headers(sub: str, **claims: Any) -> dict[str, str]:
    """The headers of an employee signed in with a :func:`user_token`."""
    return bearer(user_token(sub, **claims))


def anonymous_user(client: TestClient) -> StackUser:
    """A new anonymous user of the app (``POST /api/anonymous``): the token that makes turns,
    conversations and attachments theirs, and the user id it names."""
    issued = client.post("/api/anonymous")
    assert issued.status_code == 201, issued.text
    body = issued.json()
    return StackUser(token=str(body["anonymous_token"]), user_id=str(body["user_id"]))


# -- the other services' side --------------------------------------------------------------------


def publish(settings: GatewaySettings, topic: str, events: Sequence[Event]) -> None:
    """Publish ``events`` on ``topic`` as another service would, through a bus of its own."""

    async def run() -> None:
        bus = Bus(settings, "test-publisher")
        await bus.broker.connect()
        try:
            for event in events:
                await bus.publish(topic, event)
        finally:
            await bus.stop()

    asyncio.run(run())


def stream_events(raw: Redis, topic: str, model: type[E]) -> list[E]:
    """Every event on ``topic``, oldest first."""
    entries: Any = raw.xrange(topic)
    return [decode_entry(fields, model) for _, fields in entries]


def handled_by_the_gateway(raw: Redis, topic: str) -> bool:
    """Every entry of ``topic`` read and acknowledged by the gateway's consumer group."""
    groups: Any = raw.xinfo_groups(topic)
    [gateway] = [g for g in groups if g["name"] == Group.GATEWAY.encode()]
    return bool(gateway["lag"] == 0 and gateway["pending"] == 0)


def answered_turn(
    client: TestClient,
    settings: GatewaySettings,
    user: StackUser,
    *,
    conversation: str | None = None,
    action: Action = Action.ANSWER,
    category: str | None = "connectivity",
    urls: Sequence[str] = (),
    crawled: bool = False,
    decision: AuditRecorded | None = None,
) -> tuple[str, str]:
    """A turn of ``user``'s, answered as the orchestrator would answer it (citing ``urls``, after
    a crawl's progress when ``crawled``, its ``decision`` record on the audit stream); returns
    the turn's id and its conversation's once the app shows it done."""
    conversation = conversation or uuid4().hex
    turn_id = uuid4().hex

    async def submit() -> None:
        # What POST /api/chat records (the message itself is not needed here).
        async with aioredis.from_url(settings.redis_url) as connection:
            turns = TurnStore(connection, settings.turn_ttl_s)
            await turns.create(Submitted(turn_id, conversation, None), user.user_id)
            await connection.sadd(INDEX_PREFIX + conversation, f"turn:{turn_id}")

    asyncio.run(submit())
    if decision is not None:
        publish(settings, Topic.AUDIT, [decision.model_copy(update={"correlation_id": turn_id})])
    envelope = {"correlation_id": turn_id, "conversation_id": conversation}
    replies: list[Event] = []
    if crawled:
        replies.append(TurnReply(kind="progress", stage="crawling", **envelope))
    body = AnswerBody(
        answer="From the article [1]",
        action=action,
        category=category,
        crawled=crawled,
        citations=[
            Citation(n=n, url=url, title=url.rsplit("/", 1)[-1], snippet="steps")
            for n, url in enumerate(urls, 1)
        ],
    )
    replies.append(TurnReply(kind="answer", body=body, **envelope))
    publish(settings, reply_stream(settings.instance_id), replies)

    def done() -> bool:
        turn = client.get(f"/api/turns/{turn_id}", headers=user.headers).json()
        return bool(turn.get("status") == "done")

    wait_until_sync(done)
    return turn_id, conversation


KB_URL = "https://it.northwind.example/kb/vpn-password-reset"
"""The page :func:`answer` cites."""


def questions(raw: Redis) -> list[MessageReceived]:
    """The questions the gateway put on the bus for the orchestrator, oldest first."""
    return stream_events(raw, Topic.MESSAGE_RECEIVED, MessageReceived)


def answer_body(**fields: Any) -> AnswerBody:
    """An answer citing :data:`KB_URL`; ``fields`` replace any of its fields."""
    values: dict[str, Any] = {
        "answer": "Open **Settings** and choose Reset [1].",
        "action": Action.ANSWER,
        "citations": [Citation(n=1, url=KB_URL, title="VPN password reset", snippet="steps")],
        "category": "connectivity",
    }
    return AnswerBody(**(values | fields))


def answer(settings: GatewaySettings, message: MessageReceived, **fields: Any) -> None:
    """Answer ``message`` as the orchestrator would."""
    reply = TurnReply(
        kind="answer",
        correlation_id=message.correlation_id,
        conversation_id=message.conversation_id,
        body=answer_body(**fields),
    )
    publish(settings, reply_stream(settings.instance_id), [reply])


def one_question(raw: Redis, count: int = 1) -> MessageReceived:
    """The ``count``-th question on the bus, once it is there."""

    def arrived() -> MessageReceived | None:
        found = questions(raw)
        return found[count - 1] if len(found) >= count else None

    return wait_until_sync(arrived)


def answer_next(
    settings: GatewaySettings, raw: Redis, count: int, **fields: Any
) -> MessageReceived:
    """Wait for the ``count``-th question on the bus and answer it (in a thread: it blocks)."""
    message = one_question(raw, count)
    answer(settings, message, **fields)
    return message
