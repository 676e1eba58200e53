"""How a worker service process runs: resources, bus, heartbeat, signals, exit codes.

A service's ``app.py`` builds a :class:`Worker` from its bus and a ``resources`` context manager
that loads heavy things once (models, clients), registers the handlers and yields the dependency
probes its heartbeat reports. ``__main__`` calls :func:`run`. Once the bus consumes, the worker
serves its metrics on ``DESKPILOT_METRICS_PORT`` when one is set (:mod:`contracts.metrics`).

Exit codes: 0 after SIGTERM/SIGINT (in-flight messages finished and acked); 3 when the bus stopped
by itself (for example its consumer group vanished), so a supervisor restarts the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from contracts.bus import Bus
from contracts.heartbeat import Heartbeat, Probe
from contracts.logs import configure_logging, enable_stack_dumps
from contracts.metrics import serve_metrics
from contracts.tracing import shutdown_tracing

log = logging.getLogger("deskpilot.runtime")

EXIT_OK = 0
EXIT_BUS_STOPPED = 3

Resources = Callable[[Bus], AbstractAsyncContextManager[dict[str, Probe]]]


@dataclass
class Worker:
    bus: Bus
    resources: Resources

    @property
    def service(self) -> str:
        return self.bus.service

    def consuming(self) -> bool:
        return all(sub.running for sub in self.bus.broker.subscribers)

    async def serve(self, stop: asyncio.Event) -> int:
        async with self.resources(self.bus) as probes:
            await self.bus.start()
            heartbeat = Heartbeat(
                self.bus.redis,
                self.service,
                self.bus.settings.node_name,
                self.bus.settings.heartbeat_interval_s,
                {**probes, "bus": self._probe_bus},
            )
            heartbeat.start()
            metrics_server = serve_metrics(self.bus.settings, self.service)
            log.info("started", extra={"consumer": self.bus.consumer})
            code = EXIT_OK
            try:
                while not stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=1.0)
                    if not stop.is_set() and not self.consuming():
                        log.error("a subscriber stopped on its own; exiting to be restarted")
                        code = EXIT_BUS_STOPPED
                        break
            finally:
                log.info("stopping: finishing in-flight messages")
                if metrics_server is not None:
                    await asyncio.to_thread(metrics_server.close)
                await heartbeat.stop()
                await self.bus.stop()
                log.info("stopped")
            return code

    async def _probe_bus(self) -> bool:
        return self.consuming()


def run(worker_factory: Callable[[], Worker]) -> int:
    """Build the worker, run it until SIGTERM/SIGINT, return the process exit code."""
    enable_stack_dumps()
    worker = worker_factory()
    settings = worker.bus.settings
    configure_logging(worker.service, settings.node_name, settings.log_level)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        try:
            return await worker.serve(stop)
        finally:
            shutdown_tracing()

    return asyncio.run(main())


@contextlib.asynccontextmanager
async def no_resources(_: Bus) -> AsyncIterator[dict[str, Probe]]:
    yield {}
