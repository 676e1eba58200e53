"""What the embedded runner tells its services about where to keep things."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from deploy.runner import RunnerSettings, Stack


def test_the_vector_cache_is_kept_in_the_data_directory_unless_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`deskpilot up` keeps the vectors of the texts it ships in its data directory, so the next
    start skips embedding them; an operator's (or a test run's) own location wins."""
    monkeypatch.delenv("DESKPILOT_EMBEDDING_CACHE_DIR", raising=False)
    stack = Stack(RunnerSettings(data_dir=tmp_path), port=0, say=lambda _: None)
    assert stack._service_env()["DESKPILOT_EMBEDDING_CACHE_DIR"] == str(
        tmp_path.resolve() / "embedding-cache"
    )

    elsewhere = tmp_path / "shared-cache"
    monkeypatch.setenv("DESKPILOT_EMBEDDING_CACHE_DIR", str(elsewhere))
    stack = Stack(RunnerSettings(data_dir=tmp_path), port=0, say=lambda _: None)
    assert stack._service_env()["DESKPILOT_EMBEDDING_CACHE_DIR"] == str(elsewhere)


def test_runtime_json_is_never_read_half_written(tmp_path: Path) -> None:
    """The supervisor rewrites runtime.json after each restart while `deskpilot` commands read
    it; a reader sees the old document or the new one, never an empty or partial file."""
    stack = Stack(RunnerSettings(data_dir=tmp_path), port=0, say=lambda _: None)
    stack.metrics = {f"service-{n}": f"http://127.0.0.1:{9000 + n}/metrics" for n in range(200)}
    stack._write_runtime()
    stop = threading.Event()

    def rewrite() -> None:
        while not stop.is_set():
            stack._write_runtime()

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        for _ in range(2000):
            assert json.loads((tmp_path / "runtime.json").read_text())["gateway_url"]
    finally:
        stop.set()
        writer.join()
    assert [p.name for p in tmp_path.iterdir()] == ["runtime.json"]
