"""Health: Redis, and a live heartbeat from every required service."""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from contracts.heartbeat import read_heartbeats
from gateway.deps import SettingsDep, TurnsDep
from gateway.models import HealthRead

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthRead, responses={503: {"model": HealthRead}})
async def health(turns: TurnsDep, settings: SettingsDep) -> JSONResponse:
    problems: list[str] = []
    dependencies: dict[str, bool] = {}
    beats: list[dict[str, object]] = []
    try:
        await turns.store.client.ping()
        dependencies["redis"] = True
        beats = await read_heartbeats(turns.store.client)
    except Exception:
        dependencies["redis"] = False
        problems.append("redis is unreachable")
    services = Counter(str(beat["service"]) for beat in beats)
    for service in settings.required_services:
        if dependencies["redis"] and services[service] == 0:
            problems.append(f"{service}: no live process")
    for beat in beats:
        for name, ok in dict(beat.get("dependencies", {})).items():  # type: ignore[call-overload]
            key = f"{beat['service']}.{name}"
            dependencies[key] = dependencies.get(key, True) and bool(ok)
            if not ok:
                problems.append(f"{beat['service']} on {beat['node']}: {name} is down")
    body = HealthRead(
        status="degraded" if problems else "ok",
        dependencies=dependencies,
        services=dict(services),
        problems=problems,
    )
    return JSONResponse(body.model_dump(), status_code=503 if problems else 200)
