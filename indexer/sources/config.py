"""Settings of knowledge sources: one model per kind, several sources of each kind.

Sources are configured as one JSON list in ``INDEXER_SOURCES``, each with a unique ``name`` (the
one ``POST /api/admin/sources/{name}/sync`` and ``deskpilot sources sync NAME`` take) and a
``kind`` that selects the plugin. Secrets are :class:`~pydantic.SecretStr`: they never appear in
a log line, a repr or an error message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, SecretStr, model_validator

from contracts.readers import Readers
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


class SharePointList(BaseModel):
    """A SharePoint list to index: each item becomes a document whose title is one column and
    whose body is others (``{"list": "IT FAQ", "title": "Title", "body": ["Answer"]}``).

    Graph v1.0 reports no permissions for a list's items, so who may read them is stated here
    (``public``, or ``groups`` and ``users`` as the identity provider names them, like the
    Entra object ids a library's files report); a list with neither is refused rather than
    guessed public.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    list_name: str = Field(
        alias="list", min_length=1, max_length=255, description="The list's display name."
    )
    title: str = Field(
        "Title", min_length=1, max_length=255, description="The column that titles an item."
    )
    body: tuple[str, ...] = Field(
        min_length=1, max_length=20, description="The columns that make an item's text, in order."
    )
    public: bool = Field(False, description="Everyone in the organisation may read the list.")
    groups: tuple[str, ...] = Field((), description="Groups that may read the list.")
    users: tuple[str, ...] = Field((), description="Users that may read the list.")

    @model_validator(mode="after")
    def _check(self) -> SharePointList:
        where = f"the SharePoint list {self.list_name!r}"
        columns = [self.title, *self.body]
        if any(not column.strip() for column in columns):
            raise ValueError(f"{where}: a column name is blank")
        if len(set(columns)) != len(columns):
            raise ValueError(
                f"{where}: title and body name the same column twice ({', '.join(columns)})"
            )
        if not (self.public or self.groups or self.users):
            raise ValueError(
                f"{where}: say who may read it (public, groups or users); Graph does not report "
                "list items' permissions"
            )
        self.readers()  # ids that cannot be filed on chunks are refused now, not at sync
        return self

    def readers(self) -> Readers:
        """Who may read the list's items."""
        return Readers(public=self.public, users=self.users, groups=self.groups)


class SharePointConfig(SourceConfig):
    """A SharePoint Online site's pages, configured lists and document libraries, read through
    Microsoft Graph by an app registration with the client-credentials flow (application
    permission ``Sites.Read.All``, admin-consented)."""

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
    pages: bool = Field(True, description="Index the site's published pages.")
    sharing_changes: bool = Field(
        True,
        description="Ask the libraries' delta queries for permission changes (Microsoft "
        "documents Sites.FullControl.All for it); a delta Graph refuses with it (HTTP 403) is "
        "read without it for the rest of the run, with a warning. False: never ask; a library "
        "file's new readers then take effect when its content changes.",
    )
    lists: tuple[SharePointList, ...] = Field(
        (), description="Lists to index, with the columns that make each item's title and body."
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

    @model_validator(mode="after")
    def _unique_lists(self) -> SharePointConfig:
        names = [item.list_name for item in self.lists]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"lists: {repeated} configured more than once")
        return self


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
