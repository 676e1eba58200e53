"""What the embedded runner tells its services about where to keep things."""

from __future__ import annotations

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
