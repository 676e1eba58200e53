"""Gateway settings (``GATEWAY_*``)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import NoDecode, SettingsConfigDict

from contracts.events import INCIDENT_RESOLVED_KEEP_S, INCIDENT_STALE_AFTER_S
from contracts.settings import ServiceSettings

PLACEHOLDER_SECRETS = frozenset({"change-me", "changeme"})
MIN_JWT_SECRET_BYTES = 32
ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}
)
"""What user tokens from a JWKS may be signed with (never HMAC, never ``none``)."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
UserRole = Literal["employee", "technician", "admin"]


def _default_role_map() -> dict[str, UserRole]:
    return {"employee": "employee", "technician": "technician", "admin": "admin"}


def secret_value(secret: SecretStr | None) -> str:
    """An optional secret's value; unset and empty are both ``""`` (the feature is off)."""
    return secret.get_secret_value() if secret is not None else ""


class McpClient(BaseModel):
    """A service client of the MCP server (GATEWAY_MCP_CLIENTS)."""

    model_config = ConfigDict(extra="forbid")

    token: SecretStr = Field(min_length=32)
    roles: list[UserRole] = Field(default_factory=lambda: list[UserRole](["employee"]))


def mcp_clients(settings: GatewaySettings) -> dict[str, McpClient]:
    """GATEWAY_MCP_CLIENTS parsed: client name to its token and roles."""
    raw = secret_value(settings.mcp_clients)
    if not raw:
        return {}
    try:
        parsed = TypeAdapter(dict[str, McpClient]).validate_json(raw)
    except ValidationError:
        # The message would quote the tokens: say only what is wrong in general.
        raise ValueError(
            'GATEWAY_MCP_CLIENTS must be {"<name>": {"token": "<32+ chars>", "roles": [...]}}'
        ) from None
    tokens = [client.token.get_secret_value() for client in parsed.values()]
    if len(set(tokens)) != len(tokens):
        raise ValueError("GATEWAY_MCP_CLIENTS gives two clients the same token")
    for name in parsed:
        if not 0 < len(name) <= 64 or not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError("GATEWAY_MCP_CLIENTS names are letters, digits, - and _")
    return parsed


def _require_https(name: str, url: str) -> None:
    """An outside service's URL: https, or http on loopback (tests, a local emulator)."""
    parts = urlsplit(url)
    local = parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS
    if not parts.hostname or not (parts.scheme == "https" or local):
        raise ValueError(f"{name} must be https (http only on loopback)")


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
        default_factory=lambda: ["redactor", "ocr", "orchestrator", "indexer", "ticketing"],
        description="Services /health requires a live heartbeat from (a JSON list); by default "
        "every worker but the optional crawler: redactor, ocr, orchestrator, indexer, ticketing.",
    )
    incident_token: SecretStr | None = Field(
        None,
        description="Bearer token of POST /api/incidents (status pages, monitoring); unset "
        "or empty disables the endpoint (401). Production refuses the placeholder `change-me`.",
    )
    analytics_retention_days: int = Field(
        400,
        ge=1,
        description="How long the daily analytics counters (GET /api/admin/analytics) are kept "
        "after their last write.",
    )
    audit_scan: int = Field(
        10_000,
        ge=100,
        description="GET /api/admin/audit reads at most this many of the newest audit entries "
        "looking for a conversation's records.",
    )
    jwt_secret: SecretStr | None = Field(
        None,
        description="Shared HS256 secret (at least 32 bytes) of the optional user tokens on the "
        "chat and attachment endpoints; unset means every user is anonymous.",
    )
    jwt_audience: str | None = Field(
        None, description="The `aud` user tokens must carry; unset refuses tokens with an `aud`."
    )
    jwt_issuer: str | None = Field(None, description="The `iss` user tokens must carry, if set.")
    jwt_leeway_s: float = Field(
        30.0, ge=0, le=300, description="Clock skew allowed when checking a token's `exp`/`nbf`."
    )
    jwt_jwks_url: str | None = Field(
        None,
        description="The identity provider's JWKS URL (OIDC `jwks_uri`): user tokens are "
        "verified against its published keys; needs GATEWAY_JWT_ISSUER and GATEWAY_JWT_AUDIENCE, "
        "https (http only on loopback), and excludes GATEWAY_JWT_SECRET.",
    )
    jwt_algorithms: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["RS256", "ES256"],
        description="Comma-separated algorithms accepted on tokens from the JWKS (RS*, PS*, "
        "ES* only; never HMAC or `none`).",
    )
    jwt_jwks_lifetime_s: float = Field(
        600.0, ge=10, description="How long fetched JWKS keys are used before fetching again."
    )
    jwt_jwks_min_refresh_s: float = Field(
        30.0,
        ge=1,
        description="A token naming an unknown key id (`kid`) fetches the JWKS again at most "
        "this often: rotated keys are found, forged ids cannot flood the identity provider.",
    )
    jwt_jwks_timeout_s: float = Field(5.0, gt=0, le=60, description="Timeout of a JWKS fetch.")
    jwt_roles_claim: str = Field(
        "roles",
        min_length=1,
        description="The claim holding the user's roles (a list or a space-separated string); "
        "a dotted path such as `realm_access.roles` reaches into nested claims.",
    )
    jwt_groups_claim: str = Field(
        "groups",
        min_length=1,
        description="The claim holding the user's groups, a list of group ids (Entra ID: the "
        "group object ids, with `groupMembershipClaims` set on the app registration); a dotted "
        "path reaches into nested claims. The groups decide which synced documents the user "
        "may read; a missing claim is no groups (public documents only).",
    )
    jwt_role_map: dict[str, UserRole] = Field(
        default_factory=_default_role_map,
        description="JSON object from the identity provider's role names to Deskpilot's "
        "(employee, technician, admin); unlisted names give no role, and every valid token is "
        "at least an employee.",
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated addresses or networks (CIDR) of reverse proxies whose "
        "`X-Forwarded-For` names the client; from anyone else the header is ignored and the "
        "socket's peer is the client.",
    )
    rate_limit_enabled: bool = Field(
        True, description="Rate limits per user and per client IP, counted in Redis."
    )
    rate_limit_window_s: float = Field(
        60.0,
        ge=1,
        description="The window the limits below are per: each is a token bucket holding one "
        "window's allowance, refilled evenly over the window.",
    )
    rate_limit_chat_per_user: int = Field(
        30, ge=1, description="Chat messages (POST /api/chat, WebSocket frames) per user."
    )
    rate_limit_chat_per_ip: int = Field(
        600, ge=1, description="Chat messages per client IP (many users may share one)."
    )
    rate_limit_upload_per_user: int = Field(
        20, ge=1, description="Uploads (attachments, documents) per user."
    )
    rate_limit_upload_per_ip: int = Field(200, ge=1, description="Uploads per client IP.")
    rate_limit_api_per_user: int = Field(
        600, ge=1, description="Other API calls (and WebSocket connections) per user."
    )
    rate_limit_api_per_ip: int = Field(6000, ge=1, description="Other API calls per client IP.")
    frame_ancestors: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["'self'"],
        description="Comma-separated pages allowed to show the chat in a frame (CSP "
        "`frame-ancestors`): origins such as `https://contoso.sharepoint.com`, `'self'`, or "
        "`'none'`. The embed launcher's host pages must be listed.",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated origins whose own scripts may call the API (CORS); none "
        "by default. The iframe and the embed launcher need none.",
    )
    anonymous_key: SecretStr | None = Field(
        None,
        description="Key (at least 32 bytes) the gateway signs anonymous users' tokens with; "
        "unset, the gateway keeps a random one in Redis, shared by its replicas. Changing it "
        "makes every anonymous user a stranger to their earlier conversations.",
    )
    anonymous_ttl_s: int = Field(
        30 * 24 * 3600,
        ge=3600,
        description="How long an anonymous token is valid; the chat page gets a renewed one on "
        "every connection.",
    )
    conversation_claim_ttl_s: int = Field(
        3600,
        ge=60,
        description="How long a conversation the WebSocket opened is kept without a message; "
        "its first message keeps it as long as its turns.",
    )
    upload_concurrency_per_user: int = Field(
        2,
        ge=1,
        description="Uploads (attachments, documents) one user may have in progress at once on "
        "a gateway process, from the first byte to the answer; more get 429 with Retry-After.",
    )
    upload_concurrency_per_ip: int = Field(
        8, ge=1, description="Uploads one client IP may have in progress at once per process."
    )
    upload_concurrency_total: int = Field(
        16,
        ge=1,
        description="Uploads in progress at once per gateway process, everyone together; more "
        "get 503 with Retry-After.",
    )
    upload_memory_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="File bytes a gateway process holds at once while receiving and publishing "
        "uploads (each costs about five times its size while it is encoded and sent); an upload "
        "that does not fit gets 503 with Retry-After before its body is read. At least the "
        "largest allowed file.",
    )
    ocr_queue_max_bytes: int = Field(
        128 * 1024 * 1024,
        ge=1024,
        description="Bytes the attachment.received stream may hold in Redis (attachments "
        "waiting for the ocr service); over it, attachments get 503 with Retry-After until the "
        "ocr service catches up. At least the largest allowed file, base64-encoded.",
    )
    upload_retry_after_s: int = Field(
        5, ge=1, le=300, description="The Retry-After of uploads refused for load (429/503)."
    )

    slack_signing_secret: SecretStr | None = Field(
        None,
        description="The Slack app's signing secret (Basic Information, App Credentials): every "
        "request from Slack is verified with it. Unset or empty turns the Slack channel off "
        "(its endpoints answer 404).",
    )
    slack_bot_token: SecretStr | None = Field(
        None,
        description="The Slack app's bot token (`xoxb-`, OAuth & Permissions) the gateway posts "
        "answers with; needed when GATEWAY_SLACK_SIGNING_SECRET is set.",
    )
    slack_api_url: str = Field(
        "https://slack.com/api/",
        description="Base URL of the Slack Web API (tests point it at an emulator on loopback).",
    )
    slack_response_url_prefix: str = Field(
        "https://hooks.slack.com/",
        description="The only prefix a slash command's or button's `response_url` may have "
        "before the gateway posts to it.",
    )
    slack_principal: Literal["email", "slack_id"] = Field(
        "email",
        description="Who a Slack user is to Deskpilot: `email`, their Slack profile's email "
        "address (users.info, scope users:read.email), for an identity provider whose `sub` is "
        "the email, so a Slack user and the same person in the web chat are one user; or "
        "`slack_id`, `slack:<team>:<user>`, a user of their own.",
    )
    slack_team_ids: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated Slack workspace ids (`T...`) the app answers; empty "
        "answers any workspace the app is installed in.",
    )
    slack_event_ttl_s: int = Field(
        3600,
        ge=600,
        description="How long a Slack event id (and a request's signature) is remembered, so a "
        "retried or replayed delivery is not handled twice; longer than Slack's retries "
        "(about 5 minutes) and the signature window.",
    )
    slack_identity_ttl_s: int = Field(
        24 * 3600,
        ge=60,
        description="How long a Slack user's principal (the email users.info gave) is cached.",
    )
    slack_max_body_bytes: int = Field(
        64 * 1024,
        ge=4096,
        description="Largest request body the Slack endpoints read; a larger one is refused "
        "before it is verified.",
    )
    teams_app_id: str | None = Field(
        None,
        description="The bot's Microsoft App ID (the Entra app registration's client id): the "
        "audience every Bot Framework request's token must name. Unset turns the Teams channel "
        "off (its endpoint answers 404).",
    )
    teams_app_password: SecretStr | None = Field(
        None,
        description="The app registration's client secret, for the token the gateway sends "
        "replies with (client credentials); needed with GATEWAY_TEAMS_APP_ID.",
    )
    teams_tenant_id: str | None = Field(
        None,
        description="The tenant of a single-tenant bot (its replies' token comes from this "
        "tenant) and the only tenant whose activities are answered; unset: a multi-tenant bot "
        "(token from `botframework.com`), activities from any tenant.",
    )
    teams_openid_url: str = Field(
        "https://login.botframework.com/v1/.well-known/openidconfiguration",
        description="The Bot Framework's OpenID metadata (its `jwks_uri` has the signing keys).",
    )
    teams_issuer: str = Field(
        "https://api.botframework.com", description="The issuer Bot Framework tokens must carry."
    )
    teams_token_url: str = Field(
        "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
        description="Where the reply token is asked for; `{tenant}` is GATEWAY_TEAMS_TENANT_ID "
        "or `botframework.com`.",
    )
    teams_service_url_prefixes: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["https://smba.trafficmanager.net/"],
        description="Comma-separated prefixes an activity's `serviceUrl` (where replies are "
        "posted) must start with, beyond matching the signed token's `serviceUrl` claim.",
    )
    teams_max_body_bytes: int = Field(
        256 * 1024, ge=4096, description="Largest Bot Framework activity the gateway reads."
    )
    directory_tenant_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9.-]{1,100}$",
        description="The Entra tenant whose directory gives Teams and Slack users their groups "
        "(Microsoft Graph, app-only). Unset: channel users get no groups, so they read public "
        "documents and those granted to them by name only.",
    )
    directory_client_id: str | None = Field(
        None,
        description="The app registration that reads the directory (application permission "
        "`User.Read.All`, admin-consented); needed with GATEWAY_DIRECTORY_TENANT_ID.",
    )
    directory_client_secret: SecretStr | None = Field(
        None, description="A client secret of that app registration."
    )
    directory_group_field: Literal["id", "displayName", "onPremisesSamAccountName"] = Field(
        "id",
        description="What of a group becomes the reader's group: `id` (its object id, what "
        "Entra puts in the token's groups claim by default and SharePoint permissions name), "
        "`displayName` or `onPremisesSamAccountName`. Set it to what the web chat's token "
        "lists, so one person has the same groups on every channel.",
    )
    directory_cache_s: int = Field(
        900,
        ge=60,
        le=86_400,
        description="How long a user's groups are kept before the directory is asked again (a "
        "group removed in Entra still counts for at most this long).",
    )
    directory_timeout_s: float = Field(
        2.0,
        gt=0,
        le=10,
        description="How long one directory request may take. Slack and Teams wait for the "
        "gateway's answer, so a slow directory gives that turn no groups rather than a late "
        "reply.",
    )
    directory_graph_url: str = Field(
        "https://graph.microsoft.com/v1.0", description="Microsoft Graph's root."
    )
    directory_authority_host: str = Field(
        "https://login.microsoftonline.com",
        description="Where directory tokens come from (another cloud's login host).",
    )
    directory_ca_bundle: Path | None = Field(
        None, description="A CA bundle to verify Graph and the login host with (a proxy's)."
    )
    mcp_enabled: bool = Field(
        False,
        description="Serve Deskpilot as an MCP server at `/mcp` (streamable HTTP) for agents and "
        "systems elsewhere in the company; callers need a user token or a GATEWAY_MCP_CLIENTS "
        "token.",
    )
    mcp_clients: SecretStr | None = Field(
        None,
        description='JSON object of the MCP server\'s service clients: `{"<name>": {"token": '
        '"<at least 32 characters>", "roles": ["employee"]}}`; a client acts as the user '
        "`mcp:<name>` with those roles (technician to read any ticket and report incidents).",
    )
    # The incidents MCP lists (gateway/incidents.py); the orchestrator forgets them after its
    # own two settings, whose defaults these share (contracts.events).
    incident_resolved_keep_s: int = Field(
        INCIDENT_RESOLVED_KEEP_S,
        ge=60,
        description="How long MCP still shows a resolved incident; match "
        "ORCHESTRATOR_INCIDENT_RESOLVED_KEEP_S.",
    )
    incident_stale_after_s: int = Field(
        INCIDENT_STALE_AFTER_S,
        ge=60,
        description="An ongoing incident not updated for this long leaves MCP's list; match "
        "ORCHESTRATOR_INCIDENT_STALE_AFTER_S.",
    )
    channel_delivery_ttl_s: int = Field(
        24 * 3600,
        ge=60,
        description="How long a channel turn remembers where its answer goes (the Slack thread); "
        "an answer arriving later is kept for the web API only.",
    )

    @field_validator("frame_ancestors", "cors_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("frame_ancestors")
    @classmethod
    def _source_expressions(cls, value: list[str]) -> list[str]:
        # Each entry goes verbatim into the Content-Security-Policy header.
        for source in value:
            if any(char in source for char in ';,"') or not source.isprintable() or " " in source:
                raise ValueError(f"not a CSP source expression: {source!r}")
        return value

    @model_validator(mode="after")
    def _default_instance(self) -> GatewaySettings:
        if not self.instance_id:
            self.instance_id = f"{self.node_name}-{self.port}"
        return self

    @model_validator(mode="after")
    def _gateway_secrets(self) -> GatewaySettings:
        if (
            self.environment == "production"
            and secret_value(self.incident_token) in PLACEHOLDER_SECRETS
        ):
            raise ValueError(
                "GATEWAY_INCIDENT_TOKEN must be a real secret in production (or empty to "
                "disable POST /api/incidents)"
            )
        secret = secret_value(self.jwt_secret)
        # RFC 7518 section 3.2: an HS256 key must be at least as long as the hash (32 bytes).
        if secret and len(secret.encode()) < MIN_JWT_SECRET_BYTES:
            raise ValueError(f"GATEWAY_JWT_SECRET must be at least {MIN_JWT_SECRET_BYTES} bytes")
        anonymous_key = secret_value(self.anonymous_key)
        if anonymous_key and len(anonymous_key.encode()) < MIN_JWT_SECRET_BYTES:
            raise ValueError(f"GATEWAY_ANONYMOUS_KEY must be at least {MIN_JWT_SECRET_BYTES} bytes")
        if anonymous_key and anonymous_key == secret:
            raise ValueError("GATEWAY_ANONYMOUS_KEY must differ from GATEWAY_JWT_SECRET")
        return self

    @model_validator(mode="after")
    def _slack(self) -> GatewaySettings:
        if not secret_value(self.slack_signing_secret):
            return self
        if not secret_value(self.slack_bot_token):
            raise ValueError("GATEWAY_SLACK_SIGNING_SECRET needs GATEWAY_SLACK_BOT_TOKEN")
        if self.environment == "production" and (
            secret_value(self.slack_signing_secret) in PLACEHOLDER_SECRETS
            or secret_value(self.slack_bot_token) in PLACEHOLDER_SECRETS
        ):
            raise ValueError("the Slack signing secret and bot token must be real in production")
        _require_https("GATEWAY_SLACK_API_URL", self.slack_api_url)
        _require_https("GATEWAY_SLACK_RESPONSE_URL_PREFIX", self.slack_response_url_prefix)
        return self

    @model_validator(mode="after")
    def _teams(self) -> GatewaySettings:
        if not self.teams_app_id:
            return self
        if not secret_value(self.teams_app_password):
            raise ValueError("GATEWAY_TEAMS_APP_ID needs GATEWAY_TEAMS_APP_PASSWORD")
        urls = [
            ("GATEWAY_TEAMS_OPENID_URL", self.teams_openid_url),
            ("GATEWAY_TEAMS_TOKEN_URL", self.teams_token_url.replace("{tenant}", "t")),
            *(("GATEWAY_TEAMS_SERVICE_URL_PREFIXES", p) for p in self.teams_service_url_prefixes),
        ]
        for name, url in urls:
            _require_https(name, url)
        return self

    @model_validator(mode="after")
    def _directory(self) -> GatewaySettings:
        if not self.directory_tenant_id:
            return self
        if not (self.directory_client_id and secret_value(self.directory_client_secret)):
            raise ValueError(
                "GATEWAY_DIRECTORY_TENANT_ID needs GATEWAY_DIRECTORY_CLIENT_ID and "
                "GATEWAY_DIRECTORY_CLIENT_SECRET"
            )
        _require_https("GATEWAY_DIRECTORY_GRAPH_URL", self.directory_graph_url)
        _require_https("GATEWAY_DIRECTORY_AUTHORITY_HOST", self.directory_authority_host)
        return self

    @model_validator(mode="after")
    def _mcp(self) -> GatewaySettings:
        mcp_clients(self)  # a malformed GATEWAY_MCP_CLIENTS fails at start, not at first use
        return self

    @model_validator(mode="after")
    def _upload_budgets(self) -> GatewaySettings:
        largest = max(self.max_log_bytes, self.max_image_bytes, self.max_upload_bytes)
        if self.upload_memory_bytes < largest:
            raise ValueError(
                f"GATEWAY_UPLOAD_MEMORY_BYTES ({self.upload_memory_bytes}) must hold the largest "
                f"allowed file ({largest} bytes)"
            )
        encoded = (max(self.max_log_bytes, self.max_image_bytes) + 2) // 3 * 4
        if self.ocr_queue_max_bytes < encoded:
            raise ValueError(
                f"GATEWAY_OCR_QUEUE_MAX_BYTES ({self.ocr_queue_max_bytes}) must hold the largest "
                f"attachment base64-encoded ({encoded} bytes)"
            )
        return self

    @field_validator(
        "jwt_algorithms",
        "trusted_proxies",
        "slack_team_ids",
        "teams_service_url_prefixes",
        mode="before",
    )
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for network in value:
            ipaddress.ip_network(network, strict=False)  # ValueError names the bad entry
        return value

    @model_validator(mode="after")
    def _identity_provider(self) -> GatewaySettings:
        unsafe = set(self.jwt_algorithms) - ASYMMETRIC_ALGORITHMS
        if unsafe or not self.jwt_algorithms:
            raise ValueError(
                f"GATEWAY_JWT_ALGORITHMS takes RS*, PS* or ES* only, not {sorted(unsafe)}"
            )
        if not self.jwt_jwks_url:
            return self
        if secret_value(self.jwt_secret):
            raise ValueError("set GATEWAY_JWT_JWKS_URL or GATEWAY_JWT_SECRET, not both")
        if not (self.jwt_issuer and self.jwt_audience):
            raise ValueError(
                "GATEWAY_JWT_JWKS_URL needs GATEWAY_JWT_ISSUER and GATEWAY_JWT_AUDIENCE"
            )
        url = urlsplit(self.jwt_jwks_url)
        secure = url.scheme == "https" or (url.scheme == "http" and url.hostname in LOOPBACK_HOSTS)
        if not url.hostname or not secure:
            raise ValueError("GATEWAY_JWT_JWKS_URL must be https (http only on loopback)")
        return self
