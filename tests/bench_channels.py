"""The channels' figures: what each adds to a web-chat turn, and how many platform events one
gateway process verifies and publishes per second.

Run ``python -m tests.bench_channels`` from the repository root (it needs the test helpers: the
local Slack and Bot Framework of ``tests/support`` stand in for the platforms, on loopback). It
starts the whole stack as ``deskpilot up`` does (rate limits off) with Slack, Teams and the MCP
server on, then:

1. **Latency**, ``--turns`` rounds; each round asks the same question once through every
   channel, one at a time, in a new conversation each: the web chat (``POST /api/chat``, timed
   to its response), Slack (a signed ``app_mention``, timed to the moment the local Slack
   received the answer's blocks), Teams (a signed activity, timed to the moment the local
   connector received the card) and MCP (the SDK's client, ``ask``, timed to its result; and
   ``search_knowledge_base`` with the same question, no turn: redactor, retrieval, passages).
   It prints each channel's p50 and p95 and its p50 minus the web chat's p50 in the same run:
   what the channel adds. On loopback: a real platform adds its own network round trips (Slack: the
   placeholder post before the turn and the answer's update; Teams: the typing indicator and
   the card).
2. **Events per second**, with every service but the gateway stopped (so only the gateway
   works and nothing competes with it for the CPU): ``--events`` signed Slack events, then as
   many Teams activities, sent ``--concurrency`` at a time, prepared before the clock starts;
   each is verified, de-duplicated, mapped to its user and conversation and published sealed
   on ``message.received`` (Slack also posts its placeholder to the local Slack) before its
   200.

Not collected by pytest (figures on shared machines are measurements, not pass/fail signals).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import psutil

from deploy.bench.chat import QUESTIONS, percentile
from tests.support import wait_until_sync
from tests.support.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack, sign
from tests.support.fake_teams import APP_PASSWORD, FakeTeams
from tests.support.mcp_client import session
from tests.support.stack import new_user, running_stack

CHANNEL = "C0BENCH"
SLACK_USER = "U0BENCH"
TEAMS_USER = "5d1e2f3a-4b5c-4d6e-8f7a-9b0c1d2e3f4a"
MCP_TOKEN = f"bench-{uuid4().hex}{uuid4().hex}"


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(values) * 1000, 1),
        "p95_ms": round(percentile(values, 95) * 1000, 1),
    }


def web_turn(client: httpx.Client, token: str, question: str) -> float:
    started = time.perf_counter()
    response = client.post(
        "/api/chat",
        json={"text": question},
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,
    )
    response.raise_for_status()
    return time.perf_counter() - started


def slack_turn(slack: FakeSlack, question: str) -> float:
    envelope = slack.mention(SLACK_USER, CHANNEL, question)
    thread = str(envelope["event"]["ts"])
    started = time.perf_counter()
    slack.send_event(envelope).raise_for_status()

    def answered() -> float | None:
        done = [m.answered_at for m in slack.thread(CHANNEL, thread) if m.answered_at]
        return done[0] if done else None

    at = wait_until_sync(answered, 120, interval_s=0.001)
    return at - started


def teams_turn(teams: FakeTeams, question: str) -> float:
    chat = teams.add_conversation(f"a:1bench-{uuid4().hex[:12]}")
    activity = teams.message(TEAMS_USER, chat, question)
    started = time.perf_counter()
    teams.send(activity).raise_for_status()

    def answered() -> float | None:
        cards = [s.received_at for s in teams.messages(chat) if s.activity.get("attachments")]
        return cards[0] if cards else None

    at = wait_until_sync(answered, 120, interval_s=0.001)
    return at - started


async def latency(url: str, slack: FakeSlack, teams: FakeTeams, turns: int) -> dict[str, Any]:
    token = new_user(url).token
    web = httpx.Client(base_url=url)  # one connection kept open, as a browser's
    times: dict[str, list[float]] = {
        "web_chat": [],
        "slack": [],
        "teams": [],
        "mcp": [],
        "mcp_search": [],
    }
    async with session(url, MCP_TOKEN, timeout_s=120) as mcp:
        for index in range(turns + 2):  # the first two rounds warm up, not counted
            question = QUESTIONS[index % len(QUESTIONS)]
            round_times = {
                "web_chat": await asyncio.to_thread(web_turn, web, token, question),
                "slack": await asyncio.to_thread(slack_turn, slack, question),
                "teams": await asyncio.to_thread(teams_turn, teams, question),
            }
            started = time.perf_counter()
            result = await mcp.call_tool("ask", {"question": question})
            if result.is_error:
                raise RuntimeError(f"MCP ask failed: {result.content}")
            round_times["mcp"] = time.perf_counter() - started
            started = time.perf_counter()
            found = await mcp.call_tool("search_knowledge_base", {"query": question})
            if found.is_error:
                raise RuntimeError(f"MCP search failed: {found.content}")
            round_times["mcp_search"] = time.perf_counter() - started
            if index >= 2:
                for name, value in round_times.items():
                    times[name].append(value)
    web.close()
    figures: dict[str, Any] = {name: summary(values) for name, values in times.items()}
    baseline = figures["web_chat"]["p50_ms"]
    for name in ("slack", "teams", "mcp", "mcp_search"):
        figures[name]["added_p50_ms"] = round(figures[name]["p50_ms"] - baseline, 1)
    return figures


def gateway_cpu_s(pid: int | None) -> float:
    """CPU seconds the gateway process has used so far (0 when it cannot be read)."""
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


async def blast(
    url: str, requests: list[tuple[bytes, dict[str, str]]], path: str, concurrency: int
) -> dict[str, float]:
    """Send the prepared requests ``concurrency`` at a time; events per second answered 200."""
    queue: asyncio.Queue[tuple[bytes, dict[str, str]]] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    statuses: dict[int, int] = {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def worker() -> None:
            while not queue.empty():
                body, headers = queue.get_nowait()
                response = await client.post(path, content=body, headers=headers)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    ok = statuses.get(200, 0)
    return {
        "events": len(requests),
        "ok": ok,
        "seconds": round(elapsed, 2),
        "events_per_s": round(ok / elapsed, 1),
        "statuses": statuses,
    }  # type: ignore[dict-item]


def slack_requests(slack: FakeSlack, count: int) -> list[tuple[bytes, dict[str, str]]]:
    prepared = []
    for index in range(count):
        envelope = slack.mention(SLACK_USER, CHANNEL, QUESTIONS[index % len(QUESTIONS)])
        body = json.dumps(envelope).encode()
        stamp = str(int(time.time()))
        prepared.append(
            (
                body,
                {
                    "Content-Type": "application/json",
                    "X-Slack-Request-Timestamp": stamp,
                    "X-Slack-Signature": sign(SIGNING_SECRET, stamp, body),
                },
            )
        )
    return prepared


def teams_requests(teams: FakeTeams, count: int) -> list[tuple[bytes, dict[str, str]]]:
    chat = teams.add_conversation(f"a:1bench-blast-{uuid4().hex[:8]}")
    token = teams.token(teams.service_url)  # one token, as the Bot Framework reuses its own
    prepared = []
    for index in range(count):
        activity = teams.message(TEAMS_USER, chat, QUESTIONS[index % len(QUESTIONS)])
        activity["id"] = f"blast-{index}-{uuid4().hex[:8]}"
        prepared.append(
            (
                json.dumps(activity).encode(),
                {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            )
        )
    return prepared


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with FakeSlack() as slack, FakeTeams() as teams, tempfile.TemporaryDirectory() as data:
        slack.add_user(SLACK_USER, "bench.user@northwind.example")
        slack.add_channel(CHANNEL)
        env = {
            "GATEWAY_RATE_LIMIT_ENABLED": "false",
            "GATEWAY_MCP_ENABLED": "true",
            "GATEWAY_MCP_CLIENTS": json.dumps({"bench": {"token": MCP_TOKEN}}),
            "GATEWAY_SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "GATEWAY_SLACK_BOT_TOKEN": BOT_TOKEN,
            "GATEWAY_SLACK_API_URL": slack.api_url,
            "GATEWAY_SLACK_RESPONSE_URL_PREFIX": slack.hooks_prefix,
            "GATEWAY_TEAMS_APP_ID": teams.app_id,
            "GATEWAY_TEAMS_APP_PASSWORD": APP_PASSWORD,
            "GATEWAY_TEAMS_OPENID_URL": teams.openid_url,
            "GATEWAY_TEAMS_TOKEN_URL": teams.token_url,
            "GATEWAY_TEAMS_SERVICE_URL_PREFIXES": teams.service_url,
        }
        with running_stack(Path(data), env) as stack:
            slack.gateway_url = teams.gateway_url = stack.url
            result: dict[str, Any] = {"turns": args.turns, "cpus": os.cpu_count()}
            result["latency"] = await latency(stack.url, slack, teams, args.turns)
            for child in stack.children:
                if child.name != "gateway" and child.running():
                    child.terminate()
                    child.wait(30)
            gateway = next(child for child in stack.children if child.name == "gateway")
            pid = getattr(gateway.process, "pid", None)
            result["events_per_s"] = {}
            for name, prepared, path in (
                ("slack", slack_requests(slack, args.events), "/slack/events"),
                ("teams", teams_requests(teams, args.events), "/teams/messages"),
            ):
                before = gateway_cpu_s(pid)
                figures = await blast(stack.url, prepared, path, args.concurrency)
                used = gateway_cpu_s(pid) - before
                figures["gateway_cpu_ms_per_event"] = round(used * 1000 / max(1, figures["ok"]), 2)
                result["events_per_s"][name] = figures
            result["load_average"] = [round(load, 2) for load in os.getloadavg()]
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30, help="rounds of the latency phase")
    parser.add_argument("--events", type=int, default=1000, help="events per platform")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(bench(args))
    if args.json:
        print(json.dumps(result))
        return
    print(f"latency, {args.turns} rounds, one turn at a time (cpus={result['cpus']}):")
    for name, figures in result["latency"].items():
        added = figures.get("added_p50_ms")
        extra = f"  added over the web chat: {added:+.1f} ms" if added is not None else ""
        times = f"p50 {figures['p50_ms']:7.1f} ms  p95 {figures['p95_ms']:7.1f} ms"
        print(f"  {name:10} {times}{extra}")
    print(f"events verified and published by one gateway process (concurrency {args.concurrency}):")
    for name, figures in result["events_per_s"].items():
        counts = f"{figures['ok']} of {figures['events']} in {figures['seconds']} s"
        cpu = f"gateway CPU {figures['gateway_cpu_ms_per_event']} ms an event"
        print(f"  {name:6} {figures['events_per_s']:7.1f} events/s ({counts}; {cpu})")
    print(f"load average at the end: {result['load_average']}")


if __name__ == "__main__":
    main()
