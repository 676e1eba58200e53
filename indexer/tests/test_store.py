"""The Chroma collection: embedded by default, cosine space, and no embedding function at all."""

from __future__ import annotations

import pytest
from chromadb.api.models.Collection import Collection

from indexer.config import IndexerSettings
from indexer.store import open_collection

# Chroma warns whenever it reads the configuration of a collection without an embedding function.
pytestmark = pytest.mark.filterwarnings(
    "ignore:legacy embedding function config:DeprecationWarning"
)


def test_embedded_store_lives_in_the_data_dir(settings: IndexerSettings) -> None:
    collection = open_collection(settings)

    assert collection.name == settings.chroma_collection
    assert (settings.data_dir / "chroma").is_dir()
    assert any((settings.data_dir / "chroma").iterdir())


def test_collection_uses_cosine_distance(collection: Collection) -> None:
    collection.add(ids=["x", "y"], embeddings=[[1.0, 0.0], [0.6, 0.8]])

    result = collection.query(query_embeddings=[[1.0, 0.0]], n_results=2)

    assert collection.configuration["hnsw"]["space"] == "cosine"
    assert result["distances"] is not None
    assert result["distances"][0] == pytest.approx([0.0, 0.4], abs=1e-5)  # 1 - cos


@pytest.mark.parametrize("reopen", [False, True])
def test_chroma_never_falls_back_to_its_default_embedding_function(
    settings: IndexerSettings, reopen: bool
) -> None:
    """Chroma's default function downloads a model; text without vectors must fail instead."""
    collection = open_collection(settings)
    if reopen:
        collection = open_collection(settings)

    with pytest.raises(ValueError, match="embedding function"):
        collection.query(query_texts=["reset my password"], n_results=1)
    with pytest.raises(ValueError, match="embedding function"):
        collection.add(ids=["a"], documents=["text without a vector"])


def test_data_survives_reopening(settings: IndexerSettings) -> None:
    open_collection(settings).add(ids=["kept"], embeddings=[[0.1, 0.2]])
    assert open_collection(settings).get(ids=["kept"])["ids"] == ["kept"]
