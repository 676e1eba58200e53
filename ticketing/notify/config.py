"""Who hears about unanswered questions, and through which SMTP server.

``TICKETING_NOTIFY_ROUTES`` is a JSON object, category -> :class:`NotifyRoute`; the categories are
the intent classifier's (``contracts.runtime_config.CATEGORIES``). A webhook URL is a secret
(whoever has it may post to the channel): :class:`~pydantic.SecretStr`, never logged.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

ADDRESS = re.compile(r"^[^@\s<>,;\"]+@[^@\s<>,;\"]+\.[^@\s<>,;\"]+$")
SmtpSecurity = Literal["starttls", "tls", "none"]
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class NotifyRoute(BaseModel):
    """The people responsible for one category: e-mail addresses and/or a Slack channel."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    emails: tuple[str, ...] = Field(
        (), max_length=50, description="Addresses to e-mail.", examples=[["hr-team@example.com"]]
    )
    slack_webhook_url: SecretStr | None = Field(
        None,
        description="A Slack incoming webhook (https://hooks.slack.com/services/...): posts to "
        "the channel it was made for.",
    )

    @field_validator("emails")
    @classmethod
    def _addresses(cls, emails: tuple[str, ...]) -> tuple[str, ...]:
        for email in emails:
            if not ADDRESS.fullmatch(email):
                raise ValueError(f"not an e-mail address: {email[:80]!r}")
        return emails

    @field_validator("slack_webhook_url")
    @classmethod
    def _webhook(cls, url: SecretStr | None) -> SecretStr | None:
        if url is None:
            return url
        parts = urlsplit(url.get_secret_value())
        # The URL's path is the secret: plain http only to a server on this machine (a test's).
        if parts.scheme != "https" and not (parts.scheme == "http" and parts.hostname in LOOPBACK):
            raise ValueError("slack_webhook_url must be an https URL")
        return url

    @model_validator(mode="after")
    def _someone(self) -> NotifyRoute:
        if not self.emails and self.slack_webhook_url is None:
            raise ValueError("a route needs e-mail addresses or a slack_webhook_url")
        return self


class SmtpConfig(BaseModel):
    """The SMTP server e-mails go through (from the ``TICKETING_SMTP_*`` settings)."""

    host: str
    port: int
    security: SmtpSecurity
    username: str | None
    password: SecretStr | None
    sender: str
    timeout_s: float
    ca_bundle: Path | None
