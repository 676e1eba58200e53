"""``deskpilot asyncapi``: the AsyncAPI document of the bus, generated from the contracts.

Every stream is a :class:`contracts.topics.Topic`, read by the consumer groups in
:data:`contracts.topics.SUBSCRIPTIONS`; every payload is a pydantic model of
:mod:`contracts.events`, and :data:`contracts.payloads.PAYLOADS` says which model each topic
carries; :data:`TOPICS` adds which services write it. From these, a FastStream ``RedisBroker``
declares a publisher per (topic, producer) and a ``StreamSub`` subscriber per (topic, group), and
FastStream's own AsyncAPI 3.0 generator turns them into channels, operations, messages and payload
schemas (each model's JSON schema, with its field descriptions and examples).

FastStream gives every subscriber and publisher a channel of its own. The document is then
regrouped so that a stream is one channel (named by its address) with one message per model,
and each producer and consumer group is an operation on it; the reply streams of the gateway
instances and the dead-letter streams are parameterised channels. The output is deterministic
(sorted channels, operations and components, no timestamps) and needs no network: the broker is
never connected. ``contracts/asyncapi.yaml`` is this command's output, and a test keeps the two
identical::

    deskpilot asyncapi --write contracts/asyncapi.yaml
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts import topics
from contracts.events import Event
from contracts.payloads import PAYLOADS, REPLY_PAYLOAD
from contracts.settings import ServiceSettings
from contracts.topics import (
    DLQ_SUFFIX,
    RAW_TOPICS,
    REPLY_PREFIX,
    SUBSCRIPTIONS,
    Group,
    Topic,
)

if TYPE_CHECKING:
    from faststream.redis import RedisBroker

# FastStream and the bus are imported where the document is built, not with the command line:
# every ``deskpilot`` command builds its parser from this module (``deskpilot ask`` started in
# 3.4 s on a loaded machine, 2.4 s of it importing them).

CLI = "cli"
"""A producer that is a ``deskpilot`` command rather than a service (purge, crawl, bench)."""

CONSUMER_NAME = "{service}-{node}-{pid}"
"""How consumers are named (``contracts.bus.consumer_name``): unique per host and process."""


@dataclass(frozen=True)
class TopicDoc:
    """What the contracts do not say about a topic: who writes it. Its payload model is the one
    :data:`contracts.payloads.PAYLOADS` gives it."""

    topic: Topic
    producers: tuple[str, ...]
    note: str = ""
    """Said after the topic's own docstring; the only description when the contracts have none."""

    @property
    def model(self) -> type[Event]:
        return PAYLOADS[self.topic]


_TOPIC_DOCS = (
    TopicDoc(Topic.MESSAGE_RECEIVED, (Group.GATEWAY,)),
    TopicDoc(Topic.ATTACHMENT_RECEIVED, (Group.GATEWAY,)),
    TopicDoc(Topic.ATTACHMENT_EXTRACTED, (Group.OCR,)),
    TopicDoc(Topic.ATTACHMENT_REDACTED, (Group.REDACTOR,)),
    TopicDoc(
        Topic.CONVERSATION_PURGED,
        (Group.GATEWAY, CLI),
        "Published by the admin API (gateway) and by `deskpilot purge` (`cli`).",
    ),
    TopicDoc(Topic.QUERY_RECEIVED, (Group.REDACTOR,)),
    TopicDoc(
        Topic.CONTEXT_INSUFFICIENT,
        (Group.ORCHESTRATOR, CLI),
        "Also published by `deskpilot crawl` and `deskpilot bench crawl` (`cli`).",
    ),
    TopicDoc(Topic.PAGES_CRAWLED, (Group.CRAWLER,)),
    TopicDoc(Topic.CRAWL_TASKS, (Group.CRAWLER,)),
    TopicDoc(
        Topic.CRAWL_STOP,
        (Group.ORCHESTRATOR, CLI),
        "`deskpilot crawl` (`cli`) stops its own job this way when it is interrupted.",
    ),
    TopicDoc(Topic.CRAWL_FINISHED, (Group.CRAWLER,)),
    TopicDoc(Topic.SITE_MAPPED, (Group.CRAWLER,)),
    TopicDoc(Topic.CHUNKS_INDEXED, (Group.INDEXER,)),
    TopicDoc(Topic.ESCALATION_REQUESTED, (Group.ORCHESTRATOR,)),
    TopicDoc(Topic.TICKET_STATUS_REQUESTED, (Group.ORCHESTRATOR,)),
    TopicDoc(
        Topic.TICKET_EVENTS,
        (Group.TICKETING,),
        "Every change of every ticket goes out here, with the ticket as it now is in `record`; "
        "`change` says what happened and `idempotency_key` ties it to the escalation that asked "
        "for it.",
    ),
    TopicDoc(
        Topic.INCIDENT_RECEIVED,
        (Group.GATEWAY,),
        "Written by the gateway for `POST /api/incidents` and the MCP tool `report_incident`.",
    ),
    TopicDoc(
        Topic.INCIDENT_REPORTED,
        (Group.REDACTOR, Group.TICKETING),
        "Written by the redactor (the incidents callers reported to the gateway, redacted) and "
        "the ticketing service's status-page watcher; an internal system may publish here too. "
        "The gateway keeps them to answer the MCP tools `list_incidents` and `get_incident`.",
    ),
    TopicDoc(
        Topic.SEARCH_RECEIVED,
        (Group.GATEWAY,),
        "Written by the gateway for the MCP tool `search_knowledge_base`.",
    ),
    TopicDoc(
        Topic.SEARCH_REQUESTED,
        (Group.REDACTOR,),
        "The orchestrator answers on `reply_to` with a `TurnReply` of kind `search` whose "
        "`passages` are what it found.",
    ),
    TopicDoc(
        Topic.AUDIT,
        (Group.GATEWAY, Group.REDACTOR, Group.ORCHESTRATOR, Group.TICKETING),
        "`action` says what kind of step it was, `reason` why, and `details` holds counts, ids, "
        "kinds and, for decisions, the redacted question (never raw user text). The admin API "
        "reads it with XREVRANGE, without a consumer group.",
    ),
    TopicDoc(Topic.FEEDBACK_RECEIVED, (Group.GATEWAY,)),
    TopicDoc(Topic.FEEDBACK_RECORDED, (Group.REDACTOR,)),
    TopicDoc(
        Topic.PROPOSALS,
        (Group.INDEXER,),
        "The indexer's knowledge-base update proposals from recurring gaps; the gateway's review "
        "queue keeps the highest `revision` per `proposal_id`.",
    ),
    TopicDoc(Topic.DOCUMENT_SUBMITTED, (Group.GATEWAY,)),
    TopicDoc(
        Topic.DOCUMENT_DELETED,
        (Group.GATEWAY,),
        "An admin deleted an uploaded document; the indexer removes every chunk of it.",
    ),
    TopicDoc(Topic.DOCUMENT_STATUS, (Group.INDEXER,)),
    TopicDoc(
        Topic.SOURCE_SYNC_REQUESTED,
        (Group.GATEWAY, Group.INDEXER, CLI),
        "Published by the admin API (`POST /api/admin/sources/{name}/sync`), by `deskpilot "
        "sources sync` (`cli`) and by the indexer's schedule; one indexer replica runs the sync.",
    ),
    TopicDoc(
        Topic.SOURCE_SYNC_COMPLETED,
        (Group.INDEXER,),
        "One per run, with its summary; read by range (`deskpilot sources sync` waits for it). "
        "The admin API reads the same summary from the sources' catalogue.",
    ),
    TopicDoc(
        Topic.SOURCE_DRAFT_REQUESTED,
        (Group.GATEWAY,),
        "Published when an admin approves a proposal with a `target` (or asks for its draft "
        "again); one indexer replica writes the draft with the source's credentials, once per "
        "`proposal_id` and source.",
    ),
    TopicDoc(
        Topic.SOURCE_DRAFT_COMPLETED,
        (Group.INDEXER,),
        "The draft's link, or why there is none (`missing_permission` on HTTP 403); the gateway "
        "keeps it on the proposal when `correlation_id` is the proposal's latest request.",
    ),
    TopicDoc(
        Topic.NOTICE_UNANSWERED,
        (Group.ORCHESTRATOR,),
        "Written with the turn's answer and audit records, in one transaction; the ticketing "
        "service e-mails and posts it to whoever `TICKETING_NOTIFY_ROUTES` names for the "
        "category, once per recurring question.",
    ),
)
TOPICS: dict[Topic, TopicDoc] = {doc.topic: doc for doc in _TOPIC_DOCS}
"""Each topic's producers (and its payload model, from contracts). A topic missing here fails the
generation (and a test): the document must describe every stream."""

REPLY_MODEL = REPLY_PAYLOAD
REPLY_PRODUCERS: tuple[str, ...] = (Group.ORCHESTRATOR, Group.REDACTOR, Group.OCR, Group.CRAWLER)
REPLY_PARAMETER = "gatewayInstance"
TOPIC_PARAMETER = "topic"

SERVER = "redis"
DEFAULT_REDIS_URL = str(ServiceSettings.model_fields["redis_url"].default)
"""``REDIS_URL``'s default; only the document's server entry shows it (it is never connected)."""

_WIDTH = 100
"""Long lines are folded at this width, so the committed file reads well and diffs line by line."""

_ID = re.compile(r"^[\w.\-]+$")
"""AsyncAPI 3.0's pattern for the keys of channels, operations and components."""

INFO_DESCRIPTION = """\
Deskpilot's services talk only over Redis Streams (Redis 7+ or Valkey, `REDIS_URL`). Each \
channel below is one stream; its address is the stream key.

**Reading a stream.** Each service reads a stream through its own consumer group (named in the \
channel and in its `receive` operations); replicas of a service share the group under consumer \
names unique per host and process. An internal system (a dashboard, chat-ops) creates a group of \
its own, e.g. `XGROUP CREATE ticket.events dashboards 0 MKSTREAM`, reads with XREADGROUP and \
acknowledges with XACK; it never uses a Deskpilot service's group. Delivery is at least once: \
de-duplicate on `event_id`.

**The entry format.** An entry has one field, `__data__`, in FastStream's binary message format \
(version 1): an 8-byte magic `\\x89BIN\\r\\n\\x1a\\n`, a big-endian unsigned short version (1), \
two big-endian unsigned ints (offset of the headers, offset of the body), an unsigned short \
header count, then each header key and value as a big-endian unsigned int length and UTF-8 \
bytes, then the body: the event as UTF-8 JSON, every field present. In Python, \
`faststream.redis.parser.BinaryMessageFormatV1.parse(fields[b"__data__"])` returns the body and \
the headers. The headers are the message's `headers` schema below.

**Envelope.** Every payload carries `event_id`, `schema_version`, `correlation_id` (one per user \
turn), `conversation_id`, `occurred_at` (UTC) and the W3C trace context (`traceparent`, \
`tracestate`). Unknown fields are ignored, so a newer producer does not break an older consumer; \
check `schema_version` when it matters. A payload schema's `required` lists what a producer must \
send; Deskpilot's producers write every field, defaults included.

**Bounds and failures.** Every publish trims its stream to about `DESKPILOT_STREAM_MAXLEN` \
entries (approximate MAXLEN). A message that fails `DESKPILOT_MAX_DELIVERIES` times, or whose \
payload is invalid, is moved to `<stream>.dlq` (the `dlq` channel) and acknowledged; `deskpilot \
dlq list|replay` shows and replays it. Streams of raw, un-redacted user content \
(`x-deskpilot-raw`) are deleted entry by entry once handled, and their dead letters keep the \
event's ids only.

Generated from the `contracts` package by `deskpilot asyncapi`; do not edit by hand."""


# -- what the contracts say ----------------------------------------------------------------------


def topic_docstrings() -> dict[Topic, str]:
    """The docstring under each ``Topic`` member in contracts/topics.py, as one paragraph."""
    tree = ast.parse(inspect.getsource(topics))
    found: dict[Topic, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == Topic.__name__):
            continue
        for statement, following in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(statement, ast.Assign)
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                found[Topic[statement.targets[0].id]] = _paragraph(following.value.value)
    return found


def _markdown(text: str) -> str:
    """Markdown paragraphs wrapped to fit the YAML's width (a line break inside one is a space)."""
    return "\n\n".join(
        textwrap.fill(
            paragraph,
            width=_WIDTH - 8,
            break_long_words=False,
            break_on_hyphens=False,
        )
        for paragraph in text.split("\n\n")
    )


def _paragraph(text: str) -> str:
    return " ".join(inspect.cleandoc(text).split())


def _model_doc(model: type[Event]) -> str:
    return _paragraph(model.__doc__ or "")


def _title(name: str) -> str:
    """``ticket.events`` -> ``Ticket events``; ``TicketEvent`` -> ``Ticket event``."""
    words = name.split(".") if "." in name else re.findall(r"[A-Z][a-z]*", name)
    return " ".join(words).capitalize()


def check_topics(mapping: Mapping[Topic, TopicDoc]) -> None:
    """Refuse a mapping that leaves a topic out: its channel would be missing from the document."""
    missing = sorted(str(topic) for topic in Topic if topic not in mapping)
    if missing:
        raise ValueError(
            f"no producers for topic(s) {', '.join(missing)} in deploy.cli.asyncapi.TOPICS"
        )


# -- FastStream's generator ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Declared:
    """One publisher or subscriber given to FastStream, and where it goes in the document."""

    channel: str
    model: type[Event]
    service: str
    action: str  # "send" or "receive"


def _operation_id(channel: str, service: str, action: str) -> str:
    return f"{channel}.{service}.{action}"


def _consumer(model: type[Event]) -> Callable[..., Any]:
    """A handler whose only parameter is the model, which is all FastStream reads of it."""

    async def consume(event: Any) -> None:
        del event

    parameter = inspect.Parameter(
        "event", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=model
    )
    consume.__signature__ = inspect.Signature([parameter], return_annotation=None)  # type: ignore[attr-defined]
    consume.__annotations__ = {"event": model, "return": None}
    consume.__name__ = model.__name__
    return consume


def _declare(
    broker: RedisBroker,
    declared: dict[str, _Declared],
    *,
    channel: str,
    address: str,
    model: type[Event],
    producers: tuple[str, ...],
    groups: tuple[str, ...],
    description: str,
) -> None:
    from faststream.redis import StreamSub

    for producer in producers:
        title = _operation_id(channel, str(producer), "send")
        broker.publisher(stream=address, schema=model, title=title, description=description)
        declared[title] = _Declared(channel, model, str(producer), "send")
    for group in groups:
        title = _operation_id(channel, str(group), "receive")
        broker.subscriber(
            stream=StreamSub(address, group=group, consumer=CONSUMER_NAME),
            title=title,
            description=description,
        )(_consumer(model))
        declared[title] = _Declared(channel, model, str(group), "receive")


def _generated(mapping: Mapping[Topic, TopicDoc]) -> tuple[dict[str, Any], dict[str, _Declared]]:
    """FastStream's AsyncAPI 3.0 document of a broker that declares the whole bus."""
    from faststream.redis import RedisBroker
    from faststream.specification import AsyncAPI

    broker = RedisBroker(DEFAULT_REDIS_URL)
    declared: dict[str, _Declared] = {}
    for topic in sorted(Topic):
        doc = mapping[topic]
        _declare(
            broker,
            declared,
            channel=str(topic),
            address=str(topic),
            model=doc.model,
            producers=doc.producers,
            groups=tuple(str(group) for group in SUBSCRIPTIONS.get(topic, ())),
            description=str(topic),
        )
    _declare(
        broker,
        declared,
        channel="reply",
        address=f"{REPLY_PREFIX}{{{REPLY_PARAMETER}}}",
        model=REPLY_MODEL,
        producers=REPLY_PRODUCERS,
        groups=(Group.GATEWAY,),
        description="reply",
    )
    specification = AsyncAPI(
        broker, title="Deskpilot bus", version=version("deskpilot"), schema_version="3.0.0"
    ).to_specification()
    document: dict[str, Any] = specification.to_jsonable()
    return document, declared


# -- the document ------------------------------------------------------------------------------


def build_document(mapping: Mapping[Topic, TopicDoc] = TOPICS) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of the bus, as a plain dict in a fixed order."""
    check_topics(mapping)
    generated, declared = _generated(mapping)
    components = generated["components"]
    server_ref = {"$ref": f"#/servers/{SERVER}"}

    messages: dict[str, Any] = {}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for title, item in declared.items():
        message_name = item.model.__name__
        message_ref = {"$ref": f"#/channels/{item.channel}/messages/{message_name}"}
        if message_name not in messages:
            messages[message_name] = _message(item.model, generated, title)
        operations[title] = _operation(item, generated["channels"][title], message_ref)

    docs = topic_docstrings()
    for topic in sorted(Topic):
        doc = mapping[topic]
        groups = [str(group) for group in SUBSCRIPTIONS.get(topic, ())]
        channel: dict[str, Any] = {
            "address": str(topic),
            "title": _title(str(topic)),
            "description": _topic_description(topic, docs.get(topic, ""), doc, groups),
            "servers": [server_ref],
            "messages": {doc.model.__name__: _ref("messages", doc.model.__name__)},
            "x-deskpilot-consumer-groups": groups,
            "x-deskpilot-producers": [str(producer) for producer in doc.producers],
            "x-deskpilot-dead-letters": f"{topic}{DLQ_SUFFIX}",
        }
        if topic in RAW_TOPICS:
            channel["x-deskpilot-raw"] = True
        channels[str(topic)] = channel
    channels["reply"] = _reply_channel(server_ref)
    channels["dlq"] = _dlq_channel(server_ref)
    messages["DeadLetter"] = _dead_letter_message()
    operations[_operation_id("dlq", "bus", "send")] = {
        "action": "send",
        "channel": {"$ref": "#/channels/dlq"},
        "title": "Any consumer moves a message that failed for good",
        "messages": [{"$ref": "#/channels/dlq/messages/DeadLetter"}],
        "tags": [{"name": "bus"}],
    }
    operations[_operation_id("dlq", CLI, "receive")] = {
        "action": "receive",
        "channel": {"$ref": "#/channels/dlq"},
        "title": "`deskpilot dlq list|replay` reads it (XREVRANGE/XRANGE, no consumer group)",
        "messages": [{"$ref": "#/channels/dlq/messages/DeadLetter"}],
        "tags": [{"name": CLI}],
    }

    schemas = dict(components["schemas"])
    schemas["DeadLetter"] = _dead_letter_schema()
    schemas["MessageHeaders"] = _headers_schema()
    servers = generated["servers"]
    [server] = servers.values()
    return {
        "asyncapi": generated["asyncapi"],
        "info": {
            "title": generated["info"]["title"],
            "version": generated["info"]["version"],
            "description": _markdown(INFO_DESCRIPTION),
        },
        "defaultContentType": generated["defaultContentType"],
        "servers": {
            SERVER: {
                "host": server["host"],
                "pathname": server["pathname"],
                "protocol": server["protocol"],
                "protocolVersion": "7",
                "description": "The Redis 7+ or Valkey server in `REDIS_URL`; host and database "
                "here are its default.",
            }
        },
        "channels": _sorted(channels),
        "operations": _sorted(operations),
        "components": {"messages": _sorted(messages), "schemas": _sorted(schemas)},
    }


def _ref(*path: str) -> dict[str, str]:
    return {"$ref": "#/components/" + "/".join(path)}


def _sorted(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {key: mapping[key] for key in sorted(mapping)}


def _topic_description(topic: Topic, docstring: str, doc: TopicDoc, groups: list[str]) -> str:
    parts = [part for part in (docstring, doc.note) if part]
    if not parts:
        parts.append(_model_doc(doc.model))
    readers = (
        f"Read by the consumer group(s) {', '.join(f'`{g}`' for g in groups)}."
        if groups
        else "No Deskpilot service reads it through a consumer group."
    )
    parts.append(
        f"{readers} Written by {', '.join(f'`{p}`' for p in doc.producers)}. "
        f"Messages that fail for good go to `{topic}{DLQ_SUFFIX}`."
    )
    if topic in RAW_TOPICS:
        parts.append(
            "Raw, un-redacted user content: each entry is deleted once handled, and a dead letter "
            "keeps the event's ids only. On the wire the event is sealed: the stream entry is a "
            "`SealedEvent`, the envelope (ids, time, trace context) in clear and the whole event "
            "as described here in `sealed`, AES-256-GCM under a key of `DESKPILOT_SEAL_KEYS` "
            "with the event id as associated data (contracts/sealing.py)."
        )
    return _markdown("\n\n".join(parts))


def _message(model: type[Event], generated: dict[str, Any], title: str) -> dict[str, Any]:
    """The message of ``model``: FastStream's correlation id and payload, named after the model."""
    channel = generated["channels"][title]
    [generated_ref] = channel["messages"].values()
    generated_message = _resolve(generated, generated_ref["$ref"])
    payload = generated_message["payload"]
    if payload != _ref("schemas", model.__name__):
        raise ValueError(f"FastStream described {model.__name__} as {payload}")
    return {
        "name": model.__name__,
        "title": _title(model.__name__),
        "summary": _model_doc(model),
        "contentType": "application/json",
        "correlationId": {
            **generated_message["correlationId"],
            "description": "The user turn's id, also the payload's `correlation_id`.",
        },
        "headers": _ref("schemas", "MessageHeaders"),
        "payload": payload,
    }


def _operation(item: _Declared, generated_channel: Any, message_ref: dict[str, str]) -> Any:
    """A send or receive operation on the merged channel, with FastStream's Redis bindings
    (``xadd``; ``xreadgroup`` with the group and the consumer-name pattern)."""
    bindings = {
        key: value
        for key, value in generated_channel["bindings"]["redis"].items()
        if key != "channel"  # the merged channel's address says it
    }
    title = (
        f"{item.service} writes"
        if item.action == "send"
        else f"{item.service} reads through its consumer group"
    )
    return {
        "action": item.action,
        "channel": {"$ref": f"#/channels/{item.channel}"},
        "title": title,
        "messages": [message_ref],
        "bindings": {"redis": bindings},
        "tags": [{"name": item.service}],
    }


def _resolve(document: Mapping[str, Any], reference: str) -> Any:
    """The object a local ``$ref`` (``#/a/b``) points at; KeyError when it points nowhere."""
    node: Any = document
    for part in reference.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _reply_channel(server_ref: dict[str, str]) -> dict[str, Any]:
    return {
        "address": f"{REPLY_PREFIX}{{{REPLY_PARAMETER}}}",
        "title": "Turn replies",
        "description": _markdown(
            f"{_paragraph(topics.reply_stream.__doc__ or '')} Each gateway instance reads its own "
            f"stream, `{REPLY_PREFIX}<instance id>` (`GATEWAY_INSTANCE_ID`), through the "
            f"`{Group.GATEWAY}` consumer group, and names it in the `reply_to` of the events it "
            f"publishes. Written by {', '.join(f'`{p}`' for p in REPLY_PRODUCERS)}: progress, "
            "the final answer, and attachment outcomes. Messages that fail for good go to "
            f"`{REPLY_PREFIX}<instance id>{DLQ_SUFFIX}`."
        ),
        "servers": [server_ref],
        "parameters": {
            REPLY_PARAMETER: {
                "description": "The id of the gateway instance holding the user's connection.",
                "examples": ["gw-1"],
            }
        },
        "messages": {REPLY_MODEL.__name__: _ref("messages", REPLY_MODEL.__name__)},
        "x-deskpilot-consumer-groups": [str(Group.GATEWAY)],
        "x-deskpilot-producers": [str(producer) for producer in REPLY_PRODUCERS],
    }


def _dlq_channel(server_ref: dict[str, str]) -> dict[str, Any]:
    consumed = sorted(str(topic) for topic in SUBSCRIPTIONS)
    return {
        "address": f"{{{TOPIC_PARAMETER}}}{DLQ_SUFFIX}",
        "title": "Dead letters",
        "description": _markdown(
            f"{_paragraph(topics.dead_letter_stream.__doc__ or '')} Every stream read through a "
            "consumer group may have one: a message whose handler failed "
            "`DESKPILOT_MAX_DELIVERIES` times, or whose payload is not a valid event, is added "
            "here with the error and acknowledged on its stream. An entry is a plain Redis "
            "stream entry (the fields of `DeadLetter`), not a FastStream message; `deskpilot dlq "
            "replay` puts the original entry back on its stream unchanged."
        ),
        "servers": [server_ref],
        "parameters": {
            TOPIC_PARAMETER: {
                "description": "The stream the message failed on: a topic or a reply stream.",
                "examples": [*consumed, f"{REPLY_PREFIX}gw-1"],
            }
        },
        "messages": {"DeadLetter": _ref("messages", "DeadLetter")},
    }


def _dead_letter_message() -> dict[str, Any]:
    return {
        "name": "DeadLetter",
        "title": "Dead letter",
        "summary": "A message that failed for good, with why and where.",
        "payload": _ref("schemas", "DeadLetter"),
    }


def _dead_letter_schema() -> dict[str, Any]:
    """The fields ``contracts.bus.Bus.dead_letter`` writes (a test compares it with real ones)."""
    from contracts.bus import RAW_FIELD, WITHHELD_FIELD

    text = {"type": "string"}
    return {
        "title": "DeadLetter",
        "description": "The fields of a dead-letter stream entry, each a byte string.",
        "type": "object",
        "properties": {
            RAW_FIELD.decode(): {
                **text,
                "format": "binary",
                "description": "The original entry's `__data__`, unchanged (FastStream's "
                "binary message format): what `deskpilot dlq replay` puts back.",
            },
            WITHHELD_FIELD.decode(): {
                **text,
                "description": "Instead of the entry, on raw streams: the event's ids as JSON "
                "(event, correlation, conversation, user, attachment ids, reply stream); never "
                "its content.",
            },
            "error": {
                **text,
                "description": "Why it failed: the exception (its type only, on raw streams), "
                "`invalid <Model>: ...` or `no outcome after N deliveries`.",
            },
            "group": {**text, "description": "The consumer group that gave up."},
            "consumer": {**text, "description": "The consumer that moved it here."},
            "original_id": {
                **text,
                "description": "The entry's id on its stream.",
                "examples": ["1718000000000-0"],
            },
            "deliveries": {
                **text,
                "pattern": "^[0-9]+$",
                "description": "How often it was delivered, as a decimal number.",
            },
            "failed_at": {**text, "format": "date-time", "description": "When (ISO 8601, UTC)."},
        },
        "required": ["error", "group", "consumer", "original_id", "deliveries", "failed_at"],
        "oneOf": [
            {"required": [RAW_FIELD.decode()]},
            {"required": [WITHHELD_FIELD.decode()]},
        ],
    }


def _headers_schema() -> dict[str, Any]:
    """The headers ``contracts.bus.Bus.publish`` writes (a test compares it with real ones)."""
    return {
        "title": "MessageHeaders",
        "description": "The headers of an entry's `__data__` (FastStream's binary format).",
        "type": "object",
        "properties": {
            "correlation_id": {
                "type": "string",
                "description": "The payload's `correlation_id`.",
            },
            "content-type": {"type": "string", "const": "application/json"},
            "traceparent": {
                "type": "string",
                "description": "W3C trace context of the publishing span, when tracing is on.",
            },
        },
        "required": ["correlation_id", "content-type"],
    }


# -- rendering and the command -------------------------------------------------------------------


def render(document: Mapping[str, Any] | None = None) -> str:
    """The document as YAML: keys in the order built, long text as literal blocks."""
    import yaml

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    # Every shared object written out in full: no YAML anchors or aliases in a document for people.
    dumper: Any = type("AsyncAPIDumper", (yaml.SafeDumper,), {"ignore_aliases": lambda *_: True})
    dumper.add_representer(str, text)
    dumped: str = yaml.dump(
        dict(document if document is not None else build_document()),
        Dumper=dumper,
        sort_keys=False,
        allow_unicode=True,
        width=_WIDTH,
    )
    return dumped


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "asyncapi", help="print the bus's AsyncAPI document (generated from the contracts)"
    )
    parser.add_argument(
        "--write", metavar="PATH", default=None, help="write it to PATH instead of printing it"
    )
    parser.add_argument(
        "--docs",
        metavar="PAGE",
        default=None,
        help="put its table of streams between the markers of this documentation page "
        "(docs/reference/asyncapi.md) instead of printing the document",
    )


def run_asyncapi(args: argparse.Namespace) -> int:
    document = build_document()
    text = render(document)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write} ({len(text.encode())} bytes)", file=sys.stderr)
    if args.docs:
        page = Path(args.docs)
        page.write_text(with_streams_table(page.read_text(encoding="utf-8"), document))
        print(f"wrote the table of streams into {args.docs}", file=sys.stderr)
    if not (args.write or args.docs):
        sys.stdout.write(text)
    return 0


# -- the documentation's table of streams ---------------------------------------------------------

DOCS_BEGIN = "<!-- asyncapi:begin -->"
DOCS_END = "<!-- asyncapi:end -->"


def streams_table(document: Mapping[str, Any]) -> str:
    """The document's streams as a Markdown table, for the documentation's bus reference.

    Made from the document alone (``contracts/asyncapi.yaml`` read back gives the same table), so
    the page says what the committed document says.
    """
    rows = [
        "| stream | payload | written by | read by (consumer groups) | what it carries |",
        "| --- | --- | --- | --- | --- |",
    ]
    for channel in document["channels"].values():
        first_paragraph = " ".join(str(channel["description"]).split("\n\n", 1)[0].split())
        cells = [
            f"`{channel['address']}`",
            ", ".join(f"`{name}`" for name in channel["messages"]),
            ", ".join(channel.get("x-deskpilot-producers", ())) or "—",
            ", ".join(channel.get("x-deskpilot-consumer-groups", ())) or "—",
            first_paragraph,
        ]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


def with_streams_table(page: str, document: Mapping[str, Any]) -> str:
    """``page`` with the text between the documentation markers replaced by the current table."""
    head, rest = page.split(DOCS_BEGIN, 1)
    _, tail = rest.split(DOCS_END, 1)
    return f"{head}{DOCS_BEGIN}\n{streams_table(document)}\n{DOCS_END}{tail}"


def invalid_ids(document: Mapping[str, Any]) -> list[str]:
    """Keys of channels, operations and components that AsyncAPI 3.0 does not allow."""
    keys = [*document["channels"], *document["operations"]]
    for section in document["components"].values():
        keys.extend(section)
    return sorted(key for key in keys if not _ID.match(key))
