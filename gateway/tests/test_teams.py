"""The Teams channel against a local Bot Framework (tests/support/fake_teams.py) and a real
valkey: the gateway on a real server, the tests as Teams and as the orchestrator."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from redis import Redis

from contracts.events import Action, Checklist, Citation, FeedbackReceived, MessageReceived
from contracts.topics import Topic
from gateway.channels.teams.adapter import NOT_YOURS_TEXT, plain_text
from gateway.channels.words import STILL_BROKEN_TEXT
from gateway.config import GatewaySettings
from gateway.tests.conftest import KB_URL, answer, one_question, questions, serve, stream_events
from tests.support import wait_until_sync
from tests.support.fake_idp import new_key
from tests.support.fake_teams import APP_PASSWORD, FakeTeams, Sent, card_actions

ALICE = "0f5a8c3e-1b2d-4e6f-8a9b-0c1d2e3f4a5b"
BOB = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
CHAT = "a:1personal-chat-with-alice"
CHANNEL_THREAD = "19:general@thread.tacv2;messageid=1700000000001"


@pytest.fixture
def teams() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


@pytest.fixture
def settings_overrides(teams: FakeTeams) -> dict[str, Any]:
    return {
        "teams_app_id": teams.app_id,
        "teams_app_password": APP_PASSWORD,
        "teams_openid_url": teams.openid_url,
        "teams_token_url": teams.token_url,
        "teams_service_url_prefixes": teams.service_url,
    }


@pytest.fixture
def gateway(settings: GatewaySettings, teams: FakeTeams) -> Iterator[str]:
    with serve(settings) as url:
        teams.gateway_url = url
        yield url


def cards(teams: FakeTeams, conversation: str, count: int = 1) -> list[Sent]:
    def found() -> list[Sent] | None:
        done = [s for s in teams.messages(conversation) if s.activity.get("attachments")]
        return done if len(done) >= count else None

    return wait_until_sync(found, message=lambda: str(teams.sent))


def card_text(sent: Sent) -> str:
    return str(sent.activity["attachments"][0]["content"])


def action(sent: Sent, name: str, **data: Any) -> dict[str, Any]:
    for found in card_actions(sent):
        if found["data"]["deskpilot"] == name and all(
            found["data"].get(k) == v for k, v in data.items()
        ):
            return dict(found["data"])
    raise AssertionError(f"no {name} button")


def asked_and_answered(
    teams: FakeTeams, settings: GatewaySettings, raw: Redis, **fields: Any
) -> tuple[MessageReceived, Sent]:
    activity = teams.message(ALICE, CHAT, "How do I reset my VPN password?")
    assert teams.send(activity).status_code == 200
    message = one_question(raw)
    answer(settings, message, **fields)
    [card] = cards(teams, CHAT)
    return message, card


def test_a_personal_message_is_a_turn_of_the_object_id_answered_with_a_card(
    gateway: str, teams: FakeTeams, settings: GatewaySettings, raw: Redis
) -> None:
    activity = teams.message(ALICE.upper(), CHAT, "How do I reset my VPN password?")
    assert teams.send(activity).status_code == 200
    message = one_question(raw)
    assert message.user_id == ALICE  # the Entra object id, as the web chat's subject
    assert message.authenticated is True
    assert message.text == "How do I reset my VPN password?"
    wait_until_sync(lambda: teams.typing(CHAT) >= 1)  # typing while the turn runs
    answer(settings, message)
    [card] = cards(teams, CHAT)
    assert card.reply_to == activity["id"]
    content = card.activity["attachments"][0]
    assert content["contentType"] == "application/vnd.microsoft.card.adaptive"
    text = str(content["content"])
    assert f"[\\\\[1\\\\]]({KB_URL})" in text  # the marker, a numbered link to citation 1
    assert f"1. [VPN password reset]({KB_URL})" in text
    assert action(card, "rate", score=5)["turn_id"] == message.correlation_id
    assert action(card, "ticket")["turn_id"] == message.correlation_id
    assert teams.token_requests == 1  # one app token for the typing indicator and the answer


def test_a_channel_mention_drops_the_mention_and_a_thread_is_a_conversation(
    gateway: str, teams: FakeTeams, raw: Redis
) -> None:
    mention = "<at>Deskpilot</at> my printer &amp; scanner are offline"
    teams.send(teams.message(ALICE, CHANNEL_THREAD, mention, conversation_type="channel"))
    first = one_question(raw)
    assert first.text == "my printer & scanner are offline"
    teams.send(teams.message(ALICE, CHANNEL_THREAD, "<at>Deskpilot</at> still offline"))
    assert one_question(raw, 2).conversation_id == first.conversation_id
    teams.send(teams.message(BOB, CHANNEL_THREAD, "<at>Deskpilot</at> mine too"))
    bob = one_question(raw, 3)
    assert (bob.user_id, bob.conversation_id != first.conversation_id) == (BOB, True)


@pytest.mark.parametrize(
    "forgery",
    [
        {"key": new_key("RSA")},  # signed by someone else's key
        {"aud": "another-bot"},
        {"iss": "https://sts.windows.net/attacker/"},
        {"exp": int(time.time()) - 3600, "nbf": int(time.time()) - 7200},
        {"serviceurl": "https://attacker.example/"},
        {"serviceurl": None},
    ],
)
def test_a_forged_or_expired_token_is_refused_and_nothing_reaches_the_bus(
    gateway: str, teams: FakeTeams, raw: Redis, forgery: dict[str, Any]
) -> None:
    response = teams.send(teams.message(ALICE, CHAT, "forged"), **forgery)
    assert response.status_code == 401, response.text
    assert response.json() == {
        "error_code": "unauthorized",
        "detail": "The request is not from the Bot Framework.",
    }
    assert questions(raw) == []
    assert teams.calls == []


def test_tokens_that_are_not_the_bot_frameworks_are_refused(
    gateway: str, teams: FakeTeams, raw: Redis
) -> None:
    activity = teams.message(ALICE, CHAT, "forged")
    claims = {"aud": teams.app_id, "iss": "https://api.botframework.com", "exp": 2**31}
    claims["serviceurl"] = activity["serviceUrl"]
    hs256 = jwt.encode(claims, "guessed-" * 5, algorithm="HS256", headers={"kid": teams.key.kid})
    unsigned = jwt.encode(claims, None, algorithm="none")
    for token in ("", "not-a-jwt", hs256, unsigned):
        assert teams.send(activity, token=token).status_code == 401
    # A valid token for a service URL outside the configured prefixes.
    elsewhere = activity | {"serviceUrl": "https://attacker.example/"}
    assert teams.send(elsewhere).status_code == 401
    assert questions(raw) == []


def test_an_activity_of_another_channel_is_refused(
    gateway: str, teams: FakeTeams, raw: Redis
) -> None:
    # The channel id is not signed: a token for another channel must not pass as Teams.
    other_channel = teams.message(ALICE, CHAT, "from webchat") | {"channelId": "webchat"}
    assert teams.send(other_channel).status_code == 401
    assert questions(raw) == []


def test_a_key_not_endorsed_for_teams_is_refused(
    gateway: str, teams: FakeTeams, raw: Redis
) -> None:
    teams.endorsements = ["webchat"]  # the published key signs only for another channel
    assert teams.send(teams.message(ALICE, CHAT, "endorsed elsewhere")).status_code == 401
    assert questions(raw) == []


def test_a_replayed_activity_makes_one_turn(gateway: str, teams: FakeTeams, raw: Redis) -> None:
    activity = teams.message(ALICE, CHAT, "How do I reset my VPN password?")
    assert teams.send(activity).status_code == 200
    assert teams.send(activity).status_code == 200  # redelivered, or captured and replayed
    wait_until_sync(lambda: questions(raw))
    teams.send(teams.message(ALICE, CHAT, "marker"))
    wait_until_sync(lambda: len(questions(raw)) == 2)
    assert [q.text for q in questions(raw)] == ["How do I reset my VPN password?", "marker"]


def test_the_asker_rates_and_nobody_else_can(
    gateway: str, teams: FakeTeams, settings: GatewaySettings, raw: Redis
) -> None:
    message, card = asked_and_answered(teams, settings, raw)
    rate = action(card, "rate", score=4)
    teams.send(teams.submit(BOB, card, rate))
    wait_until_sync(lambda: any(s.activity.get("text") == NOT_YOURS_TEXT for s in teams.sent))
    assert raw.xlen(Topic.FEEDBACK_RECEIVED) == 0
    teams.send(teams.submit(ALICE, card, rate))
    [rating] = wait_until_sync(
        lambda: (
            raw.xlen(Topic.FEEDBACK_RECEIVED)
            and stream_events(raw, Topic.FEEDBACK_RECEIVED, FeedbackReceived)
        )
    )
    assert (rating.turn_id, rating.user_id, rating.score) == (message.correlation_id, ALICE, 4)


def test_checklist_and_ticket_buttons_continue_the_askers_conversation(
    gateway: str, teams: FakeTeams, settings: GatewaySettings, raw: Redis
) -> None:
    steps = Checklist(steps=["Restart the client.", "Sign in again."], current=0)
    message, card = asked_and_answered(
        teams, settings, raw, action=Action.CHECKLIST, checklist=steps
    )
    assert "Step 1 of 2" in card_text(card)
    teams.send(teams.submit(ALICE, card, action(card, "still_broken")))
    follow_up = one_question(raw, 2)
    assert (follow_up.text, follow_up.conversation_id) == (
        STILL_BROKEN_TEXT,
        message.conversation_id,
    )
    teams.send(teams.submit(ALICE, card, action(card, "ticket")))
    ticket = one_question(raw, 3)
    assert ticket.request_ticket is True
    assert ticket.conversation_id == message.conversation_id
    teams.send(teams.submit(BOB, card, action(card, "ticket")))
    teams.send(teams.submit(BOB, card, {"deskpilot": "ticket", "turn_id": "f" * 32}))
    teams.send(teams.submit(ALICE, card, {"deskpilot": "rate", "turn_id": "x", "score": 9}))
    teams.send(teams.message(ALICE, CHAT, "marker"))
    wait_until_sync(lambda: len(questions(raw)) == 4)
    assert questions(raw)[-1].text == "marker"


def test_a_ticket_is_a_card_with_its_key_and_link(
    gateway: str, teams: FakeTeams, settings: GatewaySettings, raw: Redis
) -> None:
    ticket = {"key": "IT-1042", "url": "https://jira.example/browse/IT-1042", "status": "Open"}
    _, card = asked_and_answered(teams, settings, raw, action=Action.ESCALATED, ticket=ticket)
    text = card_text(card)
    assert "[IT\\\\-1042](https://jira.example/browse/IT-1042)" in text
    assert "Talk to a technician" not in text


def test_markdown_in_an_answer_stays_text(
    gateway: str, teams: FakeTeams, settings: GatewaySettings, raw: Redis
) -> None:
    citations = [
        Citation(n=1, url="javascript:alert(1)", title="[x](https://evil.example)", snippet="s")
    ]
    _, card = asked_and_answered(
        teams,
        settings,
        raw,
        answer="Click [here](https://evil.example) **now** [1]",
        citations=citations,
    )
    text = card_text(card)
    assert "](https://evil.example)" not in text
    assert "(javascript:" not in text
    assert "**now**" in text  # the answer's own bold kept


def test_a_throttled_connector_is_waited_for_as_retry_after_says(
    gateway: str, teams: FakeTeams, settings: GatewaySettings, raw: Redis
) -> None:
    teams.send(teams.message(ALICE, CHAT, "How do I reset my VPN password?"))
    message = one_question(raw)
    wait_until_sync(lambda: teams.typing(CHAT) >= 1)
    teams.throttle(1)
    answer(settings, message)
    cards(teams, CHAT)
    assert teams.calls.count("POST") >= 3  # typing, the 429, the answer


def test_teams_markup_becomes_what_the_user_typed() -> None:
    assert plain_text("<at>Deskpilot</at> hi <b>there</b> &lt;3") == "hi  there  <3"
