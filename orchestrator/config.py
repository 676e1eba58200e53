"""Orchestrator settings (``ORCHESTRATOR_*``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from contracts.settings import ServiceSettings


class OrchestratorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ORCHESTRATOR_")

    top_k: int = Field(5, ge=1, le=50, description="Chunks retrieved per question.")
    relevance_threshold: float = Field(
        0.45,
        ge=0,
        le=1,
        description="Cosine similarity below which the knowledge base is taken not to cover it.",
    )
    see_also_margin: float = Field(
        0.08,
        ge=0,
        le=1,
        description="Other articles within this similarity of the best one are cited as see-also.",
    )
    max_citations: int = Field(3, ge=1, le=10, description="Most sources cited in one answer.")
    turn_ttl_s: int = Field(7 * 24 * 3600, ge=60, description="How long a turn's state is kept.")
    concurrency: int = Field(4, ge=1, description="Turns handled at once by one process.")
    torch_threads: int | None = Field(
        None, ge=1, description="CPU threads for the embedding model."
    )
