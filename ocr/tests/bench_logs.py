"""How long the ocr service takes to read a log at the size limit.

Run ``python -m ocr.tests.bench_logs`` from the repository root. It builds a synthetic 5 MB log
(60,000 lines, 1 % of them errors with codes, errno names and a component), reads it as the
service does (decode, scan for signatures and error lines, trim) and prints the median and best
of five runs, with the size of the text kept.

Not collected by pytest (timings on shared machines are noise, not a pass/fail signal).
"""

from __future__ import annotations

import random
import statistics
import time

from ocr.config import OcrSettings
from ocr.logs import read_log


def synthetic_log(lines: int = 60_000, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    out = []
    for i in range(lines):
        stamp = f"2024-03-05 10:{i // 3600 % 60:02d}:{i % 60:02d}"
        if rng.random() < 0.01:
            out.append(f"{stamp} ERROR [vpnagent] connect ECONNREFUSED 10.0.0.{i % 255}:443 "
                       "hr=0x80070005")  # fmt: skip
        else:
            out.append(f"{stamp} INFO worker-{i % 8} processed request id={i} in {i % 500} ms "
                       "status=200")  # fmt: skip
    return "\n".join(out).encode()


def main() -> None:
    data = synthetic_log()
    settings = OcrSettings()
    timings = []
    for _ in range(5):
        began = time.perf_counter()
        log = read_log(data, settings)
        timings.append(time.perf_counter() - began)
    print(
        f"{len(data) / 1e6:.1f} MB, {log.lines} lines: median {statistics.median(timings):.2f} s, "
        f"best {min(timings):.2f} s; kept {len(log.text)} characters, {log.omitted} lines "
        f"omitted, signatures {log.signatures}"
    )


if __name__ == "__main__":
    main()
