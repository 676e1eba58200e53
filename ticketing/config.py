"""Settings of the ticketing service (prefix ``TICKETING_``; Jira's own under ``JIRA_``).

The backend is chosen by ``TICKETING_BACKEND``: ``local`` (the embedded SQLite store, the default)
or ``jira``. Each backend has a pydantic configuration model built from these settings
(:meth:`TicketingSettings.jira_config`, :meth:`TicketingSettings.local_config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from contracts.settings import ServiceSettings

PLACEHOLDER_SECRETS = {"", "change-me"}


def _unprefixed(name: str) -> AliasChoices:
    return AliasChoices(name, name.lower())


class CategoryRoute(BaseModel):
    """Where a category's tickets go: component, extra labels, technician queue, priority."""

    component: str | None = Field(None, description="Jira component name.")
    labels: list[str] = Field(default_factory=list, description="Extra labels.")
    queue: str | None = Field(None, description="Technician queue (a label in Jira).")
    priority: str | None = Field(None, description="Priority name, e.g. High.")


DEFAULT_ROUTES: dict[str, CategoryRoute] = {
    "connectivity": CategoryRoute(queue="Network", priority="High"),
    "account": CategoryRoute(queue="Identity & Access", priority="High"),
    "courses": CategoryRoute(queue="Training", priority="Low"),
    "documentation": CategoryRoute(queue="Service Desk", priority="Low"),
    "peripheral_exchange": CategoryRoute(queue="Hardware Logistics", priority="Medium"),
    "peripheral_question": CategoryRoute(queue="Desktop Support", priority="Medium"),
    "other": CategoryRoute(queue="Service Desk", priority="Medium"),
}


class LocalConfig(BaseModel):
    """The embedded ticket store."""

    path: Path
    key_prefix: str = "DP"
    url_base: str = "deskpilot://tickets/"


class JiraConfig(BaseModel):
    """A Jira Cloud or Server/Data Center project, reached with basic auth (e-mail, API token)."""

    base_url: str
    email: str
    api_token: SecretStr
    project_key: str
    issue_type: str = "Task"
    timeout_s: float = 10.0
    link_type: str = "Relates"
    done_transition: str = "Done"
    property_key: str = "deskpilot"


class TicketingSettings(ServiceSettings):
    """How tickets are filed, retried and matched to incidents."""

    model_config = SettingsConfigDict(env_prefix="TICKETING_")

    backend: Literal["local", "jira"] = Field(
        "local",
        description="Where tickets go: `local` (a SQLite store in the data dir) or `jira`.",
    )
    support_email: str = Field(
        "servicedesk@northwind.example",
        description="The address users are told to write to when a ticket cannot be filed now.",
    )
    silent_tickets: bool = Field(
        False,
        description="File a ticket, resolved at once, for conversations the assistant resolved "
        "(escalation reason `resolved`), for analytics and past cases.",
    )
    concurrency: int = Field(4, ge=1, description="Requests one process handles at once.")
    retry_interval_s: float = Field(
        5.0, gt=0, description="How often waiting ticket requests are looked at."
    )
    retry_backoff_s: float = Field(
        30.0, gt=0, description="Wait before the first retry of a failed ticket request; doubles."
    )
    retry_backoff_max_s: float = Field(
        1800.0, gt=0, description="Longest wait between two retries of a ticket request."
    )
    max_attempts: int = Field(
        10,
        ge=1,
        description="Attempts at filing one ticket before it is dead-lettered (a `failed` "
        "ticket event and an entry in `escalation.requested.dlq`).",
    )
    category_routes: dict[str, CategoryRoute] = Field(
        default_factory=lambda: dict(DEFAULT_ROUTES),
        description="Per category (JSON object): component, labels, queue and priority of its "
        'tickets, e.g. {"connectivity": {"component": "Network", "queue": "Network", '
        '"priority": "High"}}. Setting it replaces the whole default.',
    )
    local_url_base: str = Field(
        "deskpilot://tickets/",
        description="Prefix of local tickets' URLs (the key is appended).",
    )
    jira_base_url: str | None = Field(
        None,
        validation_alias=_unprefixed("JIRA_BASE_URL"),
        description="Jira site, e.g. https://your-domain.atlassian.net; required with "
        "TICKETING_BACKEND=jira.",
    )
    jira_email: str | None = Field(
        None,
        validation_alias=_unprefixed("JIRA_EMAIL"),
        description="The Jira account's e-mail (basic auth user).",
    )
    jira_api_token: SecretStr = Field(
        SecretStr("change-me"),
        validation_alias=_unprefixed("JIRA_API_TOKEN"),
        description="The Jira account's API token; a real one is required in production.",
    )
    jira_project_key: str = Field(
        "IT", validation_alias=_unprefixed("JIRA_PROJECT_KEY"), description="Jira project key."
    )
    jira_issue_type: str = Field("Task", description="Issue type of filed tickets.")
    jira_timeout_s: float = Field(10.0, gt=0, description="Timeout of one Jira request.")
    jira_link_type: str = Field(
        "Relates", description="Issue link type used to link tickets to incidents."
    )
    jira_done_transition: str = Field(
        "Done", description="Name of the transition that resolves a ticket (silent tickets)."
    )
    statuspage_url: str | None = Field(
        None,
        description="A Statuspage-compatible status page (its base URL or its "
        "/api/v2/summary.json); unset turns the watcher off.",
    )
    statuspage_interval_s: float = Field(
        60.0, gt=0, description="Seconds between two polls of the status page."
    )
    statuspage_timeout_s: float = Field(10.0, gt=0, description="Timeout of one status poll.")

    @model_validator(mode="after")
    def _jira_settings_complete(self) -> TicketingSettings:
        if self.backend != "jira":
            return self
        missing = [
            name
            for name, value in (
                ("JIRA_BASE_URL", self.jira_base_url),
                ("JIRA_EMAIL", self.jira_email),
            )
            if not value
        ]
        if missing:
            raise ValueError(f"TICKETING_BACKEND=jira needs {', '.join(missing)}")
        if (
            self.environment == "production"
            and self.jira_api_token.get_secret_value() in PLACEHOLDER_SECRETS
        ):
            raise ValueError("JIRA_API_TOKEN must be set to a real token in production")
        return self

    def local_config(self) -> LocalConfig:
        return LocalConfig(path=self.data_dir / "tickets.sqlite3", url_base=self.local_url_base)

    def jira_config(self) -> JiraConfig:
        if not self.jira_base_url or not self.jira_email:
            raise ValueError("JIRA_BASE_URL and JIRA_EMAIL are required for the Jira backend")
        return JiraConfig(
            base_url=self.jira_base_url,
            email=self.jira_email,
            api_token=self.jira_api_token,
            project_key=self.jira_project_key,
            issue_type=self.jira_issue_type,
            timeout_s=self.jira_timeout_s,
            link_type=self.jira_link_type,
            done_transition=self.jira_done_transition,
        )
