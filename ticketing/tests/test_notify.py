"""Unanswered-question notices against a real SMTP server (aiosmtpd on loopback), a local Slack
incoming webhook that answers as Slack documents, and real valkey for de-duplication, the cap
per hour and redelivery."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from contracts.events import AuditRecorded, Event, UnansweredNotice
from tests.support.fake_slack_webhook import FakeSlackWebhook
from tests.support.served import self_signed
from tests.support.smtp import LocalSmtp
from ticketing.app import build_notifier
from ticketing.config import TicketingSettings
from ticketing.notify.service import Notifier
from ticketing.notify.slack import TryLater
from ticketing.tests.conftest import settings_for

QUESTION = "I am <PERSON_1>, call me on <PHONE_NUMBER_1>: why can't I open the payroll portal?"
TEAM = "iam-team@northwind.example"


@pytest.fixture
def smtp() -> Iterator[LocalSmtp]:
    with LocalSmtp() as server:
        yield server


@pytest.fixture
def slack() -> Iterator[FakeSlackWebhook]:
    with FakeSlackWebhook() as hook:
        yield hook


class Published:
    """What the notifier publishes (its audit records), in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Event]] = []

    async def __call__(self, topic: str, event: Event) -> str:
        self.events.append((topic, event))
        return "0-1"

    @property
    def audits(self) -> list[AuditRecorded]:
        return [e for _, e in self.events if isinstance(e, AuditRecorded)]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5) as client:
        yield client


def notifier_for(
    settings: TicketingSettings, redis: aioredis.Redis, http: httpx.AsyncClient
) -> tuple[Notifier, Published]:
    published = Published()
    notifier = build_notifier(settings, _Bus(redis, published), http)  # type: ignore[arg-type]
    return notifier, published


class _Bus:
    """What :func:`build_notifier` takes from the bus: its Redis client and publish."""

    def __init__(self, redis: aioredis.Redis, publish: Published) -> None:
        self.redis, self.publish = redis, publish


def settings(
    tmp_path: Path, redis_url: str, smtp: LocalSmtp, slack: FakeSlackWebhook | None, **kw: Any
) -> TicketingSettings:
    route: dict[str, Any] = {"emails": [TEAM]}
    if slack is not None:
        route["slack_webhook_url"] = slack.url
    values: dict[str, Any] = {
        "notify_routes": {"account": route},
        "notify_admin_url": "https://deskpilot.northwind.example",
        "smtp_host": smtp.host,
        "smtp_port": smtp.port,
        "smtp_security": "none",
        "notify_timeout_s": 5,
        **kw,
    }
    return settings_for(tmp_path, redis_url, **values)


Make = Callable[..., tuple[Notifier, Published]]


@pytest.fixture
def make(tmp_path: Path, redis_url: str, redis: aioredis.Redis, http: httpx.AsyncClient) -> Make:
    """A notifier on the test's Redis: ``make(smtp, slack_or_none, **settings)``."""

    def build(
        smtp: LocalSmtp, slack: FakeSlackWebhook | None, **kw: Any
    ) -> tuple[Notifier, Published]:
        return notifier_for(settings(tmp_path, redis_url, smtp, slack, **kw), redis, http)

    return build


def notice(
    question: str = QUESTION, category: str | None = "account", **kw: Any
) -> UnansweredNotice:
    return UnansweredNotice(
        correlation_id="turn-1",
        conversation_id="conv-42",
        outcome=kw.pop("outcome", "no_answer"),
        category=category,
        question=question,
        confidence=kw.pop("confidence", 0.21),
        **kw,
    )


async def test_a_configured_category_is_told_by_email_and_slack_with_the_redacted_question(
    make: Make,
    smtp: LocalSmtp,
    slack: FakeSlackWebhook,
) -> None:
    notifier, published = make(smtp, slack)
    result = await notifier.on_notice(notice(), last_attempt=False)
    assert (result.admission, result.channels) == ("sent", {"email": "sent", "slack": "sent"})

    [mail] = smtp.messages
    assert mail.recipients == (TEAM,)
    assert mail.message["Subject"] == "[Deskpilot] Unanswered: account question"
    assert QUESTION in mail.text
    assert "https://deskpilot.northwind.example/admin#conversation=conv-42" in mail.text
    assert "best match 0.21" in mail.text

    [post] = slack.posts
    shown = post["blocks"][0]["text"]["text"]
    assert "&lt;PHONE_NUMBER_1&gt;" in shown
    assert "<PHONE_NUMBER_1>" not in shown  # would be read as a link
    assert "<https://deskpilot.northwind.example/admin#conversation=conv-42|" in str(post)
    [audit] = published.audits
    assert (audit.action, audit.reason, audit.details["email"]) == ("notification", "sent", "sent")
    assert audit.conversation_id == "conv-42"


@pytest.mark.parametrize(
    ("window", "words"),
    [
        (86_400, "once a day"),
        (3600, "once an hour"),
        (7200, "once every 2 hours"),
        (5400, "once every 90 minutes"),
        (129_600, "once every 36 hours"),
        (1_209_600, "once every 2 weeks"),
        (0.5, "once a second"),
    ],
)
def test_the_email_states_the_configured_window(
    make: Make, smtp: LocalSmtp, window: float, words: str
) -> None:
    notifier, _ = make(smtp, None, notify_dedup_s=window)
    _, text = notifier.email_message(notice())
    assert f"The same question is reported at most {words}." in " ".join(text.split())


async def test_other_categories_and_recurring_questions_are_not_reported_again(
    make: Make, smtp: LocalSmtp
) -> None:
    notifier, _ = make(smtp, None)
    other = await notifier.on_notice(notice(category="connectivity"), last_attempt=False)
    none = await notifier.on_notice(notice(category=None), last_attempt=False)
    assert (other.admission, none.admission) == ("not_configured", "not_configured")

    sent = notice()
    assert (await notifier.on_notice(sent, last_attempt=False)).admission == "sent"
    again = notice(QUESTION.upper().replace(":", " ,"))  # same words, new turn
    assert (await notifier.on_notice(again, last_attempt=False)).admission == "duplicate"
    # The first event delivered again is decided as before, and sends nothing twice.
    redelivered = await notifier.on_notice(sent, last_attempt=False)
    assert (redelivered.admission, redelivered.channels) == ("sent", {"email": "sent"})
    assert len(smtp.messages) == 1
    fresh = notice("How do I unlock my account after three wrong passwords?")
    assert (await notifier.on_notice(fresh, last_attempt=False)).admission == "sent"
    assert len(smtp.messages) == 2


async def test_the_cap_per_hour_holds_back_a_flood(make: Make, smtp: LocalSmtp) -> None:
    notifier, _ = make(smtp, None, notify_max_per_hour=2)
    outcomes = [
        (await notifier.on_notice(notice(f"question number {n}"), last_attempt=False)).admission
        for n in range(4)
    ]
    assert outcomes == ["sent", "sent", "rate_limited", "rate_limited"]
    assert len(smtp.messages) == 2


async def test_a_question_held_back_by_the_cap_is_not_a_duplicate_and_goes_out_later(
    make: Make, smtp: LocalSmtp, redis: aioredis.Redis
) -> None:
    notifier, _ = make(smtp, None, notify_max_per_hour=1)
    assert (await notifier.on_notice(notice("first question"), last_attempt=False)).admission == (
        "sent"
    )
    held = await notifier.on_notice(notice(), last_attempt=False)
    again = await notifier.on_notice(notice(), last_attempt=False)  # same words, new turn
    assert (held.admission, again.admission) == ("rate_limited", "rate_limited")
    # The next hour: the question was never reported, so it goes out now.
    rates = [key async for key in redis.scan_iter(match="deskpilot:ticketing:*rate:*")]
    assert len(rates) == 1
    await redis.delete(*rates)
    later = await notifier.on_notice(notice(), last_attempt=False)
    assert later.admission == "sent"
    assert [QUESTION in mail.text for mail in smtp.messages] == [False, True]


async def test_replicas_racing_on_one_question_report_it_once(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, smtp: LocalSmtp, http: httpx.AsyncClient
) -> None:
    del redis  # (its fixture empties the database)
    replicas = [aioredis.from_url(redis_url) for _ in range(3)]
    try:
        chosen = settings(tmp_path, redis_url, smtp, None)
        notifiers = [notifier_for(chosen, client, http)[0] for client in replicas]
        results = await asyncio.gather(
            *(n.on_notice(notice(), last_attempt=False) for n in notifiers for _ in range(4))
        )
    finally:
        for client in replicas:
            await client.aclose()
    assert sorted(r.admission for r in results) == ["duplicate"] * 11 + ["sent"]
    assert len(smtp.messages) == 1


async def test_a_notice_every_channel_gave_up_on_does_not_mute_its_question(
    make: Make, smtp: LocalSmtp, slack: FakeSlackWebhook
) -> None:
    notifier, _ = make(smtp, slack)
    smtp.defer_next(1)  # the SMTP server is out...
    slack.fail_next(3)  # ...and so is Slack
    slack.throttle_next(0)
    failed = await notifier.on_notice(notice(), last_attempt=True)
    assert [o.endswith("(gave up)") for o in failed.channels.values()] == [True, True]
    assert (smtp.messages, slack.posts) == ([], [])
    retold = await notifier.on_notice(notice(), last_attempt=False)  # the question again
    assert (retold.admission, retold.channels) == ("sent", {"email": "sent", "slack": "sent"})
    # One channel told someone: the question is reported, and not again within the window.
    assert (await notifier.on_notice(notice(), last_attempt=False)).admission == "duplicate"


async def test_a_notice_one_channel_delivered_still_counts_as_reported(
    make: Make, smtp: LocalSmtp, slack: FakeSlackWebhook
) -> None:
    notifier, _ = make(smtp, slack)
    slack.revoke()
    partly = await notifier.on_notice(notice(), last_attempt=True)
    assert partly.channels["email"] == "sent"
    assert (await notifier.on_notice(notice(), last_attempt=False)).admission == "duplicate"


async def test_a_redelivered_notice_sends_only_what_failed(
    make: Make,
    smtp: LocalSmtp,
    slack: FakeSlackWebhook,
) -> None:
    notifier, published = make(smtp, slack)
    event = notice()
    slack.fail_next(3)  # every attempt of the first delivery answers 500
    slack.throttle_next(0)
    with pytest.raises(TryLater):
        await notifier.on_notice(event, last_attempt=False)
    assert (len(smtp.messages), slack.posts) == (1, [])
    assert published.audits == []
    result = await notifier.on_notice(event, last_attempt=False)  # the bus delivers it again
    assert result.channels == {"email": "sent", "slack": "sent"}
    assert (len(smtp.messages), len(slack.posts)) == (1, 1)


async def test_slack_throttling_is_waited_out(
    make: Make,
    smtp: LocalSmtp,
    slack: FakeSlackWebhook,
) -> None:
    notifier, _ = make(smtp, slack)
    slack.throttle_next(2, retry_after="0")
    result = await notifier.on_notice(notice(), last_attempt=False)
    assert result.channels["slack"] == "sent"
    assert len(slack.posts) == 1


@pytest.mark.parametrize(
    ("refusal", "body"),
    [
        ("revoke", "no_service"),
        ("archive", "channel_is_archived"),
        ("prohibit", "action_prohibited"),
    ],
)
async def test_a_refused_webhook_is_recorded_with_slacks_reason_and_not_retried(
    make: Make,
    smtp: LocalSmtp,
    slack: FakeSlackWebhook,
    refusal: str,
    body: str,
) -> None:
    notifier, published = make(smtp, slack)
    getattr(slack, refusal)()
    result = await notifier.on_notice(notice(), last_attempt=False)
    assert result.channels["email"] == "sent"
    assert result.channels["slack"].startswith("failed: Slack refused the message")
    assert body in result.channels["slack"]
    [audit] = published.audits
    assert audit.reason == "failed on slack"


async def test_a_webhook_not_slacks_or_a_forged_secret_is_refused(
    make: Make,
    smtp: LocalSmtp,
    slack: FakeSlackWebhook,
) -> None:
    forged = slack.url[: -len(slack.secret)] + "0" * len(slack.secret)
    route = {"account": {"slack_webhook_url": forged}}
    notifier, _ = make(smtp, None, notify_routes=route)
    result = await notifier.on_notice(notice(), last_attempt=False)
    assert "invalid_token" in result.channels["slack"]
    assert slack.posts == []


async def test_smtp_deferral_is_retried_by_the_bus_then_recorded(
    make: Make, smtp: LocalSmtp
) -> None:
    notifier, published = make(smtp, None)
    smtp.defer_next(2)
    event = notice()
    with pytest.raises(TryLater, match="451"):
        await notifier.on_notice(event, last_attempt=False)
    result = await notifier.on_notice(event, last_attempt=True)
    assert result.channels["email"] == "failed: the SMTP server answered 451 (gave up)"
    assert published.audits[0].reason == "failed on email"
    assert smtp.messages == []


async def test_a_refused_recipient_is_a_failure_not_a_retry(make: Make, smtp: LocalSmtp) -> None:
    notifier, _ = make(smtp, None)
    smtp.refuse(TEAM)
    result = await notifier.on_notice(notice(), last_attempt=False)
    assert result.channels["email"] == "failed: the SMTP server refused every recipient (550)"


async def test_a_recipient_refused_among_others_is_in_the_outcome_without_its_address(
    make: Make, smtp: LocalSmtp
) -> None:
    gone = "left-the-company@northwind.example"
    notifier, published = make(smtp, None, notify_routes={"account": {"emails": [TEAM, gone]}})
    smtp.refuse(gone)
    event = notice()
    result = await notifier.on_notice(event, last_attempt=False)
    assert result.channels == {"email": "sent (1 of 2 refused: 550)"}
    [mail] = smtp.messages
    assert mail.recipients == (TEAM,)
    [audit] = published.audits
    assert (audit.reason, audit.details["email"]) == ("sent", "sent (1 of 2 refused: 550)")
    assert gone not in str(audit.model_dump())
    # Delivered again: the outcome is as recorded, and nobody gets a second e-mail.
    again = await notifier.on_notice(event, last_attempt=False)
    assert again.channels == result.channels
    assert len(smtp.messages) == 1


async def test_starttls_and_login_then_a_wrong_password_fails_without_echoing_it(
    tmp_path: Path, redis_url: str, redis: aioredis.Redis, http: httpx.AsyncClient
) -> None:
    cert = self_signed(tmp_path)
    with LocalSmtp(tls=cert, login=("deskpilot", "smtp-pass-0123")) as smtp:
        secure = {
            "smtp_security": "starttls",
            "smtp_ca_bundle": cert[0],
            "smtp_username": "deskpilot",
        }
        good = settings(tmp_path, redis_url, smtp, None, smtp_password="smtp-pass-0123", **secure)
        notifier, _ = notifier_for(good, redis, http)
        assert (await notifier.on_notice(notice(), last_attempt=False)).channels == {
            "email": "sent"
        }
        assert smtp.logins == ["deskpilot"]
        bad = settings(tmp_path, redis_url, smtp, None, smtp_password="wrong-pass-999", **secure)
        notifier, _ = notifier_for(bad, redis, http)
        result = await notifier.on_notice(notice("another question"), last_attempt=False)
        assert result.channels["email"].startswith("failed: the SMTP server refused")
        assert "wrong-pass-999" not in result.channels["email"]
        assert len(smtp.messages) == 1


def test_settings_refuse_unknown_categories_bad_addresses_and_missing_smtp(
    tmp_path: Path,
) -> None:
    base = {"redis_url": "redis://127.0.0.1:1/0", "data_dir": tmp_path}
    with pytest.raises(ValidationError, match="unknown categories"):
        TicketingSettings.model_validate(base | {"notify_routes": {"hr": {"emails": [TEAM]}}})
    with pytest.raises(ValidationError, match="not an e-mail address"):
        TicketingSettings.model_validate(
            base | {"smtp_host": "x", "notify_routes": {"account": {"emails": ["a@b\r\nBcc: c"]}}}
        )
    with pytest.raises(ValidationError, match="TICKETING_SMTP_HOST"):
        TicketingSettings.model_validate(base | {"notify_routes": {"account": {"emails": [TEAM]}}})
    for url in (
        "file:deploy/slack/manifest.yaml",
        "http://hooks.slack.com/services/T1/B2/plainhttp7",
    ):
        with pytest.raises(ValidationError, match="https URL") as refused:
            TicketingSettings.model_validate(
                base | {"notify_routes": {"account": {"slack_webhook_url": url}}}
            )
        assert "plainhttp7" not in str(refused.value)
    with pytest.raises(ValidationError, match="needs e-mail addresses or a slack_webhook_url"):
        TicketingSettings.model_validate(base | {"notify_routes": {"account": {}}})
    # A refused setting's error, printed when the service does not start, quotes no value: not
    # the webhook's secret path, not the SMTP password.
    secrets = {
        "smtp_password": "hunter2-secret",
        "notify_routes": {
            "hr": {"slack_webhook_url": "https://hooks.slack.com/services/T/B/SECRETHOOK"},
            "account": {"emails": [TEAM]},
        },
    }
    with pytest.raises(ValidationError) as refused:
        TicketingSettings.model_validate(base | secrets)
    assert "SECRETHOOK" not in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        TicketingSettings.model_validate(
            base | secrets | {"notify_routes": {"account": {"emails": [TEAM]}}}
        )
    assert "hunter2-secret" not in str(refused.value)
    hidden = TicketingSettings.model_validate(
        base
        | {
            "smtp_host": "smtp.example.com",
            "smtp_password": "hunter2-secret",
            "notify_routes": {"account": {"slack_webhook_url": "https://hooks.example/s/secret9"}},
        }
    )
    assert "hunter2-secret" not in repr(hidden)
    assert "secret9" not in repr(hidden)
