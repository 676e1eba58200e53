"""The review queue of knowledge-base update proposals: the gateway app built by ``create_app``
on a real valkey (a database of its own per test), fed ``proposal.drafted`` through the
real bus as the indexer publishes it; approval is read back from ``document.submitted`` and the
audit stream."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from playwright.sync_api import expect
from redis.exceptions import ConnectionError as RedisConnectionError

from contracts.events import (
    AuditRecorded,
    DocumentSubmitted,
    ProposalDrafted,
    ProposalSource,
    ProposedQuestion,
    SourceDraftCompleted,
    SourceDraftRequested,
    new_id,
)
from contracts.sources import CATALOGUE_KEY, SourceStatus
from contracts.topics import Topic
from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.tests.conftest import (
    INJECTION,
    JWT_SECRET,
    admin,
    admin_page,
    handled_by_the_gateway,
    publish,
    serve,
    stream_events,
    user_headers,
)
from tests.support import wait_until_sync

ARTICLE = "# Vpn keeps disconnecting\n\n## Solution\n\n1. Update the VPN client.\n"


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"jwt_secret": JWT_SECRET}


def user(roles: list[str]) -> dict[str, str]:
    return user_headers("emp-1", roles=roles)


def draft(
    proposal_id: str, revision: int = 1, questions: int = 3, **fields: Any
) -> ProposalDrafted:
    values: dict[str, Any] = {
        "correlation_id": new_id(),
        "conversation_id": "knowledge-proposals",
        "proposal_id": proposal_id,
        "revision": revision,
        "title": "Vpn keeps disconnecting",
        "questions": [
            ProposedQuestion(
                text=f"vpn drops {n}",
                signal="escalated" if n == 0 else "no_answer",
                asked_at=datetime.now(UTC),
            )
            for n in range(questions)
        ],
        "article_markdown": ARTICLE,
        "sources": [ProposalSource(kind="ticket", ref="IT-1042", title="VPN drops")],
        "affected_article_url": "https://it.northwind.example/kb/connect-to-the-vpn",
    }
    return ProposalDrafted.model_validate(values | fields)


def drafted(settings: GatewaySettings, *events: ProposalDrafted) -> None:
    """Publish drafts as the indexer does."""
    publish(settings, Topic.PROPOSALS, events)


def shown(client: TestClient, proposal_id: str, revision: int = 1) -> Callable[[], bool]:
    def check() -> bool:
        response = client.get(f"/api/admin/proposals/{proposal_id}", headers=admin())
        return response.status_code == 200 and response.json()["revision"] >= revision

    return check


def test_drafts_land_in_the_queue_and_only_newer_revisions_replace_them(
    client: TestClient, settings: GatewaySettings
) -> None:
    first, second = new_id(), new_id()
    drafted(settings, draft(first), draft(second, questions=4))
    wait_until_sync(shown(client, first))
    wait_until_sync(shown(client, second))
    listing = client.get("/api/admin/proposals", headers=admin()).json()["proposals"]
    assert {p["id"] for p in listing} == {first, second}
    summary = next(p for p in listing if p["id"] == second)
    assert summary["status"] == "pending"
    assert summary["questions"] == 4
    assert summary["signals"] == {"escalated": 1, "no_answer": 3}

    # The gap grew (revision 3), then a late redelivery of revision 2 arrives: 3 stays. The
    # stream is handled in order, so once the marker after them shows, both were handled.
    marker = new_id()
    drafted(settings, draft(first, 3, questions=5), draft(first, 2, questions=4), draft(marker))
    wait_until_sync(shown(client, marker))
    body = client.get(f"/api/admin/proposals/{first}", headers=admin()).json()
    assert (body["revision"], len(body["questions"])) == (3, 5)
    assert body["sources"][0]["ref"] == "IT-1042"
    assert body["affected_article_url"].endswith("connect-to-the-vpn")


def test_approve_ingests_the_article_as_a_markdown_document_and_is_audited(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    proposal_id = new_id()
    drafted(settings, draft(proposal_id))
    wait_until_sync(shown(client, proposal_id))

    response = client.post(f"/api/admin/proposals/{proposal_id}/approve", headers=admin())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "approved"
    assert body["decided_by"] == "admin token"
    document_id = body["document_id"]

    [submitted] = stream_events(raw, Topic.DOCUMENT_SUBMITTED, DocumentSubmitted)
    assert submitted.document_id == document_id
    assert submitted.filename == "vpn-keeps-disconnecting.md"
    assert submitted.content_type == "text/markdown"
    assert base64.b64decode(submitted.content_b64).decode() == ARTICLE
    status = client.get(f"/api/documents/{document_id}", headers=admin()).json()
    assert status["status"] == "queued"

    again = client.post(f"/api/admin/proposals/{proposal_id}/approve", headers=admin())
    assert again.status_code == 409
    assert again.json()["error_code"] == "version_conflict"
    assert raw.xlen(Topic.DOCUMENT_SUBMITTED) == 1

    records = stream_events(raw, Topic.AUDIT, AuditRecorded)
    [record] = [r for r in records if r.action == "proposal"]
    assert record.details["proposal_id"] == proposal_id
    assert record.details["decision"] == "approved"
    assert record.details["document_id"] == document_id

    # A re-draft after the decision updates the content, not the decision.
    drafted(settings, draft(proposal_id, 2, questions=6))
    wait_until_sync(shown(client, proposal_id, 2))
    later = client.get(f"/api/admin/proposals/{proposal_id}", headers=admin()).json()
    assert (later["status"], later["document_id"]) == ("approved", document_id)


def test_reject_keeps_the_reason_and_a_decided_proposal_cannot_change(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    proposal_id = new_id()
    drafted(settings, draft(proposal_id))
    wait_until_sync(shown(client, proposal_id))
    url = f"/api/admin/proposals/{proposal_id}"

    assert client.post(f"{url}/reject", json={"reason": ""}, headers=admin()).status_code == 422
    response = client.post(
        f"{url}/reject", json={"reason": "Covered by the VPN article"}, headers=user(["admin"])
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["status"], body["reason"], body["decided_by"]) == (
        "rejected",
        "Covered by the VPN article",
        "emp-1",
    )
    assert client.post(f"{url}/approve", headers=admin()).status_code == 409
    assert raw.xlen(Topic.DOCUMENT_SUBMITTED) == 0
    pending = client.get("/api/admin/proposals?status=pending", headers=admin()).json()
    assert pending["proposals"] == []
    rejected = client.get("/api/admin/proposals?status=rejected", headers=admin()).json()
    assert [p["id"] for p in rejected["proposals"]] == [proposal_id]


def test_export_is_markdown_ready_to_paste(client: TestClient, settings: GatewaySettings) -> None:
    proposal_id = new_id()
    drafted(settings, draft(proposal_id))
    wait_until_sync(shown(client, proposal_id))
    response = client.get(f"/api/admin/proposals/{proposal_id}/export", headers=admin())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/markdown")
    assert 'filename="vpn-keeps-disconnecting.md"' in response.headers["content-disposition"]
    assert response.text == ARTICLE


def test_unknown_proposals_and_callers_without_the_admin_role(client: TestClient) -> None:
    unknown = client.get(f"/api/admin/proposals/{new_id()}", headers=admin())
    assert unknown.status_code == 404
    assert set(unknown.json()) == {"error_code", "detail"}
    assert client.get("/api/admin/proposals/../../etc", headers=admin()).status_code == 404
    assert (
        client.post(f"/api/admin/proposals/{new_id()}/approve", headers=admin()).status_code == 404
    )
    assert client.get("/api/admin/proposals").status_code == 401
    assert client.get("/api/admin/proposals", headers=user(["technician"])).status_code == 403
    denied = client.post(f"/api/admin/proposals/{new_id()}/approve", headers=user([]))
    assert denied.status_code == 403


# -- the admin page's Proposals tab, in the system Chromium ------------------------------------


@pytest.fixture
def served(settings: GatewaySettings) -> Iterator[str]:
    """The gateway app on a real server on loopback, for the browser."""
    with serve(settings) as url:
        yield url


def test_the_proposals_tab_lists_opens_rejects_and_shows_text_inert(
    served: str, settings: GatewaySettings, chromium: Path, tmp_path: Path
) -> None:
    proposal_id = new_id()
    article = f"# Printer jams\n\n{INJECTION}\n\n1. Open tray 2.\n"
    drafted(
        settings,
        draft(proposal_id, title=f"Printer jams {INJECTION}", article_markdown=article),
    )
    errors: list[str] = []
    with admin_page(served, chromium, errors) as page:
        page.click("#tab-proposals-button")
        row = page.locator(f'tr[data-proposal-id="{proposal_id}"]')
        row.wait_for()
        assert row.locator("td").nth(2).inner_text() == "3"
        row.locator("button.proposal-open").click()
        expect(page.locator("#proposal-title")).to_have_text(f"Printer jams {INJECTION}")
        expect(page.locator(".proposal-article")).to_have_text(article.rstrip("\n"))
        expect(page.locator(".proposal-questions li")).to_have_count(3)
        page.screenshot(path=str(tmp_path / "admin-proposal.png"), full_page=True)
        page.click("#proposal-reject button[type=submit]")  # no reason: the form refuses
        assert page.locator("#proposal-reason").evaluate("e => e.validity.valueMissing")
        expect(page.locator(".proposal-reason")).to_have_count(0)
        page.fill("#proposal-reason", "Covered by the printer article")
        page.click("#proposal-reject button[type=submit]")
        expect(page.locator(".proposal-reason")).to_have_text(
            "Rejected: Covered by the printer article"
        )
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#tab-proposals img").count() == 0
    assert errors == []
    body = httpx.get(f"{served}/api/admin/proposals/{proposal_id}", headers=admin()).json()
    assert (body["status"], body["reason"]) == ("rejected", "Covered by the printer article")


def announce(raw: redis.Redis, name: str, kind: str = "confluence") -> None:
    """A source in the catalogue, as the indexer announces the configured ones."""
    raw.hset(CATALOGUE_KEY, name, SourceStatus(name=name, kind=kind).model_dump_json())  # type: ignore[arg-type]


def pending_for(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis, source: str, kind: str
) -> tuple[str, str]:
    """A source announced and a pending proposal shown: the proposal's id and API path."""
    announce(raw, source, kind)
    proposal_id = new_id()
    drafted(settings, draft(proposal_id))
    wait_until_sync(shown(client, proposal_id))
    return proposal_id, f"/api/admin/proposals/{proposal_id}"


def outcome(request: SourceDraftRequested, **fields: Any) -> SourceDraftCompleted:
    values: dict[str, Any] = {
        "correlation_id": request.correlation_id,
        "conversation_id": request.conversation_id,
        "proposal_id": request.proposal_id,
        "source": request.source,
        "status": "created",
        "url": "https://wiki.example/pages/resumedraft.action?draftId=5001",
        "draft_id": "5001",
    }
    return SourceDraftCompleted.model_validate(values | fields)


def draft_is(client: TestClient, proposal_id: str, status: str) -> Callable[[], Any]:
    def check() -> Any:
        body = client.get(f"/api/admin/proposals/{proposal_id}", headers=admin()).json()
        return body["draft"] if body["draft"] and body["draft"]["status"] == status else None

    return check


def test_approve_with_a_target_asks_the_indexer_for_a_draft_and_keeps_its_link(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    proposal_id, url = pending_for(client, settings, raw, "it-wiki", "confluence")

    # A target no indexer announced is refused before anything changes.
    refused = client.post(f"{url}/approve", json={"target": "nope"}, headers=admin())
    assert (refused.status_code, refused.json()["error_code"]) == (404, "unknown_source")
    assert client.get(url, headers=admin()).json()["status"] == "pending"
    assert (
        client.post(f"{url}/approve", json={"target": "x" * 64}, headers=admin()).status_code == 422
    )

    approved = client.post(f"{url}/approve", json={"target": "it-wiki"}, headers=admin())
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert body["status"] == "approved"
    assert body["document_id"]  # the knowledge base gets it as before
    assert (body["draft"]["source"], body["draft"]["status"]) == ("it-wiki", "requested")
    [request] = stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)
    assert (request.proposal_id, request.source, request.requested_by) == (
        proposal_id,
        "it-wiki",
        "admin token",
    )
    assert request.article_markdown == ARTICLE
    assert [s.ref for s in request.sources] == ["IT-1042"]

    # Outcomes that answer no request of this proposal change nothing: another request's id
    # (forged or stale), another source, another proposal.
    pending = new_id()
    drafted(settings, draft(pending))
    wait_until_sync(shown(client, pending))
    forged = outcome(request, correlation_id=new_id(), url="https://evil.example/")
    elsewhere = outcome(request, source="other", url="https://evil.example/2")
    misdirected = outcome(request, proposal_id=pending, url="https://evil.example/3")
    publish(
        settings, Topic.SOURCE_DRAFT_COMPLETED, [forged, elsewhere, misdirected, outcome(request)]
    )
    created = wait_until_sync(draft_is(client, proposal_id, "created"))
    assert created["url"] == "https://wiki.example/pages/resumedraft.action?draftId=5001"
    assert created["completed_at"]
    # Replayed once done: ignored (the draft stays as it was, nothing more is audited).
    publish(settings, Topic.SOURCE_DRAFT_COMPLETED, [outcome(request, status="failed", error="x")])
    wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.SOURCE_DRAFT_COMPLETED))
    records = [
        r
        for r in stream_events(raw, Topic.AUDIT, AuditRecorded)
        if r.details.get("decision", "").startswith("draft_")
    ]
    assert [(r.details["decision"], r.details.get("draft_url")) for r in records] == [
        ("draft_created", created["url"])
    ]
    assert client.get(url, headers=admin()).json()["draft"] == created
    assert client.get(f"/api/admin/proposals/{pending}", headers=admin()).json()["draft"] is None

    # A draft exists in that source: asking again is a conflict; a not-approved proposal too.
    again = client.post(f"{url}/draft", json={"target": "it-wiki"}, headers=admin())
    assert again.status_code == 409
    early = client.post(
        f"/api/admin/proposals/{pending}/draft", json={"target": "it-wiki"}, headers=admin()
    )
    assert early.status_code == 409


def test_a_failed_draft_says_what_permission_is_missing_and_can_be_asked_again(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    proposal_id, url = pending_for(client, settings, raw, "intranet", "sharepoint")
    assert client.post(f"{url}/approve", json={"target": "intranet"}, headers=admin()).is_success
    [request] = stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)
    denied = outcome(
        request,
        status="failed",
        url=None,
        draft_id=None,
        error="Microsoft Graph denied the draft (HTTP 403): grant the app ...",
        missing_permission="Sites.ReadWrite.All",
    )
    publish(settings, Topic.SOURCE_DRAFT_COMPLETED, [denied])
    failed = wait_until_sync(draft_is(client, proposal_id, "failed"))
    assert failed["missing_permission"] == "Sites.ReadWrite.All"
    assert "403" in failed["error"]

    # The permission granted, the admin asks again: a new request, with a new id.
    retried = client.post(f"{url}/draft", json={"target": "intranet"}, headers=user(["admin"]))
    assert retried.status_code == 202, retried.text
    assert retried.json()["draft"]["status"] == "requested"
    first, second = stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)
    assert second.correlation_id != first.correlation_id
    assert second.requested_by == "emp-1"
    # The first request's late outcome no longer applies.
    publish(
        settings, Topic.SOURCE_DRAFT_COMPLETED, [outcome(first), outcome(second, url="https://ok/")]
    )
    assert wait_until_sync(draft_is(client, proposal_id, "created"))["url"] == "https://ok/"
    # Not an admin: no draft.
    assert (
        client.post(f"{url}/draft", json={"target": "intranet"}, headers=user([])).status_code
        == 403
    )


def test_an_outcome_whose_audit_record_was_not_published_records_it_when_redelivered(
    make_settings: Callable[..., GatewaySettings], raw: redis.Redis
) -> None:
    settings = make_settings(reclaim_idle_ms=300)  # the failed delivery comes back at once
    with TestClient(create_app(settings)) as client:
        proposal_id, url = pending_for(client, settings, raw, "it-wiki", "confluence")
        assert client.post(f"{url}/approve", json={"target": "it-wiki"}, headers=admin()).is_success
        [request] = stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)
        bus = client.app.state.proposals.bus  # type: ignore[attr-defined]
        publish_for_real = bus.publish
        refused: list[AuditRecorded] = []

        async def audit_down_once(topic: str, event: Any) -> str:
            if topic == Topic.AUDIT and not refused:
                refused.append(event)
                raise RedisConnectionError("the audit stream is unreachable")
            return str(await publish_for_real(topic, event))

        bus.publish = audit_down_once
        done = outcome(request)
        publish(settings, Topic.SOURCE_DRAFT_COMPLETED, [done])
        wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.SOURCE_DRAFT_COMPLETED))
        # Redelivered the same outcome again (a consumer that died before acknowledging it).
        publish(settings, Topic.SOURCE_DRAFT_COMPLETED, [done])
        wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.SOURCE_DRAFT_COMPLETED))
        assert client.get(url, headers=admin()).json()["draft"]["status"] == "created"
    [record] = [
        r
        for r in stream_events(raw, Topic.AUDIT, AuditRecorded)
        if r.details.get("decision") == "draft_created"
    ]
    assert [e.details["decision"] for e in refused] == ["draft_created"]
    assert record.event_id == refused[0].event_id
    assert record.details == refused[0].details
    assert record.details["proposal_id"] == proposal_id


def test_an_approval_whose_draft_request_cannot_be_queued_stands_with_the_draft_failed(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    proposal_id, url = pending_for(client, settings, raw, "it-wiki", "confluence")
    bus = client.app.state.proposals.bus  # type: ignore[attr-defined]
    publish_for_real = bus.publish

    async def requests_down(topic: str, event: Any) -> str:
        if topic == Topic.SOURCE_DRAFT_REQUESTED:
            raise RedisConnectionError("the stream is unreachable")
        return str(await publish_for_real(topic, event))

    monkeypatch.setattr(bus, "publish", requests_down)
    approved = client.post(f"{url}/approve", json={"target": "it-wiki"}, headers=admin())
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert (body["status"], body["document_id"] is not None) == ("approved", True)
    assert body["draft"]["status"] == "failed"
    assert body["draft"]["error"] == "the request could not be queued"
    [record] = [
        r
        for r in stream_events(raw, Topic.AUDIT, AuditRecorded)
        if r.details.get("proposal_id") == proposal_id
    ]
    assert (record.details["decision"], record.details["target"]) == ("approved", "it-wiki")
    # Asked again while the bus still refuses: 503, and the draft still says failed.
    refused = client.post(f"{url}/draft", json={"target": "it-wiki"}, headers=admin())
    assert (refused.status_code, refused.json()["error_code"]) == (503, "bus_unavailable")
    assert client.get(url, headers=admin()).json()["draft"]["status"] == "failed"
    # Once it is back, the draft is asked for again.
    monkeypatch.setattr(bus, "publish", publish_for_real)
    again = client.post(f"{url}/draft", json={"target": "it-wiki"}, headers=admin())
    assert again.status_code == 202, again.text
    assert again.json()["draft"]["status"] == "requested"
    [request] = stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)
    assert request.proposal_id == proposal_id


def publish_aside(settings: GatewaySettings, topic: str, events: list[Any]) -> None:
    """:func:`publish` from a thread of its own: the browser's driver runs an event loop here."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(publish, settings, topic, events).result()


def stored_draft(raw: redis.Redis, proposal_id: str) -> bytes:
    value: Any = raw.hget(f"deskpilot:gateway:proposal:{proposal_id}", "target_draft")
    return value or b""


def test_the_proposals_tab_approves_into_a_source_and_shows_the_drafts_outcome(
    served: str, settings: GatewaySettings, raw: redis.Redis, chromium: Path
) -> None:
    announce(raw, "hr-wiki")
    proposal_id = new_id()
    drafted(settings, draft(proposal_id))
    wait_until_sync(lambda: raw.exists(f"deskpilot:gateway:proposal:{proposal_id}"))
    errors: list[str] = []
    with admin_page(served, chromium, errors) as page:
        page.click("#tab-proposals-button")
        page.locator(f'tr[data-proposal-id="{proposal_id}"] button.proposal-open').click()
        expect(page.locator("#proposal-target option")).to_have_count(2)
        page.select_option("#proposal-target", "hr-wiki")
        page.click("#proposal-approve")
        expect(page.locator("#proposal-draft-status")).to_have_text(
            "Draft in hr-wiki: being written…"
        )
        [request] = stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)
        assert request.source == "hr-wiki"
        denied = outcome(
            request,
            status="failed",
            url=None,
            error=f"Confluence denied the draft (HTTP 403) {INJECTION}",
            missing_permission="Add page (HR)",
        )
        publish_aside(settings, Topic.SOURCE_DRAFT_COMPLETED, [denied])
        wait_until_sync(lambda: b'"failed"' in stored_draft(raw, proposal_id))
        page.select_option("#proposal-filter", "approved")  # the list shows pending ones first
        page.locator(f'tr[data-proposal-id="{proposal_id}"] button.proposal-open').click()
        expect(page.locator("#proposal-draft-status")).to_have_text(
            f"Draft in hr-wiki failed: Confluence denied the draft (HTTP 403) {INJECTION} "
            "(missing permission: Add page (HR))"
        )
        # Asked again once the permission is granted; a link that is no web address stays text.
        page.select_option("#proposal-draft-target", "hr-wiki")
        page.click("#proposal-draft")
        expect(page.locator("#proposal-draft-status")).to_have_text(
            "Draft in hr-wiki: being written…"
        )
        _, second = stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)
        scripted = outcome(second, url="javascript:alert(1)")
        publish_aside(settings, Topic.SOURCE_DRAFT_COMPLETED, [scripted])
        wait_until_sync(lambda: b'"created"' in stored_draft(raw, proposal_id))
        page.locator(f'tr[data-proposal-id="{proposal_id}"] button.proposal-open').click()
        expect(page.locator("#proposal-draft-status")).to_contain_text(
            "Draft in hr-wiki (not published)"
        )
        assert page.locator("#proposal-draft-status a").count() == 0
        assert page.evaluate("window.__pwned") is None
    assert errors == []


def test_a_notices_link_opens_the_conversations_audit_trail_inert(
    served: str, settings: GatewaySettings, chromium: Path
) -> None:
    conversation = f"conv-{new_id()}"
    record = AuditRecorded(
        correlation_id=new_id(),
        conversation_id=conversation,
        service="orchestrator",
        action="decision",
        reason="best similarity 0.210 below threshold 0.45",
        details={"outcome": "no_answer", "question": f"I am <PERSON_1> {INJECTION}"},
    )
    publish(settings, Topic.AUDIT, [record])
    errors: list[str] = []
    with admin_page(served, chromium, errors) as page:
        page.goto(f"{served}/admin#conversation={conversation}")
        view = page.locator("#conversation-view")
        expect(view.locator("h2")).to_have_text(f"Conversation {conversation}")
        expect(view.locator("li")).to_have_count(1)
        expect(view.locator("li")).to_contain_text(f"“I am <PERSON_1> {INJECTION}”")
        assert page.evaluate("window.__pwned") is None
        page.goto(f"{served}/admin#tab-proposals")
        expect(view).to_be_hidden()
    assert errors == []


def test_a_request_whose_outcome_was_lost_may_be_asked_again_after_an_hour(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    proposal_id, url = pending_for(client, settings, raw, "it-wiki", "confluence")
    assert client.post(f"{url}/approve", json={"target": "it-wiki"}, headers=admin()).is_success
    assert (
        client.post(f"{url}/draft", json={"target": "it-wiki"}, headers=admin()).status_code == 409
    )
    key = f"deskpilot:gateway:proposal:{proposal_id}"
    stuck = json.loads(stored_draft(raw, proposal_id))
    stuck["requested_at"] = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    raw.hset(key, "target_draft", json.dumps(stuck))
    again = client.post(f"{url}/draft", json={"target": "it-wiki"}, headers=admin())
    assert again.status_code == 202, again.text
    assert len(stream_events(raw, Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested)) == 2
