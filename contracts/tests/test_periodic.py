"""contracts.periodic.every: repeated work that stops when its block ends, whatever the work does
with a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from contracts.periodic import every


async def test_runs_every_interval_while_the_block_runs_and_not_after() -> None:
    rounds = 0

    async def work() -> None:
        nonlocal rounds
        rounds += 1

    loop = asyncio.get_running_loop()
    async with every(0.02, work, name="count"):
        began = loop.time()
        async with asyncio.timeout(30):  # five rounds, however busy the machine
            while rounds < 5:
                await asyncio.sleep(0.005)
        elapsed = loop.time() - began
    during = rounds
    await asyncio.sleep(0.1)
    assert during <= elapsed / 0.02 + 1  # never more often than the interval
    assert rounds == during


async def test_a_failing_round_is_retried_next_round() -> None:
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError("redis away")

    async with every(0.01, flaky, name="flaky", errors=(ConnectionError,)):
        async with asyncio.timeout(30):  # two failed rounds, then good ones
            while calls < 4:
                await asyncio.sleep(0.005)
    assert calls >= 4


async def test_stops_even_when_the_work_swallows_cancellation() -> None:
    """The failure this module exists for: a client that turns a cancellation into an error that
    the retry loop catches. Leaving the block must still return, and promptly."""
    started = asyncio.Event()

    async def stubborn() -> None:
        started.set()
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            raise ConnectionError("connection closed by cancellation") from None

    loop = asyncio.get_running_loop()
    began = loop.time()
    async with every(0.01, stubborn, name="stubborn", errors=(ConnectionError,)):
        await started.wait()
    assert loop.time() - began < 4.0  # promptly: before the 5 s stop timeout (margin for CI load)


async def test_work_that_hangs_is_cancelled_after_the_stop_timeout() -> None:
    entered = asyncio.Event()
    cancelled = False

    async def hangs() -> None:
        nonlocal cancelled
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled = True
            raise

    async with every(0.01, hangs, name="hangs", stop_timeout_s=0.1):
        await entered.wait()
    assert cancelled


async def test_an_unexpected_error_ends_the_loop_but_not_the_block() -> None:
    calls = 0
    called = asyncio.Event()

    async def broken() -> None:
        nonlocal calls
        calls += 1
        called.set()
        raise ValueError("bug")

    async def block() -> None:
        async with every(0.01, broken, name="broken", errors=(ConnectionError,)):
            # The first call, however late a busy machine runs the loop; then ten intervals in
            # which a loop that went on would call again.
            await asyncio.wait_for(called.wait(), 30)
            await asyncio.sleep(0.1)
            raise RuntimeError("the block's own error comes through")

    with pytest.raises(RuntimeError, match="the block's own"):
        await block()
    assert calls == 1
