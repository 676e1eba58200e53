"""A Confluence space synced into the whole stack as an operator runs it: the indexer announces
the configured source, an admin syncs it over the API, the assistant answers from its pages, an
edited page is answered in its new version only, and the space taken out of the configuration is
answered no more and then removed from the index.

Confluence is the emulator (tests/support/fake_confluence.py) on loopback; everything else is
the real stack (``deploy.runner.Stack``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import chromadb
import httpx
import pytest
import redis

from contracts.bus import decode_entry
from contracts.events import SourceSyncCompleted
from contracts.topics import Topic
from deploy.runner import Stack
from tests.support import wait_until_sync
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence
from tests.support.stack import ask, restart_child, running_stack, source_synced

pytestmark = [pytest.mark.slow]

ADMIN = "test-admin-token-for-sources-0123456789"
BADGES = (
    "<h1>Visitor badges</h1><p>Visitor badges are printed at the Zephyr kiosk in the lobby. "
    "Scan the visitor's invitation code at the Zephyr kiosk and hand over the badge.</p>"
)


@pytest.fixture(scope="module")
def confluence() -> Iterator[FakeConfluence]:
    with FakeConfluence({"FAC": "Facilities"}) as fake:
        fake.add_page("FAC", "Visitor badges", BADGES)
        fake.add_page("FAC", "Parking", "<h1>Parking</h1><p>Level -2 is for visitors.</p>")
        yield fake


@pytest.fixture(scope="module")
def stack(confluence: FakeConfluence, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    source = {
        "name": "facilities",
        "kind": "confluence",
        "base_url": confluence.base_url,
        "spaces": ["FAC"],
        "email": EMAIL,
        "api_token": TOKEN,
    }
    env = {"DESKPILOT_ADMIN_TOKEN": ADMIN, "INDEXER_SOURCES": json.dumps([source])}
    with running_stack(tmp_path_factory.mktemp("sources-stack"), env) as running:
        yield running


def admin(stack: Stack, method: str, path: str) -> httpx.Response:
    return httpx.request(
        method, f"{stack.url}{path}", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
    )


def synced(stack: Stack, after: str | None) -> dict[str, Any]:
    """Sync the space and wait for the run that ended after ``after``; its status."""
    return source_synced(stack, ADMIN, "facilities", after)


def test_a_synced_space_is_answered_from_and_an_edit_replaces_it(
    stack: Stack, confluence: FakeConfluence
) -> None:
    [listed] = admin(stack, "GET", "/api/admin/sources").json()
    assert (listed["name"], listed["kind"], listed["last_summary"]) == (
        "facilities",
        "confluence",
        None,
    )
    assert admin(stack, "POST", "/api/admin/sources/nope/sync").status_code == 404

    first = synced(stack, None)
    assert first["last_summary"]["new"] == 2
    assert first["documents"] == 2

    answer = ask(stack, "Where are visitor badges printed?").json()
    assert "Zephyr kiosk" in answer["answer"]
    assert any("/spaces/FAC/pages/" in c["url"] for c in answer["citations"])

    page = next(iter(confluence.pages))
    confluence.edit_page(page, body=BADGES.replace("Zephyr", "Orion"))
    second = synced(stack, first["last_finished_at"])
    assert (second["last_summary"]["changed"], second["last_summary"]["unchanged"]) == (1, 1)

    # Once switched, the old version is never shown. The new one is found by dense search at
    # once; its keyword scores join when the orchestrator's snapshot is rebuilt, which is not
    # within a second of the last rebuild (the question after that one sees it). Seen once: the
    # first question after the sync was answered from another article.
    answers: list[str] = []

    def new_version_answered() -> bool:
        answers.append(ask(stack, "Where are visitor badges printed?").json()["answer"])
        return "Orion kiosk" in answers[-1]

    wait_until_sync(new_version_answered, 30, interval_s=1.0, message=lambda: str(answers))
    assert len(answers) <= 3, answers
    assert not [answer for answer in answers if "Zephyr" in answer], answers


def source_chunks(stack: Stack, source: str) -> int:
    """How many chunks of ``source`` the stack's Chroma holds."""
    client = chromadb.HttpClient(host=stack.chroma_host, port=stack.chroma_port)
    collection = client.get_collection(stack.settings.chroma_collection)
    return len(collection.get(where={"source": source}, include=[])["ids"])


def removals(stack: Stack, source: str) -> list[SourceSyncCompleted]:
    """The summaries of ``source``'s removals published on ``source.sync.completed``."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        entries = client.xrange(Topic.SOURCE_SYNC_COMPLETED)
    finally:
        client.close()
    events = [decode_entry(fields, SourceSyncCompleted) for _, fields in entries]
    return [event for event in events if event.source == source and event.removal]


def test_a_space_taken_out_of_the_configuration_is_answered_no_more_then_removed(
    stack: Stack,
) -> None:
    status = admin(stack, "GET", "/api/admin/sources/facilities").json()
    if not status.get("last_finished_at"):  # run alone, without the test above
        status = synced(stack, None)
    assert status["documents"] == 2
    assert source_chunks(stack, "facilities") > 0
    question = "Where are visitor badges printed at the kiosk?"
    assert any("/spaces/FAC/" in c["url"] for c in ask(stack, question).json()["citations"])

    # The operator takes the space out of INDEXER_SOURCES and restarts the indexer, with no
    # grace period: hidden at the indexer's start, then removed at its first check (a second
    # after the start here, instead of 30).
    restart_child(
        stack,
        "indexer",
        {
            "INDEXER_SOURCES": "[]",
            "INDEXER_REMOVED_SOURCE_GRACE_S": "0",
            "INDEXER_SOURCE_TICK_S": "1",
        },
    )
    [removal] = wait_until_sync(lambda: removals(stack, "facilities"), 120, interval_s=0.5)
    assert removal.summary.deleted == 2
    assert source_chunks(stack, "facilities") == 0
    assert admin(stack, "GET", "/api/admin/sources/facilities").status_code == 404
    assert admin(stack, "GET", "/api/admin/sources").json() == []
    answer = ask(stack, question).json()
    assert not [c for c in answer["citations"] if "/spaces/FAC/" in c["url"]], answer
    assert "Zephyr" not in answer["answer"], answer  # the page's words, either version
    assert "Orion" not in answer["answer"], answer
