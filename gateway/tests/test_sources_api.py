"""The knowledge-source admin endpoints over HTTP, on an app built by ``create_app`` with a real
valkey. No indexer runs: the catalogue is written here as the indexer writes it, and sync
requests stay on their stream, where the tests read them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import expect
from redis import Redis

from contracts.events import SourceSyncRequested, SyncSummary
from contracts.sources import CATALOGUE_KEY, SourceStatus
from contracts.topics import Topic
from gateway.config import GatewaySettings
from gateway.tests.conftest import (
    INJECTION,
    admin,
    admin_page,
    bearer,
    serve,
    stream_events,
    user_token,
)

WIKI = SourceStatus(
    name="it-wiki",
    kind="confluence",
    interval_s=3600,
    last_run_id="run-1",
    last_finished_at=datetime(2026, 11, 27, 5, 0, tzinfo=UTC),
    last_summary=SyncSummary(total=12, new=3, changed=1, unchanged=7, deleted=1, duration_s=2.5),
    documents=11,
)


@pytest.fixture
def catalogue(raw: Redis) -> None:
    raw.hset(CATALOGUE_KEY, WIKI.name, WIKI.model_dump_json())


def test_sources_are_listed_with_their_last_sync(client: TestClient, catalogue: None) -> None:
    response = client.get("/api/admin/sources", headers=admin())
    assert response.status_code == 200
    [listed] = response.json()
    assert listed["name"] == "it-wiki"
    assert listed["documents"] == 11
    assert listed["last_summary"] == {
        "total": 12,
        "new": 3,
        "changed": 1,
        "unchanged": 7,
        "deleted": 1,
        "failed": 0,
        "duration_s": 2.5,
    }
    assert client.get("/api/admin/sources/it-wiki", headers=admin()).json()["kind"] == "confluence"


def test_sync_request_goes_on_the_bus(client: TestClient, catalogue: None, raw: Redis) -> None:
    response = client.post("/api/admin/sources/it-wiki/sync", headers=admin())
    assert response.status_code == 202
    [request] = stream_events(raw, Topic.SOURCE_SYNC_REQUESTED, SourceSyncRequested)
    assert request.source == "it-wiki"
    assert request.requested_by == "admin"
    assert request.correlation_id == response.json()["request_id"]


@pytest.mark.parametrize(
    "headers",
    [{}, bearer("not-the-admin-token"), bearer(user_token())],
    ids=["absent", "forged", "a-user-token"],
)
def test_sync_needs_the_admin_token(
    client: TestClient, catalogue: None, raw: Redis, headers: dict[str, str]
) -> None:
    response = client.post("/api/admin/sources/it-wiki/sync", headers=headers)
    assert response.status_code in (401, 403)
    assert client.get("/api/admin/sources", headers=headers).status_code in (401, 403)
    assert not stream_events(raw, Topic.SOURCE_SYNC_REQUESTED, SourceSyncRequested)


@pytest.mark.parametrize(
    "name",
    ["no-such-source", "IT-WIKI", "it-wiki%00", "it-wiki*", "it wiki", "a" * 80],
)
def test_unknown_or_malformed_names_are_refused_and_nothing_is_sent(
    client: TestClient, catalogue: None, raw: Redis, name: str
) -> None:
    response = client.post(f"/api/admin/sources/{name}/sync", headers=admin())
    assert response.status_code == 404
    assert response.json()["error_code"] == "unknown_source"
    assert not stream_events(raw, Topic.SOURCE_SYNC_REQUESTED, SourceSyncRequested)


def test_a_source_taken_out_is_listed_but_not_synced(
    client: TestClient, raw_injection: None, raw: Redis
) -> None:
    [listed] = [
        s
        for s in client.get("/api/admin/sources", headers=admin()).json()
        if s["name"] == "old-wiki"
    ]
    assert (listed["state"], listed["removal_due_at"]) == ("hidden", "2026-12-04T05:00:00Z")
    response = client.post("/api/admin/sources/old-wiki/sync", headers=admin())
    assert response.status_code == 404
    assert "no longer configured" in response.json()["detail"]
    assert not stream_events(raw, Topic.SOURCE_SYNC_REQUESTED, SourceSyncRequested)


@pytest.mark.parametrize(
    "path", ["../../admin/conversations/x/sync", "..%2F..%2Fconversations%2Fx/sync"]
)
def test_a_path_traversal_is_not_routed_to_a_sync(
    client: TestClient, catalogue: None, raw: Redis, path: str
) -> None:
    response = client.post(f"/api/admin/sources/{path}", headers=admin())
    assert response.status_code in (404, 405)
    assert not stream_events(raw, Topic.SOURCE_SYNC_REQUESTED, SourceSyncRequested)


# -- the admin page's Sources tab, in the system Chromium --------------------------------------


@pytest.fixture
def served(settings: GatewaySettings) -> Iterator[str]:
    with serve(settings) as url:
        yield url


def test_the_sources_tab_lists_sources_and_queues_a_sync(
    served: str, catalogue: None, raw: Redis, chromium: Path, raw_injection: None
) -> None:
    errors: list[str] = []
    with admin_page(served, chromium, errors, height=800) as page:
        page.click("#tab-sources-button")
        row = page.locator('tr[data-source="it-wiki"]')
        row.wait_for()
        expect(row.locator("td").nth(3)).to_have_text("11")
        expect(row.locator(".source-result")).to_contain_text(
            "3 new, 1 changed, 7 unchanged, 1 deleted, 0 failed"
        )
        broken = page.locator('tr[data-source="broken"] .source-error')
        expect(broken).to_have_text(f"Stopped: {INJECTION}")
        retired = page.locator('tr[data-source="old-wiki"]')
        expect(retired.locator(".source-removal")).to_contain_text("No longer configured; removed")
        expect(retired.locator("button.source-sync")).to_have_count(0)
        row.locator("button.source-sync").click()
        expect(page.locator("#tab-sources .status")).to_have_text(
            "Sync of it-wiki queued; Refresh shows it when it ends."
        )
        assert page.evaluate("window.__pwned") is None
    assert errors == []
    [request] = stream_events(raw, Topic.SOURCE_SYNC_REQUESTED, SourceSyncRequested)
    assert request.source == "it-wiki"


@pytest.fixture
def raw_injection(raw: Redis) -> None:
    """A second source whose last error carries markup (an error message is the source
    system's text): the page must show it as text."""
    broken = SourceStatus(name="broken", kind="sharepoint", state="failed", last_error=INJECTION)
    raw.hset(CATALOGUE_KEY, broken.name, broken.model_dump_json())
    # And one taken out of INDEXER_SOURCES: hidden, removed at its due time, no sync offered.
    retired = SourceStatus(
        name="old-wiki",
        kind="confluence",
        state="hidden",
        documents=4,
        removal_due_at=datetime(2026, 12, 4, 5, 0, tzinfo=UTC),
    )
    raw.hset(CATALOGUE_KEY, retired.name, retired.model_dump_json())
