"""Approved automations: the password-reset trigger, the confirmation flow and the signed webhook,
against a real HTTP server on loopback (``tests/support/fake_reset_webhook.py``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest
from pydantic import SecretStr, ValidationError

from contracts.events import AuditRecorded, utcnow
from orchestrator.automations import (
    NEUTRAL_DESTINATION,
    PASSWORD_RESET,
    AutomationRunner,
    AutomationSettings,
    Declined,
    Done,
    Failed,
    FailureReason,
    Offer,
    PasswordReset,
    PendingAutomation,
    SelfService,
    UserContext,
    audit_event,
    detect_password_reset,
    read_confirmation,
)
from tests.support import wait_until
from tests.support.fake_reset_webhook import LEAKED_PASSWORD, FakeResetWebhook

SECRET = "test-webhook-secret-0123456789abcdef"
ARTICLE = "https://it.northwind.example/kb/reset-your-account-password"
ALICE = UserContext("u-alice", authenticated=True)
ANONYMOUS = UserContext("anon-7f3a", authenticated=False)


# -- the trigger -------------------------------------------------------------------------------

REQUESTS = [
    "reset my password",
    "I forgot my password",
    "my password expired, can you reset it",
    "Hi, I was on holiday and my password expired. Can you reset it please? Thanks",
    "I forgot my password and can't log in",
    "can you reset my password please",
    "Could someone reset my password?",
    "I need a password reset",
    "password reset please",
    "Password reset",
    "I can't remember my password",
    "i dont remember my pwd",
    "plz reset my pw",
    "I need a new password",
    "please reset my windows password",
    "I forgot my email password",
    "my Outlook password has expired",
    "my expired password needs resetting asap",
    "I can't reset my password, the portal says error",
    "would it be possible to reset my password?",
    "I'm locked out, forgot my password",
    "Can I get a password reset?",
    "I forgot the password to log in to my laptop",
    "I forgot my password, how do I reset it?",
    "Can you reset the password for my account?",
    "I have forgotten my password again",
    "I need help resetting my password",
    "my account password expired yesterday and I can't sign in",
    "I would like to reset my password",
    "Please can I have a new password",
    "I need my password changed please",
    "I am unable to reset my password on the portal",
    "my password <PASSWORD_1> has expired",
]

NEAR_MISSES = [
    # how-to questions and the password rules: the knowledge base answers them
    "How do I reset my password?",
    "how do I change my expired password",
    "how do I reset a forgotten password?",
    "What are the password requirements?",
    "how long does my password need to be?",
    "How often do I have to change my password?",
    "can my password contain spaces?",
    "what special characters are allowed in a password?",
    "can I reuse an old password?",
    "I need help choosing a new password",
    "my password is <PASSWORD_1> is that strong enough?",
    "is there a password manager?",
    "Can I change my password from my phone?",
    "Tell me how to reset my password",
    # other credentials
    "reset my VPN token",
    "reset my VPN password",
    "forgot my vpn password",
    "I forgot my wifi password",
    "what's the guest wifi password",
    "I forgot my phone PIN",
    "reset my MFA",
    "I forgot my bitlocker recovery key",
    "reset the admin password on the printer",
    "I forgot the password for the coffee machine",
    "I need to reset my router",
    "my vpn password expired, can you reset it",
    # someone else's password
    "reset <PERSON_1>'s password",
    "can you reset the password for <PERSON_1>?",
    "reset my colleague's password",
    "reset all passwords",
    # negated, advice, hypothetical, already done, someone else doing it
    "I don't need a password reset",
    "please don't reset my password",
    "I haven't forgotten my password",
    "should I change my password?",
    "what if I forget my password?",
    "what happens when my password expires?",
    "my password expires in 3 days",
    "I reset my password and now outlook keeps asking for it",
    "I changed my password yesterday",
    "can my manager reset my password?",
    "who can reset my password?",
    "does resetting my password log me out of teams?",
    # not about a reset at all
    "my new password doesn't work in teams",
    "the password reset email never arrived",
    "I'm locked out of my account",
    "How do I connect to the office Wi-Fi?",
]


@pytest.mark.parametrize("text", REQUESTS)
def test_password_reset_requests_trigger(text: str) -> None:
    assert detect_password_reset(text) is not None


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_do_not_trigger(text: str) -> None:
    assert detect_password_reset(text) is None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I forgot my password", "forgot"),
        ("my password has expired", "expired"),
        ("reset my password", "request"),
        ("I can't reset my password", "trouble"),
    ],
)
def test_trigger_says_why(text: str, kind: str) -> None:
    assert detect_password_reset(text) == kind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("yes", "yes"),
        ("Yes please!", "yes"),
        ("go ahead", "yes"),
        ("ok, reset it now", "yes"),
        ("yes, go ahead and reset my password", "yes"),
        ("sure", "yes"),
        ("do it", "yes"),
        ("no", "no"),
        ("no thanks", "no"),
        ("don't", "no"),
        ("not now", "no"),
        ("cancel", "no"),
        ("I guess", None),
        ("maybe later", None),
        ("yes?", None),
        ("yes but reset my vpn password instead", None),
        ("how long does it take?", None),
        ("my printer is jammed", None),
    ],
)
def test_confirmation_must_be_explicit(text: str, expected: str | None) -> None:
    assert read_confirmation(text) == expected


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def webhook_server() -> Iterator[FakeResetWebhook]:
    with FakeResetWebhook(SECRET) as server:
        yield server


@pytest.fixture
def webhook(webhook_server: FakeResetWebhook) -> FakeResetWebhook:
    webhook_server.reset_state()
    return webhook_server


def make_runner(
    url: str, secret: str = SECRET, timeout_s: float = 2.0, attempts: int = 2
) -> AutomationRunner:
    reset = PasswordReset(url=url, secret=SecretStr(secret), timeout_s=timeout_s, attempts=attempts)
    return AutomationRunner([reset], offer_ttl_s=600)


@pytest.fixture
async def runner(webhook: FakeResetWebhook) -> AsyncIterator[AutomationRunner]:
    automations = make_runner(webhook.url)
    yield automations
    await automations.aclose()


def offer(runner: AutomationRunner, turn: str = "turn-1", user: UserContext = ALICE) -> Offer:
    result = runner.start("I forgot my password, can you reset it?", user, turn)
    assert isinstance(result, Offer)
    return result


# -- the confirmation flow ---------------------------------------------------------------------


async def test_offer_then_yes_resets_once_and_says_where(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    offered = offer(runner)
    assert "Shall I reset it?" in offered.question
    assert offered.pending == PendingAutomation(
        action=PASSWORD_RESET,
        request_id="turn-1",
        user_id="u-alice",
        offered_at=offered.pending.offered_at,
    )
    assert offered.audit["outcome"] == "offered"
    assert offered.audit["reason"] == "forgot"
    assert webhook.requests == []  # nothing runs before the yes

    # The pending offer survives a round trip through the conversation's memory.
    pending = PendingAutomation.model_validate_json(offered.pending.model_dump_json())
    result = await runner.reply(pending, "yes please", ALICE, "turn-2")

    assert isinstance(result, Done)
    assert result.delivered_to == "your registered mobile phone"
    assert "your registered mobile phone" in result.text
    assert result.audit == {
        "action": PASSWORD_RESET,
        "outcome": "done",
        "reason": "webhook confirmed",
        "user_id": "u-alice",
        "request_id": "turn-1",
        "http_status": 200,
        "attempts": 1,
        "destination_withheld": False,
    }
    assert [(r.user_id, r.request_id) for r in webhook.resets] == [("u-alice", "turn-1")]


async def test_confirmation_in_the_requesting_message_does_not_count(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    first = runner.start("reset my password, yes I confirm", ALICE, "turn-1")
    assert isinstance(first, Offer)
    # The same turn again (a redelivery, or a caller passing the offering message) runs nothing.
    assert await runner.reply(first.pending, "yes", ALICE, "turn-1") is None
    assert webhook.requests == []


async def test_no_declines_and_other_messages_let_the_offer_lapse(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    pending = offer(runner).pending
    declined = await runner.reply(pending, "no thanks", ALICE, "turn-2")
    assert isinstance(declined, Declined)
    assert declined.audit["outcome"] == "declined"
    assert await runner.reply(pending, "how do I add a printer?", ALICE, "turn-3") is None
    assert await runner.reply(pending, "I guess", ALICE, "turn-4") is None
    assert webhook.requests == []


async def test_only_the_offered_user_can_confirm(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    pending = offer(runner).pending
    assert await runner.reply(pending, "yes", UserContext("u-mallory", True), "turn-2") is None
    assert webhook.requests == []


async def test_unauthenticated_users_get_self_service(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    result = runner.start("I forgot my password", ANONYMOUS, "turn-1")
    assert isinstance(result, SelfService)
    assert result.reason == "not_authenticated"
    assert result.article_url == ARTICLE
    assert ARTICLE in result.text
    assert result.audit["outcome"] == "self_service"

    # Signed out between the offer and the yes: still self-service, nothing runs.
    pending = offer(runner).pending
    again = await runner.reply(pending, "yes", UserContext("u-alice", False), "turn-2")
    assert isinstance(again, SelfService)
    assert webhook.requests == []


async def test_a_late_yes_asks_again(webhook: FakeResetWebhook) -> None:
    now = [utcnow()]
    reset = PasswordReset(url=webhook.url, secret=SecretStr(SECRET))
    runner = AutomationRunner([reset], offer_ttl_s=60, clock=lambda: now[0])
    pending = offer(runner).pending
    now[0] += timedelta(seconds=61)
    result = await runner.reply(pending, "yes", ALICE, "turn-9")
    assert isinstance(result, Offer)
    assert result.pending.request_id == "turn-9"
    assert result.pending.offered_at == now[0]
    assert webhook.requests == []
    await runner.aclose()


async def test_messages_that_ask_for_nothing_start_nothing(runner: AutomationRunner) -> None:
    assert runner.start("How do I reset my password?", ALICE, "t") is None
    assert runner.start("reset my VPN token", ALICE, "t") is None


async def test_an_automation_not_allowed_never_runs(webhook: FakeResetWebhook) -> None:
    settings = AutomationSettings(automations=[])
    runner = AutomationRunner.from_settings(settings)
    assert runner.start("I forgot my password", ALICE, "t") is None
    pending = PendingAutomation(
        action=PASSWORD_RESET, request_id="t", user_id="u-alice", offered_at=utcnow()
    )
    assert await runner.reply(pending, "yes", ALICE, "t2") is None
    assert webhook.requests == []


# -- the signed webhook ------------------------------------------------------------------------


async def test_request_is_signed_over_the_exact_body(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    before = int(time.time())
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    assert isinstance(result, Done)
    (request,) = webhook.requests
    assert request.status == 200  # the fake verified signature and timestamp
    expected = hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
    assert request.header("X-Deskpilot-Signature") == f"sha256={expected}"
    payload = json.loads(request.body)
    assert payload == {
        "action": "password_reset",
        "request_id": "turn-1",
        "timestamp": payload["timestamp"],
        "user_id": "u-alice",
    }
    assert before <= payload["timestamp"] <= int(time.time())
    assert request.header("X-Deskpilot-Timestamp") == str(payload["timestamp"])
    assert request.header("Idempotency-Key") == "turn-1"
    assert request.header("Content-Type") == "application/json"


async def test_wrong_secret_is_refused_by_the_endpoint(
    webhook: FakeResetWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    runner = make_runner(webhook.url, secret="another-secret-another-secret-0000")
    with caplog.at_level(logging.ERROR, logger="deskpilot.orchestrator.automations"):
        result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    await runner.aclose()
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.UNAUTHORIZED
    assert webhook.requests[0].error == "invalid_signature"
    assert webhook.resets == []
    assert "refused our signature" in caplog.text


async def test_stale_timestamp_is_refused(webhook: FakeResetWebhook) -> None:
    reset = PasswordReset(
        url=webhook.url, secret=SecretStr(SECRET), clock=lambda: time.time() - 3600
    )
    runner = AutomationRunner([reset])
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    await runner.aclose()
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.UNAUTHORIZED
    assert webhook.requests[0].error == "invalid_timestamp"
    assert webhook.resets == []


# -- idempotency -------------------------------------------------------------------------------


async def test_a_redelivered_yes_resets_once(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    pending = offer(runner).pending
    first = await runner.reply(pending, "yes", ALICE, "turn-2")
    second = await runner.reply(pending, "yes", ALICE, "turn-2")
    assert isinstance(first, Done)
    assert isinstance(second, Done)
    assert second.delivered_to == first.delivered_to
    assert [r.header("Idempotency-Key") for r in webhook.requests] == ["turn-1", "turn-1"]
    assert webhook.requests[1].header("X-Deskpilot-Signature") is not None
    assert len(webhook.resets) == 1


async def test_a_server_error_is_retried_with_the_same_key(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    webhook.fail_next(1, status=500)
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    assert isinstance(result, Done)
    assert result.audit["attempts"] == 2
    assert [r.status for r in webhook.requests] == [500, 200]
    assert {r.header("Idempotency-Key") for r in webhook.requests} == {"turn-1"}
    assert len(webhook.resets) == 1


async def test_separate_offers_are_separate_resets(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    for turn in ("turn-1", "turn-3"):
        result = await runner.reply(offer(runner, turn).pending, "yes", ALICE, f"{turn}-yes")
        assert isinstance(result, Done)
    assert [r.request_id for r in webhook.resets] == ["turn-1", "turn-3"]


# -- failures ----------------------------------------------------------------------------------


async def test_server_errors_after_every_attempt(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    webhook.fail_next(5, status=500)
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.SERVER_ERROR
    assert result.audit["http_status"] == 500
    assert result.audit["attempts"] == 2
    assert len(webhook.requests) == 2
    assert result.article_url == ARTICLE
    assert ARTICLE in result.text
    assert "ticket" in result.text
    assert result.offer_ticket


async def test_forced_401_is_unauthorized(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    webhook.fail_next(1, status=401)
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.UNAUTHORIZED
    assert len(webhook.requests) == 1  # a 4xx is not retried


async def test_slow_endpoint_times_out_without_retry(webhook: FakeResetWebhook) -> None:
    webhook.delay_s = 1.0
    runner = make_runner(webhook.url, timeout_s=0.2)
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    await runner.aclose()
    # A timeout, not the endpoint's 200: the runner gave up before the answer came (a clock
    # bound here failed on a loaded CI machine, where 0.2 s of waiting took 1.6 s).
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.TIMEOUT
    assert len(webhook.requests) == 1
    assert webhook.resets == []  # asked at once after the outcome, while the fake still sleeps
    # The endpoint does reset, late: wait for it, or its record lands in a later test's fake.
    await wait_until(lambda: len(webhook.resets) == 1, 10)


async def test_unknown_user(runner: AutomationRunner, webhook: FakeResetWebhook) -> None:
    webhook.users = {"u-bob"}
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.UNKNOWN_USER
    assert result.audit["http_status"] == 404
    assert webhook.resets == []


async def test_invalid_json_is_an_unconfirmed_reset(
    runner: AutomationRunner, webhook: FakeResetWebhook
) -> None:
    webhook.raw_answer = b"<html>OK</html>"
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.INVALID_RESPONSE
    assert "couldn't confirm" in result.text
    assert len(webhook.resets) == 1  # it may well have happened: the user is told so


async def test_unreachable_endpoint() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runner = make_runner(f"http://127.0.0.1:{port}/hooks/password-reset")
    result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    await runner.aclose()
    assert isinstance(result, Failed)
    assert result.reason is FailureReason.UNREACHABLE
    assert result.audit["attempts"] == 2
    assert result.audit["http_status"] is None


# -- no password, no secret --------------------------------------------------------------------


async def test_a_password_in_the_answer_is_never_shown_or_logged(
    runner: AutomationRunner, webhook: FakeResetWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.leak_password = True
    with caplog.at_level(logging.DEBUG):
        result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    assert isinstance(result, Done)
    assert result.delivered_to == "your registered mobile phone"
    for text in (repr(result), result.text, json.dumps(result.audit), caplog.text):
        assert LEAKED_PASSWORD not in text
        assert SECRET not in text
    assert "automation password_reset request turn-1: done" in caplog.text


@pytest.mark.parametrize(
    "destination",
    [
        f"your phone; temporary password {LEAKED_PASSWORD}",
        f"+1 555 0100 ({LEAKED_PASSWORD})",
        "x" * 500,
    ],
)
async def test_a_destination_carrying_the_password_is_withheld(
    runner: AutomationRunner,
    webhook: FakeResetWebhook,
    caplog: pytest.LogCaptureFixture,
    destination: str,
) -> None:
    webhook.leak_password = True
    webhook.delivered_to = destination
    try:
        with caplog.at_level(logging.DEBUG):
            result = await runner.reply(offer(runner).pending, "yes", ALICE, "turn-2")
    finally:
        webhook.delivered_to = "your registered mobile phone"
    assert isinstance(result, Done)
    assert result.delivered_to == NEUTRAL_DESTINATION
    assert result.audit["destination_withheld"] is True
    for text in (repr(result), result.text, json.dumps(result.audit), caplog.text):
        assert LEAKED_PASSWORD not in text


async def test_audit_entries_carry_no_secret_and_fit_the_audit_stream(
    runner: AutomationRunner, webhook: FakeResetWebhook, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.fail_next(5, status=500)
    with caplog.at_level(logging.DEBUG):
        offered = offer(runner)
        failed = await runner.reply(offered.pending, "yes", ALICE, "turn-2")
        self_service = runner.start("I forgot my password", ANONYMOUS, "turn-3")
    assert self_service is not None
    for entry in (offered.audit, failed.audit if failed else None, self_service.audit):
        assert entry is not None
        assert SECRET not in json.dumps(entry)
        event = audit_event(entry, correlation_id="turn-2", conversation_id="c-1")
        assert isinstance(event, AuditRecorded)
        assert event.action == "automation"
        assert event.details["action"] == PASSWORD_RESET
        assert event.details["outcome"] == entry["outcome"]
    assert SECRET not in caplog.text
    # One step audited twice (a redelivered turn) is one event id.
    assert (
        audit_event(offered.audit, "turn-1", "c-1").event_id
        == audit_event(offered.audit, "turn-1", "c-1").event_id
    )


# -- settings ----------------------------------------------------------------------------------


def test_settings_allow_list_and_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_AUTOMATIONS", "password_reset")
    monkeypatch.setenv("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL", "http://127.0.0.1:9/hook")
    monkeypatch.setenv("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET", SECRET)
    settings = AutomationSettings()
    assert settings.automations == [PASSWORD_RESET]
    assert SECRET not in repr(settings)
    runner = AutomationRunner.from_settings(settings)
    assert list(runner.automations) == [PASSWORD_RESET]

    with pytest.raises(ValidationError, match="unknown automations"):
        AutomationSettings(automations=["password_reset", "wipe_laptop"])
    monkeypatch.delenv("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL")
    with pytest.raises(ValidationError, match="WEBHOOK_URL"):
        AutomationSettings()
    monkeypatch.setenv("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL", "http://127.0.0.1:9/hook")
    monkeypatch.setenv("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET", "short")
    monkeypatch.setenv("DESKPILOT_ENV", "production")
    monkeypatch.setenv("DESKPILOT_ADMIN_TOKEN", "a-real-admin-token")
    with pytest.raises(ValidationError, match="real secret"):
        AutomationSettings()
