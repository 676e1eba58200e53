"""Answers as Slack messages, and Slack's markup as plain questions (no services)."""

from __future__ import annotations

from typing import Any

import pytest

from contracts.events import Action, Checklist, Citation, IncidentRef, TicketRef
from gateway.channels.slack import blocks
from gateway.channels.slack.adapter import plain_text
from gateway.models import ChatRead
from tests.support.fake_slack import BOT_USER, check_blocks

TURN = "0123456789abcdef0123456789abcdef"


def chat(**fields: Any) -> ChatRead:
    values: dict[str, Any] = {
        "answer": "See [1].",
        "action": Action.ANSWER,
        "conversation_id": "c" * 32,
        "turn_id": TURN,
        "trace_id": None,
    }
    return ChatRead(**(values | fields))


def test_a_long_answer_with_many_citations_keeps_within_block_kits_limits() -> None:
    citations = [
        Citation(n=n, url=f"https://kb.example/{n}", title="T" * 500, snippet="s")
        for n in range(1, 40)
    ]
    text = " ".join(f"word{n} [{n % 39 + 1}]" for n in range(4000))
    answer = chat(
        answer=text,
        citations=citations,
        questions=["Which device?"] * 5,
        redaction_notice="I removed a password from your message.",
    )
    shown = blocks.answer_blocks(answer)
    check_blocks(shown)  # raises where Slack would answer invalid_blocks
    assert shown[-1]["block_id"] == "rating"
    assert [b["value"] for b in shown[-1]["elements"]] == [f"{TURN}:{n}" for n in range(1, 6)]
    assert len(blocks.fallback_text(answer)) <= blocks.FALLBACK_LIMIT


def test_an_answer_longer_than_a_section_is_shown_whole_in_several() -> None:
    citations = [Citation(n=1, url="https://kb.example/1", title="One", snippet="s")]
    text = "\n".join(f"Line {n} says what to do next [1]." for n in range(400))
    shown = blocks.answer_blocks(chat(answer=text, citations=citations))
    check_blocks(shown)
    sections = [b["text"]["text"] for b in shown if b["type"] == "section"]
    assert len(sections) > 1
    joined = "\n".join(sections)
    assert all(f"Line {n} says" in joined for n in range(400))
    assert "<https://kb.example/1|[1]>" in sections[-1]


def test_a_checklist_shows_its_current_step_and_both_buttons() -> None:
    checklist = Checklist(steps=["One.", "Two <b>.", "Three."], current=1)
    shown = blocks.answer_blocks(chat(action=Action.CHECKLIST, checklist=checklist))
    check_blocks(shown)
    assert "*Step 2 of 3:* Two &lt;b&gt;." in str(shown)
    [actions] = [b for b in shown if b.get("block_id") == "checklist"]
    assert [e["action_id"] for e in actions["elements"]] == [blocks.FIXED, blocks.STILL_BROKEN]
    assert {e["value"] for e in actions["elements"]} == {TURN}


def test_a_ticket_is_a_link_and_no_technician_button_is_offered_again() -> None:
    ticket = TicketRef(key="IT-1042", url="https://jira.example/browse/IT-1042", status="Open")
    shown = blocks.answer_blocks(chat(action=Action.ESCALATED, ticket=ticket))
    check_blocks(shown)
    assert "Ticket <https://jira.example/browse/IT-1042|IT-1042> (Open)" in str(shown)
    assert blocks.TICKET not in str(shown)


def test_an_incident_is_shown_escaped() -> None:
    incident = IncidentRef(id="i1", title="VPN <!channel> outage", status="investigating")
    shown = blocks.answer_blocks(chat(incident=incident))
    assert "VPN &lt;!channel&gt; outage" in str(shown)


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("https://kb.example/a", True),
        ("http://kb.example/a?b=c&d=e", True),
        ("javascript:alert(1)", False),
        ("https://kb.example/a|<!channel>", False),
        ("https://kb.example/a b", False),
        ("ftp://kb.example/a", False),
    ],
)
def test_only_plain_http_urls_become_links(url: str, linked: bool) -> None:
    assert (blocks.safe_url(url) is not None) is linked


@pytest.mark.parametrize(
    ("markup", "plain"),
    [
        (f"<@{BOT_USER}> how do I reset my VPN?", "how do I reset my VPN?"),
        ("mail <mailto:a@b.example|a@b.example> please", "mail a@b.example please"),
        ("see <https://x.example/p|the page>", "see https://x.example/p"),
        ("in <#C0ITHELP|it-help> ask <@U0BOB>", "in #it-help ask @U0BOB"),
        ("<!here> 1 &lt; 2 &amp;&amp; 3 &gt; 2", "@here 1 < 2 && 3 > 2"),
        ("&amp;lt;", "&lt;"),
    ],
)
def test_slack_markup_becomes_what_the_user_typed(markup: str, plain: str) -> None:
    assert plain_text(markup, BOT_USER) == plain
