"""The test helpers every test waits with: they return what the predicate found, and fail with
what was being waited for (and the caller's detail) at the deadline, never later."""

from __future__ import annotations

import time

import pytest

from tests.support import REPO_ROOT, wait_until, wait_until_sync


async def test_wait_until_returns_the_first_truthy_result_of_a_sync_or_async_predicate() -> None:
    calls = 0

    def third_time() -> int:
        nonlocal calls
        calls += 1
        return calls if calls >= 3 else 0

    async def ready() -> str:
        return "ready"

    assert await wait_until(third_time, 5, interval_s=0.01) == 3
    assert await wait_until(ready, 5) == "ready"


async def test_wait_until_fails_at_the_deadline_naming_what_it_waited_for() -> None:
    async def never() -> bool:
        return False

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0.2s waiting for never: the log"):
        await wait_until(never, 0.2, interval_s=0.05, message=lambda: "the log")
    assert time.monotonic() - started < 2


def test_wait_until_sync_returns_the_first_truthy_result() -> None:
    values = iter([None, [], {"status": "done"}])
    assert wait_until_sync(lambda: next(values), 5, interval_s=0.01) == {"status": "done"}


def test_wait_until_sync_fails_at_the_deadline_naming_what_it_waited_for() -> None:
    def healthy() -> bool:
        return False

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0.2s waiting for healthy: 503"):
        wait_until_sync(healthy, 0.2, interval_s=0.05, message="503")
    assert time.monotonic() - started < 2


# -- parallel runs (tests.support.scheduling) ----------------------------------------------------

RECORDING_TEST = """
import os
from pathlib import Path

import pytest

{mark}


@pytest.mark.parametrize("n", range({count}))
def test_records_its_worker(n: int, request: pytest.FixtureRequest) -> None:
    worker = os.environ["PYTEST_XDIST_WORKER"]
    with (Path(os.environ["RECORDS"]) / worker).open("a") as records:
        records.write(request.node.nodeid.split("::")[0] + "\\n")
"""


def test_parallel_runs_keep_modules_and_groups_on_one_worker_and_start_slow_ones_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = pytester.mkdir("records")
    monkeypatch.setenv("RECORDS", str(records))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    pytester.makeini("[pytest]\nmarkers =\n    slow: starts the whole stack\n")
    pytester.makeconftest('pytest_plugins = ["tests.support.scheduling"]')  # as conftest.py does
    modules = {
        "test_a": ("", 6),
        "test_b": ("", 6),
        "test_c": ("", 6),
        "test_shared_one": ('pytestmark = pytest.mark.xdist_group("shared")', 2),
        "test_shared_two": ('pytestmark = pytest.mark.xdist_group("shared")', 2),
        "test_z_stack": ("pytestmark = pytest.mark.slow", 2),
    }
    for name, (mark, count) in modules.items():
        pytester.makepyfile(**{name: RECORDING_TEST.format(mark=mark, count=count)})

    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup")

    result.assert_outcomes(passed=24)
    ran = {path.name: path.read_text().split() for path in records.iterdir()}
    assert len(ran) == 2, "both workers had work"
    workers_of = {
        module: {worker for worker, modules in ran.items() if f"{module}.py" in modules}
        for module in modules
    }
    assert all(len(workers) == 1 for workers in workers_of.values()), workers_of
    assert workers_of["test_shared_one"] == workers_of["test_shared_two"]
    (slow_worker,) = workers_of["test_z_stack"]
    assert ran[slow_worker][0] == "test_z_stack.py", "the slow module came first"
