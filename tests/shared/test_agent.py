"""The agent's decisions through the public API, on the real stack: each action and conversation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.runner import Stack
from tests.support import REPO_ROOT
from tests.support.stack import ask, new_user

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]


class Chat:
    """One conversation of one anonymous user, turn after turn: the gateway names it at the
    first answer, and every later turn goes on with that id."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.user = new_user(stack)
        self.conversation_id: str | None = None

    def say(self, text: str) -> dict[str, Any]:
        going_on = {"conversation_id": self.conversation_id} if self.conversation_id else {}
        response = ask(self.stack, text, user=self.user, **going_on)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if self.conversation_id is None:
            self.conversation_id = body["conversation_id"]
        assert body["conversation_id"] == self.conversation_id
        return body


def test_a_follow_up_is_searched_with_the_active_topic(stack: Stack) -> None:
    chat = Chat(stack)
    first = chat.say("How do I find my MAC address?")
    assert first["action"] == "clarify"
    assert any("operating system" in q for q in first["questions"])
    second = chat.say("im on linux")
    assert second["action"] == "answer"
    assert second["citations"][0]["url"].endswith("/kb/find-ip-and-mac-address")
    assert "On Linux" in second["answer"]
    # Asked once; a later question in the same conversation uses what it knows.
    third = chat.say("And how do I find my IP address?")
    assert third["action"] == "answer"
    assert "On Linux" in third["answer"]


def test_vague_messages_get_questions_then_a_ticket_offer_at_the_cap(stack: Stack) -> None:
    chat = Chat(stack)
    first = chat.say("it's not working")
    assert first["action"] == "clarify"
    assert 1 <= len(first["questions"]) <= 3
    second = chat.say("it just doesn't work, please help")
    assert second["action"] == "clarify"
    third = chat.say("it's broken!!")
    assert third["action"] == "no_answer"
    assert "ticket" in third["answer"]


def test_a_troubleshooting_request_becomes_a_checklist_that_progresses(stack: Stack) -> None:
    chat = Chat(stack)
    first = chat.say("My webcam is not working in Teams meetings")
    assert first["action"] == "checklist", first
    steps = first["checklist"]["steps"]
    assert 3 <= len(steps) <= 7
    assert first["checklist"]["current"] == 0
    assert first["citations"][0]["url"].endswith("/kb/fix-webcam-not-working")
    second = chat.say("done, still broken")
    assert second["action"] == "checklist"
    assert second["checklist"]["current"] == 1
    assert steps[1].split("\n")[0] in second["answer"]
    third = chat.say("that fixed it")
    assert third["action"] == "answer"
    assert "glad" in third["answer"]


def test_when_every_step_fails_a_ticket_is_offered(stack: Stack) -> None:
    chat = Chat(stack)
    first = chat.say("My headset isn't recognised in Teams")
    assert first["action"] == "checklist", first
    body = first
    for _ in range(len(first["checklist"]["steps"])):
        body = chat.say("done, still broken")
    assert body["action"] == "no_answer"
    assert "create a ticket" in body["answer"]


@pytest.mark.parametrize(
    "question",
    [
        "What's the weather going to be like in Paris tomorrow?",
        "Can you give me a good recipe for pancakes?",
        "Who won the football world cup in 2014?",
    ],
)
def test_questions_outside_it_support_are_declined_politely(stack: Stack, question: str) -> None:
    body = Chat(stack).say(question)
    assert body["action"] == "refuse"
    assert body["citations"] == []
    assert "VPN" in body["answer"]  # says what it can help with


def test_a_greeting_is_answered_with_an_offer_to_help(stack: Stack) -> None:
    body = Chat(stack).say("Hello!")
    assert body["action"] == "clarify"
    assert body["questions"]


def test_an_informational_question_is_answered_with_cited_steps(stack: Stack) -> None:
    body = Chat(stack).say("How do I request a second monitor?")
    assert body["action"] == "answer"
    assert body["citations"][0]["url"].endswith("/kb/request-second-monitor")
    numbered = [line for line in body["answer"].splitlines() if line[:2] in {"1.", "2.", "3."}]
    assert numbered
    assert all(line.endswith("[1]") for line in numbered)


DEMO_QUESTIONS = {
    "How do I reset my VPN password?": "/kb/vpn-password-reset",
    "How do I connect to the office Wi-Fi?": "/kb/office-wifi-nw-corp",
    "How do I unlock my account?": "/kb/unlock-locked-account",
    "How do I enrol in an IT training course?": "/kb/enrol-in-it-training-course",
    "How do I find the IT policy documents?": "/kb/find-it-policy-documents",
    "How do I change my display name?": "/kb/change-display-or-legal-name",
    "my certificate for the course is missing": "/kb/missing-course-certificate",
}


@pytest.mark.parametrize("question", list(DEMO_QUESTIONS))
def test_the_demo_questions_are_answered_at_once_from_one_article(
    stack: Stack, question: str
) -> None:
    """The knowledge base's own questions are answered at once, and the article the answer names
    is the one it quotes and cites first."""
    body = Chat(stack).say(question)
    assert body["action"] in {"answer", "checklist"}, body
    first = body["citations"][0]
    assert first["url"].endswith(DEMO_QUESTIONS[question])
    assert f"“{first['title']}”" in body["answer"].split("\n", 1)[0]
    assert not body["crawled"]


def test_similar_resolved_cases_follow_the_knowledge_base_answer(
    stack: Stack, tmp_path: Path
) -> None:
    cases = tmp_path / "resolved.csv"
    cases.write_text(
        "id,summary,symptoms,resolution,category\n"
        "IT-9001,Monitor request for a standard desk,User asked for a second screen at their "
        "desk,Approved by the manager and delivered with a DisplayPort cable,peripheral_exchange\n"
        "IT-9002,Printer queue stuck on the 3rd floor,Jobs never print,Cleared the queue on "
        "the print server,peripheral_question\n"
    )
    imported = subprocess.run(
        [sys.executable, "-m", "deploy.cli", "cases", "import", str(cases)]
        + ["--data-dir", str(stack.data_dir), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    assert json.loads(imported.stdout.strip().splitlines()[-1])["written"] == 2
    body = Chat(stack).say("How do I request a second monitor for my desk?")
    assert body["action"] == "answer"
    assert body["citations"][0]["url"].endswith("/kb/request-second-monitor")
    assert [case["ticket_id"] for case in body["similar_cases"]] == ["IT-9001"]
    assert "DisplayPort" in body["similar_cases"][0]["resolution"]
