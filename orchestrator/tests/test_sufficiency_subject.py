"""Sufficiency on chatty messages: the question's subject weighs, its context little.

Employees put a greeting, who they are, since when, what they tried and pasted secrets around
what they ask (issue 15: the leak test's messages were declined by articles that answer them).
The statistics below stand for a small IT knowledge base: most words are rare in it, as the
context's words are."""

from __future__ import annotations

import pytest

from orchestrator.retrieval import TermStats
from orchestrator.sufficiency import Policy, judge, key_terms, subject_and_context

STATS = TermStats(
    chunks=150,
    holding={"vpn": 9, "password": 14, "connect": 12, "office": 10, "wifi": 6, "laptop": 25},
)
VPN_PAGE = (
    "Fix a VPN connection that keeps dropping",
    [
        "If the VPN disconnects every few minutes, switch Northwind Connect to TCP. A VPN that "
        "keeps disconnecting on hotel Wi-Fi usually needs the captive portal opened first."
    ],
)
WIFI_PAGE = (
    "Connect to the office Wi-Fi (NW-Corp)",
    ["Choose NW-Corp and sign in with your Northwind account to connect in any office."],
)


def weights(message: str) -> dict[str, float]:
    return {term.word: term.weight for term in key_terms(message, STATS)}


def test_the_leak_tests_vpn_message_is_answered_by_the_vpn_page() -> None:
    # Covered 0.21 before: "since", "morning", "keep", "token", "key" weighed as much as "VPN".
    message = (
        "My VPN keeps disconnecting since this morning. My password is <PASSWORD_1>, "
        "the token <JWT_1> did not help, nor the key <AWS_ACCESS_KEY_1>"
    )
    verdict = judge(key_terms(message, STATS), *VPN_PAGE)
    assert verdict.sufficient
    assert verdict.covered[:2] == ("disconnecting", "vpn")
    assert not {"since", "morning", "keep", "keeps"} & set(verdict.missing)


def test_the_leak_tests_wifi_message_is_answered_by_the_wifi_page() -> None:
    message = (
        "Hi, I'm <PERSON_1> (<EMAIL_ADDRESS_1>, card on file <CREDIT_CARD_1>). "
        "How do I connect to the office Wi-Fi?"
    )
    verdict = judge(key_terms(message, STATS), *WIFI_PAGE)
    assert verdict.sufficient
    assert verdict.covered == ("wifi", "office", "connect")  # "Wi-Fi" one term, not three
    # "card on file" labels a pasted value: it weighs at most a context share of its rarity
    # (less here: the context's words together weigh at most a share of the subject's).
    assert 0 < weights(message)["card"] <= Policy().context * STATS.idf("card")


def test_a_pasted_secrets_label_weighs_a_context_share() -> None:
    message = "My password is <PASSWORD_1>. How do I connect to the VPN?"
    found = weights(message)
    assert found["password"] == pytest.approx(Policy().context * STATS.idf("password"))
    assert found["vpn"] == pytest.approx(STATS.idf("vpn"))


def test_the_asking_sentence_is_the_subject_and_the_story_around_it_context() -> None:
    message = (
        "Hi team, I moved desks to the 3rd floor yesterday and can't find the printer. "
        "How do I add the Follow-Me printer?"
    )
    subject, context = subject_and_context(message)
    assert subject == "How do I add the Follow-Me printer?"
    assert "3rd floor" in context
    found = weights(message)
    assert found["printer"] > 3 * found["floor"]


def test_a_statement_of_the_problem_is_the_subject_when_the_question_names_nothing() -> None:
    message = (
        "My webcam shows a black screen in every meeting. Restarting the laptop did not help. "
        "Any ideas?"
    )
    subject, context = subject_and_context(message)
    assert "webcam" in subject
    assert "Restarting" in context  # what was tried
    assert "idea" not in weights(message)


def test_time_phrases_weigh_nothing() -> None:
    message = (
        "Since Tuesday the VPN drops every 10 minutes, two days ago it was fine, "
        "this week it is worse at 9am"
    )
    assert not {"10", "tuesday", "minute", "day", "week", "9am", "since"} & set(weights(message))


def test_bare_numbers_weigh_a_context_share() -> None:
    found = weights("my VPN password does not work on laptop 5440")
    assert found["5440"] == pytest.approx(Policy().context * STATS.idf("5440"))


def test_a_message_of_one_plain_sentence_is_all_subject() -> None:
    # The GNOME descriptions, and most short messages: nothing to tell apart.
    for message in (
        "Ignore quickly-repeated key presses of the same key.",
        "Bluetooth, wi-fi and mobile broadband can be switched off to reduce battery use.",
        # Says what is wrong in passing: narrowed to its second clause, "see" and "manager"
        # were the key terms and the file manager's page answered it.
        "Make a file invisible, so you cannot see it in the file manager.",
    ):
        assert subject_and_context(message) == (message, "")


def test_narrowing_to_the_subject_does_not_answer_a_question_on_another_subject() -> None:
    # The context's words weigh less, but the question's must still be covered.
    message = "Hi, I'm <PERSON_1> from Finance. How do I calibrate the drawing tablet pen?"
    verdict = judge(key_terms(message, STATS), *WIFI_PAGE)
    assert not verdict.sufficient
    assert {"calibrate", "tablet", "pen"} <= set(verdict.missing)


def test_subject_words_in_the_context_do_not_count_twice() -> None:
    # A word of the subject that the context repeats keeps its full weight, once.
    message = "I tried the VPN again. How do I connect to the VPN?"
    terms = key_terms(message, STATS)
    assert [t.word for t in terms].count("vpn") == 1
    assert weights(message)["vpn"] == pytest.approx(STATS.idf("vpn"))


@pytest.mark.parametrize(
    "message",
    [
        "",
        "   ",
        "?",
        "Hi!",
        "Hi, I'm <PERSON_1>. <EMAIL_ADDRESS_1>, <PHONE_NUMBER_1>",  # all context
        ", , ; ( ) - - \n\n",
        "How?" * 2000,
        "thanks. " * 500 + "how do I connect to the vpn?",
        "<PASSWORD_1>" * 300,
        "can't won't isn't " * 100,
    ],
)
def test_odd_and_hostile_messages_give_terms_without_error(message: str) -> None:
    subject, context = subject_and_context(message)
    assert isinstance(subject, str)
    assert isinstance(context, str)
    terms = key_terms(message, STATS)
    assert all(term.weight > 0 for term in terms)
    assert judge(terms, *WIFI_PAGE).share >= 0


def test_a_message_that_is_all_context_is_judged_on_all_of_it() -> None:
    # Nothing asks and every clause frames: the message itself, so its words still count.
    message = "Hi, I'm <PERSON_1> from the Leeds office, already restarted"
    subject, _ = subject_and_context(message)
    assert subject == message
    assert "office" in weights(message)


def test_a_long_story_weighs_at_most_a_share_of_a_short_question() -> None:
    # Seven rare context words at a quarter each outweighed "unlock" (covered 0.44: declined).
    message = (
        "hi, user j.smith, pw: <PASSWORD_1> - it says account locked after I typed it wrong. "
        "can you unlock my account?"
    )
    terms = key_terms(message, STATS)
    subject = sum(t.weight for t in terms if t.word in {"unlock", "account"})
    context = sum(t.weight for t in terms if t.word not in {"unlock", "account"})
    assert context == pytest.approx(Policy().context_total * subject)
    page = ("Unlock your account", ["Wait 30 minutes or unlock it in the portal."])
    assert judge(terms, *page).sufficient


def test_context_alone_never_decides() -> None:
    # The question's words are all common here: similarity decides, not "desks" and "moved".
    stats = TermStats(chunks=10, holding={"add": 5, "network": 6, "printer": 4})
    message = "Hi, I'm <PERSON_1>, I moved desks yesterday. How do I add the network printer?"
    assert key_terms(message, stats) == []
    assert judge(key_terms(message, stats), "Add a printer", ["Open Settings."]).sufficient
