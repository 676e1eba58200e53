"""Ratings (``POST /api/feedback``) on an app built by ``create_app`` with a real valkey: only
the turn's own user rates it, a re-rating replaces the rating, the comment travels sealed to the
redactor and is kept only as the redactor sends it back, the rating expires with its turn and a
purge removes it. The tests play the orchestrator (answers on the reply stream) and the redactor
(``feedback.recorded``); the redactor's side is tested in ``redactor/tests``, the whole way in
``tests/admin/test_ratings.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.events import Action, FeedbackReceived, FeedbackRecorded
from contracts.topics import Topic
from gateway.config import GatewaySettings
from gateway.tests.conftest import (
    admin,
    anonymous_user,
    answered_turn,
    handled_by_the_gateway,
    publish,
    stream_events,
)
from tests.support import wait_until_sync

KB = "https://it.northwind.example/kb/"
SECRET_COMMENT = "useless, and my password is Gr3en-Marmot-77"
TURN_TTL_S = 3600


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"turn_timeout_s": 5, "turn_ttl_s": TURN_TTL_S, "rate_limit_enabled": False}


class User:
    """An anonymous user of the app: their token, and turns answered as the orchestrator would."""

    def __init__(self, client: TestClient, settings: GatewaySettings) -> None:
        self.client = client
        self.settings = settings
        self.anonymous = anonymous_user(client)
        self.user_id = self.anonymous.user_id
        self.headers = self.anonymous.headers

    def turn(self, urls: tuple[str, ...] = (KB + "vpn",)) -> tuple[str, str]:
        """A turn of this user's, answered; returns its id and its conversation's."""
        return answered_turn(self.client, self.settings, self.anonymous, urls=urls)

    def rate(self, turn_id: str, score: int, comment: str | None = None) -> Any:
        body: dict[str, Any] = {"turn_id": turn_id, "score": score}
        if comment is not None:
            body["comment"] = comment
        return self.client.post("/api/feedback", json=body, headers=self.headers)


def stored(raw: redis.Redis, turn_id: str) -> dict[str, Any]:
    value: Any = raw.get(f"deskpilot:gateway:feedback:{turn_id}")
    return json.loads(value) if value else {}


def received(raw: redis.Redis) -> list[FeedbackReceived]:
    return stream_events(raw, Topic.FEEDBACK_RECEIVED, FeedbackReceived)


def redacted(event: FeedbackReceived, comment: str | None) -> FeedbackRecorded:
    """What the redactor publishes for ``event``."""
    return FeedbackRecorded(
        correlation_id=event.correlation_id,
        conversation_id=event.conversation_id,
        occurred_at=event.occurred_at,
        rating_id=event.event_id,
        comment=comment,
        **event.model_dump(include={"turn_id", "user_id", "score", "cited_urls", "action"}),
    )


def test_only_the_turns_own_user_may_rate_it(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    owner, other = User(client, settings), User(client, settings)
    turn_id, _ = owner.turn()

    for response in (
        other.rate(turn_id, 1),
        client.post("/api/feedback", json={"turn_id": turn_id, "score": 1}),  # nobody
        client.post(
            "/api/feedback", json={"turn_id": turn_id, "score": 1, "user_id": owner.user_id}
        ),  # naming the owner is not being them
        other.rate("no-such-turn", 1),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["error_code"] == "unknown_turn"
    # Someone else's turn and an unknown one get the same answer, which names no id.
    refused, unknown = other.rate(turn_id, 1).json(), other.rate("x" * 32, 1).json()
    assert refused == unknown
    assert turn_id not in str(refused)
    assert stored(raw, turn_id) == {}
    assert raw.xlen(Topic.FEEDBACK_RECEIVED) == 0

    assert owner.rate(turn_id, 5).status_code == 201


def test_an_anonymous_user_rates_with_the_token_in_the_body_too(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    owner = User(client, settings)
    turn_id, _ = owner.turn()
    token = owner.anonymous.token

    response = client.post("/api/feedback", json={"turn_id": turn_id, "score": 4, "user_id": token})

    assert response.status_code == 201, response.text
    assert stored(raw, turn_id)["user_id"] == owner.user_id


def test_the_comment_goes_sealed_to_the_redactor_and_is_never_echoed(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    owner = User(client, settings)
    turn_id, conversation = owner.turn(urls=(KB + "vpn", KB + "wifi"))

    response = owner.rate(turn_id, 2, SECRET_COMMENT)

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["comment_received"] is True
    assert body["score"] == 2
    assert "Marmot" not in response.text
    rating = stored(raw, turn_id)
    assert rating["comment"] is None
    assert rating["comment_pending"] is True
    assert rating["user_id"] == owner.user_id
    assert [d["url"] for d in rating["cited"]] == [KB + "vpn", KB + "wifi"]
    # On the bus: sealed (no plaintext in Redis), and what the redactor opens is the comment.
    entries: Any = raw.xrange(Topic.FEEDBACK_RECEIVED)
    assert b"Marmot" not in b"".join(v for _, fields in entries for v in fields.values())
    [event] = received(raw)
    assert event.comment == SECRET_COMMENT
    assert (event.turn_id, event.conversation_id, event.user_id) == (
        turn_id,
        conversation,
        owner.user_id,
    )
    assert event.cited_urls == [KB + "vpn", KB + "wifi"]
    assert event.action is Action.ANSWER
    # Nothing is published unredacted: feedback.recorded is the redactor's.
    assert raw.xlen(Topic.FEEDBACK_RECORDED) == 0

    publish(settings, Topic.FEEDBACK_RECORDED, [redacted(event, "useless, and my <PASSWORD>")])

    wait_until_sync(lambda: stored(raw, turn_id)["comment_pending"] is False)
    assert stored(raw, turn_id)["comment"] == "useless, and my <PASSWORD>"
    keys: Any = raw.keys("*")
    for key in keys:
        if raw.type(key) == b"string":
            assert b"Marmot" not in (raw.get(key) or b""), key


def test_the_rating_expires_with_its_turn(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    owner = User(client, settings)
    turn_id, _ = owner.turn()
    raw.expire(f"deskpilot:gateway:turn:{turn_id}", 1234)

    owner.rate(turn_id, 3, "ok")

    assert 1200 <= raw.ttl(f"deskpilot:gateway:feedback:{turn_id}") <= 1234
    [event] = received(raw)
    publish(settings, Topic.FEEDBACK_RECORDED, [redacted(event, "ok")])
    wait_until_sync(lambda: stored(raw, turn_id)["comment"] == "ok")
    assert 1200 <= raw.ttl(f"deskpilot:gateway:feedback:{turn_id}") <= 1234  # kept its expiry


def test_a_re_rating_replaces_the_rating_and_a_late_comment_of_the_first_is_dropped(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    owner = User(client, settings)
    turn_id, _ = owner.turn()

    assert owner.rate(turn_id, 1, "first thoughts").status_code == 201
    assert owner.rate(turn_id, 4, "second thoughts").status_code == 201
    first, second = received(raw)

    rating = stored(raw, turn_id)
    assert (rating["score"], rating["rating_id"]) == (4, second.event_id)
    # The redactor's result for the first rating arrives after the re-rating: not kept.
    publish(
        settings,
        Topic.FEEDBACK_RECORDED,
        [redacted(first, "first thoughts"), redacted(second, "second thoughts")],
    )
    wait_until_sync(lambda: stored(raw, turn_id)["comment_pending"] is False)
    assert stored(raw, turn_id)["comment"] == "second thoughts"
    assert stored(raw, turn_id)["score"] == 4
    csat = client.get("/api/admin/analytics", headers=admin()).json()["csat"]
    assert csat["ratings"] == 1  # once per user and turn
    assert csat["distribution"]["4"] == 1
    assert csat["distribution"]["1"] == 0


def test_a_purge_removes_the_rating_and_a_late_comment_does_not_bring_it_back(
    client: TestClient, settings: GatewaySettings, raw: redis.Redis
) -> None:
    owner = User(client, settings)
    turn_id, conversation = owner.turn()
    owner.rate(turn_id, 2, "meh")
    assert stored(raw, turn_id)

    purged = client.delete(f"/api/admin/conversations/{conversation}", headers=admin())

    assert purged.status_code == 202
    wait_until_sync(lambda: not raw.exists(f"deskpilot:gateway:feedback:{turn_id}"))
    [event] = received(raw)
    publish(settings, Topic.FEEDBACK_RECORDED, [redacted(event, "meh")])
    wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.FEEDBACK_RECORDED))
    assert not raw.exists(f"deskpilot:gateway:feedback:{turn_id}")
    assert owner.rate(turn_id, 5).status_code == 404  # the turn went with it
