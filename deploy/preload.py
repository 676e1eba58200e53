"""A fork server for the embedded runner: the libraries every service imports, imported once.

Each Deskpilot service is its own process, and most of a service's start is spent importing the
same large libraries (torch, transformers, sentence-transformers, spaCy, Presidio, Chroma's
client): 55-80 % of the CPU a service burns before it is ready, measured with py-spy. The embedded
runner therefore starts one ``python -m deploy.preload`` process that imports them and then forks
each service from itself, as a zygote does: every service still runs in a process of its own
(own pid, own session, own log, killed and restarted alone), it only starts with those modules
already loaded. The fork server imports libraries and reads the data tables services read the
same from installed packages (:data:`WARMED`), and nothing of Deskpilot's state: no settings
read, no model loaded, no thread started, no event loop, so nothing is shared that should not be.

The server's arguments name what it loads: modules, and ``module:function`` for data
(by default :data:`PRELOADED` and :data:`WARMED`). Protocol, one JSON object per line: the
runner writes
``{"id": n, "module": "orchestrator", "env": {...}, "log": "/path/or/null"}`` to the server's
stdin; the server answers on its stdout ``{"id": n, "pid": 1234}`` (or ``{"id": n, "error":
"..."}``) and, whenever a child exits, ``{"exited": 1234, "code": 0}`` (a signal's death is
``-signum``, as :class:`subprocess.Popen` reports it). The server reaps its children, so none is
left a zombie. When its stdin closes (the runner stopped, or died) it sends SIGTERM to the
children still running, waits for them a little, and exits.

:class:`ForkServer` is the runner's side; :class:`ForkedProcess` stands for a child with the part
of :class:`subprocess.Popen` the runner and the tests use (``pid``, ``poll``, ``wait``,
``send_signal``, ``terminate``, ``kill``, ``returncode``).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

PRELOADED: tuple[str, ...] = (
    "numpy",
    "torch",
    "transformers",
    "sentence_transformers",
    "spacy",
    "presidio_analyzer",
    "chromadb",
    "easyocr",
    "faststream.redis",
    "fastapi",
    "uvicorn",
    "playwright.async_api",
)
"""What the services import that costs time: third-party libraries only, imported for their
code, never called. A library that is not installed (the crawler's extra) is skipped."""

WARMED: tuple[str, ...] = ("redactor.names:given_names",)
"""Data every process of a service reads the same from an installed package, read once here:
``module:function``, a function of no argument that caches what it returns, starts no thread
and reads no setting. The redactor's name gazetteer is 22 MB of JSON, 3-5 s of its start and
the longest part of a stack's. Skipped where the module is not installed."""

REAP_INTERVAL_S = 0.05
STOP_GRACE_S = 10.0


# -- the server ----------------------------------------------------------------------------------


@dataclass
class Request:
    id: int
    module: str
    env: dict[str, str]
    log: str | None


def preload(names: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``names``; those installed."""
    loaded = []
    for name in names:
        if importlib.util.find_spec(name.split(".")[0]) is None:
            continue
        importlib.import_module(name)
        loaded.append(name)
    return loaded


def warm(loaders: tuple[str, ...] = WARMED) -> list[str]:
    """Call ``loaders`` (``module:function``, see :data:`WARMED`); those called."""
    warmed = []
    for loader in loaders:
        module, _, function = loader.partition(":")
        if importlib.util.find_spec(module.split(".")[0]) is None:
            continue
        getattr(importlib.import_module(module), function)()
        warmed.append(loader)
    return warmed


def _write(out: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(out, data) :]


def _reap(out: int, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _write(out, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _stop(out: int, children: set[int]) -> None:
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while children and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            _reap(out, children)
        time.sleep(REAP_INTERVAL_S)
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def serve(requests: int, out: int) -> Request | None:
    """Fork a child for each request read from fd ``requests`` and report on fd ``out``; returns
    the request in the forked child (which then becomes the service), None in the server once
    its input has closed."""
    children: set[int] = set()
    pending = b""
    while True:
        readable, _, _ = select.select([requests], [], [], REAP_INTERVAL_S)
        _reap(out, children)
        if not readable:
            continue
        chunk = os.read(requests, 65536)
        if not chunk:
            _stop(out, children)
            return None
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            try:
                body = json.loads(line)
                request = Request(
                    int(body["id"]), str(body["module"]), dict(body["env"]), body.get("log")
                )
            except (ValueError, KeyError, TypeError) as exc:
                _write(out, {"id": None, "error": f"unreadable request: {exc}"})
                continue
            try:
                pid = os.fork()
            except OSError as exc:
                _write(out, {"id": request.id, "error": f"fork failed: {exc}"})
                continue
            if pid == 0:
                os.close(requests)
                os.close(out)
                return request
            children.add(pid)
            _write(out, {"id": request.id, "pid": pid})


def become(request: Request) -> NoReturn:
    """In a forked child: detach, take the service's output and environment, and run it as
    ``python -m <module>`` would, then end the process with the service's exit code.

    The end skips the interpreter's finalisation, as forked children of a server commonly do:
    once the service has stopped (its messages acked, its connections closed, its spans
    flushed), tearing down the graph of modules it was forked with (torch, spaCy, Presidio,
    Chroma's client) took 3-4 s of CPU per service, for nothing. Logs and standard streams are
    flushed first, and ``atexit`` handlers still run."""
    os.setsid()  # its own session, as the runner's children always had
    signal.signal(signal.SIGINT, signal.default_int_handler)  # what a new interpreter has
    for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    stdin = os.open(os.devnull, os.O_RDONLY)  # fd 0 was the server's input, closed by now
    if stdin != 0:
        os.dup2(stdin, 0)
        os.close(stdin)
    if request.log:
        log = os.open(request.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    else:
        os.dup2(2, 1)  # the runner's terminal (the server's stdout is its pipe)
    os.environ.clear()
    os.environ.update(request.env)
    sys.argv = [request.module]
    code = 0
    try:
        runpy.run_module(request.module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    _finish(code)


def _exit_code(code: object) -> int:
    """The process exit code of ``sys.exit(code)``, as the interpreter would make it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(code: int) -> NoReturn:
    """Run ``atexit`` handlers, flush logging and the standard streams, and exit at once."""
    try:
        atexit._run_exitfuncs()
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(code)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    requests, out = sys.stdin.fileno(), os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print cannot break the protocol
    names = tuple(sys.argv[1:]) or (*PRELOADED, *WARMED)
    loaded = preload(tuple(name for name in names if ":" not in name))
    loaded += warm(tuple(name for name in names if ":" in name))
    _write(out, {"ready": loaded})
    request = serve(requests, out)
    if request is not None:
        become(request)


# -- the runner's side ---------------------------------------------------------------------------


class ForkServerError(RuntimeError):
    """The fork server could not start a service (the runner then starts it the usual way)."""


class ForkedProcess:
    """A service forked by the :class:`ForkServer`: the parts of :class:`subprocess.Popen` the
    runner and the tests use. Its exit is reported by the server, which reaps it."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]) -> None:
        self._server = server
        self.pid = pid
        self.args = args

    @property
    def returncode(self) -> int | None:
        return self._server.exit_code(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._server.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The runner's handle on one ``python -m deploy.preload`` process."""

    def __init__(
        self,
        env: dict[str, str],
        modules: tuple[str, ...] = PRELOADED,
        start_timeout_s: float = 600.0,
        warmed: tuple[str, ...] = WARMED,
    ) -> None:
        self.start_timeout_s = start_timeout_s
        self._process = subprocess.Popen(  # nosec B603 # this package's own module, no shell
            [sys.executable, "-m", "deploy.preload", *modules, *warmed],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C reaches the runner only
        )
        self._lock = threading.Condition()
        self._next_id = 0
        self._started: dict[int, int | str] = {}
        self._exits: dict[int, int] = {}
        self._pids: set[int] = set()
        self._closed = False
        self.preloaded: list[str] | None = None
        self._reader = threading.Thread(target=self._read, name="fork-server", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None  # nosec B101 # stdout=PIPE above
        for line in self._process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "ready" in message:
                    self.preloaded = list(message["ready"])
                elif "exited" in message:
                    self._exits[int(message["exited"])] = int(message["code"])
                elif message.get("id") is not None:
                    self._started[int(message["id"])] = message.get("pid") or str(
                        message.get("error")
                    )
                self._lock.notify_all()
        with self._lock:
            self._closed = True
            # The server is gone: nobody reports these children's exits any more, so they are
            # stopped here (orphans the runner could not supervise) and counted as killed.
            for pid in self._pids - set(self._exits):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._exits[pid] = -signal.SIGKILL
            self._lock.notify_all()

    def spawn(self, module: str, env: dict[str, str], log: Path | None) -> ForkedProcess:
        """Fork ``python -m module`` with ``env``, its output appended to ``log``."""
        with self._lock:
            if self._closed or self._process.stdin is None:
                raise ForkServerError("the fork server has exited")
            self._next_id += 1
            request_id = self._next_id
            line = {"id": request_id, "module": module, "env": env, "log": log and str(log)}
            try:
                self._process.stdin.write((json.dumps(line) + "\n").encode())
                self._process.stdin.flush()
            except OSError as exc:
                raise ForkServerError(f"the fork server does not listen: {exc}") from exc
            answered = self._lock.wait_for(
                lambda: request_id in self._started or self._closed, self.start_timeout_s
            )
            result = self._started.pop(request_id, None)
            if not answered or result is None:
                raise ForkServerError("the fork server did not answer")
            if isinstance(result, str):
                raise ForkServerError(result)
            self._pids.add(result)
            return ForkedProcess(self, result, [sys.executable, "-m", module])

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._lock:
            self._lock.wait_for(lambda: pid in self._exits, timeout)
            return self._exits.get(pid)

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the server has imported what it preloads (True) or has exited (False). It
        reads no request before, so no child can exist while this waits."""
        with self._lock:
            self._lock.wait_for(lambda: self.preloaded is not None or self._closed, timeout)
            return self.preloaded is not None

    def close(self, timeout: float = 30.0) -> None:
        """Stop the server (it stops any child still running first). One still importing has
        no child yet and would read its closed input only once its imports are done: it is
        killed at once."""
        with self._lock:
            importing = self.preloaded is None and not self._closed
        if importing:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        stdin: IO[bytes] | None = self._process.stdin
        if stdin is not None:
            with contextlib.suppress(OSError):
                stdin.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(5)
        self._reader.join(5)


if __name__ == "__main__":
    main()
