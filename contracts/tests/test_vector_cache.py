"""The on-disk vector cache: only missing texts are computed, vectors come back bit for bit,
processes sharing it embed each text once between them, and a cache that cannot be used costs a
warning, never a vector."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contracts.vector_cache import CLAIM_BATCH, VectorCache, model_identity


class Model:
    """A stand-in model with float32 outputs (what sentence-transformers returns), the same vector
    for a text in every process, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.asked.extend(texts)
        # Seeded by the text's bytes, so the same in every process (hash() is not).
        rng = [np.random.default_rng(list(text.encode())) for text in texts]
        rows = [r.standard_normal(8).astype(np.float32) for r in rng]
        return [(row / np.linalg.norm(row)).astype(np.float32).tolist() for row in rows]


def test_only_missing_texts_are_computed_and_vectors_come_back_unchanged(tmp_path: Path) -> None:
    model = Model()
    first = VectorCache(tmp_path, "model-a")
    texts = ["reset my password", "vpn drops", "reset my password", "printer jam"]
    computed = first.encode(texts, model)
    assert model.asked == ["reset my password", "vpn drops", "printer jam"]  # each text once
    assert computed[0] == computed[2]

    again = VectorCache(tmp_path, "model-a")  # another process pointing at the same directory
    model.asked.clear()
    assert again.encode(texts, model) == computed  # exact: float32 stored, float32 read
    assert model.asked == []
    assert again.encode(["printer jam", "new text"], model) == [computed[3], model(["new text"])[0]]
    assert model.asked == ["new text", "new text"]  # the cache's call, then the check's own


def test_another_model_never_gets_these_vectors(tmp_path: Path) -> None:
    model = Model()
    VectorCache(tmp_path, "model-a").encode(["same text"], model)
    model.asked.clear()
    VectorCache(tmp_path, "model-b").encode(["same text"], model)
    assert model.asked == ["same text"]


def test_a_cache_that_cannot_be_written_embeds_without_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if os.geteuid() == 0:
        blocked = tmp_path / "a-file-not-a-directory"
        blocked.write_text("")
        directory = blocked / "cache"  # mkdir below a regular file fails even for root
    else:
        directory = tmp_path / "read-only"
        directory.mkdir(mode=0o500)
    model = Model()
    cache = VectorCache(directory, "model-a")
    with caplog.at_level(logging.WARNING, logger="deskpilot.vector_cache"):
        first = cache.encode(["one", "two"], model)
        second = cache.encode(["one"], model)
    assert first == model(["one", "two"])
    assert second == [first[0]]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "warned once, then embedded without the cache"


def test_a_corrupt_cache_file_is_not_fatal(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "model-a")
    cache.path.write_bytes(b"this is not a SQLite database" * 100)
    model = Model()
    assert cache.encode(["one"], model) == model(["one"])


def test_the_model_identity_names_the_distribution_and_its_version() -> None:
    identity = model_identity("numpy")
    assert identity.startswith(f"numpy=={np.__version__};")
    assert model_identity("numpy", normalised=False) != identity


def _share(directory: str, texts: list[str], asked_file: str, ready: Any) -> None:
    """A process of the sharing test: waits for the start, embeds ``texts`` through the cache
    slowly, and writes what it computed and what it got."""
    model = Model()

    def slow(batch: list[str]) -> list[list[float]]:
        time.sleep(0.05)  # a model's time, so that both processes are embedding at once
        return model(batch)

    ready.wait()
    vectors = VectorCache(Path(directory), "model-a").encode(texts, slow)
    Path(asked_file).write_text(json.dumps({"asked": model.asked, "vectors": vectors}))


def test_processes_starting_together_embed_each_text_once_between_them(tmp_path: Path) -> None:
    texts = [f"example question {n}" for n in range(10 * CLAIM_BATCH)]
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    outputs = [tmp_path / f"process-{n}.json" for n in range(2)]
    processes = [
        context.Process(target=_share, args=(str(tmp_path), texts, str(out), ready))
        for out in outputs
    ]
    for process in processes:
        process.start()
    ready.set()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    results = [json.loads(out.read_text()) for out in outputs]
    asked = [result["asked"] for result in results]
    assert sorted(asked[0] + asked[1]) == sorted(texts), "each text embedded once in all"
    assert asked[0], "both processes did part of the work"
    assert asked[1], "both processes did part of the work"
    assert results[0]["vectors"] == results[1]["vectors"] == Model()(texts)


def _claim(cache: VectorCache, text: str, owner: str, since: float) -> None:
    with sqlite3.connect(cache.path) as connection:
        connection.execute(
            "INSERT INTO claims (key, owner, since) VALUES (?, ?, ?)",
            (cache._key(text), owner, since),
        )


def test_a_text_another_live_process_claimed_is_waited_for_and_read(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "model-a")
    cache.encode(["warm"], Model())  # creates the file
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _claim(cache, "claimed text", f"{socket.gethostname()}:{other.pid}", time.time())
        model = Model()
        result: list[list[list[float]]] = []
        waiter = threading.Thread(
            target=lambda: result.append(cache.encode(["claimed text"], model))
        )
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive(), "it waits while the other process embeds the text"
        with sqlite3.connect(cache.path) as connection:  # the other process keeps its vector
            vector = np.asarray(Model()(["claimed text"])[0], dtype=np.float32).tobytes()
            key = cache._key("claimed text")
            connection.execute("INSERT INTO vectors (key, vector) VALUES (?, ?)", (key, vector))
        waiter.join(10)
        assert not waiter.is_alive()
        assert model.asked == [], "the vector was read, not computed again"
        assert result == [Model()(["claimed text"])]
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("stale", ["owner-dead", "claim-too-old"])
def test_a_claim_of_a_dead_process_or_too_old_is_taken_over(tmp_path: Path, stale: str) -> None:
    cache = VectorCache(tmp_path, "model-a")
    cache.encode(["warm"], Model())
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    if stale == "owner-dead":
        _claim(cache, "orphan", f"{socket.gethostname()}:{gone.pid}", time.time())
    else:  # a live owner (this test's parent) that has held it too long
        _claim(cache, "orphan", f"{socket.gethostname()}:{os.getppid()}", time.time() - 3600)
    model = Model()
    result: list[list[list[float]]] = []
    worker = threading.Thread(target=lambda: result.append(cache.encode(["orphan"], model)))
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "a stale claim must not hold the process up"
    assert model.asked == ["orphan"]
    assert result == [Model()(["orphan"])]


def test_a_failing_model_releases_its_claims(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "model-a")

    def broken(batch: list[str]) -> list[list[float]]:
        raise RuntimeError("model crashed")

    with pytest.raises(RuntimeError, match="model crashed"):
        cache.encode(["one", "two"], broken)
    with sqlite3.connect(cache.path) as connection:
        assert connection.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
