"""``deskpilot`` run through its ``main`` in the test's own process, its output captured.

A command run as a subprocess spends a second or two of CPU importing the command line again
(more when it loads a model), so most command tests call :func:`deploy.cli.main.main` with their
arguments instead; each command keeps one test that runs it as a subprocess, as a user does
(:func:`tests.support.deskpilot`).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from deploy.cli.main import main


@dataclass
class CliRun:
    """What a command run in-process returned and printed."""

    returncode: int
    stdout: str
    stderr: str


RunCli = Callable[..., CliRun]
"""``run_cli(*argv, stdin="")``: the ``run_cli`` fixture (deploy/tests/cli/conftest.py)."""


def in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunCli:
    """A runner of ``deskpilot`` commands in this process, reading ``stdin`` as standard input."""

    def run(*argv: str, stdin: str = "") -> CliRun:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        returncode = main(list(argv))
        captured = capsys.readouterr()
        return CliRun(returncode, captured.out, captured.err)

    return run
