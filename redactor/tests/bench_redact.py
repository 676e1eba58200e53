"""Latency and throughput of :meth:`Redactor.redact` on typical chat messages.

Run ``python -m redactor.tests.bench_redact`` from the repository root. It prints, for a short
message (20 words) and a long one (300 characters, the issue's yardstick), the median and p95 of
one call, the processor time of one call (all threads of the process; less noisy than the
wall-clock figures on a shared machine), and messages per second one after another in one
process (a redactor process handles
``REDACTOR_CONCURRENCY`` messages at once, but NER holds the GIL: one process is about one core).

Not collected by pytest (timings on shared CI machines are noise, not a pass/fail signal); run it
by hand when changing recognizers or the spaCy model and compare with the README's figures.
"""

from __future__ import annotations

import os
import statistics
import time

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


def main() -> None:
    print(f"load average: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    started = time.perf_counter()
    redactor = Redactor(RedactorSettings())
    print(f"construct: {time.perf_counter() - started:.2f} s")
    for name, message in (("short", SHORT), ("long", LONG)):
        figures = measure(redactor, message)
        print(
            f"{name}: {len(message)} characters, {len(message.split())} words, {CALLS} calls: "
            f"median {figures['median_ms']:.2f} ms, p95 {figures['p95_ms']:.2f} ms, "
            f"processor {figures['cpu_ms']:.2f} ms a call, "
            f"{figures['messages_per_s']:.0f} messages/s"
        )
        print(f"  redacted: {redactor.redact(message).text}")


if __name__ == "__main__":
    main()
