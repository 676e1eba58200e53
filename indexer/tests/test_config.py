"""IndexerSettings: its own INDEXER_* variables, the shared ones un-prefixed, and sane bounds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.settings import ServiceSettings
from indexer.config import IndexerSettings


def test_indexer_variables_are_prefixed_and_shared_ones_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INDEXER_CHUNK_MAX_TOKENS", "150")
    monkeypatch.setenv("INDEXER_TORCH_THREADS", "2")
    monkeypatch.setenv("INDEXER_SEED_DEMO_KB", "false")
    monkeypatch.setenv("CHUNK_MIN_TOKENS", "5")  # un-prefixed: must be ignored
    monkeypatch.setenv("CHROMA_HOST", "chroma.internal")

    settings = IndexerSettings()

    assert settings.chunk_max_tokens == 150
    assert settings.torch_threads == 2
    assert settings.seed_demo_kb is False
    assert settings.chunk_min_tokens == IndexerSettings.model_fields["chunk_min_tokens"].default
    assert settings.chroma_host == "chroma.internal"


def test_empty_variables_fall_back_to_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXER_TORCH_THREADS", "")
    assert IndexerSettings().torch_threads is None


def test_min_chunk_size_must_be_below_max() -> None:
    with pytest.raises(ValidationError, match="CHUNK_MIN_TOKENS"):
        IndexerSettings(chunk_max_tokens=100, chunk_min_tokens=100)


def test_every_field_is_documented() -> None:
    own = set(IndexerSettings.model_fields) - set(ServiceSettings.model_fields)
    assert own, "IndexerSettings declares no fields of its own"
    undocumented = [name for name in own if not IndexerSettings.model_fields[name].description]
    assert undocumented == []
