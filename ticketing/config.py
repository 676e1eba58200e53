"""Settings of the ticketing service (prefix ``TICKETING_``; Jira's own under ``JIRA_``).

The backend is chosen by ``TICKETING_BACKEND``: ``local`` (the embedded SQLite store, the default)
or ``jira``. Each backend has a pydantic configuration model built from these settings
(:meth:`TicketingSettings.jira_config`, :meth:`TicketingSettings.local_config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    AliasChoices,
    AnyHttpUrl,
    BaseModel,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import SettingsConfigDict

from contracts.runtime_config import CATEGORIES
from contracts.settings import ServiceSettings
from ticketing.notify.config import NotifyRoute, SmtpConfig, SmtpSecurity

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

    notify_routes: dict[str, NotifyRoute] = Field(
        default_factory=dict,
        description="Who is told about questions the assistant could not answer (or answered "
        "with low confidence, see ORCHESTRATOR_NOTICE_CONFIDENCE), per category, as a JSON "
        'object: {"account": {"emails": ["iam-team@example.com"], "slack_webhook_url": '
        '"https://hooks.slack.com/services/..."}}. Categories not named: nobody. Empty: off.',
    )
    notify_admin_url: AnyHttpUrl | None = Field(
        None,
        description="The gateway's public base URL (https://deskpilot.example.com): notices "
        "link to the conversation in its admin page. Unset: they give the conversation's id.",
    )
    notify_dedup_s: float = Field(
        86_400.0,
        gt=0,
        description="Seconds within which the same question in the same category is reported "
        "once (the same words, whatever their case, spacing and punctuation).",
    )
    notify_max_per_hour: int = Field(
        30, ge=1, description="Notices per category and hour at most; more are dropped (logged)."
    )
    notify_timeout_s: float = Field(
        10.0, gt=0, description="Timeout of one SMTP session or webhook call."
    )
    smtp_host: str | None = Field(
        None, description="The SMTP server e-mail notices go through; required for `emails`."
    )
    smtp_port: int = Field(587, ge=1, le=65535, description="The SMTP server's port.")
    smtp_security: SmtpSecurity = Field(
        "starttls",
        description="`starttls` (port 587), `tls` (implicit TLS, port 465) or `none` (a relay "
        "on a trusted network only; refused in production).",
    )
    smtp_username: str | None = Field(None, description="SMTP login, when the server wants one.")
    smtp_password: SecretStr | None = Field(None, description="SMTP password.")
    smtp_from: str = Field(
        "deskpilot@northwind.example", description="The notices' sender address."
    )
    smtp_ca_bundle: Path | None = Field(
        None, description="A CA bundle to verify the SMTP server's certificate with."
    )

    @field_validator("notify_routes")
    @classmethod
    def _known_categories(cls, routes: dict[str, NotifyRoute]) -> dict[str, NotifyRoute]:
        unknown = sorted(set(routes) - set(CATEGORIES))
        if unknown:
            raise ValueError(
                f"TICKETING_NOTIFY_ROUTES names unknown categories {unknown}; "
                f"known: {', '.join(CATEGORIES)}"
            )
        return routes

    @model_validator(mode="after")
    def _smtp_for_emails(self) -> TicketingSettings:
        if any(route.emails for route in self.notify_routes.values()) and not self.smtp_host:
            raise ValueError(
                "TICKETING_NOTIFY_ROUTES names e-mail addresses: set TICKETING_SMTP_HOST"
            )
        if self.environment == "production" and self.smtp_host and self.smtp_security == "none":
            raise ValueError("TICKETING_SMTP_SECURITY=none is refused in production")
        return self

    def smtp_config(self) -> SmtpConfig | None:
        if not self.smtp_host:
            return None
        return SmtpConfig(
            host=self.smtp_host,
            port=self.smtp_port,
            security=self.smtp_security,
            username=self.smtp_username,
            password=self.smtp_password,
            sender=self.smtp_from,
            timeout_s=self.notify_timeout_s,
            ca_bundle=self.smtp_ca_bundle,
        )

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
