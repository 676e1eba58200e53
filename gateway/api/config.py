"""Runtime configuration for admins: read the effective settings, change some, see the history.

The settings and their bounds are :class:`contracts.runtime_config.RuntimeOverrides`; defaults
are what each service published from its environment at start-up. A change is a partial update
based on the version the admin read (409 when someone changed it meanwhile), takes effect in
every service within ``contracts.runtime_config.CACHE_TTL_S`` seconds, and is recorded on the
audit stream (``action="configuration"``) with who changed what, old -> new.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from contracts.bus import Bus
from contracts.domains import within
from contracts.events import AuditRecorded, new_id
from contracts.runtime_config import (
    AUDIT_CONVERSATION,
    FIELDS,
    RuntimeConfigStore,
    RuntimeOverrides,
    StaleVersion,
    StoredConfig,
    field_kind,
    field_service,
    read_defaults,
)
from contracts.topics import Topic
from gateway.config import GatewaySettings
from gateway.deps import AdminDep, AuditDep, require_admin
from gateway.errors import ApiError, ErrorCode
from gateway.models import AuditRead, ConfigFieldRead, ConfigRead, ConfigUpdate

log = logging.getLogger("deskpilot.gateway.config")

ADMIN_TOKEN_ACTOR = "admin token"  # noqa: S105 - a label, not a secret  # nosec B105
"""Who changed the configuration when the request carries no admin identity, only the token."""


class ConfigService:
    """Reads and changes the overrides document, and audits every change."""

    def __init__(self, bus: Bus, settings: GatewaySettings) -> None:
        self.bus = bus
        self.settings = settings
        self.store = RuntimeConfigStore(bus.redis)

    async def read(self) -> ConfigRead:
        return describe(await self.store.load(), await read_defaults(self.bus.redis))

    async def change(self, update: ConfigUpdate, actor: str) -> ConfigRead:
        defaults = await read_defaults(self.bus.redis)
        current = await self.store.load()
        if current.version != update.version:
            raise stale(StaleVersion(update.version, current.version))
        overrides = current.overrides.values()
        for name in update.changes.model_fields_set:
            value = getattr(update.changes, name)
            if value is None:
                overrides.pop(name, None)
            else:
                overrides[name] = value
        merged = RuntimeOverrides.model_validate(overrides)
        changed = [
            name
            for name in FIELDS
            if effective(current.overrides, defaults, name) != effective(merged, defaults, name)
            or (getattr(current.overrides, name) is None) != (getattr(merged, name) is None)
        ]
        if not changed:
            return describe(current, defaults)
        self.check(merged, defaults, set(update.changes.model_fields_set))
        try:
            before, after = await self.store.save(update.version, merged, actor)
        except StaleVersion as exc:
            raise stale(exc) from None
        await self.audit(before, after, defaults, changed, actor)
        log.info(
            "runtime configuration changed",
            extra={"version": after.version, "fields": changed},
        )
        return describe(after, defaults)

    def check(self, merged: RuntimeOverrides, defaults: dict[str, Any], named: set[str]) -> None:
        """Rules across settings, checked when a change touches them (422)."""
        problems = []
        deadline = effective(merged, defaults, "crawl_deadline_s")
        if (
            "crawl_deadline_s" in named
            and deadline is not None
            and deadline >= self.settings.turn_timeout_s
        ):
            problems.append(
                f"crawl_deadline_s: must be under the gateway's turn timeout "
                f"({self.settings.turn_timeout_s:g} s), or users wait for nothing"
            )
        seeds = effective(merged, defaults, "crawl_seed_urls") or []
        domains = effective(merged, defaults, "crawl_allowed_domains") or []
        if named & {"crawl_seed_urls", "crawl_allowed_domains"} and domains:
            outside = [seed for seed in seeds if not within(seed, domains)]
            if outside:
                problems.append(
                    "crawl_seed_urls: not within crawl_allowed_domains: " + ", ".join(outside)
                )
        if problems:
            raise ApiError(ErrorCode.INVALID_REQUEST, "; ".join(problems))

    async def audit(
        self,
        before: StoredConfig,
        after: StoredConfig,
        defaults: dict[str, Any],
        changed: list[str],
        actor: str,
    ) -> None:
        details: dict[str, str | int | float | bool | None] = {
            "changed_by": actor,
            "version": after.version,
        }
        for name in changed:
            old = effective(before.overrides, defaults, name)
            new = effective(after.overrides, defaults, name)
            restored = " (default)" if getattr(after.overrides, name) is None else ""
            details[name] = f"{shown(old)} -> {shown(new)}{restored}"
        await self.bus.publish(
            Topic.AUDIT,
            AuditRecorded(
                correlation_id=new_id(),
                conversation_id=AUDIT_CONVERSATION,
                service="gateway",
                action="configuration",
                reason=f"{actor} changed {', '.join(changed)}",
                details=details,
            ),
        )


def effective(overrides: RuntimeOverrides, defaults: dict[str, Any], name: str) -> Any:
    """The value in force: the override, else the service's default. A queue mapping is the
    default mapping with the overridden categories replaced."""
    value = getattr(overrides, name)
    if name == "category_queues":
        return {**(defaults.get(name) or {}), **(value or {})} or None
    return value if value is not None else defaults.get(name)


def shown(value: Any) -> str:
    """A value as the audit record shows it (compact JSON; lists and mappings sorted stably)."""
    if value is None:
        return "unset"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def describe(stored: StoredConfig, defaults: dict[str, Any]) -> ConfigRead:
    schema = RuntimeOverrides.model_json_schema()["properties"]
    fields = []
    for name in FIELDS:
        bounds = _bounds(schema[name])
        fields.append(
            ConfigFieldRead(
                name=name,
                service=field_service(name),
                kind=field_kind(name),
                description=RuntimeOverrides.model_fields[name].description or "",
                minimum=bounds[0],
                maximum=bounds[1],
                value=effective(stored.overrides, defaults, name),
                default=defaults.get(name),
                overridden=getattr(stored.overrides, name) is not None,
            )
        )
    return ConfigRead(
        version=stored.version,
        updated_at=stored.updated_at,
        updated_by=stored.updated_by,
        values={field.name: field.value for field in fields},
        overridden=[field.name for field in fields if field.overridden],
        fields=fields,
    )


def _bounds(prop: dict[str, Any]) -> tuple[float | None, float | None]:
    """Minimum and maximum of an optional number's JSON schema (``anyOf`` with null)."""
    for option in prop.get("anyOf", [prop]):
        if option.get("type") in ("integer", "number"):
            low = option.get("minimum", option.get("exclusiveMinimum"))
            high = option.get("maximum", option.get("exclusiveMaximum"))
            return low, high
    return None, None


def stale(exc: StaleVersion) -> ApiError:
    return ApiError(
        ErrorCode.VERSION_CONFLICT,
        f"The configuration changed since version {exc.expected} (it is at version "
        f"{exc.current} now); read it again and reapply your change.",
    )


def get_config_service(request: Request) -> ConfigService:
    service: ConfigService = request.app.state.runtime_config
    return service


ConfigServiceDep = Annotated[ConfigService, Depends(get_config_service)]


def acting_admin(admin: AdminDep) -> str:
    """Who the audit record names: the admin's user id from a verified token, or "admin token"
    for the shared break-glass credential (which is no person)."""
    return ADMIN_TOKEN_ACTOR if admin.source == "admin_token" else admin.user_id


router = APIRouter(
    prefix="/api/admin/config", tags=["admin"], dependencies=[Depends(require_admin)]
)

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token."},
}


@router.get("", response_model=ConfigRead, responses=_ERRORS)
async def read_config(config: ConfigServiceDep) -> ConfigRead:
    """The runtime settings in force, each with its default and whether an admin overrode it."""
    return await config.read()


@router.put(
    "",
    response_model=ConfigRead,
    responses={
        **_ERRORS,
        409: {"description": "The configuration changed since `version`; read it again."},
        422: {"description": "A value out of range, a bad URL or host, an unknown category."},
    },
)
async def change_config(
    update: ConfigUpdate,
    config: ConfigServiceDep,
    actor: Annotated[str, Depends(acting_admin)],
) -> ConfigRead:
    """Change some settings (null restores a default). Services apply it within seconds,
    without a restart; the change is recorded in the audit log with who made it."""
    return await config.change(update, actor)


@router.get("/history", response_model=AuditRead, responses=_ERRORS)
async def config_history(audit: AuditDep, limit: int = Query(50, ge=1, le=500)) -> AuditRead:
    """Recorded configuration changes, oldest first (from the audit log: who, what, old ->
    new). The audit view's scan limit applies (GATEWAY_AUDIT_SCAN)."""
    return await audit.conversation(AUDIT_CONVERSATION, limit)
