"""``deskpilot bench chat``: what the bus costs.

Two measurements of the same questions at the same concurrency:

* end to end: N turns through the running stack's WebSocket API, C connections at a time, each
  turn timed from sending the message to receiving its answer;
* the in-process floor: the same per-turn work (redaction, embedding, retrieval against the same
  Chroma, composition) called directly in one process with no bus, C turns at a time.

They take turns in :data:`ROUNDS` rounds (end to end, then the floors, then end to end again...),
so that both see the same machine. It prints p50/p95/p99 latency and turns per second for both,
the overhead ratio (end-to-end p50 / floor p50) and throughput ratio (end-to-end / floor), and,
when the stack runs on this machine (``deskpilot up``), the CPU time a turn costs in each of its
processes against the floor's (the benchmark's own process and Chroma): unlike latency, a figure
other work on the machine hardly changes. The stack must not rate-limit the benchmark's
messages: start it with ``GATEWAY_RATE_LIMIT_ENABLED=false``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
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


ROUNDS = 5
"""End to end and the floors take turns this many times, each measuring its share of the turns
in a round, so that a machine that gets busier or quieter during the run weighs on both alike."""


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


class RateLimited(RuntimeError):
    """The stack refused a message with ``rate_limited``."""


class Chat:
    """``concurrency`` WebSocket connections to the stack's chat, one turn at a time on each."""

    def __init__(self, url: str, concurrency: int) -> None:
        self.url = url.replace("http://", "ws://").replace("https://", "wss://") + "/ws/chat"
        self.concurrency = concurrency
        self.free: asyncio.Queue[Any] = asyncio.Queue()
        self.connections: list[Any] = []

    async def open(self) -> None:
        import websockets

        for _ in range(self.concurrency):
            connection = await websockets.connect(self.url, max_size=2**22)
            self.connections.append(connection)
            json.loads(await connection.recv())  # the "ready" frame
            self.free.put_nowait(connection)

    async def close(self) -> None:
        for connection in self.connections:
            await connection.close()

    async def turn(self, index: int) -> float:
        connection = await self.free.get()
        try:
            started = time.perf_counter()
            await connection.send(
                json.dumps({"type": "message", "text": QUESTIONS[index % len(QUESTIONS)]})
            )
            while True:
                frame = json.loads(await connection.recv())
                if frame["type"] == "answer":
                    return time.perf_counter() - started
                if frame.get("error_code") == "rate_limited":
                    raise RateLimited(
                        "the stack rate-limits chat messages; start it with "
                        "GATEWAY_RATE_LIMIT_ENABLED=false to benchmark it"
                    )
                if frame["type"] == "error":
                    raise RuntimeError(f"turn failed: {frame}")
        finally:
            self.free.put_nowait(connection)


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


def _floor_turn(work: Callable[[str], Any]) -> Callable[[int], Awaitable[float]]:
    async def one_turn(index: int) -> float:
        started = time.perf_counter()
        # Off the event loop, as the services do it.
        await asyncio.to_thread(work, QUESTIONS[index % len(QUESTIONS)])
        return time.perf_counter() - started

    return one_turn


class StackCpu:
    """CPU seconds of the running stack's processes (services, valkey, Chroma), from the
    runtime file its runner writes; empty when the stack is not on this machine."""

    def __init__(self, runtime: dict[str, Any] | None) -> None:
        import psutil

        self.processes: dict[str, Any] = {}
        if not runtime:
            return
        try:
            runner = psutil.Process(int(runtime["pid"]))
            names = {int(pid): name for name, pid in runtime.get("children", {}).items()}
            for process in runner.children(recursive=True):
                name = names.get(process.pid) or _store_name(process.cmdline())
                if name:
                    self.processes[name] = process
        except (psutil.Error, KeyError, ValueError):
            self.processes = {}

    def read(self) -> dict[str, float]:
        import psutil

        seconds: dict[str, float] = {}
        for name, process in self.processes.items():
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            seconds[name] = times.user + times.system
        return seconds


def _store_name(command: list[str]) -> str | None:
    """``valkey`` or ``chroma`` for the stack's Redis and Chroma servers, else ``None``."""
    programs = [Path(part).name for part in command[:2]]
    if programs and programs[0].startswith("valkey-server"):
        return "valkey"
    return "chroma" if "chroma" in programs and "run" in command else None


def _cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in after if name in before}


class Phase:
    """One measurement (end to end, or a floor) gathered over the bench's rounds."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.elapsed = 0.0
        self.turns = 0
        self.cpu: dict[str, float] = {}

    async def run(
        self,
        one_turn: Callable[[int], Awaitable[float]],
        turns: int,
        concurrency: int,
        cpu: Callable[[], dict[str, float]],
    ) -> None:
        before = cpu()
        latencies, elapsed = await drive(turns, concurrency, one_turn)
        for name, seconds in _cpu_used(before, cpu()).items():
            self.cpu[name] = self.cpu.get(name, 0.0) + seconds
        self.latencies += latencies
        self.elapsed += elapsed
        self.turns += turns

    def summary(self) -> dict[str, float]:
        return summarise(self.latencies, self.elapsed)

    def cpu_ms_per_turn(self) -> dict[str, float]:
        per_turn = {name: round(s / self.turns * 1000, 1) for name, s in self.cpu.items()}
        return per_turn | {"total": round(sum(self.cpu.values()) / self.turns * 1000, 1)}


def _rounds(turns: int, rounds: int) -> list[int]:
    """``turns`` split into ``rounds`` nearly equal parts (fewer when there are few turns)."""
    rounds = max(1, min(rounds, turns))
    return [turns // rounds + (1 if n < turns % rounds else 0) for n in range(rounds)]


async def _bench(args: argparse.Namespace, result: dict[str, Any]) -> None:
    from deploy.runner import RunnerSettings, read_runtime

    overrides: dict[str, Any] = {"data_dir": args.data_dir} if args.data_dir else {}
    runtime = read_runtime(RunnerSettings(**overrides).data_dir.expanduser().resolve())
    stack = StackCpu(runtime)

    def bench_and_stack() -> dict[str, float]:
        return stack.read() | {"bench": time.process_time()}

    chat = Chat(args.url, args.concurrency)
    await chat.open()
    try:
        concurrency = args.concurrency
        await drive(min(args.turns, 2 * concurrency), concurrency, chat.turn)  # warm-up
        works = {} if args.skip_floor else await asyncio.to_thread(floor_turn_factories, args)
        for work in works.values():
            await drive(min(args.turns, 2 * concurrency), concurrency, _floor_turn(work))
        phases = {name: Phase() for name in ("end_to_end", *works, "floor_sequential")}
        # End to end and floors take turns, a round each, so that both see the same machine.
        for turns in _rounds(args.turns, ROUNDS):
            await phases["end_to_end"].run(chat.turn, turns, concurrency, stack.read)
            for name, work in works.items():
                await phases[name].run(_floor_turn(work), turns, concurrency, bench_and_stack)
            if works:
                sequential = _floor_turn(works["floor"])
                await phases["floor_sequential"].run(sequential, turns, 1, bench_and_stack)
    finally:
        await chat.close()
    for name, phase in phases.items():
        if phase.turns:
            result[name] = phase.summary()
    if stack.processes:
        result["cpu_ms_per_turn"] = {
            name: phase.cpu_ms_per_turn() for name, phase in phases.items() if phase.turns
        }


def run_chat_bench(args: argparse.Namespace) -> int:
    import os

    result: dict[str, Any] = {
        "turns": args.turns,
        "concurrency": args.concurrency,
        "rounds": len(_rounds(args.turns, ROUNDS)),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_average": [round(load, 2) for load in os.getloadavg()],
        },
    }
    try:
        asyncio.run(_bench(args, result))
    except OSError as exc:
        print(f"deskpilot bench: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 2
    except RateLimited as exc:
        print(f"deskpilot bench: {exc}", file=sys.stderr)
        return 2
    if "floor" in result:
        e2e, floor, platform = result["end_to_end"], result["floor"], result["platform_floor"]
        result["overhead_ratio"] = round(e2e["p50_ms"] / floor["p50_ms"], 3)
        result["throughput_ratio"] = round(e2e["turns_per_s"] / floor["turns_per_s"], 3)
        result["platform_floor_ratio"] = round(e2e["p50_ms"] / platform["p50_ms"], 3)
        cpu = result.get("cpu_ms_per_turn", {})
        if "end_to_end" in cpu and "floor" in cpu and cpu["floor"]["total"] > 0:
            result["cpu_ratio"] = round(cpu["end_to_end"]["total"] / cpu["floor"]["total"], 3)
    if args.json:
        print(json.dumps(result))
    else:
        _print_table(result)
    return 0


def _print_table(result: dict[str, Any]) -> None:
    load = result["machine"]["load_average"]
    print(
        f"turns={result['turns']} concurrency={result['concurrency']} "
        f"rounds={result['rounds']} load average at the start={load}"
    )
    for name in ("end_to_end", "floor", "platform_floor", "floor_sequential"):
        if name in result:
            row = result[name]
            print(
                f"{name:>17}: p50 {row['p50_ms']} ms  p95 {row['p95_ms']} ms  "
                f"p99 {row['p99_ms']} ms  {row['turns_per_s']} turns/s"
            )
    if "overhead_ratio" in result:
        one_at_a_time = result["concurrency"] == 1
        print(
            f"   overhead ratio: {result['overhead_ratio']} "
            f"(target <= {1.3 if one_at_a_time else 1.2})"
        )
        print(f" throughput ratio: {result['throughput_ratio']} (target >= 0.8)")
        print(
            f"   platform ratio: {result['platform_floor_ratio']} "
            "(end-to-end p50 / platform floor p50)"
        )
    for name, row in result.get("cpu_ms_per_turn", {}).items():
        parts = ", ".join(f"{process} {ms}" for process, ms in row.items() if process != "total")
        print(f"{name:>17}: CPU {row['total']} ms a turn ({parts})")
    if "cpu_ratio" in result:
        print(f"        CPU ratio: {result['cpu_ratio']} (end to end / floor, CPU a turn)")
