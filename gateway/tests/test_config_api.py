"""GET/PUT /api/admin/config and its history over HTTP, on an app built by ``create_app`` with a
real valkey (a database of its own, emptied per test: the configuration key is fixed). The
services' published defaults are written the way the orchestrator and the crawler write them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
import redis
import redis.asyncio as aioredis
from fastapi.testclient import TestClient

from contracts.bus import decode_entry
from contracts.events import AuditRecorded
from contracts.runtime_config import (
    AUDIT_CONVERSATION,
    CONFIG_KEY,
    CRAWLER,
    ORCHESTRATOR,
    RuntimeConfigStore,
    RuntimeOverrides,
    StaleVersion,
    publish_defaults,
)
from contracts.topics import Topic
from gateway.app import create_app
from gateway.config import GatewaySettings

ADMIN = "admin-token-for-config-tests-0123456789"
SECRET = "jwt-secret-for-config-tests-0123456789abcdef"
DB = 11
"""This module's own database: no other test package uses it."""
URL = "/api/admin/config"
ORCHESTRATOR_DEFAULTS: dict[str, Any] = {
    "crawl_seed_urls": ["https://help.northwind.example/"],
    "crawl_allowed_domains": [],
    "top_k": 5,
    "relevance_threshold": 0.45,
    "crawl_max_depth": 2,
    "crawl_max_pages": 10,
    "crawl_deadline_s": 20.0,
    "crawl_concurrency": 4,
    "clarify_cap": 2,
    "escalation_anger_threshold": 0.5,
    "category_queues": {"connectivity": "Network", "account": "Identity & Access"},
}
CRAWLER_DEFAULTS: dict[str, Any] = {
    "domain_requests_per_s": 4.0,
    "domain_concurrency": 4,
    "max_crawl_delay_s": 30.0,
}


@pytest.fixture
def db_url(redis_url: str) -> Iterator[str]:
    url = f"{redis_url.rsplit('/', 1)[0]}/{DB}"
    client = redis.Redis.from_url(url)
    client.flushdb()

    async def publish() -> None:
        async_client = aioredis.from_url(url)
        await publish_defaults(async_client, ORCHESTRATOR, ORCHESTRATOR_DEFAULTS)
        await publish_defaults(async_client, CRAWLER, CRAWLER_DEFAULTS)
        await async_client.aclose()

    asyncio.run(publish())
    yield url
    client.close()


@pytest.fixture
def raw(db_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(db_url)
    yield client
    client.close()


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    settings = GatewaySettings.model_validate(
        {
            "redis_url": db_url,
            "admin_token": ADMIN,
            "jwt_secret": SECRET,
            "turn_timeout_s": 30,
            "instance_id": f"test-{uuid.uuid4().hex[:8]}",
            "heartbeat_interval_s": 0.5,
            "graceful_timeout_s": 5,
        }
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def user(sub: str, *roles: str) -> dict[str, str]:
    claims = {"sub": sub, "roles": list(roles), "exp": int(time.time()) + 300}
    return {"Authorization": f"Bearer {jwt.encode(claims, SECRET, 'HS256')}"}


def put(client: TestClient, version: int, **changes: Any) -> Any:
    return client.put(URL, json={"version": version, "changes": changes}, headers=admin())


def audit_records(raw: redis.Redis) -> list[AuditRecorded]:
    entries: Any = raw.xrange(Topic.AUDIT)
    return [decode_entry(fields, AuditRecorded) for _, fields in entries]


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", URL), ("PUT", URL), ("GET", f"{URL}/history")],
)
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Basic {ADMIN}"])
def test_admin_only(
    client: TestClient, raw: redis.Redis, method: str, path: str, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    body = {"version": 0, "changes": {"top_k": 9}} if method == "PUT" else None
    response = client.request(method, path, json=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["error_code"] == "unauthorized"
    assert raw.get(CONFIG_KEY) is None


@pytest.mark.parametrize("roles", [(), ("employee",), ("technician",)])
def test_users_without_the_admin_role_are_forbidden(
    client: TestClient, raw: redis.Redis, roles: tuple[str, ...]
) -> None:
    headers = user("emp-7", *roles)
    assert client.get(URL, headers=headers).status_code == 403
    response = client.put(URL, json={"version": 0, "changes": {"top_k": 9}}, headers=headers)
    assert response.status_code == 403
    assert response.json()["error_code"] == "forbidden"
    assert raw.get(CONFIG_KEY) is None


def test_an_admin_signed_in_with_a_token_is_named_in_the_audit(
    client: TestClient, raw: redis.Redis
) -> None:
    body = {"version": 0, "changes": {"top_k": 6}}
    response = client.put(URL, json=body, headers=user("alice.admin", "admin"))
    assert response.status_code == 200, response.text
    assert response.json()["updated_by"] == "alice.admin"
    [record] = audit_records(raw)
    assert record.details["changed_by"] == "alice.admin"
    assert record.reason == "alice.admin changed top_k"


def test_read_shows_defaults_before_any_change(client: TestClient) -> None:
    response = client.get(URL, headers=admin())
    assert response.status_code == 200
    config = response.json()
    assert config["version"] == 0
    assert config["overridden"] == []
    assert config["values"]["relevance_threshold"] == 0.45
    assert config["values"]["domain_concurrency"] == 4
    fields = {field["name"]: field for field in config["fields"]}
    assert fields["top_k"]["minimum"] == 1
    assert fields["top_k"]["maximum"] == 50
    assert fields["top_k"]["service"] == "orchestrator"
    assert fields["domain_requests_per_s"]["service"] == "crawler"
    assert fields["category_queues"]["kind"] == "queues"
    assert fields["crawl_seed_urls"]["default"] == ["https://help.northwind.example/"]


def test_change_is_stored_versioned_and_audited(client: TestClient, raw: redis.Redis) -> None:
    response = put(client, 0, relevance_threshold=0.9, clarify_cap=1)
    assert response.status_code == 200, response.text
    config = response.json()
    assert config["version"] == 1
    assert config["updated_by"] == "admin token"
    assert sorted(config["overridden"]) == ["clarify_cap", "relevance_threshold"]
    assert config["values"]["relevance_threshold"] == 0.9
    assert config["values"]["top_k"] == 5  # untouched: still the default

    assert client.get(URL, headers=admin()).json()["values"]["clarify_cap"] == 1

    [record] = audit_records(raw)
    assert record.action == "configuration"
    assert record.service == "gateway"
    assert record.conversation_id == AUDIT_CONVERSATION
    assert record.details["changed_by"] == "admin token"
    assert record.details["version"] == 1
    assert record.details["relevance_threshold"] == "0.45 -> 0.9"
    assert record.details["clarify_cap"] == "2 -> 1"
    assert "top_k" not in record.details
    assert record.reason == "admin token changed relevance_threshold, clarify_cap"
    # No secret goes into the record: not the admin token, in no field.
    assert ADMIN not in record.model_dump_json()


def test_partial_changes_accumulate_and_null_restores_the_default(
    client: TestClient, raw: redis.Redis
) -> None:
    assert put(client, 0, top_k=8, category_queues={"account": "IAM"}).status_code == 200
    config = put(client, 1, relevance_threshold=0.6).json()
    assert config["version"] == 2
    assert config["values"]["top_k"] == 8
    assert config["values"]["category_queues"] == {"connectivity": "Network", "account": "IAM"}

    config = put(client, 2, top_k=None).json()
    assert config["version"] == 3
    assert config["values"]["top_k"] == 5
    assert "top_k" not in config["overridden"]
    assert config["values"]["relevance_threshold"] == 0.6

    records = audit_records(raw)
    assert [r.details["version"] for r in records] == [1, 2, 3]
    assert records[0].details["category_queues"] == (
        '{"account":"Identity & Access","connectivity":"Network"} -> '
        '{"account":"IAM","connectivity":"Network"}'
    )
    assert records[2].details["top_k"] == "8 -> 5 (default)"


def test_stale_version_is_refused_with_409(client: TestClient, raw: redis.Redis) -> None:
    assert put(client, 0, top_k=7).status_code == 200
    # A second admin read version 0 too, and saves after the first.
    response = put(client, 0, top_k=9)
    assert response.status_code == 409
    assert response.json()["error_code"] == "version_conflict"
    assert "version 1" in response.json()["detail"]
    assert client.get(URL, headers=admin()).json()["values"]["top_k"] == 7
    assert len(audit_records(raw)) == 1
    # A version from the future is as stale as one from the past.
    assert put(client, 5, top_k=9).status_code == 409


def test_a_change_to_the_same_values_is_no_change(client: TestClient, raw: redis.Redis) -> None:
    assert put(client, 0, top_k=7).status_code == 200
    config = put(client, 1, top_k=7).json()
    assert config["version"] == 1
    assert len(audit_records(raw)) == 1


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"relevance_threshold": 1.5}, "changes.relevance_threshold"),
        ({"relevance_threshold": -0.1}, "greater than or equal to 0"),
        ({"top_k": 0}, "changes.top_k"),
        ({"top_k": 51}, "less than or equal to 50"),
        ({"top_k": "many"}, "changes.top_k"),
        ({"escalation_anger_threshold": 2}, "changes.escalation_anger_threshold"),
        ({"crawl_deadline_s": 0}, "changes.crawl_deadline_s"),
        ({"domain_requests_per_s": 0}, "changes.domain_requests_per_s"),
        ({"crawl_seed_urls": ["ftp://help.example.com/"]}, "not an http(s) URL"),
        ({"crawl_seed_urls": ["help.example.com"]}, "not an http(s) URL"),
        ({"crawl_seed_urls": ["https://bob:hunter2@help.example.com/"]}, "user name or password"),
        ({"crawl_seed_urls": ["https://help.example.com:99999/"]}, "not a valid URL"),
        ({"crawl_allowed_domains": ["https://help.example.com/path"]}, "not a host name"),
        ({"crawl_allowed_domains": ["bad_domain!"]}, "not a host name"),
        ({"category_queues": {"printers": "Desktop"}}, "unknown category printers"),
        ({"category_queues": {"account": "  "}}, "queue of account"),
        ({"colour": "blue"}, "changes.colour: Extra inputs are not permitted"),
        ({"crawl_deadline_s": 45}, "turn timeout (30 s)"),
        ({"crawl_allowed_domains": ["docs.example.org"]}, "not within crawl_allowed_domains"),
    ],
)
def test_invalid_changes_are_refused_with_422(
    client: TestClient, raw: redis.Redis, changes: dict[str, Any], fragment: str
) -> None:
    response = put(client, 0, **changes)
    assert response.status_code == 422, response.text
    assert response.json()["error_code"] == "invalid_request"
    assert fragment in response.json()["detail"]
    assert raw.get(CONFIG_KEY) is None
    assert audit_records(raw) == []


def test_secrets_in_a_refused_url_are_not_echoed(client: TestClient) -> None:
    response = put(client, 0, crawl_seed_urls=["https://bob:hunter2@help.example.com/"])
    assert response.status_code == 422
    assert "hunter2" not in response.text


def test_missing_version_or_extra_fields_are_refused(client: TestClient) -> None:
    response = client.put(URL, json={"changes": {"top_k": 9}}, headers=admin())
    assert response.status_code == 422
    assert "version" in response.json()["detail"]
    response = client.put(URL, json={"version": 0, "changes": {}, "force": True}, headers=admin())
    assert response.status_code == 422


def test_seeds_within_allowed_domains_and_ports(client: TestClient) -> None:
    response = put(
        client,
        0,
        crawl_seed_urls=["https://kb.help.example.com/start", "http://127.0.0.1:8765/help/"],
        crawl_allowed_domains=["help.example.com", "127.0.0.1:8765"],
    )
    assert response.status_code == 200, response.text
    response = put(client, 1, crawl_allowed_domains=["help.example.com", "127.0.0.1:9999"])
    assert response.status_code == 422
    assert "http://127.0.0.1:8765/help/" in response.json()["detail"]
    # An empty list of seeds turns crawling off, whatever the domains.
    response = put(client, 1, crawl_seed_urls=[], crawl_allowed_domains=["other.example"])
    assert response.status_code == 200
    assert response.json()["values"]["crawl_seed_urls"] == []


def test_history_lists_changes_oldest_first(client: TestClient) -> None:
    put(client, 0, top_k=6)
    put(client, 1, clarify_cap=3)
    response = client.get(f"{URL}/history", headers=admin())
    assert response.status_code == 200
    records = response.json()["records"]
    assert [r["details"]["version"] for r in records] == [1, 2]
    assert records[1]["details"]["clarify_cap"] == "2 -> 3"
    assert records[1]["details"]["changed_by"] == "admin token"
    # The audit view finds the same records under their conversation id.
    view = client.get(
        "/api/admin/audit", params={"conversation_id": AUDIT_CONVERSATION}, headers=admin()
    ).json()
    assert [r["event_id"] for r in view["records"]] == [r["event_id"] for r in records]


def test_concurrent_writers_cannot_both_win(db_url: str) -> None:
    """Compare-and-set on the version: of two saves based on the same version, one fails,
    also when both read before either wrote (WATCH)."""

    async def race() -> list[object]:
        client = aioredis.from_url(db_url)
        store = RuntimeConfigStore(client)
        try:
            results = await asyncio.gather(
                *(store.save(0, RuntimeOverrides(top_k=k), f"admin-{k}") for k in range(3, 9)),
                return_exceptions=True,
            )
            assert (await store.load()).version == 1
            return list(results)
        finally:
            await client.aclose()

    results = asyncio.run(race())
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, StaleVersion)]
    assert len(won) == 1
    assert len(lost) == len(results) - 1
