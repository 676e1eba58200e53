"""Runtime configuration across the stack: an admin changes a setting through the API (and the
admin page), and the next turns behave differently, with no service restarted.

Also, without the stack: the crawler's per-host limiter takes the admins' rate limits per
request (real valkey)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from crawler.ratelimit import HostLimiter
from deploy.runner import Stack
from orchestrator.compose import CAP_TEXT
from tests.admin import ADMIN
from tests.support import unique_name, wait_until_sync
from tests.support.stack import ask

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("admin-stack")]

QUESTION = "How do I connect to the office Wi-Fi?"
VAGUE = "it's not working"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic"]


# -- the crawler's limiter ---------------------------------------------------------------------


async def test_the_limiter_takes_rate_limits_per_request(redis_url: str) -> None:
    client = aioredis.from_url(redis_url)
    prefix = unique_name("cfg") + ":"
    limiter = HostLimiter(client, prefix=prefix, concurrency=4, requests_per_s=4.0, lease_ms=10_000)
    next_key = f"{prefix}crawler:host:{{site}}:next"
    try:
        async with limiter.slot("https://a.example"):
            pass
        # The default spacing (4 per second) keeps the next start 250 ms ahead (TTL 1 s floor).
        assert 0 < await client.pttl(next_key.format(site="https://a.example")) <= 1000

        async with limiter.slot("https://b.example", requests_per_s=0.25):
            pass
        # An admin's 0.25 per second: 4 s between requests, kept for twice that.
        assert await client.pttl(next_key.format(site="https://b.example")) > 6000

        # Concurrency 1: a second request to the host waits for the first to finish.
        site = "https://c.example"

        async def second(concurrency: int | None) -> None:
            async with limiter.slot(site, concurrency=concurrency, requests_per_s=1000):
                pass

        async with limiter.slot(site, concurrency=1, requests_per_s=1000):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(second(1), 0.5)
            # The limiter's own concurrency (4) lets it start.
            await asyncio.wait_for(second(None), 2)
    finally:
        await client.aclose()


# -- the stack ---------------------------------------------------------------------------------


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def config(stack: Stack) -> dict[str, Any]:
    response = httpx.get(f"{stack.url}/api/admin/config", headers=admin(), timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def change(stack: Stack, **changes: Any) -> dict[str, Any]:
    version = config(stack)["version"]
    response = httpx.put(
        f"{stack.url}/api/admin/config",
        json={"version": version, "changes": changes},
        headers=admin(),
        timeout=10,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def until(check: Callable[[], bool], timeout_s: float = 30.0) -> float:
    """Seconds until ``check`` holds (asking new turns meanwhile); fails past the deadline."""
    started = time.monotonic()
    wait_until_sync(check, timeout_s, interval_s=0.2, message="the change never took effect")
    return time.monotonic() - started


def answer(stack: Stack, text: str) -> dict[str, Any]:
    response = ask(stack, text)  # a new conversation each time
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def pids(stack: Stack) -> dict[str, int | None]:
    return {c.name: c.process.pid if c.process else None for c in stack.children}


def test_changes_take_effect_on_the_next_turns_without_a_restart(stack: Stack) -> None:
    started_with = pids(stack)
    before = config(stack)
    assert before["values"]["relevance_threshold"] == 0.45  # published by the orchestrator
    assert before["fields"][0]["default"] is not None

    assert answer(stack, QUESTION)["action"] in {"answer", "checklist"}
    change(stack, relevance_threshold=0.99)
    took = until(lambda: answer(stack, QUESTION)["action"] == "no_answer")
    print(f"relevance threshold 0.45 -> 0.99 in force after {took:.1f} s")

    assert answer(stack, VAGUE)["action"] == "clarify"
    change(stack, clarify_cap=0)
    took = until(lambda: answer(stack, VAGUE)["answer"] == CAP_TEXT)
    print(f"clarify cap 2 -> 0 in force after {took:.1f} s")

    restored = change(stack, relevance_threshold=None, clarify_cap=None)
    assert restored["overridden"] == []
    until(lambda: answer(stack, QUESTION)["action"] in {"answer", "checklist"})
    assert answer(stack, VAGUE)["action"] == "clarify"

    assert pids(stack) == started_with  # nothing was restarted

    history = httpx.get(
        f"{stack.url}/api/admin/config/history", headers=admin(), timeout=10
    ).json()["records"]
    changes = [r["details"] for r in history]
    assert changes[-3:] == [
        {
            "changed_by": "admin token",
            "version": changes[-3]["version"],
            "relevance_threshold": "0.45 -> 0.99",
        },
        {
            "changed_by": "admin token",
            "version": changes[-3]["version"] + 1,
            "clarify_cap": "2 -> 0",
        },
        {
            "changed_by": "admin token",
            "version": changes[-3]["version"] + 2,
            "relevance_threshold": "0.99 -> 0.45 (default)",
            "clarify_cap": "0 -> 2 (default)",
        },
    ]


def test_the_admin_page_edits_the_configuration(
    stack: Stack, tmp_path: Path, chromium: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("DESKPILOT_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.set_default_timeout(30_000)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            # Script errors and CSP violations (the 422 the test provokes is logged too).
            page.on(
                "console",
                lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
            )
            page.add_init_script(f"sessionStorage.setItem('deskpilot.adminToken', '{ADMIN}')")
            page.goto(f"{stack.url}/admin")
            page.click("#tab-config-button")
            tab = page.locator("#tab-config")
            cap = tab.get_by_label("Clarification cap (rounds)")
            expect(cap).to_have_value("2")

            # A server-side refusal is shown by its field, and nothing is saved.
            seeds = tab.get_by_label("Help-site seed URLs")
            seeds.fill("ftp://help.example.com/")
            tab.get_by_role("button", name="Save changes").click()
            expect(tab.locator("#config-crawl_seed_urls-error")).to_contain_text(
                "not an http(s) URL"
            )
            expect(seeds).to_have_attribute("aria-invalid", "true")
            page.screenshot(path=str(shots / "admin-config-invalid.png"), full_page=True)
            version = config(stack)["version"]

            seeds.fill("")
            cap.fill("3")
            tab.get_by_role("button", name="Save changes").click()
            expect(tab.locator(".config-status")).to_contain_text(f"Saved as version {version + 1}")
            expect(tab.locator(".config-history")).to_contain_text(
                "Clarification cap (rounds): 2 -> 3"
            )
            page.screenshot(path=str(shots / "admin-config-saved.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []
    after = config(stack)
    assert after["values"]["clarify_cap"] == 3
    assert after["overridden"] == ["clarify_cap"]  # the refused seed URL was never stored
