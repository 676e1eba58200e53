"""Ratings on the running stack: a rating changes the admin analytics, and an article rated badly
three times gives way to the next one in the ranking (feedback-aware retrieval).

Also drives the admin page in the system Chromium: sign in, see the rating counted, and a
screenshot of the analytics tab under the test's output folder.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from deploy.runner import Stack
from tests.support.stack import ask, running_stack

pytestmark = pytest.mark.slow

ADMIN = "ratings-admin-token-0123456789"
QUESTIONS = (
    # Questions more than one demo article speaks to (VPN password / account password, office /
    # guest Wi-Fi): the first that gets an answer is used.
    "How do I reset my VPN password?",
    "How do I reset my password?",
    "How do I connect to the office Wi-Fi?",
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {"DESKPILOT_ADMIN_TOKEN": ADMIN, "GATEWAY_RATE_LIMIT_ENABLED": "false"}
    with running_stack(tmp_path_factory.mktemp("stack"), env) as running:
        yield running


def analytics(stack: Stack) -> dict[str, Any]:
    response = httpx.get(
        f"{stack.url}/api/admin/analytics",
        headers={"Authorization": f"Bearer {ADMIN}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def rate(stack: Stack, turn_id: str, score: int) -> None:
    response = httpx.post(
        f"{stack.url}/api/feedback", json={"turn_id": turn_id, "score": score}, timeout=30
    )
    assert response.status_code == 201, response.text


def first_url(body: dict[str, Any]) -> str:
    assert body["action"] in {"answer", "checklist"}, body
    url: str = body["citations"][0]["url"]
    return url


def test_a_rating_changes_the_analytics(stack: Stack, tmp_path: Path) -> None:
    before = analytics(stack)
    body = ask(stack, "How do I find the IT policy documents?").json()

    rate(stack, body["turn_id"], 2)

    after = analytics(stack)
    assert after["turns"] == before["turns"] + 1
    assert after["csat"]["ratings"] == before["csat"]["ratings"] + 1
    assert after["csat"]["distribution"]["2"] == before["csat"]["distribution"]["2"] + 1
    cited = {d["url"]: d for d in after["documents"]}
    policies = cited[first_url(body)]
    assert policies["ratings"] >= 1
    assert policies["average"] is not None
    assert after["latency"]["answers"] == before["latency"]["answers"] + 1
    assert after["latency"]["p50_ms"] is not None
    assert after["daily"][-1]["ratings"] == after["csat"]["ratings"]
    assert any(s["stream"] == "feedback.recorded" for s in after["bus"]["streams"])

    if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():
        return  # the page itself is checked where a browser is installed
    shots = tmp_path / "screenshots"
    shots.mkdir()
    page_shows_the_rating(stack, after["csat"]["ratings"], shots / "admin-analytics.png")


def page_shows_the_rating(stack: Stack, ratings: int, screenshot: Path) -> None:
    from playwright.sync_api import sync_playwright

    from crawler.browser import CHROMIUM_ARGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=list(CHROMIUM_ARGS)
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{stack.url}/admin")
            page.get_by_label("Admin token").fill(ADMIN)
            page.get_by_label("Admin token").press("Enter")
            page.wait_for_selector("#deflection-definition")
            assert f"{ratings} ratings" in page.inner_text("#tab-analytics")
            assert "conversations that did not get a ticket" in page.inner_text(
                "#deflection-definition"
            )
            assert page.locator("#tab-analytics svg[role=img]").count() >= 4
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()


def test_an_article_rated_badly_three_times_gives_way(stack: Stack) -> None:
    question, first = None, None
    for candidate in QUESTIONS:
        body = ask(stack, candidate).json()
        if body["action"] in {"answer", "checklist"}:
            question, first = candidate, body
            break
    assert question is not None, "none of the questions was answered"
    assert first is not None
    penalised = first_url(first)

    rate(stack, first["turn_id"], 1)
    for _ in range(2):
        again = ask(stack, question).json()
        assert first_url(again) == penalised  # two bad ratings move nothing yet
        rate(stack, again["turn_id"], 1)

    # The orchestrator counts the third rating and re-ranks within its refresh interval.
    deadline = time.monotonic() + 30
    while True:
        latest = ask(stack, question).json()
        if first_url(latest) != penalised or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert first_url(latest) != penalised, (question, first["citations"], latest["citations"])
    documents = {d["url"]: d for d in analytics(stack)["documents"]}
    assert documents[penalised]["ratings"] >= 3
    assert documents[penalised]["average"] == pytest.approx(1.0)
