"""A stuck or crashed service shows where it was: its threads' stacks go to its log."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import faulthandler, os, signal, sys, time
    from contracts.logs import enable_stack_dumps

    enable_stack_dumps()

    def waiting_here():
        secret = "hunter2"
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.2)
        print("still running", flush=True)
        if sys.argv[1] == "crash":
            faulthandler._sigsegv()

    waiting_here()
    """
)


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_sigusr1_writes_every_threads_stack_and_the_process_runs_on() -> None:
    done = run("dump")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "still running\n"
    assert "in waiting_here" in done.stderr
    assert "Current thread" in done.stderr
    assert "hunter2" not in done.stderr  # frames, never the values of their variables


def test_a_fatal_signal_writes_the_stack_before_the_process_dies() -> None:
    done = run("crash")
    assert done.returncode < 0
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert done.stderr.count("in waiting_here") == 2  # USR1, then the crash
