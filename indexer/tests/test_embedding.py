"""The packaged model loads offline, once, and gives normalised, meaningful vectors."""

from __future__ import annotations

import math
import os

from indexer.embedding import Embedder


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_hugging_face_is_kept_offline() -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_vectors_are_normalised_and_of_the_reported_dimension(embedder: Embedder) -> None:
    vectors = embedder.encode(["Reset my VPN password", "The printer is jammed", "x"])

    assert len(vectors) == 3
    assert all(len(vector) == embedder.dimension for vector in vectors)
    assert all(math.isclose(math.sqrt(_dot(v, v)), 1.0, rel_tol=1e-4) for v in vectors)
    assert all(isinstance(value, float) for value in vectors[0])


def test_empty_input_gives_no_vectors(embedder: Embedder) -> None:
    assert embedder.encode([]) == []


def test_batching_does_not_change_the_vectors(embedder: Embedder) -> None:
    texts = [f"Ticket {n}: my laptop will not connect to Wi-Fi number {n}" for n in range(7)]
    one_batch = Embedder(batch_size=64).encode(texts)
    small_batches = Embedder(batch_size=2).encode(texts)
    for a, b in zip(one_batch, small_batches, strict=True):
        assert _dot(a, b) > 0.9999


def test_similar_requests_are_closer_than_unrelated_ones(embedder: Embedder) -> None:
    reset, change, jam = embedder.encode(
        [
            "How do I reset my password?",
            "I want to change my login password",
            "Paper jam in printer",
        ]
    )
    assert _dot(reset, change) > _dot(reset, jam) + 0.2


def test_the_model_is_loaded_once_per_process(embedder: Embedder) -> None:
    another = Embedder(batch_size=4)
    assert another._model is embedder._model
