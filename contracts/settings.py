"""Settings every Deskpilot process shares.

Each service extends :class:`ServiceSettings` with its own ``env_prefix`` (``GATEWAY_``,
``REDACTOR_``, ...). The fields defined here are read from the same un-prefixed variables in every
service (``REDIS_URL``, ``CHROMA_HOST``, ``DESKPILOT_*``) so that one environment file
configures the whole stack. Nothing else in the code base reads ``os.environ``.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from contracts.sealing import KeyRing

PLACEHOLDER_ADMIN_TOKENS = frozenset({"change-me", "changeme"})
"""Admin token values that are documentation, not secrets."""


def _shared(name: str) -> AliasChoices:
    """Read a shared setting from its un-prefixed variable only."""
    return AliasChoices(name, name.lower())


def default_data_dir() -> Path:
    return Path.home() / ".deskpilot"


class ServiceSettings(BaseSettings):
    """The base class of every service's settings."""

    model_config = SettingsConfigDict(
        env_ignore_empty=True,
        extra="ignore",
        validate_by_name=True,
        validate_by_alias=True,
        # A refused setting's error (printed when a service does not start) names the setting
        # and the rule, never the value: values hold webhook URLs, passwords and tokens.
        hide_input_in_errors=True,
    )

    environment: Literal["development", "production"] = Field(
        "development",
        validation_alias=_shared("DESKPILOT_ENV"),
        description="`production` refuses placeholder secrets.",
    )
    redis_url: str = Field(
        "redis://127.0.0.1:6379/0",
        validation_alias=_shared("REDIS_URL"),
        description="Redis 7+ or Valkey holding every stream and the turn state.",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        validation_alias=_shared("DESKPILOT_DATA_DIR"),
        description="Where the embedded stack keeps Redis's AOF, Chroma and local stores.",
    )
    embedding_cache_dir: Path | None = Field(
        None,
        validation_alias=_shared("DESKPILOT_EMBEDDING_CACHE_DIR"),
        description="Where the vectors of texts shipped with Deskpilot (intent examples, demo "
        "articles) are kept between starts (contracts/vector_cache.py); unset embeds them at every "
        "start. `deskpilot up` keeps them in its data directory.",
    )
    chroma_host: str | None = Field(
        None,
        validation_alias=_shared("CHROMA_HOST"),
        description="A Chroma server; unset means the persistent directory in the data dir.",
    )
    chroma_port: int = Field(
        8000, validation_alias=_shared("CHROMA_PORT"), description="Port of the Chroma server."
    )
    chroma_auth_token: SecretStr | None = Field(
        None,
        validation_alias=_shared("CHROMA_AUTH_TOKEN"),
        description="Sent to the Chroma server as `X-Chroma-Token` (Chroma's token auth; the "
        "token check in front of the Chroma of deploy/k8s/stores and compose.yaml requires it).",
    )
    chroma_collection: str = Field(
        "deskpilot_kb",
        validation_alias=_shared("DESKPILOT_KB_COLLECTION"),
        description="The Chroma collection that holds knowledge-base chunks.",
    )
    node_name: str = Field(
        default_factory=socket.gethostname,
        validation_alias=_shared("DESKPILOT_NODE"),
        description="This host's name in consumer names, logs and heartbeats.",
    )
    log_level: str = Field(
        "INFO", validation_alias=_shared("LOG_LEVEL"), description="DEBUG, INFO, WARNING, ERROR."
    )
    stream_maxlen: int = Field(
        100_000,
        ge=100,
        validation_alias=_shared("DESKPILOT_STREAM_MAXLEN"),
        description="Approximate MAXLEN applied to every stream on publish.",
    )
    reclaim_idle_ms: int = Field(
        30_000,
        ge=10,
        validation_alias=_shared("DESKPILOT_RECLAIM_IDLE_MS"),
        description="A message pending this long (its consumer died) is claimed by another.",
    )
    read_block_ms: int = Field(
        5_000,
        ge=10,
        le=60_000,
        validation_alias=_shared("DESKPILOT_READ_BLOCK_MS"),
        description="Milliseconds one read of a stream waits for new entries before asking again. "
        "An entry that arrives meanwhile is delivered at once, so this sets only how often an idle "
        "consumer asks Redis (each of a service's subscriptions asks on its own, and an idle read "
        "costs a service about as much CPU as a small event does).",
    )
    max_deliveries: int = Field(
        5,
        ge=1,
        validation_alias=_shared("DESKPILOT_MAX_DELIVERIES"),
        description="After this many failed deliveries a message goes to `<topic>.dlq`.",
    )
    heartbeat_interval_s: float = Field(
        5.0,
        gt=0,
        validation_alias=_shared("DESKPILOT_HEARTBEAT_INTERVAL"),
        description="Seconds between heartbeats; a process silent for three is reported down.",
    )
    graceful_timeout_s: float = Field(
        30.0,
        gt=0,
        validation_alias=_shared("DESKPILOT_GRACEFUL_TIMEOUT"),
        description="How long shutdown waits for in-flight messages to finish and be acked.",
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        validation_alias=_shared("DESKPILOT_METRICS_PORT"),
        description="Port of this process's Prometheus metrics (`/metrics`, contracts/metrics.py); "
        "0 serves none. Off unless asked for, so a process started by hand or by a test opens no "
        "extra port; the Kubernetes and compose files set 9464 (one port per pod or container), "
        "and `deskpilot up` gives each of its processes a free loopback port of its own.",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        validation_alias=_shared("DESKPILOT_METRICS_HOST"),
        description="Interface the metrics port listens on; containers set `0.0.0.0` so "
        "Prometheus can reach it (the gateway's public port never serves metrics).",
    )
    fault_handler_delay_ms: int = Field(
        0,
        ge=0,
        validation_alias=_shared("DESKPILOT_FAULT_HANDLER_DELAY_MS"),
        description="Fault injection for reliability tests: slow every handler by this much.",
    )
    admin_token: SecretStr = Field(
        SecretStr(""),
        validation_alias=_shared("DESKPILOT_ADMIN_TOKEN"),
        description="Break-glass and service credential for admin endpoints (Bearer); unset or "
        "empty disables it (admin endpoints then take only user tokens with the admin role). "
        "`deskpilot up` generates one per run when unset and prints it once. Placeholders such "
        "as `change-me` are refused.",
    )

    seal_keys: SecretStr | None = Field(
        None,
        validation_alias=_shared("DESKPILOT_SEAL_KEYS"),
        description="AES-256-GCM keys that seal raw user content on the bus (messages, "
        "attachments, rating comments): `<id>:<base64 of 32 random bytes>`, several separated "
        "by commas; the first seals, every one opens (rotate by putting a new key first and "
        "dropping the old one once nothing it sealed is pending). Required in production by the "
        "gateway, ocr and redactor; `deskpilot up` generates one and keeps it in the data "
        "directory.",
    )

    def chroma_client_settings(self) -> dict[str, Any]:
        """The token settings of Chroma's client (``chromadb.config.Settings``): its token
        provider sends ``X-Chroma-Token`` on every request; empty when no token is set."""
        if self.chroma_auth_token is None:
            return {}
        return {
            "chroma_client_auth_provider": "chromadb.auth.token_authn.TokenAuthClientProvider",
            "chroma_client_auth_credentials": self.chroma_auth_token.get_secret_value(),
            "chroma_auth_token_transport_header": "X-Chroma-Token",  # nosec B105 # a header name
        }

    def key_ring(self) -> KeyRing:
        """The ring ``DESKPILOT_SEAL_KEYS`` configures (see :func:`contracts.sealing.key_ring_of`:
        a malformed value raises ``ValueError`` saying what is wrong, never the value; none in
        production raises, none in development is this process's own key). Checked when a
        service that seals or opens raw content starts (:meth:`contracts.bus.Bus.start`)."""
        from contracts.sealing import key_ring_of

        return key_ring_of(self.seal_keys, self.environment)

    @model_validator(mode="after")
    def _no_placeholder_secrets(self) -> ServiceSettings:
        # A placeholder is a credential everyone knows: refused everywhere, not only in
        # production (the gateway would otherwise accept `change-me` on every admin path).
        if self.admin_token.get_secret_value().strip().lower() in PLACEHOLDER_ADMIN_TOKENS:
            raise ValueError(
                "DESKPILOT_ADMIN_TOKEN is a placeholder: set a real secret, or leave it empty "
                "to disable the admin token"
            )
        return self


class LLMEndpointSettings(ServiceSettings):
    """The OpenAI-compatible endpoint, for services that may use an LLM (orchestrator, crawler).

    The names are un-prefixed, so one environment file configures every service the same way.
    """

    llm_base_url: str | None = Field(
        None,
        validation_alias=_shared("LLM_BASE_URL"),
        description="An OpenAI-compatible endpoint, up to and including `/v1` (OpenAI, Ollama, "
        "vLLM, llama.cpp); unset means no LLM: deterministic, extractive answers, and crawls "
        "follow the link planner's order.",
    )
    llm_model: str | None = Field(
        None,
        validation_alias=_shared("LLM_MODEL"),
        description="Model name sent with every request; required with LLM_BASE_URL.",
    )
    llm_api_key: SecretStr | None = Field(
        None,
        validation_alias=_shared("LLM_API_KEY"),
        description="Sent as `Authorization: Bearer`; leave unset for local servers without one.",
    )
