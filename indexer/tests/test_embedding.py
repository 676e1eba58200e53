"""The packaged model loads offline, once, and gives normalised, meaningful vectors."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from chromadb.api.models.Collection import Collection

from indexer.config import IndexerSettings
from indexer.embedding import Embedder, seed_embedder
from indexer.service import Ingestor, demo_kb_path
from indexer.store import open_collection


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


def test_the_window_is_known_before_the_model_is_loaded(embedder: Embedder) -> None:
    """A new embedder reads the model's window from its folder; loading it gives the same."""
    fresh = Embedder()
    before = fresh.max_tokens
    assert "_model" not in fresh.__dict__
    assert before == embedder._model.max_seq_length == 256


def test_ingesting_unchanged_files_never_loads_the_model(
    embedder: Embedder, settings: IndexerSettings, tmp_path: Path
) -> None:
    """``deskpilot ingest`` of a folder already indexed: no embedding model, hence no torch."""
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "printer.md").write_text("# Add the printer\n\nOpen Settings, then Printers.\n")
    collection = open_collection(settings)
    assert Ingestor(embedder, collection, settings).ingest_path(folder).files_indexed == 1

    lazy = Embedder()
    again = Ingestor(lazy, collection, settings).ingest_path(folder)

    assert again.files_unchanged == 1
    assert "_model" not in lazy.__dict__


def test_demo_articles_seeded_from_the_vector_cache_get_the_same_chunks_and_vectors(
    embedder: Embedder, settings: IndexerSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    articles = sorted(demo_kb_path().glob("*.md"))[:3]
    cache = tmp_path / "vector-cache"

    def stored(collection: Collection) -> list[tuple[str, str, list[float]]]:
        got = collection.get(include=["documents", "embeddings"])
        embeddings = got["embeddings"]
        assert embeddings is not None
        rows = zip(got["ids"], got["documents"] or [], list(embeddings), strict=True)
        return sorted((i, d, [float(x) for x in e]) for i, d, e in rows)

    def ingested(ingest_with: Embedder, name: str) -> list[tuple[str, str, list[float]]]:
        own = settings.model_copy(
            update={"chroma_collection": f"{settings.chroma_collection}-{name}"}
        )
        collection = open_collection(own)
        Ingestor(ingest_with, collection, own).ingest_files(articles)
        return stored(collection)

    plain = ingested(embedder, "plain")
    cold = ingested(seed_embedder(embedder, cache), "cold")

    def no_model(texts: object) -> list[list[float]]:
        raise AssertionError("a warm cache embeds nothing")

    monkeypatch.setattr(embedder, "encode", no_model)
    warm = ingested(seed_embedder(embedder, cache), "warm")
    assert plain
    assert cold == plain
    assert warm == plain
