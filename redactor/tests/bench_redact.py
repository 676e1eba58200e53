"""Latency of :meth:`Redactor.redact` on a typical chat message.

Run ``python -m redactor.tests.bench_redact`` from the repository root.

Not collected by pytest (timings on shared CI machines are noise, not a pass/fail signal); run it
by hand when changing recognizers or the spaCy model and compare the median with the last one.
"""

from __future__ import annotations

import statistics
import time

from redactor.config import RedactorSettings
from redactor.service import Redactor

# 20 words, with a name, an e-mail address, a product name and a password, like a real request.
MESSAGE = (
    "I am John Smith, Outlook keeps asking for my password on Windows. "
    "Mail me at john.smith@contoso.com, my password is hunter2"
)
CALLS = 200


def main() -> None:
    started = time.perf_counter()
    redactor = Redactor(RedactorSettings())
    print(f"construct: {time.perf_counter() - started:.2f} s")
    redactor.redact(MESSAGE)  # the first call pays for lazy initialisation
    timings = []
    for _ in range(CALLS):
        started = time.perf_counter()
        redactor.redact(MESSAGE)
        timings.append(time.perf_counter() - started)
    print(f"words: {len(MESSAGE.split())}, calls: {CALLS}")
    print(f"median: {statistics.median(timings) * 1000:.2f} ms")
    print(f"p95: {statistics.quantiles(timings, n=20)[-1] * 1000:.2f} ms")
    print(f"redacted: {redactor.redact(MESSAGE).text}")


if __name__ == "__main__":
    main()
