"""The runner's fork server (deploy/preload.py) with a stand-in service, and without the heavy
libraries: the tests preload ``decimal`` to see that a child starts with it imported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from deploy.preload import ForkServer, ForkServerError
from tests.support import REPO_ROOT

CHILD = "deploy.tests.preload_child"
DATA = "deploy.tests.preload_data"


def env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO_ROOT), **extra}


@pytest.fixture
def server() -> Iterator[ForkServer]:
    running = ForkServer(
        env(PRELOAD_SERVER_ONLY="the server's"), modules=("decimal",), warmed=(f"{DATA}:table",)
    )
    try:
        yield running
    finally:
        running.close()


def report(log: Path) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while not log.exists() or not log.read_text().strip():
        assert time.monotonic() < deadline, "the child printed nothing"
        time.sleep(0.05)
    first: dict[str, object] = json.loads(log.read_text().splitlines()[0])
    return first


def test_a_child_runs_the_module_with_its_own_env_output_and_session(
    server: ForkServer, tmp_path: Path
) -> None:
    log = tmp_path / "child.log"
    child = server.spawn(CHILD, env(PRELOAD_CHILD_MARKER="mine", PRELOAD_CHILD_DO="exit:3"), log)

    assert child.wait(60) == 3
    assert child.returncode == 3
    assert child.poll() == 3
    assert report(log) == {
        "argv0": str(REPO_ROOT / "deploy" / "tests" / "preload_child.py"),
        "marker": "mine",
        "inherited": None,  # the server's environment is not the child's
        "decimal_preloaded": True,
        "table_warmed": True,  # read by the server, before the fork
        "own_session": True,
        "stdin": "",  # not the server's request pipe
    }
    assert server.preloaded == ["decimal", f"{DATA}:table"]


def test_a_child_ends_with_its_exit_code_atexit_handlers_run_and_output_flushed(
    server: ForkServer, tmp_path: Path
) -> None:
    """A forked child ends without the interpreter's finalisation (os._exit), yet nothing it
    wrote is lost and its exit code is what sys.exit gave, a message being 1 as for Python."""
    for action, code in (("exit:0", 0), ("exit:7", 7), ("exit:a message", 1)):
        log = tmp_path / f"{code}.log"
        child = server.spawn(CHILD, env(PRELOAD_CHILD_DO=action), log)
        assert child.wait(60) == code
        lines = log.read_text().splitlines()
        assert "a buffered line" in lines
        assert "a logged line" in lines
        assert "atexit handler ran" in lines
        assert ("a message" in lines) is (code == 1)


def test_without_the_server_the_module_is_not_preloaded(tmp_path: Path) -> None:
    """What the check above tells apart: the same child started by hand."""
    result = subprocess.run(
        [sys.executable, "-m", CHILD],
        env=env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=True,
    )
    assert json.loads(result.stdout.splitlines()[0])["decimal_preloaded"] is False


def test_exits_by_exception_and_signal_are_reported_as_popen_reports_them(
    server: ForkServer, tmp_path: Path
) -> None:
    failing = server.spawn(CHILD, env(PRELOAD_CHILD_DO="raise"), tmp_path / "raise.log")
    assert failing.wait(60) == 1
    assert "the stand-in service failed" in (tmp_path / "raise.log").read_text()

    sleeping = server.spawn(CHILD, env(PRELOAD_CHILD_DO="sleep"), tmp_path / "sleep.log")
    report(tmp_path / "sleep.log")
    with pytest.raises(subprocess.TimeoutExpired):
        sleeping.wait(0.3)
    assert sleeping.poll() is None
    sleeping.terminate()
    assert sleeping.wait(30) == -signal.SIGTERM

    killed = server.spawn(CHILD, env(PRELOAD_CHILD_DO="sleep"), tmp_path / "kill.log")
    killed.kill()
    assert killed.wait(30) == -signal.SIGKILL


def test_children_are_the_servers_and_none_is_left_a_zombie(
    server: ForkServer, tmp_path: Path
) -> None:
    children = [
        server.spawn(CHILD, env(PRELOAD_CHILD_DO="exit:0"), tmp_path / f"{n}.log") for n in range(3)
    ]
    for child in children:
        assert child.wait(60) == 0
    assert not psutil.pid_exists(children[0].pid) or (
        psutil.Process(children[0].pid).ppid() != server.pid
    )
    assert [p for p in psutil.Process(server.pid).children() if p.status() == "zombie"] == []


def test_closing_the_server_stops_its_children(tmp_path: Path) -> None:
    server = ForkServer(env(), modules=("decimal",), warmed=())
    child = server.spawn(CHILD, env(PRELOAD_CHILD_DO="sleep"), tmp_path / "child.log")
    report(tmp_path / "child.log")
    assert psutil.Process(child.pid).ppid() == server.pid

    server.close()

    assert child.wait(30) == -signal.SIGTERM
    assert not psutil.pid_exists(child.pid)


def test_a_server_still_importing_is_not_ready_and_is_killed_when_closed(tmp_path: Path) -> None:
    """What the runner does on Ctrl-C during the imports: it stops waiting, and closing the
    server kills it at once (it has no child, and would read its closed input only after its
    imports)."""
    (tmp_path / "slow_to_import.py").write_text("import time\ntime.sleep(120)\n")
    server = ForkServer(
        {**env(), "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{tmp_path}"},
        modules=("slow_to_import",),
        warmed=(),
    )
    process = psutil.Process(server.pid)
    assert server.wait_ready(0.5) is False

    server.close()

    assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    assert server._process.returncode == -signal.SIGKILL  # killed, not done importing


def test_a_server_that_has_imported_is_ready(server: ForkServer) -> None:
    assert server.wait_ready(60) is True
    assert server.preloaded is not None
    assert "decimal" in server.preloaded


def test_a_dead_server_takes_no_request_and_its_children_do_not_outlive_it(
    tmp_path: Path,
) -> None:
    server = ForkServer(env(), modules=("decimal",), warmed=())
    child = server.spawn(CHILD, env(PRELOAD_CHILD_DO="sleep"), tmp_path / "child.log")
    report(tmp_path / "child.log")

    os.kill(server.pid, signal.SIGKILL)

    assert child.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while psutil.pid_exists(child.pid) and psutil.Process(child.pid).status() != "zombie":
        assert time.monotonic() < deadline, "the orphaned child still runs"
        time.sleep(0.05)
    with pytest.raises(ForkServerError):
        server.spawn(CHILD, env(), tmp_path / "late.log")
    server.close()


def test_a_module_that_does_not_exist_is_a_failed_child_not_a_failed_server(
    server: ForkServer, tmp_path: Path
) -> None:
    missing = server.spawn("deploy.tests.no_such_module", env(), tmp_path / "missing.log")
    assert missing.wait(60) == 1
    assert "No module named deploy.tests.no_such_module" in (tmp_path / "missing.log").read_text()
    fine = server.spawn(CHILD, env(PRELOAD_CHILD_DO="exit:0"), tmp_path / "fine.log")
    assert fine.wait(60) == 0
