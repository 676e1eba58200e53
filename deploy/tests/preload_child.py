"""A stand-in service for the fork server's tests: ``python -m deploy.tests.preload_child``.

It prints what it was started with (its argv, one variable of its environment, whether a module
the server preloads was already imported, whether data the server warms was already read, its
session), then behaves as ``PRELOAD_CHILD_DO`` says: ``exit:N`` exits with N, ``exit:text``
with a message, ``sleep`` waits for a signal, ``raise`` dies of an exception. Before it exits
it registers an ``atexit`` handler that prints, and leaves a line in stdout's buffer and one in
a logging handler's, none of them flushed."""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import time


def table_warmed() -> bool:
    """Whether the server had read :func:`deploy.tests.preload_data.table` before the fork."""
    module = sys.modules.get("deploy.tests.preload_data")
    return module is not None and module.table.cache_info().currsize == 1


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "argv0": sys.argv[0],
                "marker": os.environ.get("PRELOAD_CHILD_MARKER"),
                "inherited": os.environ.get("PRELOAD_SERVER_ONLY"),
                "decimal_preloaded": "decimal" in sys.modules,
                "table_warmed": table_warmed(),
                "own_session": os.getsid(0) == os.getpid(),
                "stdin": sys.stdin.read(),
            }
        ),
        flush=True,
    )
    action = os.environ.get("PRELOAD_CHILD_DO", "exit:0")
    if action == "sleep":
        while True:
            time.sleep(1)
    if action == "raise":
        raise RuntimeError("the stand-in service failed")
    atexit.register(print, "atexit handler ran")
    logging.basicConfig(stream=sys.stdout, format="%(message)s", level=logging.INFO)
    logging.getLogger("preload_child").info("a logged line")
    print("a buffered line")  # stdout is a file here: block-buffered
    code = action.split(":", 1)[1]
    sys.exit(int(code) if code.isdigit() else code)
