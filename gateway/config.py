"""Gateway settings (``GATEWAY_*``)."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from contracts.settings import ServiceSettings


class GatewaySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_")

    host: str = Field("127.0.0.1", description="Interface to listen on.")
    port: int = Field(8000, ge=1, le=65535, description="Port to listen on.")
    instance_id: str = Field(
        "",
        description="Names this instance's reply stream; default <node>-<port>. Keep it stable "
        "across restarts so answers that arrive meanwhile are not lost.",
    )
    max_message_bytes: int = Field(8192, ge=1, description="Longest accepted message (UTF-8).")
    max_upload_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1,
        description="Largest document accepted by POST /api/documents (it travels over the bus "
        "base64-encoded, a third larger).",
    )
    max_log_bytes: int = Field(
        5 * 1024 * 1024, ge=1, description="Largest text log accepted by POST /api/attachments."
    )
    max_image_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Largest image accepted by POST /api/attachments."
    )
    attachment_timeout_s: float = Field(
        90.0,
        gt=0,
        description="How long POST /api/attachments waits for the file to be read (OCR of a "
        "large screenshot takes seconds) before answering 504 with the id.",
    )
    attachment_ttl_s: int = Field(
        4 * 3600,
        ge=60,
        description="How long an attachment's record is kept; match "
        "ORCHESTRATOR_CONVERSATION_TTL_S so attachments expire with the conversation.",
    )
    turn_timeout_s: float = Field(
        30.0, gt=0, description="How long POST /api/chat waits before answering 504 with the id."
    )
    turn_ttl_s: int = Field(7 * 24 * 3600, ge=60, description="How long answers can be fetched.")
    required_services: list[str] = Field(
        default_factory=lambda: ["redactor", "orchestrator", "indexer"],
        description="Services /health requires a live heartbeat from.",
    )

    @model_validator(mode="after")
    def _default_instance(self) -> GatewaySettings:
        if not self.instance_id:
            self.instance_id = f"{self.node_name}-{self.port}"
        return self
