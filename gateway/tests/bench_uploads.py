"""Uploads under load: what 10 MiB images cost the gateway and Redis, with and without the caps.

Run ``python -m gateway.tests.bench_uploads`` from the repository root. It starts a real valkey
and the gateway as its own process (``python -m gateway``, rate limits at their defaults), with
no ocr service, so every accepted image stays queued on ``attachment.received`` as it would
while the ocr service is down or busy. Two loads hit it, one after the other:

* one anonymous client sending ``--burst`` images at once (one anonymous token);
* ``--clients`` clients sending one image each at once (their own tokens and addresses, through
  ``X-Forwarded-For`` from a trusted proxy).

once with the caps lifted (as before they existed) and once with the defaults. It prints, per
run: the answers by status and error code, how long refused and accepted uploads took to be
answered, the gateway's peak resident memory, Redis's peak memory and the bytes queued for the
ocr service.

Not collected by pytest (figures on shared machines are measurements, not pass/fail signals).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import redis

from conftest import start_valkey
from contracts.topics import Topic
from tests.support import free_port

MIB = 1024 * 1024
IMAGE_BYTES = 10 * MIB - 4096
"""Just under GATEWAY_MAX_IMAGE_BYTES (10 MiB, with room for the multipart envelope)."""
UNCAPPED = {
    "GATEWAY_UPLOAD_CONCURRENCY_PER_USER": "100000",
    "GATEWAY_UPLOAD_CONCURRENCY_PER_IP": "100000",
    "GATEWAY_UPLOAD_CONCURRENCY_TOTAL": "100000",
    "GATEWAY_UPLOAD_MEMORY_BYTES": str(1 << 40),
    "GATEWAY_OCR_QUEUE_MAX_BYTES": str(1 << 40),
}


@dataclass
class Peaks:
    gateway_idle_rss: int = 0
    gateway_rss: int = 0
    redis_used: int = 0
    samples: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def watch(peaks: Peaks, pid: int, redis_url: str) -> None:
    process = psutil.Process(pid)
    client = redis.Redis.from_url(redis_url)
    while not peaks.stop.is_set():
        try:
            peaks.gateway_rss = max(peaks.gateway_rss, process.memory_info().rss)
            used = client.info("memory")["used_memory"]
            peaks.redis_used = max(peaks.redis_used, int(used))
            peaks.samples += 1
        except (psutil.Error, redis.RedisError):
            pass
        time.sleep(0.01)
    client.close()


def image() -> bytes:
    """A PNG by its first bytes (all the gateway looks at), incompressible after them."""
    return b"\x89PNG\r\n\x1a\n" + os.urandom(IMAGE_BYTES - 8)


async def one_upload(
    client: httpx.AsyncClient, data: bytes, headers: dict[str, str]
) -> tuple[str, float]:
    started = time.perf_counter()
    try:
        response = await client.post(
            "/api/attachments", files={"file": ("screen.png", data)}, headers=headers
        )
    except httpx.HTTPError as exc:
        return f"error {type(exc).__name__}", time.perf_counter() - started
    code = response.json().get("error_code", "") if response.status_code != 200 else ""
    return f"{response.status_code} {code}".strip(), time.perf_counter() - started


async def token(client: httpx.AsyncClient, address: str) -> str:
    response = await client.post("/api/anonymous", headers={"X-Forwarded-For": address})
    return str(response.json()["anonymous_token"])


async def load(url: str, burst: int, clients: int) -> dict[str, list[tuple[str, float]]]:
    data = image()
    limits = httpx.Limits(max_connections=burst + clients + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        one = await token(client, "198.51.100.1")
        same = {"Authorization": f"Bearer {one}", "X-Forwarded-For": "198.51.100.1"}
        first = await asyncio.gather(*(one_upload(client, data, same) for _ in range(burst)))
        many = []
        for n in range(clients):
            address = f"203.0.113.{n + 1}"
            many.append(
                {
                    "Authorization": f"Bearer {await token(client, address)}",
                    "X-Forwarded-For": address,
                }
            )
        second = await asyncio.gather(*(one_upload(client, data, h) for h in many))
    return {
        f"one client, {burst} at once": list(first),
        f"{clients} clients, one each at once": list(second),
    }


def start_gateway(
    redis_url: str, port: int, extra: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "GATEWAY_PORT": str(port),
        "GATEWAY_ATTACHMENT_TIMEOUT_S": "5",
        "GATEWAY_TRUSTED_PROXIES": "127.0.0.1",
        "DESKPILOT_ADMIN_TOKEN": "bench-admin-token-0123456789abcdef",
        "LOG_LEVEL": "WARNING",
        **extra,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[2],
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
            return process
        except httpx.HTTPError:
            assert process.poll() is None, log.read_text(errors="replace")
            time.sleep(0.3)
    raise RuntimeError("the gateway did not start")


def report(
    name: str, results: dict[str, list[tuple[str, float]]], peaks: Peaks, queued: int
) -> None:
    print(f"\n== {name}")
    for load_name, answers in results.items():
        counts = collections.Counter(status for status, _ in answers)
        print(f"  {load_name}:")
        for status, count in sorted(counts.items()):
            seconds = [elapsed for s, elapsed in answers if s == status]
            median = statistics.median(seconds)
            print(
                f"    {count:3d} x {status:<30} answered in median {median:6.2f} s"
                f" (max {max(seconds):6.2f} s)"
            )
    print(
        f"  gateway peak resident memory: {peaks.gateway_rss / MIB:8.0f} MiB "
        f"(idle {peaks.gateway_idle_rss / MIB:.0f} MiB)"
    )
    print(f"  Redis peak used memory:       {peaks.redis_used / MIB:8.0f} MiB")
    print(f"  queued for the ocr service:   {queued / MIB:8.0f} MiB (attachment.received)")


def run(name: str, extra: dict[str, str], burst: int, clients: int, data_dir: Path) -> None:
    server = start_valkey(data_dir / name.replace(" ", "-"))
    redis_url = f"{server.connection_url}/0"
    port = free_port()
    gateway = start_gateway(redis_url, port, extra, data_dir / f"{name.replace(' ', '-')}.log")
    peaks = Peaks(gateway_idle_rss=psutil.Process(gateway.pid).memory_info().rss)
    watcher = threading.Thread(target=watch, args=(peaks, gateway.pid, redis_url), daemon=True)
    watcher.start()
    try:
        results = asyncio.run(load(f"http://127.0.0.1:{port}", burst, clients))
        client = redis.Redis.from_url(redis_url)
        queued = int(client.memory_usage(Topic.ATTACHMENT_RECEIVED, samples=0) or 0)
        client.close()
    finally:
        peaks.stop.set()
        watcher.join(5)
        gateway.terminate()
        gateway.wait(30)
        server.stop()
    report(name, results, peaks, queued)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--burst", type=int, default=24, help="images one client sends at once")
    parser.add_argument("--clients", type=int, default=24, help="clients sending one image each")
    args = parser.parse_args()
    print(
        f"{IMAGE_BYTES / MIB:.1f} MiB images, no ocr service (every accepted one stays queued), "
        "rate limits at their defaults"
    )
    with tempfile.TemporaryDirectory() as data_dir:
        run("caps lifted", UNCAPPED, args.burst, args.clients, Path(data_dir))
        run("default caps", {}, args.burst, args.clients, Path(data_dir))


if __name__ == "__main__":
    main()
