"""Escalation end to end, through the WebSocket as the chat page uses it, on the whole stack:
tickets a technician can act on, incidents, status questions.

Tickets go to the local store (the embedded default); what a technician sees is read through
the admin API (`GET /api/admin/tickets/{key}`), which the ticketing service's events feed.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import httpx
import jwt
import pytest
import websockets

from deploy.runner import Stack
from tests.support import wait_until
from tests.support.fake_jira import live_markup, split_noformat
from tests.support.fake_reset_webhook import FakeResetWebhook
from tests.support.stack import ask, running_stack
from ticketing.content import HEADINGS

pytestmark = pytest.mark.slow

ADMIN_TOKEN = f"admin-{uuid4().hex}"
INCIDENT_TOKEN = f"incidents-{uuid4().hex}"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
JWT_SECRET = f"user-tokens-{uuid4().hex}{uuid4().hex}"
WEBHOOK_SECRET = f"reset-webhook-{uuid4().hex}{uuid4().hex}"


@pytest.fixture(scope="module")
def webhook() -> Iterator[FakeResetWebhook]:
    with FakeResetWebhook(WEBHOOK_SECRET, delivered_to="your registered mobile phone") as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, webhook: FakeResetWebhook) -> Iterator[Stack]:
    env = {
        "DESKPILOT_ADMIN_TOKEN": ADMIN_TOKEN,
        "GATEWAY_INCIDENT_TOKEN": INCIDENT_TOKEN,
        "GATEWAY_JWT_SECRET": JWT_SECRET,
        "ORCHESTRATOR_INCIDENT_CACHE_S": "0",
        "ORCHESTRATOR_AUTOMATIONS": "password_reset",
        "ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL": webhook.url,
        "ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    with running_stack(tmp_path_factory.mktemp("escalation"), extra_env=env) as running:
        yield running


class Conversation:
    """One browser's WebSocket conversation."""

    def __init__(self, socket: Any, conversation_id: str) -> None:
        self.socket = socket
        self.conversation_id = conversation_id
        self.stages: list[str] = []

    async def say(self, text: str, **extra: Any) -> dict[str, Any]:
        await self.socket.send(json.dumps({"type": "message", "text": text, **extra}))
        self.stages = []
        while True:
            frame: dict[str, Any] = json.loads(await asyncio.wait_for(self.socket.recv(), 90))
            if frame["type"] == "progress":
                self.stages.append(frame["stage"])
            elif frame["type"] in ("answer", "error"):
                return frame


async def converse(stack: Stack, token: str | None = None) -> Any:
    url = stack.url.replace("http://", "ws://") + f"/ws/chat?conversation_id=c-{uuid4().hex}"
    return websockets.connect(url + (f"&token={token}" if token else ""))


def user_token(subject: str) -> str:
    claims = {"sub": subject, "exp": int(datetime.now(UTC).timestamp()) + 600}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


async def open_conversation(socket: Any) -> Conversation:
    ready = json.loads(await asyncio.wait_for(socket.recv(), 30))
    assert ready["type"] == "ready"
    return Conversation(socket, ready["conversation_id"])


async def ticket(stack: Stack, key: str, condition: Any = None) -> dict[str, Any]:
    """The ticket as the admin API shows it, once it is there (and meets ``condition``)."""
    last: dict[str, Any] = {}

    async def read() -> dict[str, Any] | None:
        nonlocal last
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{stack.url}/api/admin/tickets/{key}", headers=ADMIN)
        if response.status_code != 200:
            return None
        last = response.json()
        return last if condition is None or condition(last) else None

    return await wait_until(read, 30, message=lambda: f"ticket {key}: {last}")


async def test_still_broken_and_asking_for_a_human_files_a_complete_ticket(stack: Stack) -> None:
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        first = await chat.say("My webcam is not working in Teams meetings")
        assert first["action"] == "checklist", first
        steps = first["checklist"]["steps"]
        second = await chat.say("done, still broken")
        assert second["action"] == "checklist"
        third = await chat.say("This still doesn't work. I need a human.")
        assert third["action"] == "escalated", third
        assert "creating_ticket" in chat.stages
        key = third["ticket"]["key"]
        assert key in third["answer"]
        assert third["ticket"]["url"]

    record = await ticket(stack, key)
    description = record["description"]
    # The technician needs to ask nothing: the problem, what was tried, the links, the reason,
    # and the conversation itself.
    assert "webcam" in record["summary"].lower()
    assert steps[0].split("\n")[0][:40] in description
    assert "/kb/fix-webcam-not-working" in description
    assert "asked" in description.lower()
    assert "This still doesn't work. I need a human." in description
    assert record["status"]


LABEL_VOCABULARY = re.compile(
    r"^(deskpilot|dp-silent|dp-(idem|user|topic)-[0-9a-f]{20,32}|connectivity|account|courses|"
    r"documentation|peripheral_exchange|peripheral_question|other|queue-[a-z0-9.-]+|"
    r"incident-[a-z0-9.-]+)$"
)
"""Every label a ticket may carry: fixed vocabularies and digests, never a user's words."""


async def test_a_ticket_shows_user_markup_inert_and_names_no_conversation(stack: Stack) -> None:
    password = "Quartz-Falcon-4417"  # shaped like a label, and maybe missed by the redactor
    markup = (
        "h1. Approved by IT Security\n"
        "{panel:title=Approved}[click here|http://evil.example/reset]{panel} "
        "!http://evil.example/pixel.png! [~admin] {color:red}urgent{color}\n"
        "{noformat}\n----\n# step one\n| cell |\n"
    )
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        reply = await chat.say(
            f"I tried logging in again with my password {password} and it still fails\n{markup}"
        )
        if reply["action"] != "escalated":
            reply = await chat.say(f"{markup}I need to talk to a human")
        assert reply["action"] == "escalated", reply
        conversation_id = chat.conversation_id

    record = await ticket(stack, reply["ticket"]["key"])
    description = record["description"]
    links = tuple(re.findall(r"^\* source \d+: (\S+)$", description, re.MULTILINE))
    assert not [link for link in links if "evil" in link]
    # What a technician's Jira would render as markup: Deskpilot's own lines only; the user's
    # markup is there, verbatim.
    assert live_markup(description, headings=HEADINGS, links=links) == []
    assert "Approved by IT Security" in split_noformat(description)[1]
    assert all(live_markup(comment) == [] for comment in record["comments"])
    # Nothing in the ticket addresses the conversation; the admin API still knows it.
    texts = [record["summary"], description, *record["comments"], *record["labels"]]
    assert not [text for text in texts if conversation_id in text]
    assert record["conversation_id"] == conversation_id
    # Labels are visible to everyone in Jira: fixed vocabularies and digests only.
    assert all(LABEL_VOCABULARY.match(value) for value in record["labels"]), record["labels"]
    assert not [value for value in record["labels"] if "quartz" in value or "falcon" in value]


async def test_an_explicit_ticket_request_on_the_first_turn(stack: Stack) -> None:
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        reply = await chat.say(
            "Please open a ticket: the docking station in my office no longer detects either "
            "monitor"
        )
        assert reply["action"] == "escalated", reply
        record = await ticket(stack, reply["ticket"]["key"])
        assert "dock" in record["summary"].lower() or "monitor" in record["summary"].lower()
        assert record["summary"] != "Please open a ticket"

    # The chat's ticket button: a flag, whatever the text.
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        reply = await chat.say("", request_ticket=True)
        assert reply["action"] == "escalated", reply
        assert reply["ticket"]["key"]


async def test_an_angry_user_after_two_failed_steps_gets_a_technician(stack: Stack) -> None:
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        first = await chat.say("My headset is not recognised in Teams")
        assert first["action"] == "checklist", first
        second = await chat.say("done, still broken")
        assert second["action"] == "checklist"
        third = await chat.say("STILL NOT WORKING!!! this is useless, I've wasted an hour on it")
        assert third["action"] == "escalated", third
        record = await ticket(stack, third["ticket"]["key"])
        assert "anger" in record["description"].lower()


async def test_a_mild_complaint_does_not_escalate(stack: Stack) -> None:
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        first = await chat.say("My headset is not recognised in Teams")
        assert first["action"] == "checklist"
        second = await chat.say("done, still broken, a bit annoying")
        assert second["action"] == "checklist", second


def report_incident(stack: Stack, **incident: Any) -> None:
    response = httpx.post(
        f"{stack.url}/api/incidents",
        json=incident,
        headers={"Authorization": f"Bearer {INCIDENT_TOKEN}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text


async def test_a_vpn_question_during_a_vpn_incident(stack: Stack) -> None:
    incident_id = f"inc-vpn-{uuid4().hex[:6]}"
    report_incident(
        stack,
        id=incident_id,
        title="VPN gateway outage in the Berlin office",
        status="investigating",
        affected_services=["VPN"],
        started_at=datetime.now(UTC).isoformat(),
        latest_update="Engineers are restarting the VPN concentrator.",
        url="https://status.northwind.example/incidents/vpn",
    )

    async def told() -> dict[str, Any] | None:
        reply = ask(stack, "My VPN keeps disconnecting")  # a new conversation each time
        body: dict[str, Any] = reply.json()
        return body if body.get("incident") else None

    await wait_until(told, 20)  # the orchestrator has taken the incident in
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        reply = await chat.say("My VPN keeps disconnecting every few minutes")
        assert reply["incident"]["id"] == incident_id, reply
        assert "VPN gateway outage" in reply["answer"]
        assert "restarting the VPN concentrator" in reply["answer"]
        assert "troubleshooting" in reply["answer"]
        filed = await chat.say("yes please")
        assert filed["action"] == "escalated", filed
        record = await ticket(stack, filed["ticket"]["key"])
        assert f"incident-{incident_id}" in record["labels"]
        assert record["incident_id"] == incident_id


async def test_an_incident_reported_after_three_tickets_updates_all_three(stack: Stack) -> None:
    keys = []
    for user in ("ana", "ben", "chen"):
        response = ask(
            stack,
            "I need a person: Outlook keeps showing error 0x800CCC0E when sending mail",
            user_id=f"{user}-{uuid4().hex[:6]}",
        )
        body = response.json()
        assert body.get("action") == "escalated", body
        keys.append(body["ticket"]["key"])
    assert len(set(keys)) == 3

    incident_id = f"inc-mail-{uuid4().hex[:6]}"
    report_incident(
        stack,
        id=incident_id,
        title="Outgoing mail delayed",
        status="identified",
        affected_services=["Outlook", "Exchange Online"],
        error_signatures=["0x800CCC0E"],
        started_at=datetime.now(UTC).isoformat(),
    )
    for key in keys:
        record = await ticket(
            stack, key, lambda t: any(incident_id in comment for comment in t["comments"])
        )
        assert f"incident-{incident_id}" in record["labels"]


async def test_the_ticket_status_question(stack: Stack) -> None:
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        filed = await chat.say("Can you raise a ticket? My second monitor flickers constantly")
        assert filed["action"] == "escalated", filed
        key = filed["ticket"]["key"]
        status = await chat.say("What's the status of my ticket?")
        assert status["action"] == "answer", status
        assert key in status["answer"]
        assert status["ticket"]["key"] == key
        named = await chat.say(f"any update on {key}?")
        assert key in named["answer"]


async def test_a_signed_in_user_gets_a_password_reset_after_confirming(
    stack: Stack, webhook: FakeResetWebhook
) -> None:
    employee = f"e{uuid4().hex[:6]}"
    async with await converse(stack, user_token(employee)) as socket:
        chat = await open_conversation(socket)
        offer = await chat.say("I forgot my password, can you reset it for me?")
        assert offer["action"] == "automation", offer
        assert "Shall I reset it" in offer["answer"]
        assert not [r for r in webhook.resets if r.user_id == employee]
        done = await chat.say("yes")
        assert done["action"] == "automation", done
        assert "your registered mobile phone" in done["answer"]
    resets = [r for r in webhook.resets if r.user_id == employee]
    assert len(resets) == 1


async def test_an_anonymous_user_gets_the_self_service_steps(
    stack: Stack, webhook: FakeResetWebhook
) -> None:
    before = len(webhook.resets)
    async with await converse(stack) as socket:
        chat = await open_conversation(socket)
        reply = await chat.say("I forgot my password, can you reset it for me?")
        assert reply["action"] == "answer", reply
        assert any(c["url"].endswith("/kb/reset-your-account-password") for c in reply["citations"])
        follow = await chat.say("yes")
        assert follow["action"] != "automation"
    assert len(webhook.resets) == before
