"""Settings of the indexer service.

Shared settings (Redis, Chroma, data directory) come from
:class:`contracts.settings.ServiceSettings`; the fields here are the indexer's own and are read from
``INDEXER_*`` variables.
"""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from contracts.settings import ServiceSettings


class IndexerSettings(ServiceSettings):
    """How the indexer chunks, embeds and seeds the knowledge base."""

    model_config = SettingsConfigDict(env_prefix="INDEXER_")

    chunk_max_chars: int = Field(
        900,
        ge=100,
        description=(
            "Upper bound of a chunk's body in characters. all-MiniLM-L6-v2 reads 256 word pieces "
            "(roughly 1,000 characters of English); longer text would be cut off unseen."
        ),
    )
    chunk_min_chars: int = Field(
        200,
        ge=0,
        description=(
            "A trailing piece of a section shorter than this is merged into its neighbour, so no "
            "chunk is a lone sentence without context (a whole section may still be shorter)."
        ),
    )
    chunk_overlap_sentences: int = Field(
        1,
        ge=0,
        description="Units (sentences, steps) a chunk repeats from its predecessor in the section.",
    )
    embed_batch_size: int = Field(
        32,
        ge=1,
        description="Texts per forward pass of the embedding model.",
    )
    seed_demo_kb: bool = Field(
        True,
        description="Index the bundled demo articles at start-up; unchanged files are skipped.",
    )
    torch_threads: int | None = Field(
        None,
        ge=1,
        description=(
            "CPU threads torch may use for embeddings; unset leaves torch's default (all cores). "
            "Set it when several replicas share a host."
        ),
    )

    @model_validator(mode="after")
    def _min_below_max(self) -> IndexerSettings:
        if self.chunk_min_chars >= self.chunk_max_chars:
            raise ValueError("INDEXER_CHUNK_MIN_CHARS must be smaller than INDEXER_CHUNK_MAX_CHARS")
        return self
