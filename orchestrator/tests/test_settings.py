"""Defaults of the orchestrator's settings that its turn's speed depends on."""

from __future__ import annotations

import pytest

from orchestrator.config import OrchestratorSettings


def test_the_embedding_model_runs_on_one_thread_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On two cores shared with the other services, a second torch thread waiting for a core
    # stalled every layer: one short question took 27-460 ms to embed instead of 24-34 ms.
    monkeypatch.delenv("ORCHESTRATOR_TORCH_THREADS", raising=False)
    assert OrchestratorSettings().torch_threads == 1
    monkeypatch.setenv("ORCHESTRATOR_TORCH_THREADS", "2")
    assert OrchestratorSettings().torch_threads == 2
