"""``deskpilot bench start``: what starting the embedded stack costs, with and without the fork
server (``DESKPILOT_RUNNER_PRELOAD``, :mod:`deploy.preload`).

Each run starts a whole stack (Redis, Chroma, every service but the crawler) on a fresh data
directory, as ``deskpilot up`` does, waits until the gateway reports it healthy, and reads the
CPU time each service's process (and the fork server) has used by then, and its memory. Runs
alternate between the two ways (fork server first) so that a change of the machine's load
touches both alike. The vectors of the texts Deskpilot ships are read from one cache shared by
all runs (``--vector-cache``, filled by the first), as the test suite's stacks do.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

VARIANTS = {"fork server": True, "own python -m": False}


def add_parser(bench_kinds: Any) -> argparse.ArgumentParser:
    """Add ``start`` to ``deskpilot bench``'s kinds."""
    parser: argparse.ArgumentParser = bench_kinds.add_parser(
        "start",
        help="CPU and time a stack's start costs, with and without the fork server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=2, help="starts of each way (default 2)")
    parser.add_argument(
        "--vector-cache", type=Path, default=None, help="vector cache folder (default: a new one)"
    )
    parser.add_argument("--json", action="store_true")
    return parser


def measure_start(preload: bool, vector_cache: Path) -> dict[str, Any]:
    """Start a stack, measure it once it is ready, stop it."""
    import os

    import psutil

    from deploy.runner import RunnerSettings, Stack, free_port

    data_dir = Path(tempfile.mkdtemp(prefix="deskpilot-bench-start-"))
    settings = RunnerSettings(
        data_dir=data_dir, crawler="off", preload=preload, ready_timeout_s=900
    )
    stack = Stack(
        settings,
        port=free_port(),
        extra_env={"DESKPILOT_EMBEDDING_CACHE_DIR": str(vector_cache)},
        say=lambda _: None,
    )
    started = time.monotonic()
    load = os.getloadavg()[0]
    try:
        stack.start()
        if not stack.wait_ready():
            raise RuntimeError(
                f"the stack was not ready ({stack.not_ready()}); logs in {data_dir / 'logs'}"
            )
        ready_s = time.monotonic() - started
        processes = {child.name: child.process.pid for child in stack.children if child.process}
        if stack.fork_server is not None:
            processes["fork server"] = stack.fork_server.pid
        cpu: dict[str, float] = {}
        rss: dict[str, float] = {}
        for name, pid in processes.items():
            process = psutil.Process(pid)
            times = process.cpu_times()
            cpu[name] = round(times.user + times.system, 1)
            rss[name] = round(process.memory_info().rss / 2**20)
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "ready_s": round(ready_s, 1),
        "cpu_s": round(sum(cpu.values()), 1),
        "cpu_s_by_process": cpu,
        "rss_mib_by_process": rss,
        "load_at_start": round(load, 2),
    }


def run_start_bench(args: argparse.Namespace) -> int:
    if args.runs < 1:
        print("deskpilot bench start: --runs must be at least 1")
        return 2
    cache = args.vector_cache or Path(tempfile.mkdtemp(prefix="deskpilot-bench-vectors-"))
    measure_start(True, cache)  # fills the vector cache, so no run below embeds the texts
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    for _ in range(args.runs):
        for name, preload in VARIANTS.items():
            runs[name].append(measure_start(preload, cache))
    summary = {
        name: {
            "cpu_s_median": statistics.median(r["cpu_s"] for r in results),
            "ready_s_median": statistics.median(r["ready_s"] for r in results),
            "runs": results,
        }
        for name, results in runs.items()
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    for name, row in summary.items():
        print(
            f"{name}: CPU {row['cpu_s_median']} s, ready after {row['ready_s_median']} s "
            f"(medians of {args.runs})"
        )
        for run in row["runs"]:
            by_process = ", ".join(f"{p} {s}" for p, s in run["cpu_s_by_process"].items())
            print(
                f"  CPU {run['cpu_s']} s ({by_process}); ready {run['ready_s']} s; "
                f"load {run['load_at_start']}"
            )
    return 0
