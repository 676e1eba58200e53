"""Which automations may run, and how to reach the password-reset webhook (its settings)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from contracts.settings import ServiceSettings

PASSWORD_RESET = "password_reset"  # noqa: S105 - the automation's name, not a credential  # nosec B105
DEFAULT_ARTICLE_URL = "https://it.northwind.example/kb/reset-your-account-password"
MIN_SECRET_LENGTH = 32


class AutomationSettings(ServiceSettings):
    """Which automations may run, and how to reach the password-reset webhook.

    Meant to be a base of :class:`orchestrator.config.OrchestratorSettings` (same prefix).
    """

    model_config = SettingsConfigDict(env_prefix="ORCHESTRATOR_")

    automations: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated names of the automations the assistant may run for users "
        "(the allow-list; known: `password_reset`); none means it never runs one.",
    )
    automation_offer_ttl_s: int = Field(
        600,
        ge=10,
        description="How long an offer to run an automation waits for the user's explicit yes; "
        "a later yes asks again.",
    )
    password_reset_webhook_url: str | None = Field(
        None,
        description="The endpoint that resets a user's account password and sends them the new "
        "one (required with `password_reset` allowed); put no credentials in it, requests are "
        "signed with the secret.",
    )
    password_reset_webhook_secret: SecretStr | None = Field(
        None,
        description="Shared secret of the HMAC-SHA256 signature of every webhook request; at "
        f"least {MIN_SECRET_LENGTH} characters in production.",
    )
    password_reset_timeout_s: float = Field(
        8.0, gt=0, description="Seconds to wait for the webhook to connect and to answer."
    )
    password_reset_attempts: int = Field(
        2,
        ge=1,
        le=5,
        description="Tries per reset when the webhook cannot be reached or answers 5xx, all with "
        "the same Idempotency-Key; a timeout is never retried.",
    )
    password_reset_article_url: str = Field(
        DEFAULT_ARTICLE_URL,
        description="The knowledge-base article on resetting one's password oneself, offered "
        "to users who are not signed in and when a reset fails.",
    )

    @field_validator("automations", mode="before")
    @classmethod
    def _automation_names(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _automations_known_and_configured(self) -> AutomationSettings:
        # Imported here, not at the top: the registry's plugins are built from these settings,
        # so the runner's module imports this one.
        from orchestrator.automations.runner import REGISTRY

        unknown = sorted(set(self.automations) - set(REGISTRY))
        if unknown:
            raise ValueError(
                f"unknown automations {unknown}; known: {sorted(REGISTRY)}"  # names, not secrets
            )
        if PASSWORD_RESET in self.automations:
            secret = self.password_reset_webhook_secret
            if not self.password_reset_webhook_url or secret is None:
                raise ValueError(
                    "password_reset needs ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL and "
                    "ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET"
                )
            value = secret.get_secret_value()
            if self.environment == "production" and (
                len(value) < MIN_SECRET_LENGTH or value in {"change-me", "changeme", "secret"}
            ):
                raise ValueError(
                    "ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET must be a real secret of at "
                    f"least {MIN_SECRET_LENGTH} characters in production"
                )
        return self
