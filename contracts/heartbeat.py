"""Service heartbeats: how the gateway's /health and container health checks know who is alive.

Every process writes ``deskpilot:heartbeat:<service>:<node>:<pid>`` every few seconds with a TTL of
three intervals, including the state of the dependencies it probes (Chroma, a model, ...). A key
that expired means the process is gone or stuck.

``python -m contracts.heartbeat check SERVICE`` exits 0 when SERVICE has a fresh heartbeat on this
node, for container health checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from contracts.settings import ServiceSettings

KEY_PREFIX = "deskpilot:heartbeat:"
Probe = Callable[[], Awaitable[bool]]

log = logging.getLogger("deskpilot.heartbeat")


def heartbeat_key(service: str, node: str, pid: int) -> str:
    return f"{KEY_PREFIX}{service}:{node}:{pid}"


class Heartbeat:
    """Writes this process's heartbeat until stopped."""

    def __init__(
        self,
        client: aioredis.Redis,
        service: str,
        node: str,
        interval_s: float,
        probes: dict[str, Probe] | None = None,
        *,
        stop_timeout_s: float = 5.0,
    ) -> None:
        self.client = client
        self.service = service
        self.node = node
        self.interval_s = interval_s
        self.probes = probes or {}
        self.key = heartbeat_key(service, node, os.getpid())
        self.stop_timeout_s = stop_timeout_s
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def beat(self) -> None:
        dependencies = {}
        for name, probe in self.probes.items():
            try:
                dependencies[name] = bool(await asyncio.wait_for(probe(), self.interval_s))
            except Exception:
                dependencies[name] = False
        value = json.dumps(
            {
                "service": self.service,
                "node": self.node,
                "pid": os.getpid(),
                "at": time.time(),
                "dependencies": dependencies,
            }
        )
        await self.client.set(self.key, value, px=int(self.interval_s * 3000))

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.beat()
            except Exception as exc:  # Redis down: keep trying, the bus reconnects too.
                log.warning("heartbeat failed", extra={"error": type(exc).__name__})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=self.interval_s)

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name=f"heartbeat-{self.service}")

    @property
    def beating(self) -> bool:
        """True while the loop that writes the heartbeat runs."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """End the loop, then remove the key; returns within about twice ``stop_timeout_s``.

        The loop is told to stop, not cancelled: on Python 3.11 ``asyncio.wait_for`` swallows a
        cancellation that arrives just as a probe returns, so a cancelled heartbeat could beat on
        for ever and its process never exit (:mod:`contracts.periodic` says why cancelling a Redis
        call is unreliable too). Cancelling remains the fallback for a call that hangs.
        """
        self._stopping.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=self.stop_timeout_s)
            if not done:
                log.warning("heartbeat did not stop in time; cancelled")
                self._task.cancel()
                await asyncio.wait({self._task}, timeout=self.stop_timeout_s)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.delete(self.key), timeout=self.stop_timeout_s)


async def read_heartbeats(client: aioredis.Redis) -> list[dict[str, Any]]:
    """Every live heartbeat, newest state of each process."""
    beats = []
    async for key in client.scan_iter(match=f"{KEY_PREFIX}*", count=200):
        raw = await client.get(key)
        if raw:
            with contextlib.suppress(ValueError):
                beats.append(json.loads(raw))
    return beats


async def _check(service: str) -> int:
    settings = ServiceSettings()
    client = aioredis.from_url(settings.redis_url, socket_timeout=3)
    try:
        beats = await read_heartbeats(client)
    except Exception as exc:
        print(f"redis unreachable: {type(exc).__name__}", file=sys.stderr)
        return 2
    finally:
        await client.aclose()
    mine = [b for b in beats if b["service"] == service and b["node"] == settings.node_name]
    if not mine:
        print(f"no fresh heartbeat from {service} on {settings.node_name}", file=sys.stderr)
        return 1
    unhealthy = [name for b in mine for name, ok in b["dependencies"].items() if not ok]
    if unhealthy:
        print(f"{service} reports dependencies down: {', '.join(unhealthy)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "check":
        print("usage: python -m contracts.heartbeat check SERVICE", file=sys.stderr)
        return 64
    return asyncio.run(_check(args[1]))


if __name__ == "__main__":
    sys.exit(main())
