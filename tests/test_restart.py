"""`deskpilot up` as an operator runs it: answers, stops cleanly on Ctrl-C, keeps its data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from deploy.runner import free_port
from tests.support import REPO_ROOT, wait_until_sync
from tests.support.stack import FAST_ENV, StackUser, new_user

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def deskpilot_up(data_dir: Path) -> Iterator[tuple[str, dict[str, object]]]:
    """Run `deskpilot up` until it prints that it is ready; Ctrl-C it afterwards and check."""
    port = free_port()
    log = (data_dir.parent / f"up-{port}.log").open("w+")
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
        env={**os.environ, **FAST_ENV},
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
        yield f"http://127.0.0.1:{port}", runtime
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


@pytest.fixture(scope="module")
def first_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, Any], StackUser]:
    """A first `deskpilot up` on a fresh data directory: one answered and rated turn of an
    anonymous user (who reads it back after the restart), then Ctrl-C (checked to stop
    cleanly)."""
    data_dir = tmp_path_factory.mktemp("restart") / "data"
    with deskpilot_up(data_dir) as (url, _):
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
    return data_dir, first_body, user


@pytest.fixture(scope="module")
def second_run(
    first_run: tuple[Path, dict[str, Any], StackUser],
) -> Iterator[tuple[str, dict[str, object]]]:
    """`deskpilot up` again on the first run's data directory (one start serves both tests)."""
    data_dir, _, _ = first_run
    with deskpilot_up(data_dir) as running:
        yield running


def test_up_answers_stops_cleanly_and_keeps_its_data(
    first_run: tuple[Path, dict[str, Any], StackUser],
    second_run: tuple[str, dict[str, object]],
) -> None:
    data_dir, first_body, user = first_run
    url, runtime = second_run
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
    assert again.json()["citations"] == first_body["citations"]
    indexer_log = (data_dir / "logs" / "indexer.log").read_text()
    # The second start found every demo article unchanged and wrote nothing.
    assert "(0 indexed, 32 unchanged" in indexer_log


def test_a_crashed_service_is_restarted_by_the_runner(
    first_run: tuple[Path, dict[str, Any], StackUser],
    second_run: tuple[str, dict[str, object]],
) -> None:
    data_dir, _, _ = first_run
    url, runtime = second_run
    children = runtime["children"]
    assert isinstance(children, dict)
    old_pid = int(children["orchestrator"])
    os.kill(old_pid, signal.SIGKILL)

    def restarted() -> bool:
        current = json.loads((data_dir / "runtime.json").read_text())
        now = current["children"]["orchestrator"]
        return bool(now != old_pid and alive(int(now)))

    wait_until_sync(restarted, 120, interval_s=0.2, message="orchestrator was not restarted")
    wait_until_sync(
        lambda: httpx.get(f"{url}/health", timeout=10).status_code == 200,
        120,
        interval_s=0.3,
        message="stack did not become healthy again",
    )
    body = httpx.post(f"{url}/api/chat", json={"text": "How do I unlock my account?"}, timeout=60)
    assert body.json()["action"] == "answer"
