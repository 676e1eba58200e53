"""The runner's children started through its fork server (deploy/preload.py), and without one."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.preload import ForkedProcess, ForkServer, ForkServerError
from deploy.runner import Child, RunnerSettings, Stack
from tests.support import REPO_ROOT

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO_ROOT)}


def stand_in(tmp_path: Path, server: ForkServer | None) -> Child:
    return Child(
        name="stand-in",
        argv=[sys.executable, "-m", "deploy.tests.preload_child"],
        env={**ENV, "PRELOAD_CHILD_DO": "exit:0"},
        log_path=tmp_path / "stand-in.log",
        fork_server=server,
    )


def test_a_child_is_forked_by_the_stacks_fork_server(tmp_path: Path) -> None:
    server = ForkServer(ENV, modules=("decimal",), warmed=())
    try:
        child = stand_in(tmp_path, server)
        child.start()
        assert isinstance(child.process, ForkedProcess)
        assert child.process.wait(60) == 0
        assert '"decimal_preloaded": true' in (tmp_path / "stand-in.log").read_text()
    finally:
        server.close()


def test_without_a_working_fork_server_a_child_starts_on_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = ForkServer(ENV, modules=("decimal",), warmed=())
    server.close()  # gone before the child starts
    child = stand_in(tmp_path, server)
    with caplog.at_level(logging.WARNING, logger="deskpilot.runner"):
        child.start()
    assert isinstance(child.process, subprocess.Popen)
    assert child.process.wait(60) == 0
    assert child.fork_server is None  # the next restart does not try the dead server again
    assert any("starting stand-in on its own" in r.getMessage() for r in caplog.records)
    child.close()
    assert '"decimal_preloaded": false' in (tmp_path / "stand-in.log").read_text()


def test_a_stack_leaves_running_the_fork_server_it_was_given_and_stops_its_own(
    tmp_path: Path,
) -> None:
    """Stacks started one after another (as the tests do) can share one fork server: a stack
    given one does not close it when it stops; one it started itself it does close."""
    given = ForkServer(ENV, modules=("decimal",), warmed=())
    try:
        stack = Stack(
            RunnerSettings(data_dir=tmp_path), port=0, say=lambda _: None, fork_server=given
        )
        stack.stop()
        child = stand_in(tmp_path, given)
        child.start()
        assert isinstance(child.process, ForkedProcess)
        assert child.process.wait(60) == 0
    finally:
        given.close()

    own = Stack(RunnerSettings(data_dir=tmp_path / "own"), port=0, say=lambda _: None)
    own.fork_server = ForkServer(ENV, modules=("decimal",), warmed=())  # as start() makes it
    own.stop()
    with pytest.raises(ForkServerError):
        own.fork_server.spawn("deploy.tests.preload_child", ENV, tmp_path / "late.log")
