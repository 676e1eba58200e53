"""The on-disk vector cache: only missing texts are computed, vectors come back bit for bit, and a
cache that cannot be used costs a warning, never a vector."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from contracts.vector_cache import VectorCache, model_identity


class Model:
    """A stand-in model with float32 outputs (what sentence-transformers returns), counting the
    texts it is asked to embed."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.asked.extend(texts)
        rng = [np.random.default_rng(abs(hash(text)) % 2**32) for text in texts]
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
