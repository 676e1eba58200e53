"""Waiting for the stack to be ready: a child that crashes meanwhile is restarted, and a stack
that never gets ready says why."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from deploy.runner import GIVE_UP_RESTARTS, Child, RunnerSettings, Stack

CRASHES_ONCE = (
    "import pathlib, sys, time\n"
    "marker = pathlib.Path(sys.argv[1])\n"
    "if not marker.exists():\n"
    "    marker.touch()\n"
    "    sys.exit(7)\n"
    "time.sleep(60)\n"
)


def stack_with(tmp_path: Path, child: Child, timeout_s: float) -> Stack:
    stack = Stack(
        RunnerSettings(data_dir=tmp_path, ready_timeout_s=timeout_s, stop_timeout_s=1),
        port=0,
        say=lambda _: None,
    )
    child.start()
    stack.children = [child]
    return stack


def test_a_child_that_crashes_while_the_stack_starts_is_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    redactor = Child(
        name="redactor",
        argv=[sys.executable, "-c", CRASHES_ONCE, str(tmp_path / "crashed")],
        env={},
        log_path=tmp_path / "redactor.log",
    )
    stack = stack_with(tmp_path, redactor, timeout_s=30)

    def health() -> dict[str, Any]:  # the gateway: healthy once the redactor's beat is live
        live = redactor.running() and redactor.restarts > 0
        return {"status": "ok" if live else "degraded", "problems": []}

    monkeypatch.setattr(stack, "health", health)
    try:
        assert stack.wait_ready()
        assert redactor.restarts == 1
        assert redactor.running()
    finally:
        stack.stop()


def test_a_stack_that_is_not_ready_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ocr = Child(
        name="ocr", argv=[sys.executable, "-c", "raise SystemExit(5)"], env={}, log_path=None
    )
    stack = stack_with(tmp_path, ocr, timeout_s=1.5)
    assert ocr.process is not None
    ocr.process.wait(30)
    ocr.restarts = 3  # its next restart is 8 s away, after the deadline
    monkeypatch.setattr(
        stack, "health", lambda: {"status": "degraded", "problems": ["ocr: no live process"]}
    )
    try:
        assert not stack.wait_ready()
        assert stack.not_ready() == "ocr: no live process; ocr exited (5; 3 restarts)"
        monkeypatch.setattr(stack, "health", lambda: None)
        assert stack.not_ready().startswith("the gateway does not answer; ocr exited (5;")
    finally:
        stack.stop()


def test_a_child_that_crashes_at_every_start_ends_the_wait_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticketing = Child(
        name="ticketing", argv=[sys.executable, "-c", "raise SystemExit(1)"], env={}, log_path=None
    )
    stack = stack_with(tmp_path, ticketing, timeout_s=600)
    stack.settings.max_backoff_s = 0.1
    monkeypatch.setattr(stack, "health", lambda: None)
    started = time.monotonic()
    try:
        assert not stack.wait_ready()
        assert time.monotonic() - started < 120  # not the 600 s deadline
        assert ticketing.restarts == GIVE_UP_RESTARTS
        assert ticketing.process is not None
        ticketing.process.wait(30)  # its last start crashes too
        assert stack.not_ready() == "the gateway does not answer; ticketing exited (1; 5 restarts)"
    finally:
        stack.stop()
