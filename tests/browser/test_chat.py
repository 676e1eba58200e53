"""The chat page in a real browser (Playwright driving the system Chromium) against the whole
stack on loopback: what an employee does, keyboard-only and at phone width, embedded on a host
page, and with markup planted in what the assistant reads.

Screenshots of the key screens are written to the ``shots`` folder (see conftest.py).
"""

from __future__ import annotations

import base64
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from PIL import Image, ImageDraw, ImageFont
from playwright.sync_api import (
    Browser,
    Frame,
    FrameLocator,
    Locator,
    Page,
    WebSocketRoute,
    expect,
)

from deploy.runner import Stack
from tests.browser.conftest import (
    ADMIN_TOKEN,
    CRAWLED_PAGE,
    INJECTION,
    JWT_SECRET,
    PageProblems,
    Site,
    new_page,
)
from tests.support import wait_until_sync
from tests.support.stack import restart_child

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ANSWERS = ".msg-bot[data-action]"


def ask(page: Page | FrameLocator, text: str) -> Locator:
    """Type a question, send it with Enter, and return the answer once it is shown."""
    answers = page.locator(ANSWERS)
    before = answers.count()
    box = page.locator("#chat-input")
    box.fill(text)
    box.press("Enter")
    expect(answers).to_have_count(before + 1, timeout=90_000)
    return answers.nth(before)


def click_for_answer(page: Page, target: Locator) -> Locator:
    answers = page.locator(ANSWERS)
    before = answers.count()
    target.click()
    expect(answers).to_have_count(before + 1, timeout=90_000)
    return answers.nth(before)


def stages(page: Page) -> list[str]:
    seen: list[str] = page.evaluate("window.__stages")
    return seen


def screenshot(lines: list[str]) -> bytes:
    font = ImageFont.load_default(size=28)
    image = Image.new("RGB", (900, 70 + 50 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((30, 35 + 50 * row), line, fill="black", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def assert_inert(page: Page | Frame) -> None:
    """No markup from text became an element, and no planted script ran."""
    assert page.locator("#messages img, #messages script, #messages iframe").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("typeof window.__pwnedCrawler") == "undefined"


def user_token(subject: str) -> str:
    claims = {"sub": subject, "exp": int(datetime.now(UTC).timestamp()) + 900}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


# -- Asking ----------------------------------------------------------------------------------


def test_a_question_gets_cited_steps_with_live_progress(chat: Page, shots: Path) -> None:
    answer = ask(chat, "How do I connect to the office Wi-Fi?")

    assert answer.get_attribute("data-action") in ("answer", "checklist")
    # Numbered steps rendered as a list, citations as numbered links to the source.
    assert answer.locator(".answer ol li, .checklist-step").count() >= 2
    marker = answer.locator(".answer sup.cite-ref a").first
    expect(marker).to_have_text("1")
    source = answer.locator(".sources .citation-link").first
    href = source.get_attribute("href") or ""
    assert href.startswith("https://it.northwind.example/"), href
    assert marker.get_attribute("href") == href
    assert marker.get_attribute("target") == "_blank"
    assert marker.get_attribute("rel") == "noopener noreferrer"
    # Each stage was shown as it happened, in order.
    seen = stages(chat)
    assert "redacting" in seen, seen
    assert "searching" in seen, seen
    assert seen.index("redacting") < seen.index("searching")
    # The rating under every answer.
    expect(answer.get_by_role("button", name="Rate 5 of 5")).to_be_visible()
    chat.screenshot(path=shots / "answer-with-citations.png")


def test_a_checklist_is_followed_to_resolution_with_its_buttons(chat: Page, shots: Path) -> None:
    first = ask(chat, "My webcam is not working in Teams meetings")
    expect(first).to_have_attribute("data-action", "checklist")
    card = first.locator(".card-checklist")
    total = card.locator(".checklist-step").count()
    assert total >= 3
    expect(card.locator(".card-title")).to_have_text(f"Step 1 of {total}")
    expect(card.locator(".checklist-step").nth(0)).to_have_attribute("aria-current", "step")

    second = click_for_answer(chat, card.get_by_role("button", name="Done, still broken"))
    expect(second).to_have_attribute("data-action", "checklist")
    next_card = second.locator(".card-checklist")
    expect(next_card.locator(".card-title")).to_have_text(f"Step 2 of {total}")
    expect(next_card.locator(".checklist-step").nth(1)).to_have_attribute("aria-current", "step")
    expect(next_card.locator(".checklist-step.is-tried")).to_have_count(1)
    # What the user sent is what the button says; the old card no longer acts.
    expect(chat.locator(".msg-user .user-text").last).to_have_text("Done, still broken")
    expect(card.get_by_role("button", name="That fixed it")).to_be_disabled()
    chat.screenshot(path=shots / "checklist.png")

    done = click_for_answer(chat, next_card.get_by_role("button", name="That fixed it"))
    assert done.get_attribute("data-action") != "checklist"
    expect(done.locator(".card-checklist")).to_have_count(0)
    expect(chat.locator(".msg-user .user-text").last).to_have_text("That fixed it")


def test_a_screenshot_is_uploaded_with_progress_and_used(chat: Page, shots: Path) -> None:
    image = screenshot(
        ["The VPN cannot connect to the server.", "Error code: 0x800CCC0E", "Close    Help"]
    )
    chat.locator("#file-input").set_input_files(
        {"name": "vpn-error.png", "mimeType": "image/png", "buffer": image}
    )
    chip = chat.locator("#attachments .upload").first
    expect(chip).to_have_attribute("data-state", "ready", timeout=120_000)
    expect(chip.locator(".upload-status")).to_contain_text("0x800")
    # The upload bar reported the bytes sent (XMLHttpRequest upload progress).
    assert 100 in chat.evaluate("window.__uploadPercents")
    chat.screenshot(path=shots / "attachment-ready.png")

    answer = ask(chat, "My VPN won't connect, see my screenshot")
    expect(chat.locator(".msg-user .sent-file-name").last).to_have_text("vpn-error.png")
    expect(chat.locator("#attachments .upload")).to_have_count(0)
    text = answer.locator(".answer")
    expect(text).to_contain_text("From your attachments")
    expect(text).to_contain_text("0x800CCC0E", ignore_case=True)
    chat.screenshot(path=shots / "attachment-used.png")
    assert "reading_attachment" in stages(chat)


def test_drag_and_drop_and_rejected_files(chat: Page, shots: Path, problems: PageProblems) -> None:
    problems.refusals_expected = {415, 422}
    log = (
        "2026-11-25 09:01:07 ERROR vpnagent: connection to gw1 failed: 0x800704cf\n" * 20_000
    ).encode()
    assert len(log) > 1_000_000  # large enough for upload progress events on loopback
    drop(chat, "vpnagent.log", log, "text/plain")
    chip = chat.locator("#attachments .upload").first
    expect(chip).to_have_attribute("data-state", "ready", timeout=120_000)
    expect(chip.locator(".upload-status")).to_contain_text("0x800704cf", ignore_case=True)
    percents = chat.evaluate("window.__uploadPercents")
    assert percents, "no upload progress was shown"
    assert percents[-1] == 100, percents

    # Not a log or an image, and an image that is not one: clear errors, nothing attached.
    chat.locator("#file-input").set_input_files(
        {"name": "report.log", "mimeType": "text/plain", "buffer": b"%PDF-1.7\n%\xe2\xe3\n1 0 obj"}
    )
    chat.locator("#file-input").set_input_files(
        {"name": "broken.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n\x1a\n" + b"x" * 400}
    )
    errors = chat.locator("#attachments .upload-error")
    expect(errors).to_have_count(2, timeout=60_000)
    expect(errors.nth(0).get_by_role("alert")).to_contain_text("Not a supported file")
    expect(errors.nth(1).get_by_role("alert")).to_contain_text("Could not read the file")
    chat.screenshot(path=shots / "attachment-errors.png")
    errors.nth(0).get_by_role("button", name="Remove report.log").click()
    expect(errors).to_have_count(1)


def drop(page: Page, name: str, data: bytes, mime: str) -> None:
    """Drop a file on the chat as a user dragging it from their desktop would. The bytes go to
    the page as base64 (one string; a list of numbers took Playwright 35 s for 1.4 MB)."""
    transfer = page.evaluate_handle(
        """([name, encoded, mime]) => {
            const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
            const dt = new DataTransfer();
            dt.items.add(new File([bytes], name, {type: mime}));
            return dt;
        }""",
        [name, base64.b64encode(data).decode("ascii"), mime],
    )
    target = page.locator("#messages")
    target.dispatch_event("dragenter", {"dataTransfer": transfer})
    expect(page.locator("#drop-zone")).to_be_visible()
    target.dispatch_event("dragover", {"dataTransfer": transfer})
    target.dispatch_event("drop", {"dataTransfer": transfer})
    expect(page.locator("#drop-zone")).to_be_hidden()


def test_asking_for_a_person_shows_the_ticket_card(chat: Page, shots: Path) -> None:
    ask(chat, "My VPN keeps disconnecting every few minutes")
    answer = click_for_answer(
        chat, chat.get_by_role("button", name="Talk to a person / create ticket")
    )
    expect(answer).to_have_attribute("data-action", "escalated")
    card = answer.locator(".card-ticket")
    expect(card).to_be_visible()
    key = (card.locator(".card-title").text_content() or "").removeprefix("Ticket ").strip()
    assert re.fullmatch(r"[A-Z][A-Z0-9]*-\d+", key), key
    expect(card.locator(".status-pill")).not_to_be_empty()
    link = card.locator("a.card-link")
    assert (link.get_attribute("href") or "").startswith(("http://", "https://"))
    assert "creating_ticket" in stages(chat)
    chat.screenshot(path=shots / "ticket-card.png")


def test_a_rating_with_a_comment_reaches_the_analytics(chat: Page, stack: Stack) -> None:
    before = csat(stack)
    answer = ask(chat, "How do I find the IT policy documents?")
    answer.get_by_role("button", name="Rate 4 of 5").click()
    answer.get_by_label("Anything to add? (optional)").fill("Clear steps, thanks")
    answer.get_by_role("button", name="Send rating 4 of 5").click()
    expect(answer.locator(".feedback-status")).to_have_text("Thanks — you rated this 4 of 5.")

    def counted() -> dict[str, Any] | None:
        now = csat(stack)
        return now if now["ratings"] == before["ratings"] + 1 else None

    after = wait_until_sync(counted, 30, interval_s=0.2)
    assert after["distribution"]["4"] == before["distribution"]["4"] + 1


def csat(stack: Stack) -> dict[str, Any]:
    response = httpx.get(f"{stack.url}/api/admin/analytics", headers=ADMIN, timeout=30)
    assert response.status_code == 200, response.text
    figures: dict[str, Any] = response.json()["csat"]
    return figures


# -- Surviving a reload and a dropped connection ---------------------------------------------


def test_a_reload_mid_conversation_keeps_it(chat: Page, shots: Path) -> None:
    first = ask(chat, "How do I connect to the office Wi-Fi?")
    first_text = first.locator(".answer").inner_text()
    conversation = chat.evaluate("localStorage.getItem('deskpilot.conversation_id')")
    chat.locator(".rate-btn").first.wait_for()

    # The second question is on its way when the page reloads.
    box = chat.locator("#chat-input")
    box.fill("And the guest Wi-Fi?")
    box.press("Enter")
    expect(chat.locator(".msg-bot[data-turn-id]")).to_have_count(2)
    chat.reload()

    expect(chat.locator(".msg-user .user-text")).to_have_text(
        ["How do I connect to the office Wi-Fi?", "And the guest Wi-Fi?"]
    )
    expect(chat.locator(ANSWERS)).to_have_count(2, timeout=90_000)
    assert chat.locator(ANSWERS).nth(0).locator(".answer").inner_text() == first_text
    assert chat.evaluate("localStorage.getItem('deskpilot.conversation_id')") == conversation
    chat.screenshot(path=shots / "after-reload.png")

    # The conversation goes on where it was: same id on the socket, and the topic remembered.
    ask(chat, "thanks")
    assert chat.evaluate("localStorage.getItem('deskpilot.conversation_id')") == conversation


def test_a_dropped_connection_reconnects_and_loses_no_answer(
    chat: Page, stack: Stack, problems: PageProblems
) -> None:
    ask(chat, "How do I connect to the office Wi-Fi?")
    problems.socket_failures_expected = True
    box = chat.locator("#chat-input")
    box.fill("My webcam is not working in Teams meetings")
    box.press("Enter")
    expect(chat.locator(".msg-bot[data-turn-id]")).to_have_count(2)
    restart_child(stack, "gateway")  # the socket drops mid-turn

    expect(chat.locator("#conn-banner")).to_be_visible()
    expect(chat.locator(ANSWERS)).to_have_count(2, timeout=120_000)
    expect(chat.locator(ANSWERS).nth(1)).to_have_attribute("data-action", "checklist")
    expect(chat.locator("#conn-banner")).to_be_hidden(timeout=60_000)
    ask(chat, "done, still broken")


# -- Accessibility and small screens ---------------------------------------------------------


def test_keyboard_only(chat: Page, shots: Path) -> None:
    chat.keyboard.press("Tab")
    focused = chat.evaluate("document.activeElement.className")
    assert "skip-link" in focused
    chat.keyboard.press("Enter")
    assert chat.evaluate("document.activeElement.id") == "chat-input"
    chat.keyboard.type("How do I connect to the office Wi-Fi?")
    answers = chat.locator(ANSWERS)
    chat.keyboard.press("Enter")
    expect(answers).to_have_count(1, timeout=90_000)

    # Back from the message box to the rating, with a visible focus ring on the way.
    for _ in range(60):
        chat.keyboard.press("Shift+Tab")
        label = chat.evaluate("document.activeElement.getAttribute('aria-label')")
        if label == "Rate 5 of 5":
            break
    else:
        pytest.fail("the rating cannot be reached with the keyboard")
    outline = chat.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), outline
    chat.screenshot(path=shots / "keyboard-focus.png")
    chat.keyboard.press("Enter")
    chat.keyboard.press("Tab")
    assert chat.evaluate("document.activeElement.className") == "feedback-comment"
    chat.keyboard.type("Found it")
    chat.keyboard.press("Tab")
    chat.keyboard.press("Enter")
    status = answers.first.locator(".feedback-status")
    expect(status).to_have_text("Thanks — you rated this 5 of 5.")
    # New messages are announced: the log is a polite live region.
    log = chat.locator("#messages")
    expect(log).to_have_attribute("role", "log")
    expect(log).to_have_attribute("aria-live", "polite")


def test_usable_at_360_px(browser: Browser, stack: Stack, shots: Path) -> None:
    problems = PageProblems()
    page = new_page(browser, problems, viewport={"width": 360, "height": 740}, has_touch=True)
    try:
        page.goto(f"{stack.url}/")
        answer = ask(page, "My webcam is not working in Teams meetings")
        expect(answer.locator(".card-checklist")).to_be_visible()
        # Nothing wider than the screen, and every control on it.
        assert page.evaluate("document.documentElement.scrollWidth") <= 360
        for name in ("Attach a screenshot or log file", "Send", "Talk to a person / create ticket"):
            box = page.get_by_role("button", name=name, exact=True).bounding_box()
            assert box is not None, name
            assert box["x"] >= 0, name
            assert box["x"] + box["width"] <= 360, name
        fixed = answer.get_by_role("button", name="That fixed it").bounding_box()
        assert fixed is not None
        assert fixed["x"] + fixed["width"] <= 360
        page.screenshot(path=shots / "phone-360.png")
    finally:
        page.context.close()
    assert not problems.errors, problems.errors


# -- Embedding -------------------------------------------------------------------------------


def test_the_launcher_on_a_host_page(
    browser: Browser, stack: Stack, site: Site, shots: Path
) -> None:
    problems = PageProblems()
    page = new_page(browser, problems)
    try:
        page.goto(site.server.url("/intranet/"))
        launcher = page.get_by_role("button", name="IT help")
        expect(launcher).to_be_visible()
        # The host's styles (serif everywhere, red padded buttons) do not reach it.
        style = launcher.evaluate(
            "b => [getComputedStyle(b).backgroundColor, getComputedStyle(b).paddingTop]"
        )
        assert style == ["rgb(29, 78, 216)", "0px"], style
        page.screenshot(path=shots / "host-page-launcher.png")

        launcher.click()
        expect(launcher).to_have_attribute("aria-expanded", "true")
        frame = page.frame_locator("iframe[title='IT help chat']")
        answer = ask(frame, "How do I connect to the office Wi-Fi?")
        expect(answer.locator(".sources .citation-link").first).to_be_visible()
        page.screenshot(path=shots / "host-page-chat.png")

        # Escape in the chat closes the panel and gives focus back to the launcher.
        frame.locator("#chat-input").press("Escape")
        expect(launcher).to_have_attribute("aria-expanded", "false")
        expect(page.locator("iframe[title='IT help chat']")).to_be_hidden()
    finally:
        page.context.close()
    assert not problems.errors, problems.errors


def test_the_launcher_passes_the_host_pages_user_token(
    browser: Browser, stack: Stack, site: Site
) -> None:
    site.tokens["signed-in"] = user_token("dana.whitfield")
    problems = PageProblems()
    page = new_page(browser, problems)
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    try:
        page.goto(site.server.url("/intranet/signed-in.html"))
        page.get_by_role("button", name="IT help").click()
        frame = page.frame_locator("iframe[title='IT help chat']")
        ask(frame, "How do I connect to the office Wi-Fi?")
        src = page.locator("iframe[title='IT help chat']").get_attribute("src") or ""
        assert "token" not in src  # posted to the chat's origin, never put in the page's URL
        assert any("token=" in url for url in sockets), sockets
    finally:
        page.context.close()
    assert not problems.errors, problems.errors


def test_only_allowed_host_pages_may_frame_the_chat(stack: Stack, site: Site) -> None:
    response = httpx.get(f"{stack.url}/", timeout=10)
    policy = response.headers["content-security-policy"]
    ancestors = re.search(r"frame-ancestors ([^;]+)", policy)
    assert ancestors is not None, policy
    assert ancestors.group(1).split() == ["'self'", site.origin]
    assert "script-src 'self'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "strict-origin-when-cross-origin"


def test_a_host_page_that_is_not_allowed_gets_no_chat(
    browser: Browser, stack: Stack, site: Site
) -> None:
    problems = PageProblems()
    page = new_page(browser, problems)
    try:
        # The same host page, on an origin GATEWAY_FRAME_ANCESTORS does not list.
        page.goto(site.server.url("/intranet/").replace("127.0.0.1", "localhost"))
        page.get_by_role("button", name="IT help").click()
        iframe = page.locator("iframe[title='IT help chat']").element_handle()
        assert iframe is not None

        def refused() -> bool:
            content = iframe.content_frame()
            return content is not None and content.url.startswith("chrome-error://")

        for _ in range(100):
            if refused():
                break
            page.wait_for_timeout(100)
        assert refused()
        assert any("frame-ancestors" in error for error in problems.errors), problems.errors
    finally:
        page.context.close()


# -- Injection -------------------------------------------------------------------------------


def test_markup_in_a_user_message_is_shown_as_text(chat: Page) -> None:
    text = f"My screen shows {INJECTION} after login"
    ask(chat, text)
    expect(chat.locator(".msg-user .user-text").last).to_have_text(text)
    assert_inert(chat)


def test_markup_in_a_document_is_shown_as_text(chat: Page, stack: Stack, shots: Path) -> None:
    document = (
        "# Quillon VPN token resync\n\n"
        "To resync the Quillon VPN hardware token when codes are rejected:\n\n"
        "1. Open the Quillon token portal and sign in.\n"
        f"2. Choose Resync and enter two consecutive codes. The portal may show {INJECTION}"
        f" or `{INJECTION}`\n"
        "3. Wait one minute and sign in to the Quillon VPN again.\n"
    ).encode()
    upload = httpx.post(
        f"{stack.url}/api/documents",
        headers=ADMIN,
        files={"file": ("quillon-token.md", document, "text/markdown")},
        timeout=60,
    )
    assert upload.status_code == 202, upload.text
    doc_id = upload.json()["id"]

    def indexed() -> bool:
        state = httpx.get(f"{stack.url}/api/documents/{doc_id}", headers=ADMIN, timeout=10)
        return bool(state.json().get("status") == "indexed")

    wait_until_sync(indexed, 120, interval_s=0.2)
    answer = ask(chat, "How do I resync my Quillon VPN hardware token?")
    urls = [a.get_attribute("href") for a in answer.locator(".sources .citation").all()]
    titles = answer.locator(".sources").inner_text()
    assert "Quillon" in titles, (urls, titles)
    # The planted script's text is shown as text (the indexer drops the tags around it).
    expect(answer.locator(".answer")).to_contain_text("window.__pwned=2")
    assert_inert(chat)
    chat.screenshot(path=shots / "document-injection-inert.png")


def test_markup_in_a_crawled_page_is_shown_as_text(chat: Page, shots: Path) -> None:
    answers = chat.locator(ANSWERS)
    box = chat.locator("#chat-input")
    box.fill("How do I calibrate the Wacom drawing tablet pen?")
    box.press("Enter")
    # While the help site is read, the pending answer says so, with a progress bar.
    chat.wait_for_function("() => window.__stages.includes('crawling')")
    chat.screenshot(path=shots / "crawl-progress.png")
    expect(answers).to_have_count(1, timeout=120_000)
    answer = answers.first
    links = [
        link.get_attribute("href") or "" for link in answer.locator(".sources .citation-link").all()
    ]
    assert any(link.endswith(CRAWLED_PAGE) for link in links), links
    expect(answer.locator(".answer")).to_contain_text("window.__pwned=4")
    assert_inert(chat)
    chat.screenshot(path=shots / "crawled-answer.png")


def test_the_transcript_keeps_no_private_text(chat: Page) -> None:
    ask(chat, "My password is Hunter2-Winter! and my VPN login fails")
    expect(chat.locator(".redaction-notice")).to_be_visible()
    stored = chat.evaluate(
        "JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)])"
    )
    assert "Hunter2-Winter!" not in stored
    assert json.loads(chat.evaluate("JSON.stringify(Object.keys(sessionStorage))"))


# -- Rendering, with the gateway's frames scripted -------------------------------------------


def test_streamed_text_cards_and_unsafe_links_from_scripted_frames(
    browser: Browser, stack: Stack, shots: Path
) -> None:
    """What the stack does not produce on demand (an LLM writing, an incident, similar cases,
    a hostile citation URL), sent to the real page as the gateway would send it."""
    problems = PageProblems()
    page = new_page(browser, problems, permissions=["clipboard-read", "clipboard-write"])
    sockets: list[WebSocketRoute] = []
    received: list[dict[str, Any]] = []

    def gateway(socket: WebSocketRoute) -> None:
        sockets.append(socket)
        socket.on_message(lambda message: received.append(json.loads(message)))
        socket.send(json.dumps({"type": "ready", "conversation_id": "c-scripted"}))

    page.route_web_socket(re.compile(r"/ws/chat"), gateway)
    try:
        page.goto(f"{stack.url}/")
        box = page.locator("#chat-input")
        box.fill("My VPN drops every few minutes")
        box.press("Enter")
        message = wait_until_sync(lambda: received[0] if received else None, 10)
        assert message["text"] == "My VPN drops every few minutes"
        socket = sockets[-1]
        turn = {"turn_id": "t-1"}

        def frame(kind: str, **fields: Any) -> None:
            socket.send(json.dumps({"type": kind, **turn, **fields}))

        frame("accepted", client_id=message["client_id"])
        frame("progress", stage="searching")
        frame("progress", stage="writing", detail="**Restart** the VPN client [1]")
        pending = page.locator(".msg-pending")
        expect(pending.locator(".answer-preview")).to_have_text("Restart the VPN client [1]")
        expect(pending.locator(".progress-label")).to_have_text("Writing the answer…")
        expect(pending.locator(".bar")).to_be_visible()  # a long turn shows a bar
        expect(pending.locator(".stage-done")).to_have_text(["Searched the knowledge base"])
        frame(
            "progress",
            stage="writing",
            detail="**Restart** the VPN client [1], then run:\n\n```\nvpncli reset\n```",
        )
        expect(pending.locator(".answer-preview .code-block")).to_have_count(1)
        page.screenshot(path=shots / "writing-preview.png")

        frame(
            "answer",
            action="answer",
            answer=(
                "**Restart** the VPN client [1], then run:\n\n```sh\nvpncli reset\n```\n\n"
                "1. Open `VPN settings`.\n2. Choose [Reconnect](javascript:alert(1)).\n\n"
                "Status: https://status.northwind.example/vpn."
            ),
            citations=[
                {"n": 1, "url": "javascript:alert(1)", "title": "VPN drops", "snippet": "x"},
            ],
            incident={
                "id": "inc-7",
                "title": "VPN gateway degraded in Berlin",
                "status": "identified",
                "url": "https://status.northwind.example/inc-7",
                "since": "2026-11-25T08:30:00Z",
                "latest_update": "A fix is being rolled out.",
            },
            similar_cases=[
                {
                    "ticket_id": "IT-88",
                    "summary": "VPN drops on hotel Wi-Fi",
                    "resolution": "Switched the client to TCP.",
                    "score": 0.81,
                }
            ],
            redaction_notice="I removed a password from your message.",
            conversation_id="c-scripted",
        )
        answer = page.locator(ANSWERS).first
        expect(answer).to_have_attribute("data-action", "answer")
        expect(answer.locator(".answer-preview")).to_have_count(0)
        # Only http(s) becomes a link; a javascript: URL stays text or points at the source list.
        hrefs = [a.get_attribute("href") or "" for a in answer.locator("a").all()]
        assert not [h for h in hrefs if h.lower().startswith("javascript")], hrefs
        assert "https://status.northwind.example/vpn" in hrefs  # trailing dot left out
        expect(answer.locator(".answer")).to_contain_text("Choose [Reconnect](javascript:alert(1))")
        expect(answer.locator(".answer .inline-code")).to_have_text("VPN settings")
        incident = answer.locator(".card-incident")
        expect(incident.locator(".incident-title")).to_have_text("VPN gateway degraded in Berlin")
        expect(incident).to_contain_text("A fix is being rolled out.")
        expect(incident).to_contain_text("2026")
        similar = answer.locator(".card-similar")
        similar.locator("summary").click()
        expect(similar).to_contain_text("Switched the client to TCP.")
        expect(answer.locator(".redaction-notice")).to_have_text(
            "I removed a password from your message."
        )
        answer.get_by_role("button", name="Copy sh code").click()
        expect(answer.get_by_role("button", name="Copy sh code")).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == "vpncli reset"
        page.screenshot(path=shots / "cards.png", full_page=True)
    finally:
        page.context.close()
    assert not problems.errors, problems.errors
