"""What goes back out of the stack to the people and systems around it, on the whole stack as an
operator runs it: an unanswered question in a configured category is e-mailed (and posted to
Slack) to the people responsible, redacted; an approved proposal becomes a draft, never
published, in a Confluence space, and a SharePoint app without write permission is reported on
the proposal with the permission it lacks.

Outside systems are local: aiosmtpd on loopback (tests/support/smtp.py), a Slack incoming
webhook, the Confluence and Graph emulators; everything else is the real stack.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deploy.runner import Stack
from tests.support import wait_until_sync
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, HOST, SITE_PATH, TENANT, FakeGraph
from tests.support.fake_slack_webhook import FakeSlackWebhook
from tests.support.smtp import LocalSmtp
from tests.support.stack import ask, running_stack

pytestmark = [pytest.mark.slow]

ADMIN = "test-admin-token-for-outbound-0123456789"
TEAM = "iam-team@northwind.example"
ADMIN_URL = "https://deskpilot.northwind.example"
RAW_EMAIL, RAW_PHONE = "jane.doe@northwind.example", "+44 20 7946 0958"
HR_QUESTION = (
    f"My e-mail is {RAW_EMAIL} and my phone is {RAW_PHONE}: why does the HR portal say my "
    "parental leave request is stuck?"
)
GAP_QUESTIONS = (
    "How do I configure the SAP GUI transaction ME21N shortcuts?",
    "How can I set up keyboard shortcuts for the SAP GUI transaction ME21N?",
    "How do I change the SAP GUI shortcuts in transaction ME21N?",
)


@pytest.fixture(scope="module")
def outside(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LocalSmtp, FakeSlackWebhook, FakeConfluence, FakeGraph]]:
    tls = tmp_path_factory.mktemp("graph-tls")
    with (
        LocalSmtp() as smtp,
        FakeSlackWebhook() as slack,
        FakeConfluence({"HR": "People", "IT": "Information Technology"}) as confluence,
        FakeGraph(tls) as graph,
    ):
        yield smtp, slack, confluence, graph


@pytest.fixture(scope="module")
def stack(
    outside: tuple[LocalSmtp, FakeSlackWebhook, FakeConfluence, FakeGraph],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    smtp, slack, confluence, graph = outside
    sources = [
        {
            "name": "hr-wiki",
            "kind": "confluence",
            "base_url": confluence.base_url,
            "spaces": ["HR"],
            "email": EMAIL,
            "api_token": TOKEN,
        },
        {
            "name": "intranet",
            "kind": "sharepoint",
            "tenant_id": TENANT,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "site": f"{HOST}:{SITE_PATH}",
            "graph_url": graph.graph_url,
            "authority_host": graph.origin,
            "ca_bundle": str(graph.ca_bundle),
        },
    ]
    route = {"emails": [TEAM], "slack_webhook_url": slack.url}
    env = {
        "DESKPILOT_ADMIN_TOKEN": ADMIN,
        "GATEWAY_RATE_LIMIT_ENABLED": "false",
        "INDEXER_SOURCES": json.dumps(sources),
        "INDEXER_GAPS_INTERVAL_S": "1",
        "INDEXER_GAPS_MIN_SIZE": "3",
        "TICKETING_NOTIFY_ROUTES": json.dumps({"account": route}),
        "TICKETING_NOTIFY_ADMIN_URL": ADMIN_URL,
        "TICKETING_SMTP_HOST": smtp.host,
        "TICKETING_SMTP_PORT": str(smtp.port),
        "TICKETING_SMTP_SECURITY": "none",
    }
    with running_stack(tmp_path_factory.mktemp("outbound-stack"), env) as running:
        yield running


def admin(stack: Stack, method: str, path: str, **kw: Any) -> httpx.Response:
    return httpx.request(
        method,
        f"{stack.url}{path}",
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=30,
        **kw,
    )


def decided(stack: Stack, conversation: str) -> dict[str, Any] | None:
    """The conversation's decision record, once the audit stream has it."""
    audit = admin(stack, "GET", f"/api/admin/audit?conversation_id={conversation}").json()
    return next((r for r in audit["records"] if r["action"] == "decision"), None)


def test_an_unanswered_hr_question_is_emailed_once_to_its_people_redacted(
    stack: Stack, outside: tuple[LocalSmtp, FakeSlackWebhook, FakeConfluence, FakeGraph]
) -> None:
    smtp, slack, _, _ = outside
    body = ask(stack, HR_QUESTION).json()
    assert body["action"] == "no_answer", body
    conversation = body["conversation_id"]
    decision = wait_until_sync(lambda: decided(stack, conversation), 60)
    assert decision["details"]["category"] == "account", decision  # the route's category

    [mail] = wait_until_sync(lambda: list(smtp.messages), 120)
    assert mail.recipients == (TEAM,)
    text = mail.text
    assert "HR portal" in text
    assert "parental leave request is stuck" in text
    assert RAW_EMAIL not in text
    assert RAW_EMAIL not in mail.message["Subject"]
    assert "7946" not in text
    assert "<EMAIL_ADDRESS" in text  # the placeholder the redactor put in its place
    assert f"{ADMIN_URL}/admin#conversation={conversation}" in text
    [post] = wait_until_sync(lambda: list(slack.posts), 60)
    assert RAW_EMAIL not in json.dumps(post)
    assert "7946" not in json.dumps(post)

    # The same question again (another user, another conversation) is not reported again; a
    # new one is. Notices are handled in order, so once the new one's e-mail is here, the
    # repeat was decided.
    again = ask(stack, HR_QUESTION).json()
    assert again["action"] == "no_answer"
    other = ask(stack, "Why does the HR portal reject my login since this morning?").json()
    assert other["action"] == "no_answer", other
    other_decision = wait_until_sync(lambda: decided(stack, other["conversation_id"]), 60)
    assert other_decision["details"]["category"] == "account", other_decision
    messages = wait_until_sync(lambda: smtp.messages if len(smtp.messages) >= 2 else None, 120)
    assert len(messages) == 2
    assert "reject my login" in messages[1].text

    audit = admin(stack, "GET", f"/api/admin/audit?conversation_id={conversation}").json()
    sent = [r for r in audit["records"] if r["action"] == "notification"]
    assert [(r["service"], r["reason"]) for r in sent] == [("ticketing", "sent")]


def test_an_approved_proposal_becomes_a_draft_never_published(
    stack: Stack, outside: tuple[LocalSmtp, FakeSlackWebhook, FakeConfluence, FakeGraph]
) -> None:
    _, _, confluence, graph = outside
    for question in GAP_QUESTIONS:
        assert ask(stack, question).json()["action"] == "no_answer"

    def drafted() -> list[dict[str, Any]]:
        listing = admin(stack, "GET", "/api/admin/proposals").json()["proposals"]
        return [p for p in listing if "sap" in p["title"].lower() and p["questions"] >= 3]

    [summary] = wait_until_sync(drafted, 120, interval_s=0.5)
    path = f"/api/admin/proposals/{summary['id']}"
    approved = admin(stack, "POST", f"{path}/approve", json={"target": "hr-wiki"})
    assert approved.status_code == 200, approved.text
    assert approved.json()["draft"]["status"] in ("requested", "created")

    def draft_done() -> dict[str, Any] | None:
        draft: dict[str, Any] | None = admin(stack, "GET", path).json()["draft"]
        return draft if draft and draft["status"] != "requested" else None

    draft = wait_until_sync(draft_done, 120)
    assert draft["status"] == "created", draft
    [(page_id, sent)] = confluence.drafts.items()
    assert draft["url"] == f"{confluence.base_url}/pages/resumedraft.action?draftId={page_id}"
    assert sent["status"] == "draft"
    assert sent["spaceId"] == "1000"  # HR
    proposal = admin(stack, "GET", path).json()
    assert sent["title"] == proposal["title"]
    for source in proposal["sources"]:
        assert source["title"] in sent["body"]["value"] or source["ref"] in sent["body"]["value"]
    assert confluence.published == []
    assert page_id not in confluence.pages

    def audited() -> list[dict[str, Any]]:
        records = admin(stack, "GET", "/api/admin/audit?conversation_id=knowledge-proposals")
        return [
            r
            for r in records.json()["records"]
            if r["details"].get("proposal_id") == summary["id"]
            and r["details"].get("decision") == "draft_created"
        ]

    [record] = wait_until_sync(audited, 60)
    assert record["details"]["draft_url"] == draft["url"]

    # SharePoint: the app was given read permission only.
    graph.deny("/pages")
    asked = admin(stack, "POST", f"{path}/draft", json={"target": "intranet"})
    assert asked.status_code == 202, asked.text
    failed = wait_until_sync(draft_done, 120)
    assert failed["status"] == "failed", failed
    assert failed["missing_permission"] == "Sites.ReadWrite.All"
    assert "403" in failed["error"]
    assert graph.site_pages == {}
    assert graph.published == []
    # Someone else's or a made-up source, and a proposal that does not exist.
    assert admin(stack, "POST", f"{path}/draft", json={"target": "../hr-wiki"}).status_code == 404
    missing = admin(
        stack, "POST", "/api/admin/proposals/0123456789abcdef/draft", json={"target": "hr-wiki"}
    )
    assert missing.status_code == 404
