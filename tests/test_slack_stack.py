"""Slack end to end: the whole stack as an operator starts it, with the Slack channel on and a
local Slack (tests/support/fake_slack.py) in place of slack.com."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import httpx
import pytest
import redis

from deploy.runner import Stack
from gateway.channels.slack import blocks
from tests.support import wait_until_sync
from tests.support.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack, Posted, button
from tests.support.stack import log_records, running_stack

pytestmark = pytest.mark.slow

ADMIN_TOKEN = f"admin-{uuid4().hex}"
CHANNEL = "C0ITHELP"
ALICE, ALICE_EMAIL = "U0ALICE", "alice@northwind.example"
TICKET_KEY = re.compile(r"Ticket (?:<[^|>]+\|)?([A-Z]+-\d+)")
"""The ticket line of an answer (a link where the ticket has an http URL; the local store's
``deskpilot://`` ones are not linked)."""


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user(ALICE, ALICE_EMAIL, name="alice")
        fake.add_channel(CHANNEL)
        yield fake


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack) -> Iterator[Stack]:
    env = {
        "DESKPILOT_ADMIN_TOKEN": ADMIN_TOKEN,
        "GATEWAY_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "GATEWAY_SLACK_BOT_TOKEN": BOT_TOKEN,
        "GATEWAY_SLACK_API_URL": slack.api_url,
        "GATEWAY_SLACK_RESPONSE_URL_PREFIX": slack.hooks_prefix,
    }
    with running_stack(tmp_path_factory.mktemp("slack"), extra_env=env) as running:
        slack.gateway_url = running.url
        yield running


def ask_in_thread(slack: FakeSlack, text: str, thread: str | None = None) -> str:
    """Alice mentions Deskpilot with ``text`` (in ``thread``); returns the thread."""
    envelope = slack.mention(ALICE, CHANNEL, text, thread_ts=thread)
    response = slack.send_event(envelope)
    assert response.status_code == 200, response.text
    return thread or str(envelope["event"]["ts"])


def answers(slack: FakeSlack, thread: str, count: int) -> list[Posted]:
    """The thread's answers once there are ``count`` (an answer is a message with blocks)."""

    def found() -> list[Posted] | None:
        done = [m for m in slack.thread(CHANNEL, thread) if m.blocks]
        return done if len(done) >= count else None

    return wait_until_sync(found, 120, message=lambda: str(slack.thread(CHANNEL, thread)))


def action_of(message: Posted) -> str:
    """What the answer did, as its buttons show it."""
    shown = str(message.blocks)
    if blocks.STILL_BROKEN in shown:
        return "checklist"
    if TICKET_KEY.search(shown):
        return "escalated"
    return "answer"


def test_a_question_in_slack_is_answered_in_its_thread_with_citations(
    stack: Stack, slack: FakeSlack
) -> None:
    question = "How do I reset my VPN password? my colleague zebulon.quist@example.org asked too"
    thread = ask_in_thread(slack, question)
    [answer] = answers(slack, thread, 1)
    shown = str(answer.blocks)
    assert "|[1]>" in shown, shown  # a numbered citation link
    assert "zebulon.quist" not in shown
    # Nothing of the raw question in the gateway's logs.
    assert "zebulon" not in str(log_records(stack, "gateway"))


def test_an_angry_slack_thread_is_escalated_to_a_technician(stack: Stack, slack: FakeSlack) -> None:
    thread = ask_in_thread(slack, "My headset is not recognised in Teams")
    [first] = answers(slack, thread, 1)
    assert action_of(first) == "checklist", first.blocks
    still_broken = button(first, blocks.STILL_BROKEN)
    assert slack.press(ALICE, first, blocks.STILL_BROKEN, still_broken["value"]).status_code == 200
    second = answers(slack, thread, 2)[-1]
    assert action_of(second) == "checklist", second.blocks
    ask_in_thread(slack, "STILL NOT WORKING!!! this is useless, I've wasted an hour on it", thread)
    third = answers(slack, thread, 3)[-1]
    assert action_of(third) == "escalated", third.blocks
    found = TICKET_KEY.search(str(third.blocks))
    assert found is not None
    key = found.group(1)
    assert blocks.TICKET not in str(third.blocks)  # no second "talk to a technician"

    def ticket() -> dict[str, Any] | None:
        response = httpx.get(
            f"{stack.url}/api/admin/tickets/{key}",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=10,
        )
        return response.json() if response.status_code == 200 else None

    record = wait_until_sync(ticket, 30)
    assert record["user_id"] == ALICE_EMAIL  # the Slack user's principal, as the web chat's
    assert "anger" in record["description"].lower()


def test_a_forged_request_is_refused_and_nothing_of_it_reaches_the_bus(
    stack: Stack, slack: FakeSlack
) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    added = int(client.xinfo_stream("message.received")["entries-added"])
    forged = slack.send_event(
        slack.mention(ALICE, CHANNEL, "forged"), secret="guessed-signing-secret"
    )
    assert forged.status_code == 401
    expired = slack.send_event(slack.mention(ALICE, CHANNEL, "old"), timestamp=1_600_000_000)
    assert expired.status_code == 401
    # A real request after them: once it is answered, the forged ones had their chance.
    thread = ask_in_thread(slack, "How do I reset my VPN password?")
    answers(slack, thread, 1)
    assert int(client.xinfo_stream("message.received")["entries-added"]) == added + 1
    client.close()
