"""`deskpilot up` as an operator runs it: answers, stops cleanly on Ctrl-C, keeps its data, and
makes an admin token of its own for each run when none is configured.

Both starts share the test run's vector cache (as every test stack does) instead of the data
directory's own: the default location is checked without a start in
``deploy/tests/test_runner_env.py``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import redis

from deploy.runner import free_port
from tests.support import REPO_ROOT, vector_cache_dir, wait_until_sync
from tests.support.stack import FAST_ENV, StackUser, new_user

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Run:
    """A running `deskpilot up`: its chat URL, its runtime file and what it has printed."""

    url: str
    runtime: dict[str, Any]
    log: Path

    def output(self) -> str:
        return self.log.read_text()

    def admin_token(self) -> str:
        """The token `up` generated for this run (none is configured in these tests)."""
        [token] = re.findall(r"Admin token for this run[^:]*: (\S+)", self.output())
        return token


@contextmanager
def deskpilot_up(data_dir: Path) -> Iterator[Run]:
    """Run `deskpilot up` until it prints that it is ready; Ctrl-C it afterwards and check. No
    admin token is configured, as on an operator's first try."""
    port = free_port()
    log = (data_dir.parent / f"up-{port}.log").open("w+")
    env = {
        **os.environ,
        **FAST_ENV,
        "DESKPILOT_EMBEDDING_CACHE_DIR": str(vector_cache_dir()),
    }
    env.pop("DESKPILOT_ADMIN_TOKEN", None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deploy.cli",
            "up",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def ready() -> bool:
            assert process.poll() is None, Path(log.name).read_text()
            return "Deskpilot is ready" in Path(log.name).read_text()

        wait_until_sync(ready, 300, interval_s=0.2, message=lambda: Path(log.name).read_text())
        runtime = json.loads((data_dir / "runtime.json").read_text())
        assert f"http://127.0.0.1:{port}" in Path(log.name).read_text()  # the chat URL is printed
        yield Run(f"http://127.0.0.1:{port}", runtime, Path(log.name))
        # The services running now (a test may have had one restarted since the start).
        children = json.loads((data_dir / "runtime.json").read_text())["children"]
        assert isinstance(children, dict)
        process.send_signal(signal.SIGINT)
        assert process.wait(120) == 0, Path(log.name).read_text()
        assert not [name for name, pid in children.items() if alive(int(pid))]
        assert not (data_dir / "runtime.json").exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        log.close()


@dataclass
class FirstRun:
    data_dir: Path
    answer: dict[str, Any]
    user: StackUser
    admin_token: str
    refused_tokens: dict[str, int]
    """What the admin API answered the first run to known defaults and to no token."""
    written: list[str]
    """Files of the data directory (Redis's aside) that held the generated token."""


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    """A first `deskpilot up` on a fresh data directory: one answered and rated turn of an
    anonymous user (who reads it back after the restart), the admin API tried with the
    generated token and with known defaults, then Ctrl-C (checked to stop cleanly)."""
    data_dir = tmp_path_factory.mktemp("restart") / "data"
    with deskpilot_up(data_dir) as run:
        url = run.url
        user = new_user(url)  # turns are their asker's
        first = httpx.post(
            f"{url}/api/chat",
            json={"text": "How do I reset my VPN password?"},
            headers=user.headers,
            timeout=60,
        )
        first_body: dict[str, Any] = first.json()
        assert first_body["action"] == "answer"
        rated = httpx.post(
            f"{url}/api/feedback",
            json={"turn_id": first_body["turn_id"], "score": 5},
            headers=user.headers,
            timeout=30,
        )
        assert rated.status_code == 201
        token = run.admin_token()
        assert run.output().count(token) == 1  # shown once
        tickets = f"{url}/api/admin/tickets"
        assert httpx.get(tickets, headers=bearer(token), timeout=30).status_code == 200
        refused = {
            known: httpx.get(tickets, headers=bearer(known), timeout=30).status_code
            for known in ("change-me", "changeme")
        }
        refused["no token"] = httpx.get(tickets, timeout=30).status_code
        written = [
            str(path.relative_to(data_dir))
            for path in data_dir.rglob("*")
            if path.is_file() and "redis" not in path.parts and token.encode() in path.read_bytes()
        ]
    return FirstRun(data_dir, first_body, user, token, refused, written)


@pytest.fixture(scope="module")
def second_run(first_run: FirstRun) -> Iterator[Run]:
    """`deskpilot up` again on the first run's data directory (one start serves both tests)."""
    with deskpilot_up(first_run.data_dir) as running:
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_up_makes_an_admin_token_per_run_and_shows_it_once(
    first_run: FirstRun, second_run: Run
) -> None:
    """No admin token configured: each `deskpilot up` generates its own, prints it once, keeps
    it out of its files, and no known default (`change-me`, none) opens the admin API."""
    assert len(first_run.admin_token) >= 40
    assert first_run.refused_tokens == {"change-me": 401, "changeme": 401, "no token": 401}
    assert first_run.written == []  # not in the logs, not in runtime.json
    second = second_run.admin_token()
    assert second != first_run.admin_token
    tickets = f"{second_run.url}/api/admin/tickets"
    assert httpx.get(tickets, headers=bearer(second), timeout=30).status_code == 200
    assert httpx.get(tickets, headers=bearer(first_run.admin_token), timeout=30).status_code == 401


def test_up_answers_stops_cleanly_and_keeps_its_data(first_run: FirstRun, second_run: Run) -> None:
    data_dir, first_body, user = first_run.data_dir, first_run.answer, first_run.user
    url, runtime = second_run.url, second_run.runtime
    turn = httpx.get(
        f"{url}/api/turns/{first_body['turn_id']}",
        headers=user.headers,  # the same user after the restart
        timeout=30,
    ).json()
    assert turn["status"] == "done"
    assert turn["answer"]["answer"] == first_body["answer"]
    client = redis.Redis.from_url(str(runtime["redis_url"]))
    assert client.exists(f"deskpilot:gateway:feedback:{first_body['turn_id']}")
    again = httpx.post(
        f"{url}/api/chat", json={"text": "How do I reset my VPN password?"}, timeout=60
    )
    # The same article answers from the kept data; the first run's rating (counted whenever its
    # event is handled, before or after the restart) may move the lesser citations.
    cited, first_cited = again.json()["citations"], first_body["citations"]
    assert cited[0] == first_cited[0]
    assert {c["url"] for c in cited} <= {c["url"] for c in first_cited}
    indexer_log = (data_dir / "logs" / "indexer.log").read_text()
    # The second start found every demo article unchanged and wrote nothing.
    assert "(0 indexed, 32 unchanged" in indexer_log


def test_a_crashed_service_is_restarted_by_the_runner(first_run: FirstRun, second_run: Run) -> None:
    data_dir = first_run.data_dir
    url, runtime = second_run.url, second_run.runtime
    children = runtime["children"]
    assert isinstance(children, dict)
    old_pid = int(children["orchestrator"])
    os.kill(old_pid, signal.SIGKILL)

    def restarted() -> bool:
        current = json.loads((data_dir / "runtime.json").read_text())
        now = current["children"]["orchestrator"]
        return bool(now != old_pid and alive(int(now)))

    wait_until_sync(restarted, 120, interval_s=0.2, message="orchestrator was not restarted")
    # Started again the way `up` starts every service: forked by the stack's fork server, which
    # had imported the libraries the services share (deploy/preload.py).
    new_pid = int(json.loads((data_dir / "runtime.json").read_text())["children"]["orchestrator"])
    assert "deploy.preload" in psutil.Process(new_pid).parent().cmdline()
    wait_until_sync(
        lambda: httpx.get(f"{url}/health", timeout=10).status_code == 200,
        120,
        interval_s=0.3,
        message="stack did not become healthy again",
    )
    body = httpx.post(f"{url}/api/chat", json={"text": "How do I unlock my account?"}, timeout=60)
    assert body.json()["action"] == "answer"
