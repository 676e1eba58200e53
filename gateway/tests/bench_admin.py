"""Costs of the admin read paths and of user-token checks, on a real valkey it starts itself.

Run ``python -m gateway.tests.bench_admin`` from the repository root. It prints:

* the audit view's worst case: a conversation whose only record is the oldest of
  ``GATEWAY_AUDIT_SCAN`` (10,000) entries, so the whole window is read and decoded;
* ticket listings (50 of 5,000 tickets: all, by status, by user) and one ticket by key;
* HS256 token verifications per second in one process.

Not collected by pytest (timings on shared machines are noise, not a pass/fail signal).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt
import redis.asyncio as aioredis

from conftest import start_valkey
from contracts.bus import Bus
from contracts.events import AuditRecorded, TicketChange, TicketRecord
from contracts.settings import ServiceSettings
from gateway.audit import AuditReader
from gateway.identity import HS256Verifier
from gateway.tickets import TicketReadModel

AUDIT_ENTRIES = 10_000
TICKETS = 5_000
RUNS = 30


async def timed(call: Callable[[], Awaitable[object]], runs: int = RUNS) -> str:
    await call()
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    p95 = timings[int(len(timings) * 0.95) - 1]
    return f"median {statistics.median(timings):7.2f} ms  p95 {p95:7.2f} ms"


async def bench(redis_url: str) -> None:
    settings = ServiceSettings(redis_url=redis_url)
    bus = Bus(settings, "bench")
    await bus.broker.connect()
    client = aioredis.from_url(redis_url)
    try:
        stream = "bench.audit"
        for n in range(AUDIT_ENTRIES):
            event = AuditRecorded(
                correlation_id=f"turn-{n}",
                conversation_id="target" if n == 0 else f"conv-{n % 500}",
                service="orchestrator",
                action="decision",
                reason="answer: the knowledge base covers it",
                details={"score": 0.82, "chunks": 5},
            )
            await bus.publish(stream, event)
        reader = AuditReader(client, AUDIT_ENTRIES, stream=stream)
        found = await reader.conversation("target", 200)
        assert len(found.records) == 1
        assert found.scanned == AUDIT_ENTRIES
        audit = await timed(lambda: reader.conversation("target", 200))
        print(f"audit, {AUDIT_ENTRIES} entries scanned: {audit}")

        model = TicketReadModel(client, namespace="bench")
        start = datetime(2026, 1, 1, tzinfo=UTC)
        statuses = ("Open", "In Progress", "Done")
        for n in range(TICKETS):
            await model.put(
                TicketRecord(
                    key=f"IT-{n}",
                    url=f"https://jira.northwind.example/browse/IT-{n}",
                    status=statuses[n % 3],
                    summary="VPN drops every hour",
                    description="Steps tried: reconnect, reinstall the client. " * 5,
                    user_id=f"emp-{n % 200}",
                    updated_at=start + timedelta(minutes=n),
                ),
                TicketChange.CREATED,
                start,
            )
        print(f"tickets, 50 newest of {TICKETS}:   {await timed(lambda: model.list(limit=50))}")
        print(
            f"tickets, 50 by status:        "
            f"{await timed(lambda: model.list(status='in progress', limit=50))}"
        )
        print(f"tickets, by user (25):        {await timed(lambda: model.list(user_id='emp-7'))}")
        print(f"ticket by key:                {await timed(lambda: model.get('IT-4321'))}")
    finally:
        await bus.stop()
        await client.aclose()


def bench_tokens() -> None:
    secret = b"bench-secret-0123456789abcdef-0123456789"
    verifier = HS256Verifier(secret, audience="deskpilot")
    token = jwt.encode(
        {"sub": "emp-1042", "aud": "deskpilot", "exp": int(time.time()) + 600}, secret, "HS256"
    )
    count = 20_000
    started = time.perf_counter()
    for _ in range(count):
        verifier.verify(token)
    elapsed = time.perf_counter() - started
    print(f"HS256 verifications:          {count / elapsed:,.0f} per second")


def main() -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        server = start_valkey(Path(data_dir))
        try:
            asyncio.run(bench(f"{server.connection_url}/0"))
        finally:
            server.stop()
    bench_tokens()


if __name__ == "__main__":
    main()
