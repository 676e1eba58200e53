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

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

ADDRESS = re.compile(r"^[^@\s<>,;\"]+@[^@\s<>,;\"]+\.[^@\s<>,;\"]+$")
SmtpSecurity = Literal["starttls", "tls", "none"]


class NotifyRoute(BaseModel):
    """The people responsible for one category: e-mail addresses and/or a Slack channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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
        if url is not None and urlsplit(url.get_secret_value()).scheme not in ("https", "http"):
            raise ValueError("slack_webhook_url must be an https URL")
        return url


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
