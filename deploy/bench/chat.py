"""``deskpilot bench chat``: what the bus costs.

Two measurements of the same questions at the same concurrency:

* end to end: N turns through the running stack's WebSocket API, C connections at a time, each
  turn timed from sending the message to receiving its answer;
* the in-process floor: the same per-turn work (redaction, embedding, retrieval against the same
  Chroma, composition) called directly in one process with no bus, C turns at a time.

It prints p50/p95/p99 latency and turns per second for both, and the overhead ratio
(end-to-end p50 / floor p50) and throughput ratio (end-to-end / floor).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

QUESTIONS = (
    "How do I reset my VPN password?",
    "The VPN keeps disconnecting every few minutes",
    "How do I connect to the office Wi-Fi?",
    "How can I find my MAC address on Windows?",
    "I forgot my account password",
    "My account is locked, how do I unlock it?",
    "How do I set up MFA on my new phone?",
    "How do I change my display name?",
    "Where do I enrol in an IT training course?",
    "When is the security awareness training due?",
    "Where can I find the org chart of a department?",
    "My keyboard is broken, how do I get a new one?",
    "How do I request a second monitor?",
    "How do I add the network printer?",
    "My headset is not recognised in Teams",
    "My webcam does not work in meetings",
)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarise(latencies: Sequence[float], elapsed: float) -> dict[str, float]:
    return {
        "turns": len(latencies),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p95_ms": round(percentile(latencies, 95) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1) if latencies else float("nan"),
        "turns_per_s": round(len(latencies) / elapsed, 2) if elapsed > 0 else float("nan"),
    }


async def drive(
    turns: int, concurrency: int, one_turn: Callable[[int], Awaitable[float]]
) -> tuple[list[float], float]:
    """Run ``turns`` calls of ``one_turn`` with ``concurrency`` workers; latencies and wall time."""
    counter = iter(range(turns))
    latencies: list[float] = []

    async def worker() -> None:
        for index in counter:
            latencies.append(await one_turn(index))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


async def end_to_end(url: str, turns: int, concurrency: int) -> dict[str, float]:
    import websockets

    ws_url = url.replace("http://", "ws://").replace("https://", "wss://") + "/ws/chat"
    connections = [await websockets.connect(ws_url, max_size=2**22) for _ in range(concurrency)]
    for connection in connections:
        json.loads(await connection.recv())  # the "ready" frame
    free: asyncio.Queue[Any] = asyncio.Queue()
    for connection in connections:
        free.put_nowait(connection)

    async def one_turn(index: int) -> float:
        connection = await free.get()
        try:
            started = time.perf_counter()
            await connection.send(
                json.dumps({"type": "message", "text": QUESTIONS[index % len(QUESTIONS)]})
            )
            while True:
                frame = json.loads(await connection.recv())
                if frame["type"] == "answer":
                    return time.perf_counter() - started
                if frame["type"] == "error":
                    raise RuntimeError(f"turn failed: {frame}")
        finally:
            free.put_nowait(connection)

    await drive(min(turns, 2 * concurrency), concurrency, one_turn)  # warm-up
    latencies, elapsed = await drive(turns, concurrency, one_turn)
    for connection in connections:
        await connection.close()
    return summarise(latencies, elapsed)


def floor_turn_factories(args: argparse.Namespace) -> dict[str, Callable[[str], Any]]:
    """The per-turn work of redactor and orchestrator, wired directly, on the stack's Chroma.

    * ``floor``: what a knowledge-base turn does now: redaction, intent classification and hybrid
      retrieval (the question embedded once for both) and composition;
    * ``platform_floor``: what a turn did on the platform, before the agent: redaction, one
      embedding, plain dense retrieval (the best chunks, then the best document's chunks, both
      from Chroma) and composition; the issue's latency target is relative to it.
    """
    from deploy.runner import RunnerSettings, read_runtime
    from orchestrator.app import build_retriever
    from orchestrator.compose import compose_answer
    from orchestrator.config import OrchestratorSettings
    from orchestrator.dialogue import readable
    from orchestrator.embedding import QueryEncoder, one_embedding_per_text
    from orchestrator.intent import IntentClassifier
    from orchestrator.retrieval import HybridConfig, Retrieval, Retriever
    from redactor.config import RedactorSettings
    from redactor.service import Redactor

    overrides: dict[str, Any] = {"data_dir": args.data_dir} if args.data_dir else {}
    runtime = read_runtime(RunnerSettings(**overrides).data_dir.expanduser().resolve())
    if runtime:
        overrides |= {"chroma_host": runtime["chroma_host"], "chroma_port": runtime["chroma_port"]}
    redactor = Redactor(RedactorSettings(**overrides))
    settings = OrchestratorSettings(**overrides)
    encoder = QueryEncoder(settings.torch_threads)
    retriever = build_retriever(settings, encoder)
    plain = Retriever(encoder, retriever.collection, HybridConfig(mode="dense"))
    intents = IntentClassifier.from_settings(encoder, settings)

    def compose(retrieval: Retrieval) -> Any:
        return compose_answer(
            retrieval,
            threshold=settings.relevance_threshold,
            see_also_margin=settings.see_also_margin,
            max_citations=settings.max_citations,
        )

    def turn(text: str) -> Any:
        with one_embedding_per_text():
            redacted = readable(redactor.redact(text).text)
            intents.classify(redacted)
            return compose(retriever.retrieve(redacted, settings.top_k))

    def platform_turn(text: str) -> Any:
        return compose(plain.retrieve(redactor.redact(text).text, settings.top_k))

    return {"floor": turn, "platform_floor": platform_turn}


async def in_process_floor(
    work: Callable[[str], Any], turns: int, concurrency: int
) -> dict[str, float]:
    async def one_turn(index: int) -> float:
        started = time.perf_counter()
        # Off the event loop, as the services do it.
        await asyncio.to_thread(work, QUESTIONS[index % len(QUESTIONS)])
        return time.perf_counter() - started

    await drive(min(turns, 2 * concurrency), concurrency, one_turn)
    latencies, elapsed = await drive(turns, concurrency, one_turn)
    return summarise(latencies, elapsed)


def run_chat_bench(args: argparse.Namespace) -> int:
    import os

    result: dict[str, Any] = {
        "turns": args.turns,
        "concurrency": args.concurrency,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
    }
    try:
        result["end_to_end"] = asyncio.run(end_to_end(args.url, args.turns, args.concurrency))
    except OSError as exc:
        print(f"deskpilot bench: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 2
    if not args.skip_floor:
        works = floor_turn_factories(args)
        for name, work in works.items():
            result[name] = asyncio.run(in_process_floor(work, args.turns, args.concurrency))
        result["floor_sequential"] = asyncio.run(in_process_floor(works["floor"], args.turns, 1))
        e2e, floor, platform = result["end_to_end"], result["floor"], result["platform_floor"]
        result["overhead_ratio"] = round(e2e["p50_ms"] / floor["p50_ms"], 3)
        result["throughput_ratio"] = round(e2e["turns_per_s"] / floor["turns_per_s"], 3)
        result["platform_floor_ratio"] = round(e2e["p50_ms"] / platform["p50_ms"], 3)
    if args.json:
        print(json.dumps(result))
    else:
        _print_table(result)
    return 0


def _print_table(result: dict[str, Any]) -> None:
    print(f"turns={result['turns']} concurrency={result['concurrency']}")
    for name in ("end_to_end", "floor", "platform_floor", "floor_sequential"):
        if name in result:
            row = result[name]
            print(
                f"{name:>17}: p50 {row['p50_ms']} ms  p95 {row['p95_ms']} ms  "
                f"p99 {row['p99_ms']} ms  {row['turns_per_s']} turns/s"
            )
    if "overhead_ratio" in result:
        print(f"   overhead ratio: {result['overhead_ratio']} (target <= 1.5)")
        print(f" throughput ratio: {result['throughput_ratio']} (target >= 0.5)")
        print(
            f"   platform ratio: {result['platform_floor_ratio']} "
            "(end-to-end p50 / platform floor p50, target <= 1.5)"
        )
