"""Stopping the stack when a child will not die: the stop goes on with the others."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from deploy import runner
from deploy.runner import Child, RunnerSettings, Stack


class Undying:
    """A process handle whose death is never reported (a child stuck in the kernel)."""

    pid = 4242
    returncode = None

    def __init__(self) -> None:
        self.signals: list[str] = []

    def poll(self) -> None:
        return None

    def wait(self, timeout: float | None = None) -> int:
        raise subprocess.TimeoutExpired(["stuck"], timeout or 0.0)

    def send_signal(self, signum: int) -> None:
        self.signals.append(f"signal {signum}")

    def terminate(self) -> None:
        self.signals.append("terminate")

    def kill(self) -> None:
        self.signals.append("kill")


def test_a_child_that_does_not_die_is_logged_and_the_stop_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "KILL_WAIT_S", 0.1)
    stack = Stack(RunnerSettings(data_dir=tmp_path, stop_timeout_s=0.1), port=0, say=lambda _: None)
    stuck = Child(name="redactor", argv=[sys.executable, "-c", "pass"], env={}, log_path=None)
    stuck.process = Undying()  # type: ignore[assignment]
    healthy = Child(
        name="indexer",
        argv=[sys.executable, "-c", "import time; time.sleep(60)"],
        env={},
        log_path=tmp_path / "indexer.log",
    )
    healthy.start()
    stack.children = [stuck, healthy]

    with caplog.at_level(logging.WARNING, logger="deskpilot.runner"):
        stack.stop()

    assert "kill" in stuck.process.signals  # type: ignore[union-attr]
    assert healthy.process is not None
    assert healthy.process.poll() is not None
    assert any("redactor (pid 4242) is not reported dead" in r.getMessage() for r in caplog.records)
