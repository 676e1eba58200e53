"""Fixtures of the command line's tests: ``run_cli`` runs ``deskpilot`` in the test's process."""

from __future__ import annotations

import pytest

from deploy.tests.cli.inprocess import RunCli, in_process


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunCli:
    """``run_cli(*argv, stdin="")``: ``deskpilot ARGV`` through its ``main``, output captured."""
    return in_process(monkeypatch, capsys)
