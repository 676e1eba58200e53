"""`deskpilot up` stopped while it is still starting (models load for minutes): every process it
started, Redis and Chroma included, is stopped and reaped, none is left running or <defunct>."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from deploy.runner import RUNTIME_FILE, free_port
from tests.support import REPO_ROOT, vector_cache_dir, wait_until_sync
from tests.support.stack import FAST_ENV

pytestmark = pytest.mark.slow


def left_running(processes: list[psutil.Process]) -> list[str]:
    """The processes still there, running or a zombie nobody reaped."""
    left = []
    for process in processes:
        try:
            left.append(f"{process.pid} {process.name()} {process.status()}")
        except psutil.NoSuchProcess:
            continue
    return left


def fork_server_importing(runner: subprocess.Popen[str], log_path: Path) -> bool:
    """The runner has started Redis and Chroma and waits for its fork server's imports."""
    if runner.poll() is not None or "Started Chroma" not in log_path.read_text():
        return False
    children = psutil.Process(runner.pid).children()
    return any("deploy.preload" in " ".join(child.cmdline()) for child in children)


@pytest.mark.parametrize(
    ("signal_number", "phase"),
    [(signal.SIGTERM, "imports"), (signal.SIGINT, "services")],
    ids=["term-while-importing", "int-while-services-start"],
)
def test_a_stop_during_the_start_stops_and_reaps_every_child(
    tmp_path: Path, signal_number: signal.Signals, phase: str
) -> None:
    """Stopped while the fork server imports the libraries (the longest wait, no service yet:
    the stop takes effect at once, not once they are loaded) or once every service is forked
    (runtime.json is written then, long before the stack is ready)."""
    data_dir = tmp_path / "data"
    log_path = tmp_path / "up.log"
    with log_path.open("w") as log:
        runner = subprocess.Popen(
            [sys.executable, "-m", "deploy.cli", "up", "--port", str(free_port())]
            + ["--data-dir", str(data_dir)],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                **FAST_ENV,
                "DESKPILOT_EMBEDDING_CACHE_DIR": str(vector_cache_dir()),
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    children: list[psutil.Process] = []
    try:
        if phase == "imports":
            wait_until_sync(
                lambda: fork_server_importing(runner, log_path), 300, message=log_path.read_text
            )
        else:
            wait_until_sync(
                lambda: runner.poll() is None and (data_dir / RUNTIME_FILE).exists(),
                300,
                message=log_path.read_text,
            )
        children = psutil.Process(runner.pid).children()
        names = {child.name() for child in children}
        assert {"valkey-server", "chroma"} <= names, names
        assert "ready" not in log_path.read_text()

        runner.send_signal(signal_number)

        assert runner.wait(180) == 1, log_path.read_text()
        assert left_running(children) == []
        output = log_path.read_text()
        assert "Stopping Deskpilot" in output
        assert not (data_dir / RUNTIME_FILE).exists()
        if phase == "imports":  # stopped before any service was started
            assert "Metrics (Prometheus)" not in output, output
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
        for child in children:  # what the runner left behind, so the run goes on clean
            try:
                child.kill()
            except psutil.NoSuchProcess:
                continue
