"""Settings of the crawler service.

Shared settings (Redis, node name, bus timings) come from
:class:`contracts.settings.ServiceSettings`; the fields here are the crawler's own and are read from
``CRAWLER_*`` variables, except ``CHROMIUM_PATH``, which is un-prefixed because every tool that
drives the system browser reads it. A job's own budget (pages, depth, deadline, concurrency) and
scope (seeds, allowed domains) travel in its ``context.insufficient`` event; the values here are
the fleet's politeness and safety rules, the same for every job.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from contracts.settings import LLMEndpointSettings

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class CrawlerSettings(LLMEndpointSettings):
    """How a crawler process drives its browser and how politely and safely it crawls."""

    model_config = SettingsConfigDict(env_prefix="CRAWLER_")

    chromium_path: Path = Field(
        Path("/usr/bin/chromium"),
        validation_alias=AliasChoices("CHROMIUM_PATH", "chromium_path"),
        description="The system Chromium the crawler launches (Debian package `chromium`); "
        "browsers are never downloaded.",
    )
    cdp_url: str | None = Field(
        None,
        description="Attach to a running Chromium over CDP (e.g. `http://browser:9222`) instead "
        "of launching `CHROMIUM_PATH`.",
    )
    chromium_sandbox: bool = Field(
        True,
        description="Run Chromium with its sandbox. Only as root (where Chromium cannot sandbox "
        "itself) or with this false does it run with `--no-sandbox`; turn it off only where the "
        "container runtime forbids the user namespaces the sandbox needs.",
    )
    contexts: int = Field(
        2,
        ge=1,
        le=32,
        description="Browser contexts per worker: the pages one worker renders at once.",
    )
    recycle_after_pages: int = Field(
        200,
        ge=1,
        description="Restart the browser after this many pages, so its memory stays flat.",
    )
    page_timeout_s: float = Field(
        20.0, gt=0, description="Upper bound for one page: download, render and extraction."
    )
    render_timeout_s: float = Field(
        5.0,
        gt=0,
        description="How long a page's scripts may take to put content in the body after load.",
    )
    render: Literal["auto", "always"] = Field(
        "auto",
        description=(
            "auto: a page is read from its HTML as served, and rendered in Chromium only when that "
            "HTML carries fewer than `CRAWLER_RENDER_MIN_WORDS` words of content or asks for "
            "JavaScript in a `<noscript>`; always: every HTML page is rendered."
        ),
    )
    render_min_words: int = Field(
        60,
        ge=0,
        description="In `auto`, pages whose served HTML has fewer content words are rendered.",
    )
    render_quiet_ms: int = Field(
        100,
        ge=0,
        description="A rendered page is read once its DOM has not changed for this long.",
    )
    max_page_bytes: int = Field(
        5 * 1024 * 1024,
        ge=1024,
        description="Larger documents, and rendered pages whose DOM is larger, are refused "
        "(`too_large`); a page's HTML or PDF travels whole on `pages.crawled`.",
    )
    max_redirects: int = Field(5, ge=0, description="Longer redirect chains are refused.")
    user_agent: str = Field(
        "DeskpilotCrawler/0.1 (+https://github.com/deskpilot)",
        description="User-Agent of every request; its first word is the robots.txt agent name.",
    )
    respect_robots: bool = Field(True, description="Honour robots.txt rules and crawl-delay.")
    freshness_s: float = Field(
        3600.0,
        ge=0,
        description=(
            "A page read within this many seconds is not fetched again (by any job): its links "
            "are planned from what was kept and it counts as skipped `fresh`. 0 turns it off."
        ),
    )
    subresource_cache_bytes: int = Field(
        32 * 1024 * 1024,
        ge=0,
        description="Memory a worker keeps of the scripts and stylesheets rendered pages loaded "
        "(Chromium caches nothing the crawler fulfils), for at most the freshness window. 0 "
        "turns it off.",
    )
    # With an LLM endpoint (LLMEndpointSettings, shared with the orchestrator) the LLM re-ranks
    # each page's best links (crawler/rerank.py).
    llm_rerank_top: int = Field(
        8, ge=0, le=50, description="Best links of a page the LLM re-orders; 0 turns it off."
    )
    llm_rerank_timeout_s: float = Field(
        8.0, gt=0, description="Longest wait for the LLM's ranking; then the planner's order."
    )
    robots_cache_s: int = Field(
        3600, ge=1, description="How long a site's robots.txt is reused (cached in Redis)."
    )
    sitemaps: bool = Field(
        True,
        description="Read each seed site's sitemaps (robots.txt `Sitemap:` lines, `/sitemap.xml` "
        "and the one beside the seed; indexes and gzip too) and plan their pages with the links: "
        "finds the pages only scripts link to, and `<lastmod>` says when a page read within the "
        "freshness window must be read again.",
    )
    sitemap_host_map: dict[str, str] = Field(
        default_factory=dict,
        description="JSON object mapping a host named in sitemaps to the allowed host that "
        'serves its pages, e.g. `{"docs.example.com": "staging.example.com"}` for a staging site '
        "whose sitemap names production: the URLs' paths are kept, scheme and host replaced "
        "(a value without `http://` or `https://` keeps the scheme the sitemap was read with). "
        "Without a mapping, sitemap URLs outside the allowed domains are dropped.",
    )
    sitemap_cache_s: int = Field(
        3600, ge=1, description="How long a sitemap file is reused (cached in Redis per site)."
    )
    site_profile_interval_s: float = Field(
        3600.0,
        ge=0,
        description=(
            "How often the fleet reads the configured help sites' sitemaps with no question "
            "asked (one worker each time, checked every 30 s), so that the sites' profiles "
            "(scope, the redactor's site words) know the listed pages before the first "
            "question; 0 turns it off. The files themselves are cached for "
            "CRAWLER_SITEMAP_CACHE_S."
        ),
    )
    sitemap_max_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1024,
        description="Largest sitemap file, as downloaded and after gzip: a larger one is read up "
        "to here (the protocol allows 50 MB; a gzip bomb stops here).",
    )
    sitemap_max_urls: int = Field(
        50_000, ge=1, description="Pages taken from one site's sitemaps, in their order."
    )
    sitemap_max_files: int = Field(
        10, ge=1, description="Sitemap files (indexes included) read for one crawl job."
    )
    sitemap_timeout_s: float = Field(
        5.0,
        gt=0,
        description="Longest a job reads sitemaps before it plans past its seeds (only the seeds "
        "are fetched meanwhile); what was read by then is planned, and the files read are cached "
        "for the next job.",
    )
    max_crawl_delay_s: float = Field(
        30.0,
        ge=0,
        description="A robots.txt crawl-delay above this is capped to it.",
    )
    domain_requests_per_s: float = Field(
        4.0, gt=0, description="Requests per second per host, across the whole fleet."
    )
    domain_concurrency: int = Field(
        4, ge=1, description="Requests in flight per host, across the whole fleet."
    )
    retry_attempts: int = Field(
        3,
        ge=1,
        description="Tries of one page on 429/503, time-outs of the network or a browser crash.",
    )
    backoff_s: float = Field(
        1.0, gt=0, description="First back-off after a 429/503 without Retry-After; doubles."
    )
    max_retry_after_s: float = Field(
        60.0,
        gt=0,
        description="A Retry-After longer than this gives the page up instead of waiting.",
    )
    allow_networks: Annotated[list[IPNetwork], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated CIDRs exempt from the SSRF guard (e.g. `127.0.0.0/8` for a "
        "site on this host); private, loopback, link-local and metadata addresses are refused "
        "otherwise.",
    )
    embeddings: bool = Field(
        True,
        description="Score links with the packaged embedding model as well as keywords.",
    )
    torch_threads: int | None = Field(
        None, ge=1, description="CPU threads torch may use; unset leaves torch's default."
    )
    max_links_per_page: int = Field(
        300, ge=1, description="Links of one page the planner considers, in page order."
    )
    max_pages_per_pattern: int = Field(
        8,
        ge=1,
        description="Pages per URL pattern (digits as wildcards) in one job: the guard against "
        "calendar-style link traps.",
    )
    job_ttl_s: int = Field(
        24 * 3600, ge=60, description="How long a job's state stays in Redis after it starts."
    )
    namespace: str = Field(
        "",
        pattern=r"^[A-Za-z0-9_.-]*$",
        description="Prefix of the crawler's stream and key names, so that separate fleets (or "
        "test runs) can share one Redis; leave unset where the other services must reach it.",
    )
    sweep_interval_s: float = Field(
        1.0, gt=0, description="How often a worker looks for jobs past their deadline."
    )

    @field_validator("allow_networks", mode="before")
    @classmethod
    def _split_networks(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("sitemap_host_map")
    @classmethod
    def _check_host_map(cls, value: dict[str, str]) -> dict[str, str]:
        checked = {}
        for named, serving in value.items():
            checked[_host_port(named, "a host named in sitemaps")] = _origin(serving)
        return checked

    @property
    def key_prefix(self) -> str:
        """What every Redis key of the crawler starts with (before ``crawler:``)."""
        return f"{self.namespace}:" if self.namespace else ""

    @property
    def robots_agent(self) -> str:
        """The product token robots.txt groups are matched against."""
        return self.user_agent.split("/", 1)[0].split()[0]


def _host_port(value: str, what: str) -> str:
    """``host`` or ``host:port``, lower-cased; ValueError naming ``what`` otherwise."""
    parts = urlsplit(f"//{value.strip()}")
    try:
        port = parts.port
    except ValueError:
        port = None
        parts = urlsplit("//")
    if not parts.hostname or parts.path or parts.query or parts.username:
        raise ValueError(f"{value!r} is not {what} (host or host:port)")
    return f"{parts.hostname}:{port}" if port else parts.hostname


def _origin(value: str) -> str:
    """A mapping's target: ``host[:port]`` or ``http(s)://host[:port]``, lower-cased."""
    text = value.strip().rstrip("/")
    scheme, _, rest = text.rpartition("://")
    if scheme and scheme.lower() not in ("http", "https"):
        raise ValueError(f"{value!r}: only http and https hosts can serve a site's pages")
    host = _host_port(rest, "an allowed host")
    return f"{scheme.lower()}://{host}" if scheme else host
