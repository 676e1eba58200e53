"""Envelope, settings and logging rules every service relies on."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry import trace
from pydantic import ValidationError
from pydantic_settings import SettingsConfigDict

from contracts.events import Event, MessageReceived, QueryReceived, TurnReply
from contracts.logs import PAYLOAD_LOGGERS, JsonFormatter, configure_logging, correlation_id_var
from contracts.settings import ServiceSettings
from contracts.topics import SUBSCRIPTIONS, Topic, dead_letter_stream, reply_stream
from contracts.tracing import context_from_traceparent, current_traceparent, setup_tracing


def test_envelope_defaults_are_filled_and_unique() -> None:
    first = MessageReceived(
        correlation_id="t1", conversation_id="c1", user_id="u", text="hi", reply_to="reply.g"
    )
    second = MessageReceived(
        correlation_id="t1", conversation_id="c1", user_id="u", text="hi", reply_to="reply.g"
    )
    assert first.schema_version == 1
    assert first.occurred_at.tzinfo is not None
    assert len(first.event_id) == 32
    assert first.event_id != second.event_id


def test_events_round_trip_and_ignore_unknown_fields() -> None:
    query = QueryReceived(
        correlation_id="t1", conversation_id="c1", user_id="u", text="<PERSON_1>", reply_to="r"
    )
    payload = json.loads(query.model_dump_json())
    payload["added_in_a_later_version"] = True
    assert QueryReceived.model_validate(payload) == query


def test_envelope_fields_are_required() -> None:
    with pytest.raises(ValidationError) as error:
        Event.model_validate({"conversation_id": "c"})
    assert "correlation_id" in str(error.value)


def test_reply_kinds_are_closed() -> None:
    with pytest.raises(ValidationError):
        TurnReply(correlation_id="t", conversation_id="c", kind="shout")  # type: ignore[arg-type]


def test_names() -> None:
    assert reply_stream("gw-1") == "reply.gw-1"
    assert dead_letter_stream(Topic.QUERY_RECEIVED) == "query.received.dlq"
    assert all(groups for groups in SUBSCRIPTIONS.values())


class _Prefixed(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SOMESVC_")
    port: int = 1


def test_shared_settings_are_unprefixed_and_service_settings_prefixed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6380/1")
    monkeypatch.setenv("SOMESVC_PORT", "9")
    monkeypatch.setenv("SOMESVC_REDIS_URL", "redis://ignored:1/0")
    monkeypatch.setenv("DESKPILOT_MAX_DELIVERIES", "")  # empty means unset
    settings = _Prefixed()
    assert settings.redis_url == "redis://elsewhere:6380/1"
    assert settings.port == 9
    assert settings.max_deliveries == 5
    assert "redis_url" in settings.model_fields_set


@pytest.mark.parametrize("environment", ["development", "production"])
def test_placeholder_admin_tokens_are_refused_and_empty_disables(
    monkeypatch: pytest.MonkeyPatch, environment: str
) -> None:
    monkeypatch.setenv("DESKPILOT_ENV", environment)
    for placeholder in ("change-me", "changeme", "Change-Me "):
        monkeypatch.setenv("DESKPILOT_ADMIN_TOKEN", placeholder)
        with pytest.raises(ValidationError, match="DESKPILOT_ADMIN_TOKEN"):
            ServiceSettings()
    # Empty is unset, and unset is disabled: it never turns back into a known default.
    monkeypatch.setenv("DESKPILOT_ADMIN_TOKEN", "")
    assert ServiceSettings().admin_token.get_secret_value() == ""
    monkeypatch.delenv("DESKPILOT_ADMIN_TOKEN")
    assert ServiceSettings().admin_token.get_secret_value() == ""
    monkeypatch.setenv("DESKPILOT_ADMIN_TOKEN", "a-real-secret-value")
    assert ServiceSettings().admin_token.get_secret_value() == "a-real-secret-value"


def test_json_logs_carry_service_trace_and_correlation() -> None:
    setup_tracing("test", "node-a")
    formatter = JsonFormatter("gateway", "node-a")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("there",), None)
    token = correlation_id_var.set("turn-42")
    try:
        with trace.get_tracer("t").start_as_current_span("span") as span:
            line = json.loads(formatter.format(record))
            expected_trace = format(span.get_span_context().trace_id, "032x")
    finally:
        correlation_id_var.reset(token)
    assert line["msg"] == "hello there"
    assert line["service"] == "gateway"
    assert line["node"] == "node-a"
    assert line["trace_id"] == expected_trace
    assert line["correlation_id"] == "turn-42"


def test_exceptions_are_logged_without_their_message() -> None:
    formatter = JsonFormatter("redactor", "n")
    try:
        raise ValueError("my password is hunter2")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = formatter.format(record)
    assert "hunter2" not in line
    assert json.loads(line)["exc_type"] == "ValueError"


def test_libraries_that_quote_payloads_stay_quiet_even_at_debug() -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging("redactor", "n", "DEBUG")
        assert logging.getLogger("deskpilot.redactor").isEnabledFor(logging.DEBUG)
        for name in PAYLOAD_LOGGERS:
            assert not logging.getLogger(name).isEnabledFor(logging.DEBUG), name
            assert logging.getLogger(name).isEnabledFor(logging.INFO), name
    finally:
        root.handlers[:], root.level = handlers, level
        for name in PAYLOAD_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_traceparent_round_trip() -> None:
    setup_tracing("test", "node-a")
    tracer = trace.get_tracer("t")
    with tracer.start_as_current_span("parent") as parent:
        traceparent, _ = current_traceparent()
    assert traceparent is not None
    context = context_from_traceparent(traceparent)
    with tracer.start_as_current_span("child", context=context) as child:  # type: ignore[arg-type]
        assert child.get_span_context().trace_id == parent.get_span_context().trace_id


SPAN_SNIPPET = """
from opentelemetry import trace
from contracts.tracing import setup_tracing, shutdown_tracing
setup_tracing("probe-service", "node-z")
with trace.get_tracer("t").start_as_current_span("probe-span"):
    pass
shutdown_tracing()
"""


@pytest.mark.parametrize(("exporter", "exported"), [("console", True), (None, False)])
def test_spans_are_exported_only_when_an_exporter_is_configured(
    exporter: str | None, exported: bool
) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if exporter:
        env["OTEL_TRACES_EXPORTER"] = exporter
    result = subprocess.run(
        [sys.executable, "-c", SPAN_SNIPPET],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert ('"name": "probe-span"' in result.stdout) is exported
    assert ("probe-service" in result.stdout) is exported


def test_a_purge_is_confirmed_once_per_service() -> None:
    from contracts.events import ConversationPurged

    purge = ConversationPurged(correlation_id="c1", conversation_id="conv", requested_by="cli")
    first = purge.confirmation("indexer", gap_turns=2)
    assert first.action == "purge"
    assert first.service == "indexer"
    assert first.details == {"gap_turns": 2}
    assert (first.correlation_id, first.conversation_id) == ("c1", "conv")
    assert purge.confirmation("indexer", gap_turns=2).event_id == first.event_id
    assert purge.confirmation("gateway").event_id != first.event_id
