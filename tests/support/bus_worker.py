"""A minimal Deskpilot worker that delivery tests run as a subprocess.

    python -m tests.support.bus_worker --topic T --mode M [--service S] [--group G] [--seconds N]

It is built like a service (:class:`contracts.runtime.Worker`, :func:`contracts.runtime.run`,
:meth:`contracts.bus.Bus.subscribe`) and reads its settings from the environment (``REDIS_URL``,
``DESKPILOT_*``), so what a test observes is what a deployed service does.

Every handler call leaves traces in Redis for the test to assert on:

* ``deliveries:<topic>``: a list with one ``<pid>:<event_id>`` per handler call.
* The side effect, idempotent by event id: ``effect:<event_id>`` is set (NX, to the pid that did
  it) and, only when it was newly set, ``count:<topic>`` is incremented, in one atomic script.
  ``count:<topic>`` is therefore the number of distinct effects, whatever the redeliveries.

Modes:

* ``normal``: the side effect, then return (the bus acks).
* ``effect-then-crash``: on the first delivery of an event (marker ``crashed:<event_id>`` absent),
  the side effect and then ``os._exit(137)`` before returning, i.e. before the ack, like a process
  killed at the worst moment. Later deliveries behave like ``normal``.
* ``slow``: sleep ``--seconds`` inside the handler, then the side effect.

Readiness: the heartbeat ``deskpilot:heartbeat:<service>:<node>:<pid>`` appears once the bus has
started consuming.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator

from pydantic import Field

from contracts.bus import Bus, Delivery
from contracts.events import Event
from contracts.heartbeat import Probe
from contracts.runtime import Worker, run
from contracts.settings import ServiceSettings

MODES = ("normal", "effect-then-crash", "slow")
CRASH_EXIT_CODE = 137

# SET effect:<id> <pid> NX and, only if it was newly set, INCR count:<topic>; atomically, so a
# crash cannot fall between the two.
_EFFECT_SCRIPT = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
    return redis.call('INCR', KEYS[2])
end
return 0
"""


class ProbeEvent(Event):
    """The event delivery tests publish: the envelope plus one free-text field."""

    payload: str = Field(description="Anything; tests use it to tell events apart.")


def deliveries_key(topic: str) -> str:
    return f"deliveries:{topic}"


def effect_key(event_id: str) -> str:
    return f"effect:{event_id}"


def count_key(topic: str) -> str:
    return f"count:{topic}"


def crash_marker_key(event_id: str) -> str:
    return f"crashed:{event_id}"


def build_worker(args: argparse.Namespace) -> Worker:
    settings = ServiceSettings()
    bus = Bus(settings, args.service)
    pid = str(os.getpid())

    async def handle(event: ProbeEvent, delivery: Delivery) -> None:
        redis = bus.redis
        await redis.rpush(deliveries_key(args.topic), f"{pid}:{event.event_id}")
        if args.mode == "slow":
            await asyncio.sleep(args.seconds)
        crash = args.mode == "effect-then-crash" and bool(
            await redis.set(crash_marker_key(event.event_id), pid, nx=True)
        )
        await redis.eval(  # type: ignore[misc]
            _EFFECT_SCRIPT, 2, effect_key(event.event_id), count_key(args.topic), pid
        )
        if crash:
            # Die like SIGKILL would: no finally blocks, no ack, no graceful shutdown.
            os._exit(CRASH_EXIT_CODE)

    @contextlib.asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        bus.subscribe(args.topic, ProbeEvent, handle, group=args.group or args.service)
        yield {}

    return Worker(bus, resources)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.support.bus_worker")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--mode", choices=MODES, default="normal")
    parser.add_argument("--service", default="bus-worker")
    parser.add_argument("--group", default=None, help="consumer group (default: the service)")
    parser.add_argument("--seconds", type=float, default=2.0, help="handler time in slow mode")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run(lambda: build_worker(args))


if __name__ == "__main__":
    sys.exit(main())
