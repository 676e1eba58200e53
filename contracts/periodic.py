"""Background work repeated at an interval for as long as a block runs, stopped reliably.

Cancelling a task that is inside a Redis call is not reliable: the client may turn the
cancellation into a connection error, which a retry loop then catches and carries on from, and
the ``await`` on the cancelled task never returns. :func:`every` does not cancel: it sets a stop
flag that the loop checks between rounds and while it sleeps, so the loop ends at the latest when
the call in flight returns. Cancellation remains the fallback when that call hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger("deskpilot.periodic")


@contextlib.asynccontextmanager
async def every(
    interval_s: float,
    work: Callable[[], Awaitable[object]],
    *,
    name: str,
    errors: tuple[type[BaseException], ...] = (Exception,),
    stop_timeout_s: float = 5.0,
) -> AsyncIterator[None]:
    """Run ``work`` every ``interval_s`` seconds (first after one interval) while the block runs.

    An exception of a type in ``errors`` is logged and the next round retries; anything else
    ends the loop and is logged. On leaving the block the loop is told to stop and awaited for at
    most ``stop_timeout_s`` seconds (the call in flight, if any), then cancelled.
    """
    stop = asyncio.Event()

    async def loop() -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
            if stop.is_set():
                return
            try:
                await work()
            except errors as exc:
                log.warning(
                    "periodic work failed; retrying next round",
                    extra={"task": name, "error": type(exc).__name__},
                )

    task = asyncio.create_task(loop(), name=name)
    try:
        yield
    finally:
        stop.set()
        done, _ = await asyncio.wait({task}, timeout=stop_timeout_s)
        if not done:
            log.warning("periodic work did not stop in time; cancelled", extra={"task": name})
            task.cancel()
            await asyncio.wait({task}, timeout=stop_timeout_s)
        elif not task.cancelled() and (exc := task.exception()) is not None:
            log.error(
                "periodic work ended with an error",
                extra={"task": name, "error": type(exc).__name__},
            )
