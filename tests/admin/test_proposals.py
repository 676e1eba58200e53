"""Knowledge-base update proposals on the running stack: questions the knowledge base cannot
answer recur, the indexer drafts a proposal from them, an admin approves it from the review
queue, and the article is indexed like any uploaded document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from deploy.runner import Stack
from tests.admin import ADMIN
from tests.support import wait_until_sync
from tests.support.stack import ask

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("admin-stack")]

QUESTIONS = (
    "How do I configure the SAP GUI transaction ME21N shortcuts?",
    "How can I set up keyboard shortcuts for the SAP GUI transaction ME21N?",
    "How do I change the SAP GUI shortcuts in transaction ME21N?",
)


def admin_get(stack: Stack, path: str) -> Any:
    response = httpx.get(
        f"{stack.url}{path}", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()


def until(check: Callable[[], Any]) -> Any:
    """What ``check`` returns once truthy; the indexer's gap rounds run every second here."""
    return wait_until_sync(check, 90, interval_s=0.5)


def test_recurring_unanswered_questions_become_a_proposal_an_admin_approves(stack: Stack) -> None:
    for question in QUESTIONS:
        body = ask(stack, question).json()
        assert body["action"] == "no_answer", body

    def drafted() -> list[dict[str, Any]]:
        listing: list[dict[str, Any]] = admin_get(stack, "/api/admin/proposals")["proposals"]
        # Other modules' questions on this stack may make gaps of their own (low ratings).
        return [
            p for p in listing if p["questions"] >= len(QUESTIONS) and "sap" in p["title"].lower()
        ]

    [summary] = until(drafted)
    assert summary["status"] == "pending"
    assert summary["signals"] == {"no_answer": 3}
    proposal = admin_get(stack, f"/api/admin/proposals/{summary['id']}")
    assert sorted(q["text"] for q in proposal["questions"]) == sorted(QUESTIONS)
    assert "sap" in proposal["title"].lower()
    assert proposal["article_markdown"].startswith(f"# {proposal['title']}")

    approved = httpx.post(
        f"{stack.url}/api/admin/proposals/{summary['id']}/approve",
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=30,
    )
    assert approved.status_code == 200, approved.text
    document_id = approved.json()["document_id"]
    document = until(
        lambda: (d := admin_get(stack, f"/api/documents/{document_id}"))["status"] != "queued" and d
    )
    assert document["status"] == "indexed", document
    assert document["chunks"] >= 1
