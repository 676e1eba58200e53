"""The whole Deskpilot stack as an operator starts it (``deploy.runner.Stack``), for tests.

Valkey, a Chroma server and every service run as real processes on loopback, on a fresh data
directory, with short heartbeat and reclaim intervals so fault tests take seconds.

Starting a stack costs about 55 CPU-seconds, 25 with a warm vector cache (which every stack of a
test run shares: :func:`tests.support.vector_cache_dir`); its processes inherit the run's one
thread per native pool (the root conftest.py). So modules share one where they can:

* a package of modules shares one stack, started by its conftest.py with ``scope="package"`` and
  stopped after its last test: ``tests/shared`` (:data:`SHARED_ENV`, for every module whose
  tests need no settings of their own and leave nothing behind that another module's answers
  depend on), ``tests/admin`` (ratings, proposals, runtime configuration) and ``tests/browser``
  (the crawler on, a help site; one module so far). Its modules share an ``xdist_group`` (e.g.
  ``pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]``), so that one
  worker runs them all (:mod:`tests.support.scheduling`) and the stack starts once;
* a module-scoped ``stack`` fixture of its own, via :func:`running_stack`, where a module needs
  other settings or changes the stack (kills services, restarts Redis).

Every stack a test process starts forks its services from one fork server
(:func:`shared_fork_server`), which imports torch, spaCy, Presidio and the rest once for the
process instead of once a stack (12 CPU-seconds each, before any service could start).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from uuid import uuid4

import httpx

from deploy.preload import ForkServer
from deploy.runner import PROCESS_ENV, Child, RunnerSettings, Stack, free_port
from tests.support import vector_cache_dir, wait_until_sync
from tests.support.chromium import require_chromium

FAST_ENV = {
    "DESKPILOT_HEARTBEAT_INTERVAL": "0.5",
    "DESKPILOT_RECLAIM_IDLE_MS": "1500",
    "DESKPILOT_GRACEFUL_TIMEOUT": "20",
    "GATEWAY_TURN_TIMEOUT_S": "60",
}


SHARED_ADMIN_TOKEN = f"test-admin-{uuid4().hex}"
"""The admin token of the shared stack (tests/shared)."""
SHARED_MAX_LOG_BYTES = 200_000
"""The shared stack's ``GATEWAY_MAX_LOG_BYTES`` (small, so a test can send a log over it)."""
SHARED_MAX_UPLOAD_BYTES = 100_000
"""The shared stack's ``GATEWAY_MAX_UPLOAD_BYTES``."""
SHARED_ENV = {
    "DESKPILOT_ADMIN_TOKEN": SHARED_ADMIN_TOKEN,
    "GATEWAY_MAX_LOG_BYTES": str(SHARED_MAX_LOG_BYTES),
    "GATEWAY_MAX_UPLOAD_BYTES": str(SHARED_MAX_UPLOAD_BYTES),
}
"""The shared stack's settings beyond :data:`FAST_ENV`: the union of what its modules need."""
SHARED_MCP_TOKEN = f"mcp-{uuid4().hex}{uuid4().hex}"
"""The bearer token of the shared stack's MCP client ``itsm``, an employee
(tests/shared/conftest.py turns the channels on, pointed at a local Slack and Bot Framework)."""
SHARED_MCP_NOC_TOKEN = f"mcp-noc-{uuid4().hex}{uuid4().hex}"
"""The bearer token of the shared stack's MCP client ``noc``, a technician (reports incidents)."""
SHARED_SLACK_CHANNEL = "C0ITHELP"
"""The Slack channel the shared stack's app is in."""
SHARED_SLACK_USER = ("U0ALICE", "alice@northwind.example")
"""A Slack user of the shared stack's workspace, and the e-mail her profile gives."""


HELP_SITE = Path(__file__).parent.parent / "sites"
"""The company help site the crawl tests serve on loopback (``/help/index.html``)."""


def help_site_env(seed: str) -> dict[str, str]:
    """A stack that crawls the help site at ``seed`` when its knowledge base falls short; skips
    the test where no Chromium is installed (fails it with ``CI=true``)."""
    require_chromium()
    return {
        "CRAWL_SEED_URLS": seed,
        "CRAWLER_ALLOW_NETWORKS": "127.0.0.0/8",
        "ORCHESTRATOR_CRAWL_MAX_PAGES": "8",
        "ORCHESTRATOR_CRAWL_CONCURRENCY": "2",
        "ORCHESTRATOR_CRAWL_DEADLINE_S": "40",
        "GATEWAY_TURN_TIMEOUT_S": "90",
    }


@functools.cache
def shared_fork_server() -> ForkServer:
    """One fork server for every stack of this test process, closed when the process ends (a
    stack started from it leaves it running when it stops)."""
    server = ForkServer({**os.environ, **PROCESS_ENV})
    atexit.register(server.close)
    return server


@contextmanager
def running_stack(
    data_dir: Path,
    extra_env: dict[str, str] | None = None,
    *,
    crawler: Literal["on", "off"] = "off",
    crawler_workers: int = 1,
) -> Iterator[Stack]:
    """The whole stack as ``deskpilot up`` starts it; the crawler only when a test needs it."""
    settings = RunnerSettings(
        data_dir=data_dir,
        ready_timeout_s=900,  # it took 8 minutes on a machine loaded 15 times over its 2 cores
        stop_timeout_s=30,
        crawler=crawler,
        crawler_workers=crawler_workers,
    )
    stack = Stack(
        settings,
        port=free_port(),
        extra_env={
            **FAST_ENV,
            "DESKPILOT_EMBEDDING_CACHE_DIR": str(vector_cache_dir()),
            **(extra_env or {}),
        },
        say=lambda _: None,
        fork_server=shared_fork_server(),
    )
    try:
        stack.start()
        if not stack.wait_ready():
            raise AssertionError(not_ready_report(stack))
        yield stack
    finally:
        stack.stop()


def child(stack: Stack, name: str) -> Child:
    return next(c for c in stack.children if c.name == name)


def restart_child(stack: Stack, name: str, env: dict[str, str] | None = None) -> Child:
    """Stop a service (SIGKILL if still running) and start it again, optionally with more env."""
    old = child(stack, name)
    if old.running():
        assert old.process is not None
        old.process.kill()
        old.process.wait(10)
    old.env = {**old.env, **(env or {})}
    old.start()
    return old


def logs(
    stack: Stack,
    names: tuple[str, ...] = ("gateway", "redactor", "orchestrator"),
    tail: int = 3000,
) -> str:
    """The last ``tail`` characters of each named service's log."""
    out = []
    for name in names:
        path = stack.data_dir / "logs" / f"{name}.log"
        if path.exists():
            out.append(f"--- {name}\n{path.read_text(errors='replace')[-tail:]}")
    return "\n".join(out)


def not_ready_report(stack: Stack) -> str:
    """Why a stack did not become ready: the gateway's problems, the children that exited, and
    the end of every log after each running service was asked for its threads' stacks
    (SIGUSR1, :func:`contracts.logs.enable_stack_dumps`), which shows where a stuck one waits."""
    reason = stack.not_ready()
    for running in stack.children:
        if running.running() and running.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(running.process.pid, signal.SIGUSR1)
    time.sleep(1.0)
    names = tuple(c.name for c in stack.children) + (("chroma",) if stack.chroma else ())
    return f"stack not healthy: {reason}; logs:\n{logs(stack, names, 6000)}"


def log_records(stack: Stack, name: str) -> list[dict[str, Any]]:
    """The JSON log lines a service wrote (other output, like progress bars, is skipped)."""
    records = []
    path = stack.data_dir / "logs" / f"{name}.log"
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


@dataclass(frozen=True)
class StackUser:
    """An anonymous user of a running stack: the gateway-signed token that makes turns,
    conversations and attachments theirs (anyone else gets the 404 of an unknown id)."""

    token: str
    user_id: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def new_user(url: str | Stack) -> StackUser:
    """A new anonymous user of the gateway at ``url`` (``POST /api/anonymous``)."""
    base = url.url if isinstance(url, Stack) else url
    response = httpx.post(f"{base}/api/anonymous", timeout=30)
    response.raise_for_status()
    body = response.json()
    return StackUser(token=str(body["anonymous_token"]), user_id=str(body["user_id"]))


def ask(stack: Stack, text: str, *, user: StackUser | None = None, **fields: Any) -> httpx.Response:
    """``POST /api/chat`` as ``user``; a new anonymous user when None (so tests never share a
    user's rate limit). Pass the same user, and the answer's ``conversation_id``, to go on."""
    asker = user or new_user(stack)
    return httpx.post(
        f"{stack.url}/api/chat",
        json={"text": text, **fields},
        headers=asker.headers,
        timeout=90,
    )


def source_synced(stack: Stack, admin_token: str, source: str, after: str | None) -> dict[str, Any]:
    """Request a sync of the knowledge source ``source`` as the admin and wait for a run that
    ended after ``after`` (a ``last_finished_at``, None for the first); the source's status."""
    headers = {"Authorization": f"Bearer {admin_token}"}
    path = f"{stack.url}/api/admin/sources/{source}"
    assert httpx.post(f"{path}/sync", headers=headers, timeout=30).status_code == 202

    def done() -> dict[str, Any] | None:
        status: dict[str, Any] = httpx.get(path, headers=headers, timeout=30).json()
        finished = status.get("last_finished_at")
        return status if finished and finished != after else None

    return wait_until_sync(done, 300)
