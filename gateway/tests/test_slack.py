"""The Slack channel against a local Slack (tests/support/fake_slack.py) and a real valkey.

The gateway runs on a real server; the tests play Slack (signed requests in, the Web API out)
and the orchestrator (answers published on the gateway's reply stream)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from redis import Redis

from contracts.events import Action, Checklist, Citation, FeedbackReceived, MessageReceived
from contracts.topics import Topic, reply_stream
from gateway.channels.slack import blocks
from gateway.channels.slack.adapter import HELP_TEXT
from gateway.config import GatewaySettings
from gateway.tests.conftest import KB_URL, answer, one_question, questions, serve, stream_events
from tests.support import wait_until_sync
from tests.support.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack, Posted, button

CHANNEL = "C0ITHELP"
DM = "D0ALICEDM"
ALICE, BOB, NOMAIL = "U0ALICE", "U0BOB", "U0NOMAIL"
ALICE_EMAIL = "alice@northwind.example"
QUESTION = "How do I reset my VPN password? My email is alice.private@example.org"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user(ALICE, "Alice@Northwind.example", name="alice")
        fake.add_user(BOB, "bob@northwind.example", name="bob")
        fake.add_user(NOMAIL, None, name="guest")
        fake.add_channel(CHANNEL)
        fake.add_channel(DM)
        yield fake


@pytest.fixture
def settings_overrides(slack: FakeSlack) -> dict[str, Any]:
    return {
        "slack_signing_secret": SIGNING_SECRET,
        "slack_bot_token": BOT_TOKEN,
        "slack_api_url": slack.api_url,
        "slack_response_url_prefix": slack.hooks_prefix,
        "slack_max_body_bytes": 16 * 1024,
        "max_message_bytes": 2000,
    }


@pytest.fixture
def gateway(settings: GatewaySettings, slack: FakeSlack) -> Iterator[str]:
    with serve(settings) as url:
        slack.gateway_url = url
        yield url


def answered(slack: FakeSlack, channel: str, thread: str | None, count: int = 1) -> list[Posted]:
    """The app's messages in the thread once ``count`` of them carry answer blocks."""

    def done() -> list[Posted] | None:
        found = [m for m in slack.thread(channel, thread) if m.blocks]
        return found if len(found) >= count else None

    return wait_until_sync(done, message=lambda: f"no answer in {slack.thread(channel, thread)}")


def asked(slack: FakeSlack, raw: Redis) -> tuple[str, MessageReceived]:
    """Alice's question in the channel: its thread and its message on the bus."""
    envelope = slack.mention(ALICE, CHANNEL, QUESTION)
    slack.send_event(envelope)
    return envelope["event"]["ts"], one_question(raw)


# -- a question answered -------------------------------------------------------------------------


def test_a_mention_is_a_turn_of_the_askers_principal_answered_in_its_thread(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    envelope = slack.mention(ALICE, CHANNEL, QUESTION)
    response = slack.send_event(envelope)
    assert response.status_code == 200, response.text
    message = one_question(raw)
    assert message.user_id == ALICE_EMAIL  # the web chat's principal: the profile's email
    assert message.authenticated is True
    assert message.text == QUESTION  # the mention dropped, nothing else changed
    assert message.reply_to == reply_stream(settings.instance_id)
    # The raw text is sealed on the stream, like the web chat's.
    for _, fields in raw.xrange(Topic.MESSAGE_RECEIVED):
        assert b"alice.private" not in b"".join(fields.values())
    root = envelope["event"]["ts"]
    [placeholder] = slack.thread(CHANNEL, root)
    assert placeholder.text == blocks.WORKING_TEXT
    answer(settings, message)
    [posted] = answered(slack, CHANNEL, root)
    assert posted.ts == placeholder.ts  # the placeholder became the answer
    section = posted.blocks[0]["text"]["text"]
    assert section == f"Open *Settings* and choose Reset <{KB_URL}|[1]>."
    assert f"[1] <{KB_URL}|VPN password reset>" in str(posted.blocks)
    rating = button(posted, blocks.RATE, f"{message.correlation_id}:5")
    assert rating["value"] == f"{message.correlation_id}:5"


def test_the_same_thread_is_one_conversation_and_another_user_has_their_own(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    first = slack.mention(ALICE, CHANNEL, "VPN keeps dropping")
    slack.send_event(first)
    root = first["event"]["ts"]
    one = one_question(raw)
    slack.send_event(slack.mention(ALICE, CHANNEL, "still dropping", thread_ts=root))
    two = one_question(raw, 2)
    slack.send_event(slack.mention(BOB, CHANNEL, "me too", thread_ts=root))
    three = one_question(raw, 3)
    assert one.conversation_id == two.conversation_id
    assert three.conversation_id != one.conversation_id
    assert three.user_id == "bob@northwind.example"
    # A new top-level mention is a new thread, so a new conversation.
    slack.send_event(slack.mention(ALICE, CHANNEL, "another problem"))
    assert one_question(raw, 4).conversation_id != one.conversation_id


def test_a_direct_message_is_answered_in_the_dm_and_continues_its_conversation(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    slack.send_event(slack.direct_message(ALICE, DM, "printer jammed"))
    first = one_question(raw)
    answer(settings, first, answer="Open tray 2.", citations=[])
    [posted] = answered(slack, DM, None)
    assert posted.blocks[0]["text"]["text"] == "Open tray 2."
    slack.send_event(slack.direct_message(ALICE, DM, "it is still jammed"))
    assert one_question(raw, 2).conversation_id == first.conversation_id


def test_the_slash_command_answers_only_the_asker_through_its_response_url(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    response = slack.command(ALICE, CHANNEL, "how do I reset my VPN password?")
    assert response.status_code == 200
    assert response.json() == {"response_type": "ephemeral", "text": blocks.WORKING_TEXT}
    message = one_question(raw)
    assert message.text == "how do I reset my VPN password?"
    answer(settings, message)
    [hooked] = wait_until_sync(lambda: slack.responses)
    assert hooked["response_type"] == "ephemeral"
    assert hooked["hook"].startswith("commands-")
    assert KB_URL in str(hooked["blocks"])
    assert slack.thread(CHANNEL, None) == []  # nothing posted where others see it


def test_an_empty_slash_command_gets_the_help_and_makes_no_turn(
    gateway: str, slack: FakeSlack, raw: Redis
) -> None:
    response = slack.command(ALICE, CHANNEL, "   ")
    assert response.json() == {"response_type": "ephemeral", "text": HELP_TEXT}
    assert questions(raw) == []


def test_a_slash_command_whose_response_url_is_not_slacks_makes_no_turn(
    gateway: str, slack: FakeSlack, raw: Redis
) -> None:
    form = {"response_url": "http://169.254.169.254/latest/meta-data/"}
    response = slack.command(ALICE, CHANNEL, "hello", form=form)
    assert response.status_code == 200
    assert "cannot be answered" in response.json()["text"]
    assert questions(raw) == []


# -- verification, replays and retries ------------------------------------------------------------


def test_url_verification_echoes_the_challenge_only_when_signed(
    gateway: str, slack: FakeSlack
) -> None:
    body = {
        "token": "x",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        "type": "url_verification",
    }
    assert slack.send_event(body).json() == {"challenge": body["challenge"]}
    forged = slack.send_event(body, secret="not-the-signing-secret")
    assert forged.status_code == 401
    assert forged.json() == {
        "error_code": "unauthorized",
        "detail": "The request is not signed by Slack.",
    }


@pytest.mark.parametrize(
    "forgery",
    [
        {"secret": "not-the-signing-secret"},
        {"timestamp": 1_600_000_000},  # long expired
        {"headers": {"X-Slack-Signature": "v0=" + "0" * 64}},
        {"headers": {"X-Slack-Request-Timestamp": ""}},
    ],
)
def test_a_forged_or_expired_request_is_refused_and_nothing_reaches_the_bus(
    gateway: str, slack: FakeSlack, raw: Redis, forgery: dict[str, Any]
) -> None:
    for path in ("/slack/events", "/slack/commands", "/slack/interactivity"):
        envelope = slack.mention(ALICE, CHANNEL, QUESTION)
        if path == "/slack/events":
            response = slack.send_event(envelope, **forgery)
        elif path == "/slack/commands":
            response = slack.command(ALICE, CHANNEL, QUESTION, **forgery)
        else:
            fake = Posted(CHANNEL, "1700000000.000001", "x")
            response = slack.press(ALICE, fake, blocks.TICKET, "0" * 32, **forgery)
        assert response.status_code == 401, (path, response.text)
    assert questions(raw) == []
    assert slack.calls == []  # not even the asker was looked up


def replay(response: httpx.Response) -> httpx.Response:
    """The request behind ``response`` sent again byte for byte, headers and all, within the
    signature's window: what an attacker who captured it can do."""
    request = response.request
    return httpx.post(str(request.url), content=request.content, headers=dict(request.headers))


def test_a_replayed_event_makes_no_second_turn(gateway: str, slack: FakeSlack, raw: Redis) -> None:
    first = slack.send_event(slack.mention(ALICE, CHANNEL, QUESTION))
    assert first.status_code == 200
    assert replay(first).status_code == 200  # acknowledged, as Slack's retries must be
    wait_until_sync(lambda: questions(raw))
    assert len(questions(raw)) == 1
    assert slack.calls.count("chat.postMessage") == 1


def test_a_replayed_command_or_button_press_is_refused(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    first = slack.command(ALICE, CHANNEL, QUESTION)
    assert first.status_code == 200
    refused = replay(first)
    assert refused.status_code == 401
    assert refused.json()["error_code"] == "unauthorized"
    message = one_question(raw)
    answer(settings, message)
    wait_until_sync(lambda: slack.responses)
    posted = Posted(CHANNEL, "1700000000.000001", "x", blocks=slack.responses[0]["blocks"])
    pressed = slack.press(ALICE, posted, blocks.TICKET, button(posted, blocks.TICKET)["value"])
    assert pressed.status_code == 200
    assert replay(pressed).status_code == 401
    wait_until_sync(lambda: len(questions(raw)) == 2)
    assert len(questions(raw)) == 2


def test_slacks_retries_of_an_event_make_one_turn(
    gateway: str, slack: FakeSlack, raw: Redis
) -> None:
    envelope = slack.mention(ALICE, CHANNEL, QUESTION)
    assert slack.send_event(envelope).status_code == 200
    for attempt in (1, 2, 3):
        # Signed anew (Slack retries after 3 s, a minute, 5 minutes), the same event_id.
        later = int(time.time()) + attempt
        retried = slack.send_event(envelope, retry_num=attempt, timestamp=later)
        assert retried.status_code == 200
    wait_until_sync(lambda: questions(raw))
    assert len(questions(raw)) == 1
    assert len(slack.thread(CHANNEL, envelope["event"]["ts"])) == 1


def test_a_body_over_the_limit_is_refused_before_it_is_read(
    gateway: str, slack: FakeSlack, raw: Redis
) -> None:
    envelope = slack.mention(ALICE, CHANNEL, "x" * 20_000)
    response = slack.send_event(envelope)
    assert response.status_code == 413
    assert response.json()["error_code"] == "request_too_large"
    assert questions(raw) == []


def test_events_that_are_not_questions_are_acknowledged_and_left(
    gateway: str, slack: FakeSlack, raw: Redis
) -> None:
    edited = slack.mention(ALICE, CHANNEL, "edited")
    edited["event"]["subtype"] = "message_changed"
    from_a_bot = slack.mention(ALICE, CHANNEL, "a bot")
    from_a_bot["event"]["bot_id"] = "B0OTHER"
    channel_chatter = slack.direct_message(ALICE, CHANNEL, "chatter")
    channel_chatter["event"]["channel_type"] = "channel"
    other_team = slack.mention(ALICE, CHANNEL, "elsewhere")
    other_team["team_id"] = "bad team"
    odd_user = slack.mention(ALICE, CHANNEL, "odd")
    odd_user["event"]["user"] = {"id": ALICE}
    for envelope in (edited, from_a_bot, channel_chatter, other_team, odd_user):
        assert slack.send_event(envelope).status_code == 200
    not_json = slack.send("/slack/events", b"[1, 2]", "application/json")
    assert not_json.status_code == 400
    assert questions(raw) == []
    assert slack.messages == {}


def test_a_user_without_an_email_is_told_and_makes_no_turn(
    gateway: str, slack: FakeSlack, raw: Redis
) -> None:
    assert slack.send_event(slack.mention(NOMAIL, CHANNEL, QUESTION)).status_code == 200
    [notice] = wait_until_sync(lambda: slack.ephemerals)
    assert notice["user"] == NOMAIL
    assert "no email" in notice["text"]
    assert questions(raw) == []


def test_a_message_over_the_limit_replaces_the_placeholder_with_why(
    gateway: str, slack: FakeSlack, raw: Redis
) -> None:
    envelope = slack.mention(ALICE, CHANNEL, "y" * 3000)
    assert slack.send_event(envelope).status_code == 200
    [placeholder] = slack.thread(CHANNEL, envelope["event"]["ts"])
    assert "limit is 2000" in placeholder.text
    assert questions(raw) == []


# -- the answer's buttons -------------------------------------------------------------------------


def asked_and_answered(
    slack: FakeSlack, settings: GatewaySettings, raw: Redis, **fields: Any
) -> tuple[MessageReceived, Posted]:
    thread, message = asked(slack, raw)
    answer(settings, message, **fields)
    [posted] = answered(slack, CHANNEL, thread)
    return message, posted


def test_the_asker_rates_the_answer_and_nobody_else_can(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    message, posted = asked_and_answered(slack, settings, raw)
    value = button(posted, blocks.RATE, f"{message.correlation_id}:2")["value"]
    assert slack.press(BOB, posted, blocks.RATE, value).status_code == 200
    [refused] = wait_until_sync(lambda: slack.ephemerals)
    assert refused == {
        "channel": CHANNEL,
        "user": BOB,
        "text": "Only the person who asked can use these buttons.",
    }
    assert raw.xlen(Topic.FEEDBACK_RECEIVED) == 0
    assert slack.press(ALICE, posted, blocks.RATE, value).status_code == 200
    [rating] = wait_until_sync(
        lambda: (
            raw.exists(Topic.FEEDBACK_RECEIVED)
            and stream_events(raw, Topic.FEEDBACK_RECEIVED, FeedbackReceived)
        )
    )
    assert (rating.turn_id, rating.user_id, rating.score) == (
        message.correlation_id,
        ALICE_EMAIL,
        2,
    )
    assert rating.cited_urls == [KB_URL]


def test_checklist_buttons_continue_the_askers_conversation_in_the_thread(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    checklist = Checklist(steps=["Restart the VPN client.", "Sign in again."], current=0)
    message, posted = asked_and_answered(
        slack, settings, raw, action=Action.CHECKLIST, checklist=checklist
    )
    assert "Step 1 of 2" in str(posted.blocks)
    broken = button(posted, blocks.STILL_BROKEN)
    slack.press(BOB, posted, blocks.STILL_BROKEN, broken["value"])
    wait_until_sync(lambda: slack.ephemerals)
    assert len(questions(raw)) == 1  # someone else's press changes nothing
    slack.press(ALICE, posted, blocks.STILL_BROKEN, broken["value"])
    follow_up = one_question(raw, 2)
    assert follow_up.text == blocks.STILL_BROKEN_TEXT
    assert follow_up.conversation_id == message.conversation_id
    assert follow_up.user_id == ALICE_EMAIL
    answer(settings, follow_up, answer="Now sign in again.", citations=[])
    both = answered(slack, CHANNEL, posted.thread_ts, 2)
    assert both[-1].blocks[0]["text"]["text"] == "Now sign in again."


def test_talk_to_a_technician_sends_a_ticket_request_in_the_conversation(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    message, posted = asked_and_answered(slack, settings, raw)
    slack.press(ALICE, posted, blocks.TICKET, button(posted, blocks.TICKET)["value"])
    request = one_question(raw, 2)
    assert request.request_ticket is True
    assert request.conversation_id == message.conversation_id


def test_a_button_naming_a_turn_that_is_not_the_pressers_changes_nothing(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    _, posted = asked_and_answered(slack, settings, raw)
    for action_id, value in (
        (blocks.TICKET, "f" * 32),
        (blocks.RATE, "f" * 32 + ":5"),
        (blocks.RATE, "../../etc:5"),
        (blocks.FIXED, "x" * 5000),
        ("something_else", "1"),
    ):
        assert slack.press(ALICE, posted, action_id, value).status_code == 200
    assert len(questions(raw)) == 1
    assert raw.xlen(Topic.FEEDBACK_RECEIVED) == 0


# -- what Slack shows ----------------------------------------------------------------------------


def test_markup_in_an_answer_never_becomes_a_mention_or_a_foreign_link(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    citations = [
        Citation(n=1, url="javascript:alert(1)", title="<!channel> evil", snippet="s"),
        Citation(n=2, url="https://ok.example/a|<!here>", title="pipe", snippet="s"),
    ]
    _, posted = asked_and_answered(
        slack,
        settings,
        raw,
        answer="Ping <!channel> and <@U0BOB> & see [1] [2]",
        citations=citations,
    )
    shown = str(posted.blocks)
    assert "<!channel>" not in shown
    assert "<!here>" not in shown
    assert "<@U0BOB>" not in shown
    assert "&lt;!channel&gt;" in shown
    assert "<javascript:" not in shown
    assert "<https://ok.example" not in shown


def test_a_rate_limited_slack_is_waited_for_as_retry_after_says(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    thread, message = asked(slack, raw)
    slack.rate_limit("chat.update", 1)
    answer(settings, message)
    [posted] = answered(slack, CHANNEL, thread)
    assert slack.calls.count("chat.update") == 2  # refused once with 429, then delivered
    assert posted.updates == 1


def test_an_answer_is_delivered_once_even_when_its_reply_comes_twice(
    gateway: str, slack: FakeSlack, settings: GatewaySettings, raw: Redis
) -> None:
    thread, message = asked(slack, raw)
    answer(settings, message)
    answered(slack, CHANNEL, thread)
    answer(settings, message)  # redelivered, as at-least-once delivery may
    slack.send_event(slack.direct_message(ALICE, DM, "sync marker"))
    wait_until_sync(lambda: len(questions(raw)) == 2)
    assert slack.calls.count("chat.update") == 1
