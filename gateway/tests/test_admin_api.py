"""The admin, incident and identity endpoints over HTTP, on an app built by ``create_app`` with a
real valkey (a database of its own per test, since stream names are fixed). No other service
runs: messages stay on their streams, where the tests read them."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse

from contracts.events import (
    AuditRecorded,
    IncidentReceived,
    MessageReceived,
    TicketChange,
    TicketEvent,
    TicketRecord,
)
from contracts.topics import Topic
from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.tests.conftest import (
    ADMIN_TOKEN,
    JWT_SECRET,
    admin,
    anonymous_user,
    bearer,
    publish,
    stream_events,
    user_token,
)
from tests.support import wait_until_sync

INCIDENT = "incident-token-for-tests-0123456789"
AUDIENCE = "deskpilot-chat"


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {
        "incident_token": INCIDENT,
        "jwt_secret": JWT_SECRET,
        "jwt_audience": AUDIENCE,
        "turn_timeout_s": 0.3,
    }


def employee_token(**claims: Any) -> str:
    """A token of emp-1042 for this app's audience; ``claims`` add or replace (None drops)."""
    return user_token(**({"sub": "emp-1042", "aud": AUDIENCE} | claims))


# -- tickets -----------------------------------------------------------------------------------


def ticket_event(key: str, minutes: int, **fields: Any) -> TicketEvent:
    values: dict[str, Any] = {
        "key": key,
        "url": f"https://jira.northwind.example/browse/{key}",
        "status": "Open",
        "summary": "Printer on floor 3 jams",
        "user_id": "emp-1",
        "updated_at": datetime(2026, 3, 2, 9, tzinfo=UTC) + timedelta(minutes=minutes),
    }
    values.update(fields)
    return TicketEvent(
        correlation_id="turn-1",
        conversation_id="conv-1",
        change=TicketChange.CREATED,
        record=TicketRecord.model_validate(values),
    )


def test_ticket_events_become_the_admin_ticket_listing(
    client: TestClient, settings: GatewaySettings
) -> None:
    publish(
        settings,
        Topic.TICKET_EVENTS,
        [
            ticket_event("IT-1", 0),
            ticket_event("IT-2", 10, user_id="emp-2", status="In Progress"),
            ticket_event("IT-1", 20, status="Done"),
            ticket_event("IT-1", 5, status="Open"),  # stale, arrives last
        ],
    )

    def listed() -> list[tuple[str, str]]:
        response = client.get("/api/admin/tickets", headers=admin())
        assert response.status_code == 200
        return [(t["key"], t["status"]) for t in response.json()]

    wait_until_sync(
        lambda: (
            len(listed()) == 2
            and client.get("/api/admin/tickets/IT-1", headers=admin()).json().get("status")
            == "Done"
        )
    )
    assert listed() == [("IT-1", "Done"), ("IT-2", "In Progress")]

    response = client.get("/api/admin/tickets/IT-1", headers=admin())
    assert response.status_code == 200
    ticket = response.json()
    assert ticket["url"] == "https://jira.northwind.example/browse/IT-1"
    assert ticket["last_change"] == "created"
    assert ticket["user_id"] == "emp-1"

    filtered = client.get(
        "/api/admin/tickets", params={"status": "in progress", "limit": 5}, headers=admin()
    )
    assert [t["key"] for t in filtered.json()] == ["IT-2"]
    mine = client.get("/api/admin/tickets", params={"user_id": "emp-1"}, headers=admin())
    assert [t["key"] for t in mine.json()] == ["IT-1"]
    one = client.get("/api/admin/tickets", params={"limit": 1}, headers=admin())
    assert [t["key"] for t in one.json()] == ["IT-1"]


def test_ticket_endpoints_are_for_admins_and_say_when_a_ticket_is_unknown(
    client: TestClient,
) -> None:
    for path in ("/api/admin/tickets", "/api/admin/tickets/IT-1"):
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": f"Bearer {INCIDENT}"},
        ):
            response = client.get(path, headers=headers)
            assert response.status_code == 401
            assert response.json()["error_code"] == "unauthorized"
    missing = client.get("/api/admin/tickets/IT-404", headers=admin())
    assert missing.status_code == 404
    assert missing.json() == {
        "error_code": "unknown_ticket",
        "detail": "No such ticket is known.",
    }
    too_many = client.get("/api/admin/tickets", params={"limit": 0}, headers=admin())
    assert too_many.status_code == 422
    assert too_many.json()["error_code"] == "invalid_request"


# -- incidents ---------------------------------------------------------------------------------

INCIDENT_BODY: dict[str, Any] = {
    "id": "inc-2026-031",
    "title": "VPN gateway unreachable in Berlin",
    "status": "investigating",
    "affected_services": ["VPN"],
    "error_signatures": ["0x800704cf"],
    "started_at": "2026-03-02T08:55:00Z",
    "updated_at": "2026-03-02T09:05:00Z",
    "url": "https://status.northwind.example/incidents/031",
    "latest_update": "We are investigating reports of VPN failures.",
    "resolved": False,
    "ticket_key": None,
    "category": "connectivity",
}


def incident_headers(token: str = INCIDENT) -> dict[str, str]:
    return bearer(token)


def test_a_reported_incident_goes_sealed_to_the_redactor(
    client: TestClient, raw: redis.Redis
) -> None:
    response = client.post("/api/incidents", json=INCIDENT_BODY, headers=incident_headers())
    assert response.status_code == 202
    assert response.json() == {"id": "inc-2026-031", "status": "queued"}
    # What the caller typed is redacted before anything keeps it: only sealed on its way there.
    [(_, stored)] = raw.xrange(Topic.INCIDENT_RECEIVED)
    assert b"Berlin" not in b"".join(stored.values())
    assert raw.xlen(Topic.INCIDENT_REPORTED) == 0
    [event] = stream_events(raw, Topic.INCIDENT_RECEIVED, IncidentReceived)
    assert event.source == "api"
    assert event.correlation_id == "inc-2026-031"
    assert event.conversation_id == "inc-2026-031"
    assert event.incident.model_dump(mode="json") | {"started_at": None, "updated_at": None} == (
        INCIDENT_BODY | {"started_at": None, "updated_at": None}
    )
    assert event.incident.updated_at == datetime(2026, 3, 2, 9, 5, tzinfo=UTC)

    # A retried request is the same event (consumers de-duplicate); a change is a new one.
    client.post("/api/incidents", json=INCIDENT_BODY, headers=incident_headers())
    resolved = INCIDENT_BODY | {"status": "resolved", "resolved": True}
    client.post("/api/incidents", json=resolved, headers=incident_headers())
    first, retried, changed = stream_events(raw, Topic.INCIDENT_RECEIVED, IncidentReceived)
    assert retried.event_id == first.event_id
    assert changed.event_id != first.event_id
    assert changed.incident.resolved is True


def test_incidents_need_the_incident_token(client: TestClient, raw: redis.Redis) -> None:
    for headers in (
        {},
        incident_headers("wrong"),
        incident_headers(ADMIN_TOKEN),
        {"Authorization": INCIDENT},
    ):
        response = client.post("/api/incidents", json=INCIDENT_BODY, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error_code"] == "unauthorized"
    assert raw.xlen(Topic.INCIDENT_RECEIVED) == 0


@pytest.mark.parametrize("configured", [None, ""], ids=["unset", "empty"])
def test_no_incident_token_disables_the_endpoint(
    make_settings: Callable[..., GatewaySettings], raw: redis.Redis, configured: str | None
) -> None:
    with TestClient(create_app(make_settings(incident_token=configured))) as disabled:
        for headers in ({}, {"Authorization": "Bearer "}, incident_headers()):
            response = disabled.post("/api/incidents", json=INCIDENT_BODY, headers=headers)
            assert response.status_code == 401
    assert raw.xlen(Topic.INCIDENT_RECEIVED) == 0


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"id": ""}, "id"),
        ({"id": "inc 31 with spaces"}, "id"),
        ({"title": None}, "title"),
        ({"status": ""}, "status"),
        ({"started_at": "yesterday"}, "started_at"),
        ({"affected_services": "VPN"}, "affected_services"),
        ({"severity": "major"}, "severity"),
    ],
)
def test_invalid_incidents_are_422_with_the_field(
    client: TestClient, raw: redis.Redis, change: dict[str, Any], where: str
) -> None:
    response = client.post(
        "/api/incidents", json=INCIDENT_BODY | change, headers=incident_headers()
    )
    assert response.status_code == 422
    body = response.json()
    assert body["error_code"] == "invalid_request"
    assert body["detail"].startswith(f"{where}: ")
    assert raw.xlen(Topic.INCIDENT_RECEIVED) == 0


# -- audit -------------------------------------------------------------------------------------


def audit(conversation_id: str, n: int, action: str = "decision") -> AuditRecorded:
    return AuditRecorded.model_validate(
        {
            "correlation_id": f"turn-{n}",
            "conversation_id": conversation_id,
            "service": "orchestrator",
            "action": action,
            "reason": f"step {n}",
            "trace_id": f"{n:032x}",
            "details": {"n": n},
        }
    )


def test_the_audit_of_a_conversation_is_its_records_oldest_first(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    publish(settings, Topic.AUDIT, [audit("conv-a", 1, "retrieval"), audit("conv-b", 2)])
    # Stray entries are skipped, not a 500, even one that names the conversation.
    raw.xadd(Topic.AUDIT, {b"not": b"an event"})
    raw.xadd(Topic.AUDIT, {b"__data__": b'{"conversation_id": "conv-a", "half": "an event"}'})
    publish(settings, Topic.AUDIT, [audit("conv-a", 3), audit("conv-a", 4, "ticket")])

    response = client.get("/api/admin/audit", params={"conversation_id": "conv-a"}, headers=admin())
    assert response.status_code == 200
    body = response.json()
    assert body["conversation_id"] == "conv-a"
    assert [r["reason"] for r in body["records"]] == ["step 1", "step 3", "step 4"]
    assert [r["action"] for r in body["records"]] == ["retrieval", "decision", "ticket"]
    first = body["records"][0]
    assert first["correlation_id"] == "turn-1"
    assert first["trace_id"] == f"{1:032x}"
    assert first["service"] == "orchestrator"
    assert first["details"] == {"n": 1}
    ids = [r["entry_id"] for r in body["records"]]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    assert body["scanned"] == 6
    assert body["complete"] is True

    limited = client.get(
        "/api/admin/audit", params={"conversation_id": "conv-a", "limit": 2}, headers=admin()
    ).json()
    assert [r["reason"] for r in limited["records"]] == ["step 3", "step 4"]  # the newest two
    assert limited["complete"] is False

    nobody = client.get("/api/admin/audit", params={"conversation_id": "conv-z"}, headers=admin())
    assert nobody.json()["records"] == []
    assert nobody.json()["complete"] is True


def test_the_audit_scan_is_bounded(make_settings: Callable[..., GatewaySettings]) -> None:
    settings = make_settings(audit_scan=100)
    publish(
        settings,
        Topic.AUDIT,
        [audit("conv-old", 0)] + [audit("conv-new", n) for n in range(1, 151)],
    )
    with TestClient(create_app(settings)) as bounded:
        old = bounded.get(
            "/api/admin/audit", params={"conversation_id": "conv-old"}, headers=admin()
        ).json()
        new = bounded.get(
            "/api/admin/audit",
            params={"conversation_id": "conv-new", "limit": 1000},
            headers=admin(),
        ).json()
    assert old == {"conversation_id": "conv-old", "records": [], "scanned": 100, "complete": False}
    assert [r["reason"] for r in new["records"]] == [f"step {n}" for n in range(51, 151)]
    assert new["scanned"] == 100


def test_the_audit_is_for_admins_and_needs_a_conversation(client: TestClient) -> None:
    assert client.get("/api/admin/audit", params={"conversation_id": "c"}).status_code == 401
    missing = client.get("/api/admin/audit", headers=admin())
    assert missing.status_code == 422
    assert missing.json()["detail"].startswith("query.conversation_id: ")
    bad = client.get("/api/admin/audit", params={"conversation_id": "a b"}, headers=admin())
    assert bad.status_code == 422


# -- identity on chat, attachments and the WebSocket --------------------------------------------


def messages(raw: redis.Redis) -> list[MessageReceived]:
    return stream_events(raw, Topic.MESSAGE_RECEIVED, MessageReceived)


def test_a_valid_token_makes_its_subject_the_authenticated_user(
    client: TestClient, raw: redis.Redis
) -> None:
    response = client.post(
        "/api/chat",
        json={"text": "my vpn drops", "user_id": "someone-else"},
        headers=bearer(employee_token()),
    )
    assert response.status_code == 504  # accepted; nobody answers in this test
    [message] = messages(raw)
    assert message.user_id == "emp-1042"
    assert message.authenticated is True


def test_without_a_token_the_user_is_anonymous_and_unverified(
    client: TestClient, raw: redis.Redis
) -> None:
    issued = anonymous_user(client)
    client.post("/api/chat", json={"text": "my vpn drops", "user_id": issued.token})
    client.post("/api/chat", json={"text": "my vpn drops"}, headers=issued.headers)
    client.post("/api/chat", json={"text": "my vpn drops", "user_id": "browser-7"})
    client.post("/api/chat", json={"text": "my vpn drops"}, headers={"Authorization": "Basic dTpw"})
    users = [(m.user_id, m.authenticated) for m in messages(raw)]
    assert users[:2] == [(issued.user_id, False)] * 2
    # A self-chosen id, or no credentials: a new anonymous user each time, named by the gateway.
    assert users[2][0] != users[3][0]
    assert {user for user, _ in users[2:]}.isdisjoint({"anon:browser-7", issued.user_id})
    assert not any(authenticated for _, authenticated in users)


@pytest.mark.parametrize(
    "presented",
    [
        employee_token(exp=int(time.time()) - 3600),
        employee_token(aud="payroll"),
        employee_token(sub=None),
        employee_token()[:-4] + "AAAA",
        "not-a-token",
    ],
    ids=["expired", "audience", "no-sub", "tampered", "garbage"],
)
def test_an_invalid_token_is_one_generic_401_and_nothing_is_sent(
    client: TestClient, raw: redis.Redis, presented: str
) -> None:
    response = client.post(
        "/api/chat",
        json={"text": "my vpn drops"},
        headers={"Authorization": f"Bearer {presented}"},
    )
    assert response.status_code == 401
    assert response.json() == {
        "error_code": "unauthorized",
        "detail": "The access token is not valid.",
    }
    assert response.headers["www-authenticate"] == "Bearer"
    assert raw.xlen(Topic.MESSAGE_RECEIVED) == 0


def test_an_invalid_token_is_refused_on_attachments(client: TestClient) -> None:
    response = client.post(
        "/api/attachments",
        files={"file": ("vpn.log", b"ERROR vpn connect failed\n", "text/plain")},
        headers=bearer(employee_token(aud="payroll")),
    )
    assert response.status_code == 401
    assert response.json()["detail"] == "The access token is not valid."


def test_the_websocket_takes_its_token_in_the_query(client: TestClient, raw: redis.Redis) -> None:
    refused_url = f"/ws/chat?token={employee_token(aud='payroll')}"
    with pytest.raises(WebSocketDenialResponse) as refused, client.websocket_connect(refused_url):
        pass
    assert refused.value.status_code == 401
    assert refused.value.json() == {
        "error_code": "unauthorized",
        "detail": "The access token is not valid.",
    }

    with client.websocket_connect(f"/ws/chat?token={employee_token()}") as ws:
        ready = ws.receive_json()
        assert ready.keys() == {"type", "conversation_id"}  # a user needs no anonymous token
        ws.send_json({"type": "message", "text": "printer jams"})
        assert ws.receive_json()["type"] == "accepted"
    with client.websocket_connect("/ws/chat") as ws:
        anonymous = ws.receive_json()
        assert anonymous["type"] == "ready"
        ws.send_json({"type": "message", "text": "printer jams"})
        assert ws.receive_json()["type"] == "accepted"
    wait_until_sync(lambda: raw.xlen(Topic.MESSAGE_RECEIVED) == 2)
    by_conversation = {m.conversation_id: (m.user_id, m.authenticated) for m in messages(raw)}
    issued = client.app.state.identity.anonymous.verify(anonymous["anonymous_token"])  # type: ignore[attr-defined]
    assert by_conversation == {
        ready["conversation_id"]: ("emp-1042", True),
        anonymous["conversation_id"]: (issued.user_id, False),
    }
