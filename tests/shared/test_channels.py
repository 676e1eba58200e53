"""Slack, Teams and MCP end to end on the shared stack, which has every channel on: a local Slack
(tests/support/fake_slack.py) in place of slack.com and a local Bot Framework
(tests/support/fake_teams.py) in place of Microsoft's, both started by tests/shared/conftest.py
before the stack."""

from __future__ import annotations

import re
from typing import Any
from uuid import uuid4

import httpx
import httpx2
import pytest
import redis
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from deploy.runner import Stack
from gateway.channels.slack import blocks
from tests.support import wait_until_sync
from tests.support.channels import slack_answers, teams_cards
from tests.support.fake_slack import FakeSlack, Posted, button
from tests.support.fake_teams import FakeTeams, card_actions
from tests.support.stack import (
    SHARED_ADMIN_TOKEN,
    SHARED_MCP_TOKEN,
    SHARED_SLACK_CHANNEL,
    SHARED_SLACK_USER,
    log_records,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]

CHANNEL = SHARED_SLACK_CHANNEL
ALICE, ALICE_EMAIL = SHARED_SLACK_USER
MCP_TOKEN = SHARED_MCP_TOKEN
TICKET_KEY = re.compile(r"Ticket (?:<[^|>]+\|)?([A-Z]+-\d+)")
"""The ticket line of an answer (a link where the ticket has an http URL; the local store's
``deskpilot://`` ones are not linked)."""


def ask_in_thread(slack: FakeSlack, text: str, thread: str | None = None) -> str:
    """Alice mentions Deskpilot with ``text`` (in ``thread``); returns the thread."""
    envelope = slack.mention(ALICE, CHANNEL, text, thread_ts=thread)
    response = slack.send_event(envelope)
    assert response.status_code == 200, response.text
    return thread or str(envelope["event"]["ts"])


def answers(slack: FakeSlack, thread: str, count: int) -> list[Posted]:
    """The thread's answers once there are ``count`` (an answer is a message with blocks)."""
    return slack_answers(slack, CHANNEL, thread, count)


def action_of(message: Posted) -> str:
    """What the answer did, as its buttons show it."""
    shown = str(message.blocks)
    if blocks.STILL_BROKEN in shown:
        return "checklist"
    if TICKET_KEY.search(shown):
        return "escalated"
    return "answer"


def ticket(stack: Stack, key: str) -> dict[str, Any]:
    """The ticket as a technician sees it (the admin API), once the ticketing service said so."""

    def read() -> dict[str, Any] | None:
        response = httpx.get(
            f"{stack.url}/api/admin/tickets/{key}",
            headers={"Authorization": f"Bearer {SHARED_ADMIN_TOKEN}"},
            timeout=10,
        )
        return response.json() if response.status_code == 200 else None

    found: dict[str, Any] = wait_until_sync(read, 30)
    return found


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

    record = ticket(stack, key)
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


# -- Teams ---------------------------------------------------------------------------------------

BRUNO = "3c9e2f1a-7b6d-4c5e-9f8a-2b1c0d9e8f7a"
"""A Teams user's Entra object id."""


def test_a_question_in_teams_is_answered_with_a_card_of_citations(
    stack: Stack, teams: FakeTeams
) -> None:
    chat = teams.add_conversation("a:1bruno-personal-" + uuid4().hex[:8])
    activity = teams.message(BRUNO, chat, "How do I reset my VPN password?")
    assert teams.send(activity).status_code == 200
    [card] = teams_cards(teams, chat, 1)
    assert card.reply_to == activity["id"]
    content = str(card.activity["attachments"][0]["content"])
    assert re.search(r"1\. \[[^\]]+\]\(https?://", content), content  # numbered citation link
    assert teams.typing(chat) >= 1


def test_a_ticket_is_filed_from_a_teams_conversation(stack: Stack, teams: FakeTeams) -> None:
    chat = teams.add_conversation("a:1bruno-ticket-" + uuid4().hex[:8])
    teams.send(teams.message(BRUNO, chat, "My laptop docking station does not charge the laptop"))
    [first] = teams_cards(teams, chat, 1)
    [technician] = [a for a in card_actions(first) if a["data"]["deskpilot"] == "ticket"]
    assert teams.send(teams.submit(BRUNO, first, technician["data"])).status_code == 200
    second = teams_cards(teams, chat, 2)[-1]
    content = second.activity["attachments"][0]["content"]
    [box] = [b for b in content["body"] if b.get("type") == "Container"]
    assert box["items"][0]["text"] == "**Ticket for a technician**"
    line = box["items"][1]["text"].replace("\\", "")  # "DP-1 · Open" or "[DP-1](url) · Open"
    found = re.search(r"[A-Z]+-\d+", line)
    assert found is not None, line
    key = found.group(0)
    record = ticket(stack, key)
    assert record["user_id"] == BRUNO  # the Teams user's object id, as the web chat's subject


# -- MCP -----------------------------------------------------------------------------------------


async def test_the_mcp_sdks_client_lists_the_tools_and_gets_a_cited_answer(stack: Stack) -> None:
    headers = {"Authorization": f"Bearer {MCP_TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(stack.url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"ask", "search_knowledge_base", "open_ticket", "get_ticket"} <= tools
        result = await client.call_tool("ask", {"question": "How do I reset my VPN password?"})
    assert not result.is_error, result.content
    answer = result.structured_content
    assert answer is not None
    assert answer["citations"], answer
    assert answer["citations"][0]["url"].startswith("http")
    assert "[1]" in answer["answer"]
