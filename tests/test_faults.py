"""Faults against the real stack: dead services, SIGTERM mid-turn, a Redis restart, poison input."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
import websockets

from deploy.runner import Child, Stack, free_port
from tests.support import REPO_ROOT, wait_until
from tests.support.stack import StackUser, child, new_user, restart_child, running_stack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("faults")) as running:
        yield running


def health(stack: Stack) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{stack.url}/health", timeout=10)
    return response.status_code, response.json()


async def healthy(stack: Stack) -> bool:
    return health(stack)[0] == 200


async def test_a_dead_service_makes_health_503_and_its_work_waits_for_it(stack: Stack) -> None:
    redactor = child(stack, "redactor")
    assert redactor.process is not None
    redactor.process.kill()
    redactor.process.wait(10)

    def down() -> bool:
        status, body = health(stack)
        return status == 503 and any("redactor" in problem for problem in body["problems"])

    await wait_until(down, 20, interval_s=0.2)

    # A turn sent meanwhile is accepted and answered once the redactor is back.
    async with websockets.connect(stack.url.replace("http", "ws") + "/ws/chat") as socket:
        await socket.recv()
        await socket.send(json.dumps({"type": "message", "text": "How do I set up MFA?"}))
        accepted = json.loads(await socket.recv())
        assert accepted["type"] == "accepted"
        restart_child(stack, "redactor")
        while (frame := json.loads(await asyncio.wait_for(socket.recv(), 120)))["type"] != "answer":
            pass
    assert frame["turn_id"] == accepted["turn_id"]
    assert frame["citations"][0]["url"].endswith("/kb/set-up-mfa-new-phone")
    await wait_until(lambda: healthy(stack), 60, interval_s=0.3)


async def test_sigterm_while_a_turn_is_in_flight_completes_the_turn(stack: Stack) -> None:
    # A slow orchestrator, so the turn is surely in its hands when SIGTERM arrives.
    orchestrator = restart_child(
        stack, "orchestrator", {"DESKPILOT_FAULT_HANDLER_DELAY_MS": "3000"}
    )
    await wait_until(lambda: healthy(stack), 120, interval_s=0.3)
    client = redis.Redis.from_url(stack.redis_url)

    def in_flight() -> bool:
        return int(client.xpending("query.received", "orchestrator")["pending"]) >= 1

    async with websockets.connect(stack.url.replace("http", "ws") + "/ws/chat") as socket:
        await socket.recv()
        await socket.send(json.dumps({"type": "message", "text": "How do I add the printer?"}))
        accepted = json.loads(await socket.recv())
        await wait_until(in_flight, 120, interval_s=0.05)  # the redactor first, on a loaded machine
        assert orchestrator.process is not None
        orchestrator.process.send_signal(signal.SIGTERM)
        while (frame := json.loads(await asyncio.wait_for(socket.recv(), 60)))["type"] != "answer":
            pass
    assert frame["turn_id"] == accepted["turn_id"]
    assert orchestrator.process.wait(30) == 0
    assert int(client.xpending("query.received", "orchestrator")["pending"]) == 0
    restart_child(stack, "orchestrator", {"DESKPILOT_FAULT_HANDLER_DELAY_MS": "0"})
    await wait_until(lambda: healthy(stack), 120, interval_s=0.3)


def _turn_until_answered(stack: Stack, user: StackUser, text: str, deadline: float) -> str:
    """One client's turn under faults: 'refused' if never accepted, else 'answered' or 'lost'.

    The client is ``user`` throughout: a turn is fetched by the user who asked it (anyone else
    gets the 404 of an unknown turn, which would look like a lost one here)."""
    turn_id = None
    while time.monotonic() < deadline and turn_id is None:
        try:
            response = httpx.post(
                f"{stack.url}/api/chat", json={"text": text}, headers=user.headers, timeout=20
            )
        except httpx.HTTPError:
            time.sleep(0.2)
            continue
        if response.status_code == 200:
            return "answered"
        if response.status_code == 504:
            turn_id = response.json()["turn_id"]  # accepted; the answer comes later
            break
        if response.status_code == 503:
            time.sleep(0.5)  # not accepted: the client was told to retry, and does
            continue
        raise AssertionError(f"unexpected {response.status_code}: {response.text}")
    if turn_id is None:
        return "refused"  # told to retry until the deadline: never accepted, so nothing lost
    while time.monotonic() < deadline:
        try:
            body = httpx.get(
                f"{stack.url}/api/turns/{turn_id}", headers=user.headers, timeout=10
            ).json()
        except (httpx.HTTPError, ValueError):
            time.sleep(0.3)
            continue
        if body.get("status") == "done":
            return "answered"
        time.sleep(0.3)
    return "lost"


async def test_redis_restart_under_load_loses_no_accepted_turn(stack: Stack) -> None:
    if stack.valkey is None:
        pytest.skip("REDIS_URL points at an external Redis")
    questions = [
        "How do I reset my VPN password?",
        "How do I connect to the office Wi-Fi?",
        "My keyboard is broken",
        "How do I unlock my account?",
    ]
    # The stack runs with GATEWAY_TURN_TIMEOUT_S=60 (FAST_ENV), long enough to span the restart.
    clients = [new_user(stack) for _ in range(24)]  # each its own user, as separate people
    deadline = time.monotonic() + 150

    async def load() -> list[str]:
        tasks = [
            asyncio.to_thread(_turn_until_answered, stack, user, questions[i % 4], deadline)
            for i, user in enumerate(clients)
        ]
        return list(await asyncio.gather(*tasks))

    load_task = asyncio.create_task(load())
    await asyncio.sleep(1.0)
    stack.valkey.stop(timeout=15)  # SIGTERM: valkey flushes its AOF and exits
    await asyncio.sleep(2.0)
    stack.valkey.start(timeout=30)  # same port, same data directory
    outcomes = await load_task
    assert "lost" not in outcomes, outcomes
    assert outcomes.count("answered") >= 12, outcomes
    await wait_until(lambda: healthy(stack), 60, interval_s=0.3)
    body = httpx.post(f"{stack.url}/api/chat", json={"text": "How do I pair a mouse?"}, timeout=60)
    assert body.status_code == 200


async def test_replies_reach_only_the_gateway_instance_holding_the_user(stack: Stack) -> None:
    port = free_port()
    second = Child(
        name="gateway-b",
        argv=[sys.executable, "-m", "gateway"],
        env={
            **child(stack, "gateway").env,
            "GATEWAY_PORT": str(port),
            "GATEWAY_INSTANCE_ID": "gw-b",
        },
        log_path=stack.data_dir / "logs" / "gateway-b.log",
    )
    second.start()
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(f"{url}/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        await wait_until(up, 180, interval_s=0.3)  # a gateway starts in minutes under load
        client = redis.Redis.from_url(stack.redis_url)
        first_stream = f"reply.{child(stack, 'gateway').env.get('GATEWAY_INSTANCE_ID') or ''}"
        before = {key.decode(): client.xlen(key) for key in client.scan_iter("reply.*")}
        body = httpx.post(f"{url}/api/chat", json={"text": "How do I add the printer?"}, timeout=60)
        assert body.status_code == 200
        after = {key.decode(): client.xlen(key) for key in client.scan_iter("reply.*")}
        grown = {key for key in after if after[key] > before.get(key, 0)}
        assert grown == {"reply.gw-b"}
        assert first_stream not in grown
    finally:
        second.terminate()
        second.wait(30)
        second.close()


async def test_poison_message_is_dead_lettered_and_listed(stack: Stack) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    poison_id = client.xadd("message.received", {"__data__": b'{"text": "no envelope at all"}'})

    def dead_lettered() -> bool:
        return client.xlen("message.received.dlq") >= 1

    await wait_until(dead_lettered, 30, interval_s=0.2)
    listing = subprocess.run(
        [sys.executable, "-m", "deploy.cli", "dlq", "list", "message.received"]
        + ["--redis-url", stack.redis_url],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "invalid MessageReceived" in listing.stdout
    assert "correlation_id" in listing.stdout
    # Raw user text: neither kept in the dead letter nor left in the stream.
    assert "no envelope" not in listing.stdout
    dead = b"".join(
        b"".join(fields.values()) for _, fields in client.xrange("message.received.dlq")
    )
    assert b"no envelope" not in dead
    assert client.xrange("message.received", min=poison_id, max=poison_id) == []
    # Still healthy: the poison message did not take the redactor down.
    assert health(stack)[0] == 200
