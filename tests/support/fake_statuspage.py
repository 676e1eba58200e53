"""A local Atlassian Statuspage over real HTTP: ``GET /api/v2/summary.json`` and
``GET /api/v2/incidents/unresolved.json``, in the documented shape.

The summary holds ``page``, ``status`` (``indicator`` and ``description``), ``components``
(``id``, ``name``, ``status`` one of operational, degraded_performance, partial_outage,
major_outage, ...), ``incidents`` (the unresolved ones, each with ``id``, ``name``, ``status``,
``impact``, ``shortlink``, timestamps, ``components`` and ``incident_updates`` newest first) and
``scheduled_maintenances``. Tests drive it with :meth:`FakeStatusPage.open_incident`,
:meth:`FakeStatusPage.post_update` and :meth:`FakeStatusPage.resolve`; :meth:`fail_next`
answers 503 a number of times. Any other path is a 404 and any other method a 405. It is a
Starlette app served by :mod:`tests.support.served`.
"""

from __future__ import annotations

import itertools
import json
import threading
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.served import ServedFake

PAGE_ID = "y2j98763l56x"
COMPONENT_STATUSES = (
    "operational",
    "degraded_performance",
    "partial_outage",
    "major_outage",
    "under_maintenance",
)
INDICATORS = {
    "none": "All Systems Operational",
    "minor": "Minor Service Outage",
    "major": "Partial System Outage",
    "critical": "Major System Outage",
}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FakeStatusPage(ServedFake):
    """The status page and its incidents; ``with FakeStatusPage() as page:`` serves it at
    ``page.base_url``."""

    def __init__(self, components: tuple[str, ...] = ("VPN", "Email", "Wi-Fi", "SSO")) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.components: dict[str, dict[str, Any]] = {}
        for position, name in enumerate(components, start=1):
            self.components[name] = {
                "id": f"cmp{position:04d}",
                "name": name,
                "status": "operational",
                "created_at": _now(),
                "updated_at": _now(),
                "position": position,
                "description": None,
                "showcase": True,
                "start_date": None,
                "group_id": None,
                "page_id": PAGE_ID,
                "group": False,
                "only_show_if_degraded": False,
            }
        self.incidents: dict[str, dict[str, Any]] = {}
        self.requests = 0
        self._failures = 0

    # -- driving it ------------------------------------------------------------------------

    def fail_next(self, count: int) -> None:
        with self._lock:
            self._failures += count

    def open_incident(
        self,
        name: str,
        components: list[str],
        body: str,
        status: str = "investigating",
        impact: str = "major",
    ) -> str:
        with self._lock:
            incident_id = f"inc{next(self._ids):08d}"
            now = _now()
            affected = [self.components[c] for c in components]
            for component in affected:
                component["status"] = "major_outage" if impact != "minor" else "partial_outage"
                component["updated_at"] = now
            self.incidents[incident_id] = {
                "id": incident_id,
                "name": name,
                "status": status,
                "created_at": now,
                "updated_at": now,
                "monitoring_at": None,
                "resolved_at": None,
                "impact": impact,
                "shortlink": f"https://stspg.io/{incident_id}",
                "started_at": now,
                "page_id": PAGE_ID,
                "incident_updates": [],
                "components": [dict(c) for c in affected],
            }
            self._add_update(incident_id, status, body)
            return incident_id

    def post_update(self, incident_id: str, status: str, body: str) -> None:
        with self._lock:
            self.incidents[incident_id]["status"] = status
            self._add_update(incident_id, status, body)

    def resolve(self, incident_id: str) -> None:
        """Resolved incidents leave the summary's unresolved list, as on Statuspage."""
        with self._lock:
            incident = self.incidents.pop(incident_id)
            for component in incident["components"]:
                self.components[component["name"]]["status"] = "operational"

    def _add_update(self, incident_id: str, status: str, body: str) -> None:
        incident = self.incidents[incident_id]
        now = _now()
        update = {
            "id": f"upd{next(self._ids):08d}",
            "status": status,
            "body": body,
            "incident_id": incident_id,
            "created_at": now,
            "updated_at": now,
            "display_at": now,
            "affected_components": [
                {
                    "code": c["id"],
                    "name": c["name"],
                    "old_status": "operational",
                    "new_status": c["status"],
                }
                for c in incident["components"]
            ],
            "deliver_notifications": True,
            "custom_tweet": None,
            "tweet_id": None,
        }
        incident["incident_updates"].insert(0, update)
        incident["updated_at"] = now

    # -- serving ---------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        with self._lock:
            impacts = [i["impact"] for i in self.incidents.values()]
            indicator = next(
                (level for level in ("critical", "major", "minor") if level in impacts), "none"
            )
            return {
                "page": {
                    "id": PAGE_ID,
                    "name": "Northwind Labs IT",
                    "url": self.base_url,
                    "time_zone": "Etc/UTC",
                    "updated_at": _now(),
                },
                "status": {"indicator": indicator, "description": INDICATORS[indicator]},
                "components": [dict(c) for c in self.components.values()],
                "incidents": json.loads(json.dumps(list(self.incidents.values()))),
                "scheduled_maintenances": [],
            }

    def respond(self, path: str) -> tuple[int, Any]:
        """The status and JSON body for a GET of ``path`` (every request counts)."""
        with self._lock:
            self.requests += 1
            if self._failures:
                self._failures -= 1
                return 503, {"error": "Service Unavailable"}
        if path == "/api/v2/summary.json":
            return 200, self.summary()
        if path == "/api/v2/incidents/unresolved.json":
            summary = self.summary()
            return 200, {"page": summary["page"], "incidents": summary["incidents"]}
        return 404, {"error": "Not Found"}

    def build_app(self) -> Starlette:
        paths = ("/api/v2/summary.json", "/api/v2/incidents/unresolved.json")
        return Starlette(
            routes=[Route(path, self._get, methods=["GET"]) for path in paths],
            exception_handlers={404: self._no_route, 405: self._no_route},
        )

    async def _get(self, request: Request) -> Response:
        return _json(*self.respond(request.url.path))

    async def _no_route(self, request: Request, exc: Exception) -> Response:
        """Starlette's 404 and 405 in Statuspage's shape; a GET still counts (and may fail)."""
        if request.method not in ("GET", "HEAD"):
            return _json(405, {"error": "Method Not Allowed"}, {"Allow": "GET"})
        return _json(*self.respond(request.url.path))


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(
        payload,
        status_code=status,
        headers=headers,
        media_type="application/json; charset=utf-8",
    )
