"""Latency and throughput of :meth:`Redactor.redact` on typical chat messages.

Run ``python -m redactor.tests.bench_redact`` from the repository root. It prints, for a short
message (20 words) and a long one (300 characters, the issue's yardstick), the median and p95 of
one call, the processor time of one call (all threads of the process; less noisy than the
wall-clock figures on a shared machine), and messages per second one after another in one
process (a redactor process handles
``REDACTOR_CONCURRENCY`` messages at once, but NER holds the GIL: one process is about one core).

Each figure is measured in ``--processes`` fresh processes one after another (5 by default) and
printed for each, then their median: on the 2-core machines measured here one process's median
for the long message came out near 20 ms in most processes and 24-30 ms in some, the same code
back to back, so a single process's figure says little.

Not collected by pytest (timings on shared CI machines are noise, not a pass/fail signal); run it
by hand when changing recognizers or the spaCy model and compare with the README's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from redactor.config import RedactorSettings
from redactor.service import Redactor

# 20 words, with a name, an e-mail address, a product name and a password, like a real request.
SHORT = (
    "I am John Smith, Outlook keeps asking for my password on Windows. "
    "Mail me at john.smith@contoso.com, my password is hunter2"
)
# 300 characters: a problem report with a name, phone, host, error code, key and a URL.
LONG = (
    "Hi, this is Maria Lopez from finance (ext. +1 415 555 0142). Since this morning Teams and "
    "Outlook both fail to sign in on my laptop NW-LT-0042 with error 0x80070005. I already "
    "rebooted, reinstalled Cisco AnyConnect and tried the key AKIAZ7QW3ERT5YUI9OPL from the wiki "
    "at https://wiki.northwind.example/vpn; nothing helps."
)
CALLS = 200


def measure(redactor: Redactor, message: str) -> dict[str, float]:
    redactor.redact(message)  # the first call pays for lazy initialisation
    timings = []
    started_all = time.perf_counter()
    processor_started = time.process_time()
    for _ in range(CALLS):
        started = time.perf_counter()
        redactor.redact(message)
        timings.append(time.perf_counter() - started)
    elapsed = time.perf_counter() - started_all
    return {
        "median_ms": statistics.median(timings) * 1000,
        "p95_ms": statistics.quantiles(timings, n=20)[-1] * 1000,
        "cpu_ms": (time.process_time() - processor_started) / CALLS * 1000,
        "messages_per_s": CALLS / elapsed,
    }


MESSAGES = {"short": SHORT, "long": LONG}


def measure_here() -> None:
    """One process's figures, as one line of JSON per message (``--one``)."""
    started = time.perf_counter()
    redactor = Redactor(RedactorSettings())
    construct_s = time.perf_counter() - started
    for name, message in MESSAGES.items():
        figures: dict[str, object] = {"message": name, "construct_s": construct_s}
        figures.update(measure(redactor, message), redacted=redactor.redact(message).text)
        print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--processes", type=int, default=5, help="fresh processes, one by one")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        measure_here()
        return
    print(f"load average: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in MESSAGES}
    for _ in range(args.processes):
        out = subprocess.run(  # this interpreter, this module
            [sys.executable, "-m", "redactor.tests.bench_redact", "--one"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for line in out.splitlines():
            figures = json.loads(line)
            runs[figures.pop("message")].append(figures)
    print(f"construct: {statistics.median(r['construct_s'] for r in runs['short']):.2f} s")
    for name, message in MESSAGES.items():
        each = runs[name]
        medians = [r["median_ms"] for r in each]
        print(
            f"{name}: {len(message)} characters, {len(message.split())} words, {CALLS} calls "
            f"in each of {len(each)} processes: median {statistics.median(medians):.2f} ms "
            f"(each: {', '.join(f'{m:.2f}' for m in medians)}), "
            f"p95 {statistics.median(r['p95_ms'] for r in each):.2f} ms, "
            f"processor {statistics.median(r['cpu_ms'] for r in each):.2f} ms a call, "
            f"{statistics.median(r['messages_per_s'] for r in each):.0f} messages/s"
        )
    for name in MESSAGES:
        print(f"  {name} redacted: {runs[name][0]['redacted']}")


if __name__ == "__main__":
    main()
