"""Settings of knowledge sources: one model per kind, several sources of each kind.

Sources are configured as one JSON list in ``INDEXER_SOURCES``, each with a unique ``name`` (the
one ``POST /api/admin/sources/{name}/sync`` and ``deskpilot sources sync NAME`` take) and a
``kind`` that selects the plugin. Secrets are :class:`~pydantic.SecretStr`: they never appear in
a log line, a repr or an error message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, SecretStr

from contracts.sources import SOURCE_NAME_PATTERN


class SourceConfig(BaseModel):
    """What every source has."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SOURCE_NAME_PATTERN, description="Unique name of the source.")
    interval_s: float | None = Field(
        None, gt=0, description="Seconds between scheduled syncs; none: on demand only."
    )
    timeout_s: float = Field(30.0, gt=0, description="Seconds per HTTP request.")
    max_retries: int = Field(
        5, ge=0, le=20, description="Retries of a request answered 429 or 503 (after Retry-After)."
    )
    max_retry_after_s: float = Field(
        120.0, gt=0, description="Longest Retry-After honoured; a longer one stops the run."
    )
    max_document_bytes: int = Field(
        5_000_000, gt=0, description="Largest document body read; a larger one counts failed."
    )


class ConfluenceConfig(SourceConfig):
    """A Confluence Cloud site, read with an account's e-mail and API token."""

    kind: Literal["confluence"] = "confluence"
    base_url: AnyHttpUrl = Field(
        description="The site's wiki root: https://example.atlassian.net/wiki (Cloud) or "
        "https://confluence.example.com (Data Center)."
    )
    spaces: tuple[str, ...] = Field(min_length=1, description="Keys of the spaces to index.")
    email: str = Field(min_length=3, description="The account's e-mail (basic auth).")
    api_token: SecretStr = Field(description="The account's API token.")
    page_size: int = Field(50, ge=1, le=250)


class SharePointConfig(SourceConfig):
    """A SharePoint Online site's document libraries, read through Microsoft Graph by an app
    registration with the client-credentials flow (application permission ``Sites.Read.All``,
    admin-consented)."""

    kind: Literal["sharepoint"] = "sharepoint"
    tenant_id: str = Field(pattern=r"^[A-Za-z0-9.-]{1,100}$", description="The Entra tenant.")
    client_id: str = Field(min_length=1, description="The app registration's client id.")
    client_secret: SecretStr = Field(description="A client secret of the app registration.")
    site: str = Field(
        pattern=r"^[A-Za-z0-9.-]+:/[^?#]*$",
        description="The site as host name and path: contoso.sharepoint.com:/sites/it.",
    )
    libraries: tuple[str, ...] = Field(
        (), description="Names of the document libraries to index; empty: every library."
    )
    graph_url: AnyHttpUrl = Field(
        AnyHttpUrl("https://graph.microsoft.com/v1.0"), description="Microsoft Graph's root."
    )
    authority_host: AnyHttpUrl = Field(
        AnyHttpUrl("https://login.microsoftonline.com"),
        description="Where tokens come from (another cloud's login host, if not the global one).",
    )
    ca_bundle: Path | None = Field(
        None, description="A CA bundle to verify Graph and the login host with (a proxy's)."
    )


SourceSettings = Annotated[ConfluenceConfig | SharePointConfig, Field(discriminator="kind")]
"""Any source's settings, selected by ``kind``."""


def unique_names(sources: list[SourceSettings]) -> list[SourceSettings]:
    """``sources`` when no two share a name; raises ``ValueError`` naming the repeat."""
    seen: set[str] = set()
    for source in sources:
        if source.name in seen:
            raise ValueError(f"INDEXER_SOURCES: the name {source.name!r} is used twice")
        seen.add(source.name)
    return sources
