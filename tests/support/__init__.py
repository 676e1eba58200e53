"""Helpers for Deskpilot's cross-service tests, importable by tests and by the programs they start.

* :func:`free_port` gives a server started by a test a port of its own.
* :func:`unique_name` gives every test its own streams, groups and keys, so tests never see each
  other's messages on the shared server.
* :func:`wait_until` (async) and :func:`wait_until_sync` (for sync tests, and where another event
  loop runs, like Playwright's sync API) are how a test waits for anything: short polls up to a
  deadline, never a fixed sleep. :func:`entry_gone` is what to wait for when a service must
  delete the raw entry it read.
* :class:`Children` starts Python programs from the repository root as subprocesses, keeps their
  output in a log file for failure messages, and kills whatever is still running at teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload
from uuid import uuid4

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The working directory of every child process, so ``contracts`` and ``tests`` import."""

SHARED = REPO_ROOT.parent / "shared"
"""What every developer and CI run has beside the repository (``../shared``, its README says
what): schemas and the data below. Tests read it in place; nothing of it is copied in."""

SHARED_DATA = SHARED / "data"
"""Real corpora beside the repository: help sites, knowledge bases, intents, tickets, PII."""

VECTOR_CACHE_VARIABLE = "DESKPILOT_TEST_VECTOR_CACHE"
"""Set by the root conftest.py for the whole test run (xdist workers inherit it)."""


@functools.cache
def vector_cache_dir() -> Path:
    """One vector cache (``DESKPILOT_EMBEDDING_CACHE_DIR``) for every stack and embedding test of
    this run, both xdist workers included: the stacks that start first embed the intent examples
    and demo articles, sharing the work between them (the cache's claims), and every later one
    reads them. The root conftest.py makes it and removes it when the run ends."""
    return Path(os.environ.get(VECTOR_CACHE_VARIABLE) or tempfile.mkdtemp(prefix="deskpilot-"))


T = TypeVar("T")


def deskpilot(
    *args: str, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run the ``deskpilot`` command as a user would, from the repository, and capture it."""
    return subprocess.run(
        [sys.executable, "-m", "deploy.cli", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        timeout=timeout,
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, chosen as the embedded runner chooses its children's ports
    (:func:`deploy.runner.free_port`), for services' tests, which may not import ``deploy``."""
    from deploy.runner import free_port as runner_free_port

    return runner_free_port(host)


def unique_name(prefix: str = "t") -> str:
    """A fresh stream, group or key name such as ``t.1a2b3c4d``."""
    return f"{prefix}.{uuid4().hex[:8]}"


@overload
async def wait_until(
    predicate: Callable[[], Awaitable[T]],
    timeout_s: float = ...,
    *,
    interval_s: float = ...,
    message: str | Callable[[], str] | None = ...,
) -> T: ...


@overload
async def wait_until(
    predicate: Callable[[], T],
    timeout_s: float = ...,
    *,
    interval_s: float = ...,
    message: str | Callable[[], str] | None = ...,
) -> T: ...


async def wait_until(
    predicate: Callable[[], Any],
    timeout_s: float = 20.0,
    *,
    interval_s: float = 0.05,
    message: str | Callable[[], str] | None = None,
) -> Any:
    """Poll ``predicate`` (sync or async) until it returns something truthy, and return that.

    Fails the test with ``message`` (a string, or a callable evaluated at the deadline, e.g. to
    include a child's log) when ``timeout_s`` passes first.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() >= deadline:
            raise _timed_out(predicate, timeout_s, message)
        await asyncio.sleep(interval_s)


def wait_until_sync(
    predicate: Callable[[], T],
    timeout_s: float = 20.0,
    *,
    interval_s: float = 0.05,
    message: str | Callable[[], str] | None = None,
) -> T:
    """:func:`wait_until` for code that must not (or cannot) run an event loop: blocks between
    polls."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise _timed_out(predicate, timeout_s, message)
        time.sleep(interval_s)


def _timed_out(
    predicate: Callable[[], object], timeout_s: float, message: str | Callable[[], str] | None
) -> AssertionError:
    detail = message() if callable(message) else message
    name = getattr(predicate, "__name__", repr(predicate))
    return AssertionError(
        f"timed out after {timeout_s:g}s waiting for {name}" + (f": {detail}" if detail else "")
    )


async def entry_gone(client: Any, topic: str, entry_id: str) -> bool:
    """Whether the entry ``entry_id`` of the stream ``topic`` is no longer there (``client``: an
    asynchronous Redis client)."""
    return not await client.xrange(topic, min=entry_id, max=entry_id)


@dataclass
class Child:
    """A running (or finished) child process and the file its output goes to."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def running(self) -> bool:
        return self.process.poll() is None

    def send_signal(self, signum: int = signal.SIGTERM) -> None:
        self.process.send_signal(signum)

    def log_tail(self, limit: int = 4000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "<no log>"
        return text[-limit:]

    async def wait_exit(self, timeout_s: float = 20.0) -> int:
        """Wait for the process to end and return its exit code (negative: killed by a signal)."""
        await wait_until(
            lambda: not self.running(),
            timeout_s,
            message=lambda: f"{self.name} (pid {self.pid}) to exit; log:\n{self.log_tail()}",
        )
        code = self.process.returncode
        assert code is not None
        return code

    def kill(self, timeout_s: float = 10.0) -> None:
        """SIGKILL and reap, if still running."""
        if self.running():
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout_s)


@dataclass
class Children:
    """The child processes one test started; :meth:`kill_all` runs at teardown, pass or fail."""

    log_dir: Path
    started: list[Child] = field(default_factory=list)

    def start_module(
        self,
        module: str,
        *args: str,
        env: Mapping[str, str],
        name: str | None = None,
    ) -> Child:
        """Run ``python -m module args...`` from the repository root with exactly ``env``."""
        name = name or module.rsplit(".", 1)[-1]
        log_path = self.log_dir / f"{name}-{len(self.started)}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                cwd=REPO_ROOT,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        child = Child(name, process, log_path)
        self.started.append(child)
        return child

    def kill_all(self) -> None:
        for child in self.started:
            child.kill()

    def logs(self) -> str:
        """Every child's log tail, for failure messages."""
        return "\n".join(
            f"--- {c.name} pid={c.pid} rc={c.returncode} ---\n{c.log_tail()}" for c in self.started
        )


def child_env(
    overrides: Mapping[str, str], base: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The caller's environment without Deskpilot/OpenTelemetry settings, plus ``overrides``.

    Inherited ``DESKPILOT_*``, ``REDIS_URL`` or ``OTEL_*`` variables would silently point a child
    at another server or exporter; tests say explicitly what a child gets.
    """
    source = os.environ if base is None else base
    env = {
        key: str(value)
        for key, value in source.items()
        if not key.startswith(("DESKPILOT_", "OTEL_", "REDIS_"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env
