"""The AsyncAPI document of the bus tells the truth, and the committed copy is current.

``contracts/asyncapi.yaml`` must be exactly what ``deskpilot asyncapi`` generates from the
contracts (as ``tests/test_readme.py`` does for the settings table). Beyond that: the document
is structurally sound (AsyncAPI 3.0 keys, every ``$ref`` resolves, a channel per topic, payload
schemas with their required fields), the topic-to-model mapping agrees with the services'
subscriptions, the streams internal systems read (``ticket.events``, ``audit.log``) carry their
descriptions, and what it says about the wire (the entry field, the headers, the payload, the
dead letters) matches what the real bus writes to a real valkey.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml
from faststream.redis.parser import BinaryMessageFormatV1
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from contracts.bus import RAW_FIELD, Bus, Delivery
from contracts.events import (
    AuditRecorded,
    Event,
    TicketChange,
    TicketEvent,
    TicketRecord,
    TicketRef,
)
from contracts.settings import ServiceSettings
from contracts.topics import DLQ_SUFFIX, RAW_TOPICS, SUBSCRIPTIONS, Group, Topic
from deploy.cli import asyncapi
from deploy.cli.asyncapi import TOPICS, build_document, render, topic_docstrings
from deploy.cli.main import main as cli_main
from tests.support import REPO_ROOT, deskpilot, unique_name, wait_until

COMMITTED = REPO_ROOT / "contracts" / "asyncapi.yaml"
REGENERATE = "run: deskpilot asyncapi --write contracts/asyncapi.yaml"
SERVICES = ("gateway", "redactor", "ocr", "orchestrator", "crawler", "indexer", "ticketing")
UNDECLARED_READERS: frozenset[tuple[Topic, Group]] = frozenset()
"""Subscriptions missing from ``contracts.topics.SUBSCRIPTIONS`` (so missing from the document
too), known and reported: the orchestrator's feedback-aware retrieval reads feedback.recorded.
Remove an entry once SUBSCRIPTIONS names the pair; add none without fixing the contracts."""


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return build_document()


@pytest.fixture(scope="module")
def text() -> str:
    return render()


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _resolve(document: dict[str, Any], reference: str) -> Any:
    assert reference.startswith("#/"), reference
    node: Any = document
    for part in reference[2:].split("/"):
        node = node[part]
    return node


def _payload_validator(document: dict[str, Any], model: type[Event]) -> Draft202012Validator:
    """A validator for ``model``'s payload schema as the document states it (refs and all)."""
    registry: Registry[Any] = Registry().with_resource(
        "urn:deskpilot:asyncapi", Resource(contents=document, specification=DRAFT202012)
    )
    schema = {"$ref": f"urn:deskpilot:asyncapi#/components/schemas/{model.__name__}"}
    return Draft202012Validator(schema, registry=registry)


def _service_sources(package: str) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        if "tests" not in path.relative_to(REPO_ROOT).parts:
            yield path, ast.parse(path.read_text(encoding="utf-8"))


# -- the committed file ------------------------------------------------------------------------


def test_committed_document_is_the_generated_one(text: str) -> None:
    assert COMMITTED.read_text(encoding="utf-8") == text, REGENERATE


def test_generation_is_deterministic_across_processes(text: str) -> None:
    """Another interpreter (another hash seed) through the command a user runs prints the same."""
    assert render() == text
    result = deskpilot("asyncapi", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == text


def test_write_writes_the_printed_document(tmp_path: Path, text: str) -> None:
    target = tmp_path / "asyncapi.yaml"
    assert cli_main(["asyncapi", "--write", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == text


def test_yaml_holds_exactly_the_document(document: dict[str, Any], text: str) -> None:
    assert yaml.safe_load(text) == document
    assert "&id" not in text, "no YAML anchors: every object is written out in full"


# -- the topic -> model mapping ----------------------------------------------------------------


def test_every_topic_has_a_model() -> None:
    missing = sorted(str(topic) for topic in Topic if topic not in TOPICS)
    assert not missing, f"add these topics to deploy.cli.asyncapi.TOPICS: {missing}"


def test_generation_refuses_a_topic_without_a_model() -> None:
    partial = {topic: doc for topic, doc in TOPICS.items() if topic != Topic.TICKET_EVENTS}
    with pytest.raises(ValueError, match=r"ticket\.events"):
        build_document(partial)


def test_mapping_agrees_with_the_services_subscriptions() -> None:
    """Every ``bus.subscribe(Topic.X, Model, ..., group=Group.Y)`` in a service: the document
    gives ``X`` that model, and ``SUBSCRIPTIONS`` (hence the document) names that group."""
    seen = 0
    for package in SERVICES:
        for path, tree in _service_sources(package):
            for call in ast.walk(tree):
                if not (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "subscribe"
                    and len(call.args) >= 2
                    and isinstance(call.args[0], ast.Attribute)
                    and isinstance(call.args[0].value, ast.Name)
                    and call.args[0].value.id == "Topic"
                    and isinstance(call.args[1], ast.Name)
                ):
                    continue
                topic = Topic[call.args[0].attr]
                where = f"{path.relative_to(REPO_ROOT)}:{call.lineno}"
                assert TOPICS[topic].model.__name__ == call.args[1].id, where
                for keyword in call.keywords:
                    if keyword.arg == "group" and isinstance(keyword.value, ast.Attribute):
                        group = Group[keyword.value.attr]
                        if (topic, group) in UNDECLARED_READERS:
                            continue
                        assert group in SUBSCRIPTIONS.get(topic, ()), (
                            f"{where}: {group} reads {topic}, but contracts.topics.SUBSCRIPTIONS "
                            "does not say so (groups are created ahead from it)"
                        )
                seen += 1
    assert seen >= 20, "the subscriptions were not found: has the bus's API changed?"


def test_named_producers_write_their_topics() -> None:
    """A producer the mapping names refers to its topic in its own code (``cli``: in deploy)."""
    for topic, doc in TOPICS.items():
        for producer in doc.producers:
            package = "deploy" if producer == asyncapi.CLI else str(producer)
            assert package in (*SERVICES, "deploy"), producer
            sources = (path.read_text(encoding="utf-8") for path, _ in _service_sources(package))
            token = f"Topic.{topic.name}"
            assert any(token in source for source in sources), f"{package} never uses {token}"


# -- structure ---------------------------------------------------------------------------------


def test_document_is_asyncapi_3(document: dict[str, Any]) -> None:
    assert document["asyncapi"] == "3.0.0"
    assert document["info"]["title"] == "Deskpilot bus"
    assert document["info"]["version"]
    assert document["defaultContentType"] == "application/json"
    assert set(document) == {
        "asyncapi",
        "info",
        "defaultContentType",
        "servers",
        "channels",
        "operations",
        "components",
    }
    assert asyncapi.invalid_ids(document) == []
    for key in ("channels", "operations"):
        assert list(document[key]) == sorted(document[key])


def test_every_reference_resolves(document: dict[str, Any]) -> None:
    references = set(_refs(document))
    assert len(references) > 50
    for reference in references:
        _resolve(document, reference)  # KeyError when it points nowhere


def test_a_channel_per_topic_with_its_model(document: dict[str, Any]) -> None:
    channels = document["channels"]
    for topic, doc in TOPICS.items():
        channel = channels[str(topic)]
        assert channel["address"] == str(topic)
        [message_ref] = channel["messages"].values()
        message = _resolve(document, message_ref["$ref"])
        assert message["name"] == doc.model.__name__
        assert message["payload"] == {"$ref": f"#/components/schemas/{doc.model.__name__}"}
        assert channel["x-deskpilot-consumer-groups"] == [
            str(g) for g in SUBSCRIPTIONS.get(topic, ())
        ]
        assert channel["x-deskpilot-dead-letters"] == f"{topic}{DLQ_SUFFIX}"
        assert channel.get("x-deskpilot-raw", False) == (topic in RAW_TOPICS)
        assert channel["description"].strip()
    assert set(channels) == {str(topic) for topic in Topic} | {"reply", "dlq"}


def test_payload_schemas_carry_the_required_fields(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for model in {doc.model for doc in TOPICS.values()} | {asyncapi.REPLY_MODEL}:
        schema = schemas[model.__name__]
        Draft202012Validator.check_schema(schema)
        required = [name for name, field in model.model_fields.items() if field.is_required()]
        assert schema["required"] == required, model.__name__
        assert {"correlation_id", "conversation_id"} <= set(schema["required"])
        assert list(schema["properties"]) == list(model.model_fields)


def test_operations_name_every_producer_and_consumer_group(document: dict[str, Any]) -> None:
    operations = document["operations"]
    for topic, doc in TOPICS.items():
        on_topic = [
            op for op in operations.values() if op["channel"] == {"$ref": f"#/channels/{topic}"}
        ]
        receivers = sorted(
            op["bindings"]["redis"]["groupName"] for op in on_topic if op["action"] == "receive"
        )
        senders = sorted(op["tags"][0]["name"] for op in on_topic if op["action"] == "send")
        assert receivers == sorted(str(g) for g in SUBSCRIPTIONS.get(topic, ())), topic
        assert senders == sorted(str(p) for p in doc.producers), topic
        for operation in on_topic:
            channel_messages = {
                f"#/channels/{topic}/messages/{name}"
                for name in document["channels"][str(topic)]["messages"]
            }
            assert {ref["$ref"] for ref in operation["messages"]} <= channel_messages


def test_reply_and_dead_letter_streams_are_described(document: dict[str, Any]) -> None:
    reply = document["channels"]["reply"]
    assert reply["address"] == "reply.{gatewayInstance}"
    assert set(reply["parameters"]) == {"gatewayInstance"}
    assert list(reply["messages"]) == ["TurnReply"]
    dlq = document["channels"]["dlq"]
    assert dlq["address"] == "{topic}.dlq"
    assert set(dlq["parameters"]) == {"topic"}
    assert list(dlq["messages"]) == ["DeadLetter"]
    readers = [
        op for op in document["operations"].values() if op["channel"]["$ref"] == "#/channels/reply"
    ]
    assert [
        op["bindings"]["redis"]["groupName"] for op in readers if op["action"] == "receive"
    ] == ["gateway"]


# -- the streams internal systems read ---------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "model", "fields"),
    [
        (Topic.TICKET_EVENTS, TicketEvent, ("change", "record", "idempotency_key")),
        (Topic.AUDIT, AuditRecorded, ("action", "reason", "details")),
    ],
)
def test_streams_for_internal_systems_carry_their_descriptions(
    document: dict[str, Any], topic: Topic, model: type[Event], fields: tuple[str, ...]
) -> None:
    channel = document["channels"][str(topic)]
    description = " ".join(channel["description"].split())
    docstring = topic_docstrings()[topic]
    assert docstring, "the Topic has a docstring of its own"
    assert docstring in description
    note = " ".join(TOPICS[topic].note.split())
    assert note, "the mapping explains the stream to its outside readers"
    assert note in description
    assert channel["title"]
    message = document["components"]["messages"][model.__name__]
    assert message["summary"] == " ".join((model.__doc__ or "").split())
    schema = document["components"]["schemas"][model.__name__]
    assert " ".join(schema["description"].split()) == message["summary"]
    for name in fields:
        assert name in schema["properties"], name
        assert name in description, f"the channel explains {name}"


def test_every_channel_uses_its_topic_docstring(document: dict[str, Any]) -> None:
    for topic, docstring in topic_docstrings().items():
        assert docstring in " ".join(document["channels"][str(topic)]["description"].split())
    assert len(topic_docstrings()) >= len(Topic) // 2


def test_real_events_validate_against_the_document(document: dict[str, Any]) -> None:
    ticket = TicketEvent(
        correlation_id="c-1",
        conversation_id="v-1",
        change=TicketChange.CREATED,
        ticket=TicketRef(key="IT-1042", url="https://jira.example/browse/IT-1042", status="Open"),
        record=TicketRecord(
            key="IT-1042", url="https://jira.example/browse/IT-1042", status="Open", summary="VPN"
        ),
    )
    audit = AuditRecorded(
        correlation_id="c-1",
        conversation_id="v-1",
        service="orchestrator",
        action="decision",
        reason="answer from the knowledge base",
        details={"citations": 2, "score": 0.7, "crawl": False, "category": None},
    )
    for event in (ticket, audit):
        validator = _payload_validator(document, type(event))
        validator.validate(json.loads(event.model_dump_json()))
    unknown_change = {**json.loads(ticket.model_dump_json()), "change": "exploded"}
    without_turn = json.loads(audit.model_dump_json())
    del without_turn["correlation_id"]
    with pytest.raises(ValidationError, match="exploded"):
        _payload_validator(document, TicketEvent).validate(unknown_change)
    with pytest.raises(ValidationError, match="correlation_id"):
        _payload_validator(document, AuditRecorded).validate(without_turn)


# -- what the real bus writes ------------------------------------------------------------------


def _schema_validator(document: dict[str, Any], name: str) -> Draft202012Validator:
    return Draft202012Validator(document["components"]["schemas"][name])


async def test_an_entry_on_the_wire_is_what_the_document_says(
    document: dict[str, Any], redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    topic = unique_name("asyncapi")
    bus = Bus(bus_settings, "asyncapi-test")
    await bus.start()
    try:
        event = TicketEvent(
            correlation_id="c-2", conversation_id="v-2", change=TicketChange.COMMENTED
        )
        await bus.publish(topic, event)
    finally:
        await bus.stop()
    [(_, fields)] = await redis.xrange(topic)
    await redis.delete(topic)

    assert set(fields) == {RAW_FIELD}, "one field, __data__"
    assert fields[RAW_FIELD].startswith(BinaryMessageFormatV1.IDENTITY_HEADER)
    body, headers = BinaryMessageFormatV1.parse(fields[RAW_FIELD])
    _schema_validator(document, "MessageHeaders").validate(headers)
    assert set(headers) <= set(document["components"]["schemas"]["MessageHeaders"]["properties"])
    assert headers["correlation_id"] == event.correlation_id
    payload = json.loads(body)
    _payload_validator(document, TicketEvent).validate(payload)
    assert set(payload) == set(document["components"]["schemas"]["TicketEvent"]["properties"])


async def test_a_dead_letter_is_what_the_document_says(
    document: dict[str, Any], redis: aioredis.Redis, bus_settings: ServiceSettings
) -> None:
    topic, group = unique_name("asyncapi"), unique_name("g")

    async def never_called(event: TicketEvent, delivery: Delivery) -> None:
        raise AssertionError("an invalid payload reached the handler")

    bus = Bus(bus_settings, "asyncapi-test")
    bus.subscribe(topic, TicketEvent, never_called, group=group)
    await bus.start()
    try:
        await bus.broker.publish(b'{"not": "a ticket event"}', stream=topic)
        entries = await wait_until(lambda: redis.xrange(f"{topic}{DLQ_SUFFIX}"), 20.0)
    finally:
        await bus.stop()
        await redis.delete(topic, f"{topic}{DLQ_SUFFIX}")

    [(_, fields)] = entries
    as_text = {key.decode(): value.decode("latin-1") for key, value in fields.items()}
    schema = document["components"]["schemas"]["DeadLetter"]
    assert set(as_text) <= set(schema["properties"]), "every field is documented"
    _schema_validator(document, "DeadLetter").validate(as_text)
    assert as_text["group"] == group
    assert as_text["error"].startswith("invalid TicketEvent")
