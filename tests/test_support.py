"""The test helpers every test waits with: they return what the predicate found, and fail with
what was being waited for (and the caller's detail) at the deadline, never later."""

from __future__ import annotations

import time

import pytest

from tests.support import wait_until, wait_until_sync


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
