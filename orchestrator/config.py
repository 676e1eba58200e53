"""Orchestrator settings (``ORCHESTRATOR_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from contracts.events import INCIDENT_RESOLVED_KEEP_S, INCIDENT_STALE_AFTER_S
from contracts.settings import LLMEndpointSettings
from orchestrator.automations import AutomationSettings
from orchestrator.feedback import FeedbackSettings


class OrchestratorSettings(LLMEndpointSettings, AutomationSettings, FeedbackSettings):
    model_config = SettingsConfigDict(env_prefix="ORCHESTRATOR_")

    top_k: int = Field(5, ge=1, le=50, description="Chunks retrieved per question.")
    relevance_threshold: float = Field(
        0.45,
        ge=0,
        le=1,
        description="Cosine similarity below which the knowledge base is taken not to cover it.",
    )
    sufficiency_check: bool = Field(
        True,
        description="Answer only from an article whose title, heading or text covers the "
        "question's key terms (its words weighed by their rarity in the knowledge base; the "
        "words of a message's context, such as a greeting, details the redactor replaced or "
        "'since this morning', weigh little or nothing), not from one that is merely similar; "
        "a question no article covers is crawled for, or answered honestly as not covered.",
    )
    see_also_margin: float = Field(
        0.08,
        ge=0,
        le=1,
        description="Other articles within this similarity of the best one are cited as see-also.",
    )
    max_citations: int = Field(3, ge=1, le=10, description="Most sources cited in one answer.")
    cases_collection: str = Field(
        "deskpilot_cases",
        validation_alias=AliasChoices("DESKPILOT_CASES_COLLECTION", "cases_collection"),
        description="The Chroma collection of resolved tickets (past cases); the indexer imports "
        "into it, the orchestrator offers matches from it.",
    )
    cases_min_score: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Cosine similarity a resolved ticket needs to be offered as a similar case.",
    )
    cases_max: int = Field(3, ge=0, le=10, description="Most similar resolved cases offered.")
    turn_ttl_s: int = Field(7 * 24 * 3600, ge=60, description="How long a turn's state is kept.")
    conversation_ttl_s: int = Field(
        4 * 3600, ge=60, description="How long a quiet conversation's memory is kept."
    )
    clarify_cap: int = Field(
        2, ge=0, description="Clarifying rounds per topic before a ticket is offered instead."
    )
    concurrency: int = Field(4, ge=1, description="Turns handled at once by one process.")
    torch_threads: int | None = Field(
        1,
        ge=1,
        description="CPU threads for the embedding model (unset: torch's default, one per core). "
        "A question is a few word pieces, which a second thread hardly speeds up, while a thread "
        "that waits for a core another process holds stalls every layer of the model; turns run "
        "side by side instead (ORCHESTRATOR_CONCURRENCY).",
    )
    intents_file: Path | None = Field(
        None,
        description="YAML file of labelled examples the intent classifier learns from at start-up "
        "(categories and kinds, their technician queues, conversation, out-of-scope); unset "
        "means the packaged orchestrator/data/intents.yaml. Changes take effect on restart.",
    )
    scope_threshold: float = Field(
        0.44,
        ge=0,
        le=1,
        description="A message is declined as not IT support when the learned probability that "
        "it is IT support or conversation falls below this. The default is calibrated by "
        "cross-validation on the packaged examples (at most 0.5 % of the IT and conversational "
        "ones refused by a model that did not see them); with your own examples, `deskpilot "
        "eval intents --held-apart FILE` prints the threshold calibrated on them.",
    )
    scope_site_margin: float = Field(
        0.1,
        ge=0,
        le=1,
        description="How far under the scope threshold a message may score and still be read "
        "from the help sites, when it names a subject of their profile (their seed URLs, the "
        "titles and URL words of the pages read from them): a help site's own subjects are in "
        "scope. 0 refuses whatever the scope model refuses.",
    )
    request_human_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Learned probability above which a message counts as asking for a person "
        "or a ticket.",
    )

    # Escalation to a technician (orchestrator/escalation/, orchestrator/tickets.py).
    escalation_anger_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description='Anger score (VADER, profanity, shouting, repeated punctuation, "still '
        "doesn't work\", failed steps, repeated questions) at which a conversation goes to a "
        "technician; see `deskpilot eval escalation`.",
    )
    ticket_wait_s: float = Field(
        15.0,
        gt=0,
        description="How long a turn waits for the ticketing service before telling the user a "
        "ticket will follow (the request stays queued).",
    )
    support_email: str = Field(
        "servicedesk@northwind.example",
        description="Where users are told to write when no ticket can be filed now; keep it "
        "equal to TICKETING_SUPPORT_EMAIL.",
    )
    route_categories: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated categories the assistant does not handle itself: such "
        "requests go straight to their category's technician queue as a ticket.",
    )

    # Ongoing incidents (orchestrator/incidents.py).
    incident_cache_s: float = Field(
        2.0,
        ge=0,
        description="Seconds each process reuses its list of active incidents before reading "
        "Redis again (every turn asks for it).",
    )
    incident_resolved_keep_s: int = Field(
        INCIDENT_RESOLVED_KEEP_S,
        ge=60,
        description="How long a resolved incident is kept, so a late, older update cannot "
        "make it active again.",
    )
    incident_stale_after_s: int = Field(
        INCIDENT_STALE_AFTER_S,
        ge=60,
        description="An active incident not updated for this long is forgotten (its source "
        "never reported the resolution).",
    )

    # The LLM plugin (orchestrator/llm/); its endpoint, model and key come from
    # LLMEndpointSettings, shared with the crawler.
    llm_temperature: float = Field(
        0.0, ge=0, le=2, description="Sampling temperature; 0 keeps answers close to the sources."
    )
    llm_connect_timeout_s: float = Field(
        5.0, gt=0, description="Seconds to wait for a connection to the LLM endpoint."
    )
    llm_read_timeout_s: float = Field(
        30.0, gt=0, description="Seconds to wait for a response, or for each streamed piece."
    )
    llm_max_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="Retries after connection errors, timeouts, 429 and 5xx, with exponential "
        "backoff and jitter. Other 4xx responses are never retried.",
    )
    llm_retry_after_max_s: float = Field(
        10.0,
        ge=0,
        description="Longest Retry-After worth waiting for; a longer one fails the call at once.",
    )
    llm_deadline_s: float = Field(
        20.0,
        gt=0,
        description="Limit on one LLM call, retries included (streaming: until the first "
        "piece); past it the turn takes the deterministic path.",
    )
    llm_stream_interval_s: float = Field(
        0.1,
        ge=0,
        description="Least time between two `writing` progress replies, which carry the answer "
        "written so far while the LLM streams it; 0 sends one per streamed piece.",
    )

    llm_critique: Literal["off", "sources", "all"] = Field(
        "off",
        description="Check the model's answer before it is sent: a second call judges each "
        "sentence or step of the draft against the same passages; what they do not support is "
        "removed, and the judge's confidence decides whether the assistant says it is not sure "
        "(ORCHESTRATOR_CRITIQUE_MIN_CONFIDENCE). `sources`: only answers from a synced "
        "knowledge source (Confluence, SharePoint); `all`: every answer the model words; `off`: "
        "none. A critique that fails sends the extractive answer, which quotes the passage. "
        "Without a model (LLM_BASE_URL unset) nothing is critiqued.",
    )
    critique_min_confidence: float = Field(
        0.5,
        ge=0,
        le=1,
        description="A critiqued answer whose confidence is below this says it is not sure, "
        "keeps only what the passages support (marked as such), offers a technician and is "
        "reported on `notice.unanswered` as answered with low confidence.",
    )

    # Crawling the company's help sites when the knowledge base cannot answer (issue: agentic
    # crawl loop). Seeds and allowed domains use un-prefixed names, like the LLM settings.
    crawl_seed_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("CRAWL_SEED_URLS", "crawl_seed_urls"),
        description="Comma-separated start pages of the help sites to read when the knowledge "
        "base does not cover a question; none means never crawl.",
    )
    crawl_allowed_domains: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("CRAWL_ALLOWED_DOMAINS", "crawl_allowed_domains"),
        description="Comma-separated hosts a crawl may read (each with its subdomains); none "
        "means the seed URLs' own hosts.",
    )
    crawl_enabled: bool = Field(True, description="Crawl at all (with seed URLs configured).")
    crawl_max_pages: int = Field(10, ge=1, description="Pages one turn's crawl may read.")
    crawl_max_depth: int = Field(2, ge=0, description="Links followed from a seed at most.")
    crawl_deadline_s: float = Field(
        20.0,
        gt=0,
        description="Seconds a turn's crawl may take; then the turn is answered with what was "
        "found. Keep it under the gateway's GATEWAY_TURN_TIMEOUT_S.",
    )
    crawl_grace_s: float = Field(
        5.0,
        ge=0,
        description="Extra seconds after the crawl deadline for the last pages to be indexed "
        "before the turn is answered without them.",
    )
    crawl_concurrency: int = Field(4, ge=1, description="Pages of one crawl fetched at once.")
    crawl_settled_s: float = Field(
        300.0,
        ge=0,
        description="After a question's crawl read no new page (what its plan reached had been "
        "read within the crawler's freshness window, more of it than failed), the same question "
        "is answered from what is indexed without crawling again for this long: asked again, "
        "it does not wait on a crawl that would read nothing. 0: always crawl.",
    )
    crawl_enough_words: int = Field(
        25,
        ge=0,
        description="Words an answer found while the crawl runs must quote to end the crawl "
        "early (a checklist always does); thinner pages (a hub listing links) let it go on.",
    )

    notice_confidence: float | None = Field(
        None,
        ge=0,
        le=1,
        description="An answer whose best match is below this similarity counts as answered "
        "with low confidence and is reported on `notice.unanswered` like a turn not answered at "
        "all (the ticketing service tells whoever TICKETING_NOTIFY_ROUTES names for its "
        "category). Unset: only turns not answered are reported.",
    )

    @field_validator("crawl_seed_urls", "crawl_allowed_domains", "route_categories", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def crawl_configured(self) -> bool:
        return self.crawl_enabled and bool(self.crawl_seed_urls)
