"""Ratings and the analytics API, on an app built by ``create_app`` with a real valkey (a database
of its own per test). No other service runs: the tests publish what the orchestrator, the crawler
and the audit trail would (answers on the gateway's reply stream, decision records, crawl
summaries) and read the report back over HTTP."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from contracts.events import (
    Action,
    AnswerBody,
    AuditRecorded,
    CrawlFinished,
    CrawlPageSummary,
    TurnReply,
)
from contracts.topics import Topic, reply_stream
from gateway.analytics import (
    DEFINITIONS,
    escalation_reason,
    latency_bucket,
    percentile,
    topic_key,
)
from gateway.analytics import (
    PREFIX as ANALYTICS_PREFIX,
)
from gateway.config import GatewaySettings
from gateway.tests.conftest import (
    admin,
    anonymous_user,
    answered_turn,
    handled_by_the_gateway,
    publish,
)
from tests.support import wait_until_sync

KB = "https://it.northwind.example/kb/"


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"turn_timeout_s": 5, "rate_limit_enabled": False}


class Stack:
    """Plays the other services for one app: turns answered as the orchestrator would."""

    def __init__(self, client: TestClient, settings: GatewaySettings) -> None:
        self.client = client
        self.settings = settings
        # One anonymous user sends every turn and reads them back (turns are their sender's).
        self.sender = anonymous_user(client)
        self.user = self.sender.user_id
        client.headers.update(self.sender.headers)

    def turn(
        self,
        action: Action,
        *,
        conversation: str | None = None,
        urls: tuple[str, ...] = (),
        category: str | None = "connectivity",
        crawled: bool = False,
        decision: AuditRecorded | None = None,
    ) -> str:
        """Submit a message through the API and answer it; returns the turn id."""
        turn_id, _ = answered_turn(
            self.client,
            self.settings,
            self.sender,
            conversation=conversation,
            action=action,
            category=category,
            urls=urls,
            crawled=crawled,
            decision=decision,
        )
        return turn_id

    def report(self, **params: str) -> dict[str, Any]:
        response = self.client.get("/api/admin/analytics", params=params, headers=admin())
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture
def stack(client: TestClient, settings: GatewaySettings) -> Stack:
    return Stack(client, settings)


def decision(outcome: Action, reason: str, **details: str) -> AuditRecorded:
    return AuditRecorded(
        correlation_id="set-per-turn",
        conversation_id="c",
        service="orchestrator",
        action="decision",
        reason=reason,
        details={"outcome": outcome.value, **details},
    )


# -- pure parts ----------------------------------------------------------------------------------


def test_unanswered_questions_group_by_content_words() -> None:
    assert topic_key("How do I book the cafeteria?") == topic_key("book cafeteria, how?")
    assert topic_key("Can <PERSON_1> book the cafeteria") == "book cafeteria"
    assert topic_key("how do I?") == "(no content words)"
    assert topic_key("reserve a parking space") != topic_key("book the cafeteria")


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (
            "escalated (user_request): the user pressed the ticket button; ticket created",
            "user_request",
        ),
        ("escalated (anger): anger 0.71 >= 0.50; ticket deferred", "anger"),
        ("escalated (something_new): x", "other"),
        ("ticket offer declined", "other"),
    ],
)
def test_escalation_reasons_come_from_the_decision(reason: str, expected: str) -> None:
    assert escalation_reason(reason) == expected


def test_latency_percentiles_are_within_ten_percent() -> None:
    samples = [100.0 + n for n in range(100)] + [5000.0] * 5  # 105 answers
    histogram: dict[int, int] = {}
    for ms in samples:
        histogram[latency_bucket(ms)] = histogram.get(latency_bucket(ms), 0) + 1
    p50, p95 = percentile(histogram, 0.5), percentile(histogram, 0.95)
    assert p50 is not None
    assert p95 is not None
    assert 152 <= p50 <= 152 * 1.1  # the exact median is 152 ms
    assert 195 <= p95 <= 199 * 1.1  # 100th of 105 sorted: 199 ms
    assert percentile({}, 0.5) is None


# -- ratings ---------------------------------------------------------------------------------------


def test_a_rating_is_stored_with_the_answers_context_and_published(
    stack: Stack, raw: redis.Redis
) -> None:
    turn_id = stack.turn(Action.ANSWER, urls=(KB + "vpn", KB + "wifi"))

    created = stack.client.post(
        "/api/feedback", json={"turn_id": turn_id, "score": 2, "comment": "outdated"}
    )

    assert created.status_code == 201
    assert created.json()["score"] == 2
    assert "outdated" not in created.text  # a comment is never echoed
    stored = json.loads(raw.get(f"deskpilot:gateway:feedback:{turn_id}") or b"{}")
    assert stored["score"] == 2
    # The comment waits for the redactor (feedback.received -> feedback.recorded): not kept raw.
    assert stored.get("comment") is None
    assert stored["comment_pending"] is True
    assert stored["action"] == "answer"
    assert stored["category"] == "connectivity"
    assert stored["user_id"] == stack.user
    assert [d["url"] for d in stored["cited"]] == [KB + "vpn", KB + "wifi"]
    assert raw.ttl(f"deskpilot:gateway:feedback:{turn_id}") > 0  # expires with its turn
    entries: Any = raw.xrevrange(Topic.FEEDBACK_RECEIVED, count=1)
    assert entries, "the rating was handed to the redactor"
    assert b"outdated" not in b"".join(k + v for k, v in entries[0][1].items())  # sealed on the bus


def test_ratings_of_unknown_turns_and_bad_scores_are_refused(stack: Stack) -> None:
    turn_id = stack.turn(Action.ANSWER, urls=(KB + "vpn",))
    unknown = stack.client.post("/api/feedback", json={"turn_id": "nope", "score": 3})
    assert unknown.status_code == 404
    assert unknown.json()["error_code"] == "unknown_turn"
    for bad in ({"score": 0}, {"score": 6}, {"score": 4.5}, {"score": "5"}):
        response = stack.client.post("/api/feedback", json={"turn_id": turn_id, **bad})
        assert response.status_code == 422, bad
    assert stack.report()["csat"]["ratings"] == 0


def test_csat_counts_a_re_rated_turn_once(stack: Stack) -> None:
    first = stack.turn(Action.ANSWER, urls=(KB + "vpn",))
    second = stack.turn(Action.CHECKLIST, urls=(KB + "printer",))
    for turn_id, score in ((first, 1), (first, 4), (second, 5)):
        response = stack.client.post("/api/feedback", json={"turn_id": turn_id, "score": score})
        assert response.status_code == 201

    csat = stack.report()["csat"]

    assert csat["ratings"] == 2
    assert csat["average"] == pytest.approx(4.5)
    assert csat["distribution"] == {"1": 0, "2": 0, "3": 0, "4": 1, "5": 1}
    assert csat["definition"] == DEFINITIONS["csat"]


# -- the report ------------------------------------------------------------------------------------


def test_the_report_counts_outcomes_reasons_and_gaps(stack: Stack) -> None:
    helped = uuid.uuid4().hex
    stack.turn(Action.ANSWER, conversation=helped, urls=(KB + "vpn",))
    stack.turn(Action.CHECKLIST, conversation=helped, urls=(KB + "vpn",), category="peripheral")
    # Answered, then escalated: its resolved turn is not deflected.
    angry = uuid.uuid4().hex
    stack.turn(Action.ANSWER, conversation=angry, urls=(KB + "wifi",))
    stack.turn(
        Action.ESCALATED,
        conversation=angry,
        decision=decision(Action.ESCALATED, "escalated (anger): anger 0.8; ticket created"),
    )
    stack.turn(
        Action.NO_ANSWER,
        decision=decision(
            Action.NO_ANSWER, "best similarity 0.2", question="How do I book the cafeteria?"
        ),
    )
    stack.turn(
        Action.NO_ANSWER,
        decision=decision(
            Action.NO_ANSWER, "best similarity 0.1", question="book cafeteria <PERSON_1>"
        ),
    )
    stack.turn(Action.CLARIFY, category=None)  # not a support turn
    stack.turn(Action.ANSWER, urls=(KB + "wifi",), crawled=True)
    stack.turn(Action.NO_ANSWER, crawled=True)
    publish(
        stack.settings,
        Topic.CRAWL_FINISHED,
        [
            CrawlFinished(
                correlation_id="job-1",
                conversation_id="c",
                job_id="job-1",
                reason="max_pages",
                pages=[
                    CrawlPageSummary(
                        url=f"https://help.example/{n}",
                        status=200,
                        depth=1,
                        title="t",
                        bytes=10,
                        ms=5,
                    )
                    for n in range(3)
                ],
            )
        ],
    )

    def settled() -> bool:
        body = stack.report()
        return (
            body["crawl"]["jobs"] == 1
            and sum(t["count"] for t in body["unanswered"]) == 2
            and bool(body["escalation"]["reasons"])
        )

    wait_until_sync(settled)
    body = stack.report()

    assert body["turns"] == 9
    assert body["support_turns"] == 8  # every turn but the clarification
    # helped: 2 resolved; angry: its answer is not deflected (ticket); crawled answer: 1.
    assert body["deflection"]["deflected"] == 3
    assert body["deflection"]["rate"] == pytest.approx(3 / 8, abs=1e-4)
    assert body["deflection"]["definition"] == DEFINITIONS["deflection"]
    assert body["escalation"]["escalated"] == 1
    assert body["escalation"]["rate"] == pytest.approx(1 / 8, abs=1e-4)
    assert body["escalation"]["reasons"] == [{"name": "anger", "count": 1}]
    intents = {c["name"]: c["count"] for c in body["intents"]}
    assert intents == {"answer": 3, "checklist": 1, "escalated": 1, "no_answer": 3, "clarify": 1}
    categories = {c["name"]: c["count"] for c in body["categories"]}
    assert categories == {"connectivity": 7, "peripheral": 1}
    (gap,) = body["unanswered"]
    assert gap["topic"] == "book cafeteria"
    assert gap["count"] == 2
    assert gap["example"] in {"How do I book the cafeteria?", "book cafeteria <PERSON_1>"}
    crawl = body["crawl"]
    assert (crawl["jobs"], crawl["pages"]) == (1, 3)
    assert crawl["endings"] == [{"name": "max_pages", "count": 1}]
    assert (crawl["crawl_turns"], crawl["answered"], crawl["hit_rate"]) == (2, 1, 0.5)
    assert body["latency"]["answers"] == 9
    assert 0 < body["latency"]["p50_ms"] <= body["latency"]["p95_ms"] < 60_000
    documents = {d["url"]: d["cited"] for d in body["documents"]}
    assert documents == {KB + "vpn": 2, KB + "wifi": 2}
    today = datetime.now(UTC).date()
    assert body["from"] == (today - timedelta(days=6)).isoformat()
    assert body["to"] == today.isoformat()
    assert [d["day"] for d in body["daily"]] == [
        (today - timedelta(days=n)).isoformat() for n in range(6, -1, -1)
    ]
    assert body["daily"][-1]["support_turns"] == 8
    assert body["daily"][-1]["deflected"] == 3
    assert all(d["turns"] == 0 for d in body["daily"][:-1])
    assert set(body["definitions"]) >= {"deflection", "escalation", "csat", "latency"}


def test_facts_are_counted_once_however_often_delivered(stack: Stack, raw: redis.Redis) -> None:
    turn_id = stack.turn(Action.ANSWER, urls=(KB + "vpn",))
    answer = stack.client.get(f"/api/turns/{turn_id}").json()["answer"]
    again = TurnReply(
        kind="answer",
        correlation_id=turn_id,
        conversation_id=answer["conversation_id"],
        body=AnswerBody.model_validate(answer),
    )
    record = decision(Action.NO_ANSWER, "x", question="where is the cafeteria menu")
    finished = CrawlFinished(correlation_id="j", conversation_id="c", job_id="j", reason="deadline")
    publish(stack.settings, Topic.AUDIT, [record, record])
    publish(stack.settings, Topic.CRAWL_FINISHED, [finished, finished])
    publish(stack.settings, reply_stream(stack.settings.instance_id), [again, again])

    # Every copy read and acknowledged: the redeliveries had their turn to be (not) counted.
    streams = (Topic.AUDIT, Topic.CRAWL_FINISHED, reply_stream(stack.settings.instance_id))
    wait_until_sync(lambda: all(handled_by_the_gateway(raw, topic) for topic in streams))
    body = stack.report()
    assert body["turns"] == 1
    assert body["crawl"]["jobs"] == 1
    assert body["unanswered"][0]["count"] == 1


def test_a_purge_takes_the_conversations_wordings_and_analytics_never_name_it(
    stack: Stack, raw: redis.Redis
) -> None:
    """The unanswered wordings a conversation gave go with its purge (a later wording of another
    conversation on the same topic stays), a decision record that arrives after the purge adds
    nothing, and no key, field or value of analytics holds the conversation's id. The counts
    stay: they hold no text."""
    purged, other = uuid.uuid4().hex, uuid.uuid4().hex

    def unanswered(conversation: str, question: str) -> None:
        record = decision(Action.NO_ANSWER, "nothing found", question=question)
        stack.turn(
            Action.NO_ANSWER,
            conversation=conversation,
            decision=record.model_copy(update={"conversation_id": conversation}),
        )
        wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.AUDIT))

    stack.turn(Action.ANSWER, conversation=purged, urls=(KB + "vpn",))
    stack.turn(Action.ESCALATED, conversation=purged)
    unanswered(purged, "where is the cafeteria menu")
    unanswered(purged, "how do I book a parking space")
    unanswered(other, "the cafeteria menu, where is it")
    examples = {t["topic"]: t["example"] for t in stack.report()["unanswered"]}
    assert examples["book parking space"] == "how do I book a parking space"
    assert examples["cafeteria menu"] == "the cafeteria menu, where is it"

    response = stack.client.delete(f"/api/admin/conversations/{purged}", headers=admin())
    assert response.status_code == 202, response.text

    def wording_gone() -> bool:
        return {t["topic"]: t["example"] for t in stack.report()["unanswered"]} == {
            "book parking space": "",
            "cafeteria menu": "the cafeteria menu, where is it",
        }

    wait_until_sync(wording_gone)
    late = decision(Action.NO_ANSWER, "nothing found", question="booking a parking space, how?")
    publish(stack.settings, Topic.AUDIT, [late.model_copy(update={"conversation_id": purged})])
    wait_until_sync(lambda: handled_by_the_gateway(raw, Topic.AUDIT))
    body = stack.report()
    assert {t["topic"]: (t["count"], t["example"]) for t in body["unanswered"]} == {
        "book parking space": (1, ""),
        "cafeteria menu": (2, "the cafeteria menu, where is it"),
    }
    assert body["turns"] == 5  # counted before the purge, still counted

    held = []
    for name in raw.scan_iter(match=f"{ANALYTICS_PREFIX}*"):
        kind = raw.type(name)
        if kind == b"hash":
            held += [b"%s %s" % pair for pair in raw.hgetall(name).items()]
        elif kind == b"set":
            held += list(raw.smembers(name))
        elif kind == b"string":
            held.append(raw.get(name) or b"")
        held.append(name)
    assert held, "analytics wrote nothing to search"
    assert not [entry for entry in held if purged.encode() in entry]


def test_a_period_selects_whole_days(stack: Stack, raw: redis.Redis) -> None:
    stack.turn(Action.ANSWER, urls=(KB + "vpn",))
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)

    assert (
        stack.report(**{"from": yesterday.isoformat(), "to": yesterday.isoformat()})["turns"] == 0
    )
    both = stack.report(**{"from": yesterday.isoformat(), "to": today.isoformat()})
    assert both["turns"] == 1
    assert len(both["daily"]) == 2
    keys = [k for k in raw.scan_iter("deskpilot:gateway:{analytics}:day:*")]
    assert keys
    assert all(0 < raw.ttl(k) <= 400 * 24 * 3600 for k in keys)


@pytest.mark.parametrize(
    "params",
    [
        {"from": "yesterday"},
        {"to": "2026-13-01"},
        {"from": "2026-03-02", "to": "2026-03-01"},
        {"from": "2024-01-01", "to": "2026-01-01"},
    ],
)
def test_bad_periods_are_refused(client: TestClient, params: dict[str, str]) -> None:
    response = client.get("/api/admin/analytics", params=params, headers=admin())
    assert response.status_code == 422
    assert response.json()["error_code"] == "invalid_request"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_analytics_need_the_admin_token(client: TestClient, headers: dict[str, str]) -> None:
    response = client.get("/api/admin/analytics", headers=headers)
    assert response.status_code in (401, 403)
    assert "turns" not in response.json()


def test_consumer_lag_and_dead_letters_are_reported(stack: Stack, raw: redis.Redis) -> None:
    # Nobody consumes query.received here: what is published stays unread by the group.
    raw.xadd(Topic.QUERY_RECEIVED, {"x": "1"})
    raw.xadd(Topic.QUERY_RECEIVED, {"x": "2"})
    raw.xadd(f"{Topic.PAGES_CRAWLED}.dlq", {"error": "boom"})

    bus = stack.report()["bus"]

    streams = {s["stream"]: s for s in bus["streams"]}
    groups = {g["group"]: g for g in streams[Topic.QUERY_RECEIVED]["groups"]}
    assert groups["orchestrator"]["lag"] == 2
    assert groups["orchestrator"]["pending"] == 0
    assert bus["dead_letters"] == [{"stream": "pages.crawled.dlq", "depth": 1}]
    assert bus["dead_letter_total"] == 1
    # The gateway's own reply stream and group are there too.
    assert any(name.startswith("reply.") for name in streams)


def test_the_admin_page_is_served(client: TestClient) -> None:
    page = client.get("/admin")
    assert page.status_code == 200
    assert 'id="tab-config"' in page.text
    assert 'id="tab-proposals"' in page.text
    for script in ("admin-analytics.js", "admin-config.js", "admin-proposals.js"):
        assert f"/static/{script}" in page.text
    assert client.get("/static/admin-analytics.js").status_code == 200
    assert client.get("/static/admin.css").status_code == 200
