"""Reading a message in its conversation: facts, follow-ups, vagueness, checklist reports."""

from __future__ import annotations

import pytest

from orchestrator.dialogue import (
    checklist_feedback,
    detect_facts,
    detect_os,
    is_follow_up,
    is_greeting,
    is_technical,
    is_vague,
    readable,
    search_text,
)
from orchestrator.memory import Conversation

TOPIC = Conversation(conversation_id="c", topic="how do I find my mac address")
FRESH = Conversation(conversation_id="c")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("im on linux", "linux"),
        ("Ubuntu 24.04 here", "linux"),
        ("on my MacBook", "macos"),
        ("Windows 11 laptop", "windows"),
        ("works on windows but not on linux", None),  # two named: unknown which is the user's
        ("my vpn is down", None),
        ("How do I find my MAC address?", None),  # a network address, not a Mac
    ],
)
def test_detect_os(text: str, expected: str | None) -> None:
    assert detect_os(text) == expected


def test_error_codes_are_facts() -> None:
    assert detect_facts("Outlook says error 0x80070005")["error"] == "0x80070005"
    assert "error" not in detect_facts("Outlook is slow")


@pytest.mark.parametrize("text", ["im on linux", "and on windows?", "what about macOS", "Ubuntu"])
def test_follow_ups_are_searched_with_the_topic(text: str) -> None:
    assert is_follow_up(text, TOPIC)
    assert search_text(text, TOPIC) == f"how do I find my mac address {text}"


@pytest.mark.parametrize(
    "text", ["How do I connect to the office Wi-Fi?", "My headset is not recognised in Teams"]
)
def test_new_questions_are_not_follow_ups(text: str) -> None:
    assert not is_follow_up(text, TOPIC)
    assert search_text(text, TOPIC) == text


def test_without_a_topic_nothing_is_a_follow_up() -> None:
    assert not is_follow_up("im on linux", FRESH)


@pytest.mark.parametrize(
    "text",
    [
        "it's not working",
        "help!",
        "it stopped working again",
        "problem",
        # what the redactor removed says nothing about the problem
        "it's not working, I'm <PERSON_1> (<PHONE_NUMBER_1>)",
    ],
)
def test_vague_messages(text: str) -> None:
    assert is_vague(text)


@pytest.mark.parametrize(
    "text", ["my vpn is not working", "printer broken", "error 0x80070005", "Teams crashes"]
)
def test_specific_messages_are_not_vague(text: str) -> None:
    assert not is_vague(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("done, still broken", "failed"),
        ("that didn't work", "failed"),
        ("still not working", "failed"),
        ("That fixed it!", "fixed"),
        ("it works now, thanks", "fixed"),
        ("not fixed", "failed"),
        ("How do I add a printer?", None),
    ],
)
def test_checklist_feedback(text: str, expected: str | None) -> None:
    assert checklist_feedback(text) == expected


def test_greetings_and_technical_users() -> None:
    assert is_greeting("Hi there!")
    assert is_greeting("thanks")
    assert not is_greeting("hi, my vpn is down")
    assert is_technical("nslookup times out and the DNS server is 10.0.0.2")
    assert not is_technical("the internet doesn't work")


def test_placeholders_read_as_plain_words() -> None:
    assert readable("What is the capital of <LOCATION_1>?") == "What is the capital of a place?"
    assert readable("mail <EMAIL_ADDRESS_2> and <CUSTOM_ID_1>") == (
        "mail an email address and something"
    )
    assert readable("no placeholders here") == "no placeholders here"
    # Every kind the redactor finds reads as words, secrets of any service as "a secret".
    assert readable("my pin is <PIN_1>, born <DATE_OF_BIRTH_1>, passport <PASSPORT_1>") == (
        "my pin is a PIN, born a date of birth, passport a passport number"
    )
    assert readable("I clicked <PHISHING_LINK_1>") == "I clicked a suspicious link"
    assert readable("GITHUB_TOKEN=<GITHUB_TOKEN_1> and <AWS_SECRET_KEY_2>") == (
        "GITHUB_TOKEN=a secret and a secret"
    )
