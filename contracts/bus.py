"""The event bus every service uses: FastStream's RedisBroker with Deskpilot's delivery rules.

What a handler can rely on:

* It is called once per message per consumer group; replicas of a service share the group, each
  under a host-and-process-unique consumer name, so replicas never collide.
* The message is acknowledged only after the handler returned. If the handler raises, the message
  stays pending and is retried after ``reclaim_idle_ms``; so is a message whose consumer died.
  Handlers must therefore be idempotent (use event ids, deterministic ids, de-duplication keys).
* A message that failed ``max_deliveries`` times, or whose payload is not a valid event, is moved
  to ``<topic>.dlq`` with the error and the original entry, and acknowledged. Operators inspect
  and replay it with ``deskpilot dlq``.
* Raw topics (:data:`contracts.topics.RAW_TOPICS`) are sealed: :meth:`Bus.publish` seals the event
  and the delivery opens it (:mod:`contracts.sealing`), so handlers see plain events while Redis
  (and its AOF, replicas, backups) holds only the envelope and ciphertext. An entry that does not
  open (a key this process lacks, altered content) is dead-lettered at once, without content.
* Consumer groups are created ahead, from id 0 with MKSTREAM, for every topic and group in
  :data:`contracts.topics.SUBSCRIPTIONS`, so nothing published while a consumer restarts is lost.
* Every publish trims its stream with an approximate MAXLEN.
* On shutdown the broker stops reading and waits for in-flight handlers to finish and ack.
* A start that runs out of FastStream's fixed wait for a subscriber's first PING (a loaded
  machine) stops the half-started broker the same way and starts it again, up to
  :data:`START_ATTEMPTS` times.
* A subscription nobody waits on may linger (``linger_ms``): its new entries are read in
  batches, handled a little after they arrived and acknowledged together.
* What it does is measured (:mod:`contracts.metrics`): events handled, handler time and failures,
  redeliveries, dead letters and events published, and the lag of the groups it reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import redis.asyncio as aioredis
from faststream import AckPolicy
from faststream.message import AckStatus
from faststream.redis import RedisBroker, StreamSub
from faststream.redis.message import RedisBatchStreamMessage
from faststream.redis.message import RedisStreamMessage as StreamMessage
from faststream.redis.parser import BinaryMessageFormatV1
from opentelemetry import propagate, trace
from pydantic import ValidationError
from redis.asyncio.client import Pipeline
from redis.exceptions import NoPermissionError, RedisError, ResponseError
from redis.typing import StreamIdT

from contracts import metrics
from contracts.events import Event, SealedEvent
from contracts.logs import conversation_id_var, correlation_id_var
from contracts.periodic import every
from contracts.sealing import KeyRing, SealError, open_event, seal_event
from contracts.settings import ServiceSettings
from contracts.topics import (
    LINGERING,
    RAW_TOPICS,
    SUBSCRIPTIONS,
    dead_letter_stream,
    seal_key_holders,
)
from contracts.tracing import current_traceparent, setup_tracing

E = TypeVar("E", bound=Event)

log = logging.getLogger("deskpilot.bus")
tracer = trace.get_tracer("deskpilot.bus")

RAW_FIELD = b"__data__"
"""The stream-entry field in which FastStream stores a message (headers and body)."""
WITHHELD_FIELD = b"withheld"
"""In a dead letter of a raw topic, instead of the entry: the event's ids only."""


READ_TIMEOUT_MARGIN_S = 5.0
"""How much longer than a blocking read's wait the client waits for Redis's answer."""


START_ATTEMPTS = 3
"""How many times :meth:`Bus.start` starts the broker before it gives up. FastStream gives each
stream subscriber a fixed 3 s for its first PING; on a machine loaded far beyond its cores that
ran out and the whole start failed."""


LINGER_BATCH = 100
"""How many new entries a lingering subscription (``Bus.subscribe(linger_ms=...)``) reads at
once."""


def read_timeout_s(read_block_ms: int) -> float:
    """The socket timeout of the broker's connections: a blocking read's wait and a margin."""
    return read_block_ms / 1000 + READ_TIMEOUT_MARGIN_S


def consumer_name(service: str, node: str) -> str:
    """A consumer name unique to this host and process, so replicas never share pending entries."""
    return f"{service}-{node}-{os.getpid()}"


class Acknowledgement:
    """Whether a delivery's acknowledgement went with its handler's own write
    (:meth:`Delivery.ack_with`), so the bus does not send it again."""

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written = False


@dataclass(frozen=True)
class Delivery:
    """What a handler may know about the message it handles besides the event."""

    topic: str
    message_id: str
    deliveries: int
    _delete: Callable[[], Awaitable[object]]
    group: str = ""
    _acknowledgement: Acknowledgement = field(default_factory=Acknowledgement)

    async def delete_entry(self) -> None:
        """Delete the stream entry itself (XDEL), e.g. raw user text once it is redacted."""
        await self._delete()

    def delete_with(self, batch: Batch) -> None:
        """Queue the entry's deletion (XDEL) in ``batch``: what a handler publishes in place of
        raw content and the raw entry's deletion reach Redis in one write (all or nothing in a
        ``transaction`` batch), so nobody is answered while the raw entry is still there, and a
        crash cannot leave one without the other."""
        batch.redis.xdel(self.topic, self.message_id)

    def ack_with(self, batch: Batch) -> None:
        """Queue the entry's acknowledgement (XACK) in ``batch``, for the handler's last write:
        its outcome and the acknowledgement reach Redis in one round trip (all or nothing in a
        ``transaction`` batch), and the bus does not acknowledge the entry again when the handler
        returns. Once the batch is written the entry is done: a failure after it is not retried,
        so nothing that must happen may come after that write."""
        batch.redis.xack(self.topic, self.group, self.message_id)
        batch.on_written(self._acknowledged)

    def _acknowledged(self) -> None:
        self._acknowledgement.written = True


Handler = Callable[[E, Delivery], Awaitable[None]]


async def create_group(client: aioredis.Redis, stream: str, group: str) -> bool:
    """Create ``group`` on ``stream`` from id 0 (MKSTREAM); False when it already existed, or
    when this service's Redis user may not touch ``stream`` (deploy/redis_acl.py): the services
    that publish to or read from it create the group."""
    try:
        await client.xgroup_create(name=stream, groupname=group, id="0", mkstream=True)
    except NoPermissionError:
        return False
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
        return False
    return True


async def ensure_groups(client: aioredis.Redis, pairs: Iterable[tuple[str, str]]) -> None:
    """:func:`create_group` for each (stream, group), in one round trip (a service creates about
    forty at its start): the same answers are not errors, any other is raised."""
    async with client.pipeline(transaction=False) as pipe:
        for stream, group in pairs:
            pipe.xgroup_create(name=stream, groupname=group, id="0", mkstream=True)
        results = await pipe.execute(raise_on_error=False)
    for result in results:
        if isinstance(result, NoPermissionError):
            continue
        if isinstance(result, ResponseError) and "BUSYGROUP" in str(result):
            continue
        if isinstance(result, BaseException):
            raise result


class Batch:
    """Events and Redis commands written together (:meth:`Bus.batch`)."""

    def __init__(self, bus: Bus, pipeline: Pipeline) -> None:
        self._bus = bus
        self.redis = pipeline
        """Queue Redis commands here (``batch.redis.set(...)``); they run in order with the
        events."""
        self._written: list[Callable[[], None]] = []

    def on_written(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the batch is written (not if it fails)."""
        self._written.append(callback)

    async def publish(self, topic: str, event: Event) -> None:
        """Append ``event`` to ``topic`` with the batch, as :meth:`Bus.publish` does."""
        await self._bus._publish(topic, event, self.redis)


class Bus:
    """One per process: the broker, a Redis client for bookkeeping, and the delivery rules."""

    def __init__(self, settings: ServiceSettings, service: str) -> None:
        self.settings = settings
        self.service = service
        self.consumer = consumer_name(service, settings.node_name)
        # The trace travels in each event (``traceparent``): every delivery is a span of the
        # publisher's trace (:meth:`_deliver`). FastStream's telemetry middleware is not used:
        # it made three spans and two header round trips per message, plus its metrics.
        setup_tracing(service, settings.node_name)
        self.broker = RedisBroker(
            settings.redis_url,
            graceful_timeout=settings.graceful_timeout_s,
            logger=logging.getLogger(f"deskpilot.{service}.broker"),
            log_level=logging.DEBUG,
            # Handlers take the message from the broker's context (see :meth:`subscribe`), not
            # through FastStream's dependency injection, which resolves a context argument in
            # a worker thread: a thread hop on every delivery.
            apply_types=False,
            # A read of new entries blocks up to read_block_ms in Redis: the client must wait
            # longer than that for the answer. Under redis-py's default socket timeout (5 s),
            # a longer block failed as a timeout; FastStream then logged "Message fetch error"
            # and read nothing for 5 s, and an entry handed over as the client gave up waited
            # for the reclaimer. This setting wins over a socket_timeout in the URL.
            socket_timeout=read_timeout_s(settings.read_block_ms),
        )
        self.redis: aioredis.Redis = aioredis.from_url(
            settings.redis_url, health_check_interval=10, socket_keepalive=True
        )
        self._groups: set[tuple[str, str]] = set()
        self._key_ring: KeyRing | None = None
        self._lag_watch: int | None = None
        self._claimed = InFlight()
        self._claiming: contextlib.AsyncExitStack | None = None

    @property
    def key_ring(self) -> KeyRing:
        """The keys that seal and open raw topics (``DESKPILOT_SEAL_KEYS``), read when first
        needed; raises in production without them (see :meth:`ServiceSettings.key_ring`)."""
        if self._key_ring is None:
            self._key_ring = self.settings.key_ring()
        return self._key_ring

    # -- consuming -------------------------------------------------------------------------

    def subscribe(
        self,
        topic: str,
        model: type[E],
        handler: Handler[E],
        *,
        group: str | None = None,
        concurrency: int = 1,
        linger_ms: int | None = None,
    ) -> None:
        """Deliver ``topic`` to ``handler`` through ``group`` (default: this service's name).

        Two FastStream subscribers share the group and consumer name: one reads new entries
        (XREADGROUP), the other claims entries left pending longer than ``reclaim_idle_ms``
        (XAUTOCLAIM), whether their consumer died or their handler failed.

        ``linger_ms`` is for topics nobody waits on (by default the topic's entry in
        :data:`contracts.topics.LINGERING`, the audit trail): new entries are read up to
        :data:`LINGER_BATCH` at a time, handled one by one ``linger_ms`` after
        they were read and acknowledged together. Their work then stays clear of the moment
        they were written (a turn's audit records are written with its answer, which the
        gateway is handing over then), and a busy stream costs one read and one ack per batch.
        An entry whose handler fails stays pending with the rest of its batch; the reclaimer
        delivers them again one by one. Until then the batch's entries are kept claimed.
        """
        group = group or self.service
        self._groups.add((topic, group))
        idle_ms = self.settings.reclaim_idle_ms
        linger_ms = LINGERING.get(topic) if linger_ms is None else linger_ms
        if linger_ms is not None:
            if topic in RAW_TOPICS:
                raise ValueError(f"{topic} carries raw content: its entries are read one by one")
            self._subscribe_lingering(topic, group, model, handler, linger_ms)

        def delivering(reclaimed: bool) -> Callable[[bytes], Awaitable[None]]:
            async def on_entry(_: bytes) -> None:
                msg = self._message()
                acked = Acknowledgement()
                held = self._held_until_acked(topic, group, msg, acked, reclaimed=reclaimed)
                async with held as ours:
                    if ours:
                        await self._deliver(
                            topic, group, model, handler, msg, acked, reclaimed=reclaimed
                        )

            return on_entry

        on_new, on_reclaimed = delivering(reclaimed=False), delivering(reclaimed=True)

        # A read takes no more entries than the handler can work on at once. Unbounded, the
        # first XREADGROUP moves a whole backlog into this consumer's pending list: replicas
        # started for it find nothing to do, and the group's lag (what KEDA scales on) reads 0.
        # A read waits up to read_block_ms for new entries (FastStream's 100 ms default had each
        # idle subscription ask ten times a second); an entry arriving meanwhile ends the wait.
        if linger_ms is None:
            self.broker.subscriber(
                stream=StreamSub(
                    topic,
                    group=group,
                    consumer=self.consumer,
                    max_records=concurrency,
                    polling_interval=self.settings.read_block_ms,
                ),
                ack_policy=AckPolicy.NACK_ON_ERROR,
                max_workers=concurrency,
                decoder=_undecoded,
                title=f"{topic}:{group}",
            )(on_new)
        self.broker.subscriber(
            stream=StreamSub(
                topic,
                group=group,
                consumer=self.consumer,
                min_idle_time=idle_ms,
                polling_interval=min(5_000, max(50, idle_ms // 5)),
            ),
            ack_policy=AckPolicy.NACK_ON_ERROR,
            decoder=_undecoded,
            title=f"{topic}:{group}:reclaim",
            include_in_schema=False,
        )(on_reclaimed)

    def _subscribe_lingering(
        self, topic: str, group: str, model: type[E], handler: Handler[E], linger_ms: int
    ) -> None:
        """The reader of new entries of :meth:`subscribe` with ``linger_ms``: batches."""

        async def on_batch(_: bytes) -> None:
            batch: RedisBatchStreamMessage = self.broker.context.get_local("message")
            raw = batch.raw_message
            with contextlib.ExitStack() as held:
                # Every entry waits for the linger and for those before it, maybe longer than
                # reclaim_idle_ms: all are kept claimed (:meth:`_renew_claims`) until the batch
                # ends, or a reclaimer (this process's or a replica's) would handle them too.
                for entry_id in raw["message_ids"]:
                    held.enter_context(self._claimed.holding(topic, group, entry_id.decode()))
                await asyncio.sleep(linger_ms / 1000)
                done: list[StreamIdT] = []
                for entry_id, fields in zip(raw["message_ids"], raw["data"], strict=True):
                    try:
                        await self._deliver_entry(
                            topic, group, model, handler, entry_id.decode(), fields
                        )
                    except Exception:
                        # The entries before it are done: only it and the rest stay pending.
                        if done:
                            await self.redis.xack(topic, group, *done)
                        raise
                    done.append(entry_id)

        self.broker.subscriber(
            stream=StreamSub(
                topic,
                group=group,
                consumer=self.consumer,
                batch=True,
                max_records=LINGER_BATCH,
                polling_interval=self.settings.read_block_ms,
            ),
            ack_policy=AckPolicy.NACK_ON_ERROR,
            decoder=_undecoded,
            title=f"{topic}:{group}",
        )(on_batch)

    async def _deliver_entry(
        self,
        topic: str,
        group: str,
        model: type[E],
        handler: Handler[E],
        entry_id: str,
        fields: dict[bytes, bytes],
    ) -> None:
        """One entry of a batch read (:meth:`_subscribe_lingering`), on its first delivery."""
        entry = fields.get(RAW_FIELD, b"")

        async def dead_letter(error: str, envelope: bytes) -> None:
            await self._write_dead_letter(
                topic,
                group,
                entry=entry,
                envelope=envelope,
                error=error,
                deliveries=1,
                original_id=entry_id,
            )

        try:
            body, _ = BinaryMessageFormatV1.parse(entry)
            event = model.model_validate_json(body)
        except ValidationError as exc:
            await dead_letter(f"invalid {model.__name__}: {_problems(exc)}", entry)
            return
        except ValueError as exc:  # not in the bus's message format
            await dead_letter(f"unreadable entry: {_describe(exc)}", entry)
            return
        correlation_token = correlation_id_var.set(event.correlation_id)
        conversation_token = conversation_id_var.set(event.conversation_id)
        try:
            delete = functools.partial(self.redis.xdel, topic, entry_id)
            await self._run(group, handler, event, Delivery(topic, entry_id, 1, delete, group))
        except Exception as exc:
            error = _describe(exc)
            if self.settings.max_deliveries <= 1:
                log.exception("handler failed for good", extra={"topic": topic, "error": error})
                await dead_letter(error, body)
                return
            log.warning(
                "handler failed, will retry",
                extra={"topic": topic, "error": error, "deliveries": 1},
            )
            raise
        finally:
            correlation_id_var.reset(correlation_token)
            conversation_id_var.reset(conversation_token)

    async def _run(self, group: str, handler: Handler[E], event: E, delivery: Delivery) -> None:
        """Call ``handler`` in the delivery's span, measured. Its caller keeps the entry claimed
        meanwhile (:meth:`_held_until_acked`, a batch's hold in :meth:`_subscribe_lingering`): a
        handler may run longer than reclaim_idle_ms, and its entry must not look abandoned to
        the reclaimers (this process's or a replica's)."""
        topic, entry_id = delivery.topic, delivery.message_id
        with (
            _consume_span(topic, entry_id, event),
            metrics.handling(self.service, topic, group),
        ):
            await handler(event, delivery)

    def _message(self) -> StreamMessage:
        """The message being delivered (FastStream keeps it in the broker's context)."""
        message: StreamMessage = self.broker.context.get_local("message")
        return message

    @contextlib.asynccontextmanager
    async def _held_until_acked(
        self,
        topic: str,
        group: str,
        msg: StreamMessage,
        acked: Acknowledgement,
        *,
        reclaimed: bool,
    ) -> AsyncIterator[bool]:
        """Keep an entry claimed (:meth:`_renew_claims`) while it is delivered and until it is
        acknowledged, which happens here when the block ends without an error: between a
        handler's end and its acknowledgement the entry is still pending, and a reclaimer must
        not find it idle then (on a busy machine it did, and the entry was handled twice).

        Yields whether to deliver it: a reclaimed entry this process is still working on is left
        alone (its renewal came late, the event loop busy for longer than reclaim_idle_ms less a
        third; its consumer did not die). It stays pending for the handler that has it."""
        entry_id = _entry_id(msg)
        if reclaimed and self._claimed.holds(topic, group, entry_id):
            log.info("reclaimed an entry still in flight here", extra={"topic": topic})
            await msg.nack()
            yield False
            return
        with self._claimed.holding(topic, group, entry_id):
            yield True
            if acked.written:
                msg.committed = AckStatus.ACKED  # for FastStream: nothing left to acknowledge
            else:
                await msg.ack()  # FastStream's own acknowledgement then has nothing left to do

    async def _deliver(
        self,
        topic: str,
        group: str,
        model: type[E],
        handler: Handler[E],
        msg: StreamMessage,
        acked: Acknowledgement,
        *,
        reclaimed: bool,
    ) -> None:
        max_deliveries = self.settings.max_deliveries
        entry_id = _entry_id(msg)
        deliveries = 1
        if reclaimed:
            pending = await self.redis.xpending_range(topic, group, entry_id, entry_id, 1)
            if not pending:
                # Acknowledged between the reclaimer's claim and now: its handler had finished.
                log.info("reclaimed an entry handled meanwhile", extra={"topic": topic})
                return
            deliveries = int(pending[0]["times_delivered"])
        if deliveries > 1:
            metrics.REDELIVERIES.labels(self.service, topic, group).inc()
        if deliveries > max_deliveries:
            # Delivered this often without an outcome: its consumers keep dying on it.
            await self.dead_letter(
                topic, group, msg, f"no outcome after {deliveries - 1} deliveries", deliveries
            )
            return
        try:
            event = (
                open_event(SealedEvent.model_validate_json(msg.body), model, self.key_ring)
                if topic in RAW_TOPICS
                else model.model_validate_json(msg.body)
            )
        except SealError as exc:
            # Not a transient failure: another delivery would not open it either.
            await self.dead_letter(
                topic, group, msg, f"cannot open the sealed {model.__name__}: {exc}", deliveries
            )
            return
        except ValidationError as exc:
            await self.dead_letter(
                topic, group, msg, f"invalid {model.__name__}: {_problems(exc)}", deliveries
            )
            return

        correlation_token = correlation_id_var.set(event.correlation_id)
        conversation_token = conversation_id_var.set(event.conversation_id)
        try:
            if self.settings.fault_handler_delay_ms:
                await asyncio.sleep(self.settings.fault_handler_delay_ms / 1000)
            delivery = Delivery(topic, entry_id, deliveries, msg.delete, group, acked)
            await self._run(group, handler, event, delivery)
        except Exception as exc:
            # An exception's message may quote the content it choked on: raw content stays out.
            error = type(exc).__name__ if topic in RAW_TOPICS else _describe(exc)
            if acked.written:
                # Acknowledged with the handler's last write: nothing is delivered again.
                log.exception("handler failed after its last write", extra={"topic": topic})
                return
            if not reclaimed:
                deliveries = await msg.get_delivery_count()
            if deliveries >= max_deliveries:
                log.exception("handler failed for good", extra={"topic": topic, "error": error})
                await self.dead_letter(topic, group, msg, error, deliveries, opened=event)
                return
            log.warning(
                "handler failed, will retry",
                extra={"topic": topic, "error": error, "deliveries": deliveries},
            )
            raise
        finally:
            correlation_id_var.reset(correlation_token)
            conversation_id_var.reset(conversation_token)

    async def _renew_claims(self) -> None:
        """Reset the idle time of every entry a handler of this process is working on.

        The reclaimer takes entries idle for ``reclaim_idle_ms``, meaning "their consumer died".
        Every third of that time the entries in flight are re-claimed by their own consumer
        (XCLAIM JUSTID: resets the idle time, does not count a delivery), one command per
        stream and group, so only entries of dead consumers become idle.
        """
        held = self._claimed.snapshot()
        if not held:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for (topic, group), entry_ids in held.items():
                ids: list[StreamIdT] = list(entry_ids)
                pipe.xclaim(topic, group, self.consumer, 0, ids, justid=True)
            await pipe.execute()

    async def dead_letter(
        self,
        topic: str,
        group: str,
        msg: StreamMessage,
        error: str,
        deliveries: int,
        opened: Event | None = None,
    ) -> None:
        """Keep the original entry and why it failed in ``<topic>.dlq``; the caller then acks.

        On a raw topic (:data:`RAW_TOPICS`) the content is not kept: the dead letter holds the
        event's ids only (``withheld``; with the user and reply stream when the sealed event was
        ``opened``), and the raw entry itself is deleted from the topic.
        """
        raw: dict[bytes, bytes] = msg.raw_message["data"]
        await self._write_dead_letter(
            topic,
            group,
            entry=raw.get(RAW_FIELD, msg.body),
            envelope=opened.model_dump_json().encode() if opened is not None else msg.body,
            error=error,
            deliveries=deliveries,
            # The stream entry id; ``msg.message_id`` is FastStream's message-id header, a
            # random uuid for messages published without one.
            original_id=_entry_id(msg),
        )
        if topic in RAW_TOPICS:
            await self.redis.xdel(topic, _entry_id(msg))

    async def dead_letter_event(
        self,
        topic: str,
        event: Event,
        error: str,
        deliveries: int,
        *,
        group: str | None = None,
        original_id: str | None = None,
    ) -> str:
        """Dead-letter ``event`` of ``topic`` after its message was acknowledged, for a service
        that retries on its own schedule and gives up later (ticketing: a ticket backend down
        for hours); returns the dead letter's entry id.

        The entry is the one :meth:`dead_letter` writes: the event in the message format
        :meth:`publish` writes, so ``deskpilot dlq replay`` appends it to ``topic`` again as it
        came (same event id: consumers stay idempotent); on a raw topic the event's ids only.
        ``group`` is the consumer group that gave up (default: this service's),
        ``original_id`` the stream entry id when known, else the event id.
        """
        body = event.model_dump_json().encode()
        return await self._write_dead_letter(
            topic,
            group or self.service,
            entry=await self.broker.message_format.encode(
                message=body,
                reply_to=None,
                headers={"content-type": "application/json"},
                correlation_id=event.correlation_id,
            ),
            envelope=body,
            error=error,
            deliveries=deliveries,
            original_id=original_id or event.event_id,
        )

    async def _write_dead_letter(
        self,
        topic: str,
        group: str,
        *,
        entry: bytes,
        envelope: bytes,
        error: str,
        deliveries: int,
        original_id: str,
    ) -> str:
        """Append one dead letter to ``<topic>.dlq``, count and log it; returns its entry id.

        ``entry`` is the message as :meth:`publish` writes it (what ``deskpilot dlq replay``
        appends again); on a raw topic it is left out and only the ids of the event JSON
        ``envelope`` are kept (``withheld``).
        """
        content: tuple[bytes, bytes] = (
            (WITHHELD_FIELD, _envelope_only(envelope))
            if topic in RAW_TOPICS
            else (RAW_FIELD, entry)
        )
        entry_id = await self.redis.xadd(
            dead_letter_stream(topic),
            {
                content[0]: content[1],
                b"error": error.encode(),
                b"group": group.encode(),
                b"consumer": self.consumer.encode(),
                b"original_id": original_id.encode(),
                b"deliveries": str(deliveries).encode(),
                b"failed_at": datetime.now(UTC).isoformat().encode(),
            },
            maxlen=self.settings.stream_maxlen,
            approximate=True,
        )
        metrics.DEAD_LETTERS.labels(self.service, topic, group).inc()
        log.error("message dead-lettered", extra={"topic": topic, "group": group, "error": error})
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    # -- producing -------------------------------------------------------------------------

    async def publish(self, topic: str, event: Event) -> str:
        """Append ``event`` to ``topic`` (sealed on a raw topic) and return its stream entry id."""
        entry_id = await self._publish(topic, event, None)
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    @contextlib.asynccontextmanager
    async def batch(self, *, transaction: bool = False) -> AsyncIterator[Batch]:
        """Writes made together: the events published in the block (``batch.publish``) and the
        commands queued on ``batch.redis`` go to Redis in one round trip, in order, when the
        block ends (nothing is written if it raises). With ``transaction``, all or nothing
        (MULTI/EXEC)."""
        async with self.redis.pipeline(transaction=transaction) as pipe:
            batch = Batch(self, pipe)
            yield batch
            await pipe.execute()
        for callback in batch._written:
            callback()

    async def publish_replacing(self, delivery: Delivery, *published: tuple[str, Event]) -> None:
        """Publish ``published`` (topic and event pairs) in place of the delivered entry, and
        delete and acknowledge that entry, in one transaction (:meth:`Delivery.delete_with`,
        :meth:`Delivery.ack_with`): how a handler of a raw topic hands on what it made of raw
        content, as its last write."""
        async with self.batch(transaction=True) as batch:
            for topic, event in published:
                await batch.publish(topic, event)
            delivery.delete_with(batch)
            delivery.ack_with(batch)

    async def _publish(self, topic: str, event: Event, pipeline: Pipeline | None) -> Any:
        if event.traceparent is None:
            traceparent, tracestate = current_traceparent()
            event = event.model_copy(update={"traceparent": traceparent, "tracestate": tracestate})
        wire: Event = seal_event(event, self.key_ring) if topic in RAW_TOPICS else event
        result = await self.broker.publish(
            wire.model_dump_json().encode(),
            stream=topic,
            maxlen=self.settings.stream_maxlen,
            correlation_id=event.correlation_id,
            headers={"content-type": "application/json"},
            pipeline=pipeline,
        )
        metrics.EVENTS_PUBLISHED.labels(self.service, topic).inc()
        return result

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Create every known group ahead (and this bus's own), then start consuming. A service
        that seals or opens raw content checks its keys first: in production it refuses to start
        without them, rather than fail on the first message."""
        if self.service in seal_key_holders():
            ring = self.key_ring
            log.info("raw topics sealed", extra={"seal_key": ring.sealing_key_id})
        await ensure_groups(self.redis, [*_all_known_groups(), *sorted(self._groups)])
        await self._start_broker()
        try:
            if self._claiming is None:
                # Redis away: the next round retries.
                self._claiming = contextlib.AsyncExitStack()
                await self._claiming.enter_async_context(
                    every(
                        self.settings.reclaim_idle_ms / 3000,
                        self._renew_claims,
                        name=f"keep-claimed-{self.consumer}",
                        errors=(RedisError,),
                    )
                )
        except Exception:
            # Nothing may keep reading after a failed start: its caller will not stop it.
            await self.broker.stop()
            raise
        if self._lag_watch is None:
            self._lag_watch = metrics.LAG.watch(self.service, self.settings.redis_url, self._groups)

    async def _start_broker(self) -> None:
        """Start the broker, again from scratch when a subscriber's first PING timed out.

        FastStream starts the subscribers one after the other and raises ``TimeoutError`` from
        the first whose PING took over 3 s: those before it are consuming, it has its read task
        running (it reads once the PING returns), those after it and the publishers are not
        started. Stopping the broker ends all of that the way a shutdown does: handlers in
        flight finish and ack, an entry read but not handled stays pending and is reclaimed, and
        the connections close, so the next attempt starts every subscriber once, from nothing.
        Any other failure, and the last timeout, stop the broker too before they are raised: a
        read task left running would outlive the start that failed (an event loop closing
        cancels it, the subscriber's own loop reads on, and the loop never closes).
        """
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                await self.broker.start()
            except Exception as exc:
                await self.broker.stop()
                if not isinstance(exc, TimeoutError) or attempt == START_ATTEMPTS:
                    raise
                log.warning(
                    "the broker did not start in time; retrying",
                    extra={"attempt": attempt, "attempts": START_ATTEMPTS},
                )
            else:
                return

    async def stop(self) -> None:
        """Stop reading, let in-flight handlers finish and ack, then close connections."""
        if self._lag_watch is not None:
            metrics.LAG.unwatch(self._lag_watch)
            self._lag_watch = None
        await self.broker.stop()
        if self._claiming is not None:
            await self._claiming.aclose()
            self._claiming = None
        await self.redis.aclose()


class InFlight:
    """The stream entries this process's handlers are working on, per stream and group."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], dict[str, int]] = {}

    @contextlib.contextmanager
    def holding(self, topic: str, group: str, entry_id: str) -> Iterator[None]:
        """Count ``entry_id`` as in flight while the block runs."""
        entries = self._entries.setdefault((topic, group), {})
        entries[entry_id] = entries.get(entry_id, 0) + 1
        try:
            yield
        finally:
            if entries[entry_id] > 1:
                entries[entry_id] -= 1
            else:
                del entries[entry_id]
                if not entries:
                    self._entries.pop((topic, group), None)

    def holds(self, topic: str, group: str, entry_id: str) -> bool:
        """Whether a handler of this process is working on ``entry_id``."""
        return entry_id in self._entries.get((topic, group), ())

    def snapshot(self) -> dict[tuple[str, str], list[str]]:
        """The entries in flight now, per (stream, group)."""
        return {key: list(entries) for key, entries in self._entries.items() if entries}


def _consume_span(
    topic: str, entry_id: str, event: Event
) -> contextlib.AbstractContextManager[Any]:
    """The span of one delivery, a child of the span that published the event (its
    ``traceparent``), so one trace spans the services a turn passes through."""
    carrier = {"traceparent": event.traceparent or "", "tracestate": event.tracestate or ""}
    return tracer.start_as_current_span(
        f"{topic} process",
        context=propagate.extract({k: v for k, v in carrier.items() if v}),
        kind=trace.SpanKind.CONSUMER,
        attributes={
            "messaging.system": "redis",
            "messaging.destination.name": topic,
            "messaging.message.id": entry_id,
            "messaging.message.conversation_id": event.correlation_id,
        },
    )


async def _undecoded(msg: StreamMessage) -> bytes:
    """The body as it came: :meth:`Bus._deliver` validates it into the event (FastStream's
    default decoder would parse the JSON once more, for nothing)."""
    return msg.body


def _all_known_groups() -> list[tuple[str, str]]:
    return [(str(topic), str(group)) for topic, groups in SUBSCRIPTIONS.items() for group in groups]


def _entry_id(msg: StreamMessage) -> str:
    """The message's stream entry id, e.g. ``1718000000000-0``."""
    entry_id: bytes = msg.raw_message["message_ids"][0]
    return entry_id.decode()


# What a dead letter of a raw topic keeps of its event: where it belongs, not what it said.
_ENVELOPE_KEYS = (
    "event_id",
    "schema_version",
    "correlation_id",
    "conversation_id",
    "occurred_at",
    "source",
    "traceparent",
    "user_id",
    "reply_to",
    "attachment_id",
)


def _envelope_only(body: bytes) -> bytes:
    """The event's ids as JSON (content and any unknown field left out); ``{}`` if unreadable."""
    try:
        event = json.loads(body)
    except ValueError:
        event = None
    kept = (
        {key: event[key] for key in _ENVELOPE_KEYS if key in event}
        if isinstance(event, dict)
        else {}
    )
    return json.dumps(kept).encode()


def _problems(exc: ValidationError) -> str:
    """What is wrong with an event, without the content it holds."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}"
        for e in exc.errors(include_input=False, include_url=False)
    )


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:497] + "..."


def decode_entry(
    fields: Mapping[bytes, bytes], model: type[E], key_ring: KeyRing | None = None
) -> E:
    """The event in a stream entry written through the bus (FastStream's message format), for
    readers outside a subscription (the admin API's audit view, command-line tools). A sealed
    event (a raw topic's) is opened with ``key_ring``, by default the one the environment
    configures."""
    body, _ = BinaryMessageFormatV1.parse(fields[RAW_FIELD])
    if "sealed" not in model.model_fields and b'"sealed"' in body:
        sealed = SealedEvent.model_validate_json(body)
        return open_event(sealed, model, key_ring or ServiceSettings().key_ring())
    return model.model_validate_json(body)


def dlq_entry_fields(fields: dict[bytes, bytes]) -> dict[str, Any]:
    """Decode a dead-letter entry's metadata for display (never the payload itself)."""
    return {
        key.decode(): value.decode(errors="replace")
        for key, value in fields.items()
        if key != RAW_FIELD
    }
