"""Turns as the gateway sees them: submit a message, wait for its reply, remember the answer.

Replies arrive on this instance's own reply stream (see :func:`contracts.topics.reply_stream`),
so only the instance that holds the user's connection handles them. Each answer is stored in
Redis, so a client that disconnected mid-turn can fetch it with ``GET /api/turns/{turn_id}``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import redis.asyncio as aioredis
from opentelemetry import trace
from redis.asyncio.client import Pipeline
from redis.exceptions import RedisError

from contracts.bus import Bus
from contracts.events import AnswerBody, MessageReceived, TurnReply
from contracts.topics import Topic, reply_stream
from contracts.tracing import current_trace_id
from gateway.analytics import AnalyticsRecorder, AnsweredTurn
from gateway.config import GatewaySettings
from gateway.conversations import TURN_PREFIX, ConversationIndex, OwnedRecords
from gateway.errors import ApiError, ErrorCode
from gateway.models import ChatRead, TurnRead

log = logging.getLogger("deskpilot.gateway")
tracer = trace.get_tracer("deskpilot.gateway")


@dataclass(frozen=True)
class Submitted:
    turn_id: str
    conversation_id: str
    trace_id: str | None


class TurnStore:
    """The gateway's record of each turn: pending until its answer arrives. Kept with its
    owner, the user who sent it: callers read it with :meth:`get_owned`."""

    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.records = OwnedRecords(client, TURN_PREFIX)

    async def create(self, submitted: Submitted, user_id: str) -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            self.queue_create(pipe, submitted, user_id)
            await pipe.execute()

    def queue_create(self, pipe: Pipeline, submitted: Submitted, user_id: str) -> dict[str, object]:
        """:meth:`create` as commands queued on ``pipe`` (the turn's publish goes with them);
        returns the record written."""
        record: dict[str, object] = {
            "status": "pending",
            "conversation_id": submitted.conversation_id,
            "trace_id": submitted.trace_id,
            "user_id": user_id,
            "submitted_at": time.time(),
        }
        self.records.queue_create(pipe, submitted.turn_id, user_id, record, self.ttl_s)
        return record

    async def complete(self, turn_id: str, answer: ChatRead) -> bool:
        """Store the answer; False when it was already stored (a redelivered reply). A turn
        purged or expired meanwhile is not brought back."""
        return await self.complete_record(turn_id, answer, await self._record(turn_id))

    async def complete_record(
        self, turn_id: str, answer: ChatRead, record: dict[str, object] | None
    ) -> bool:
        """:meth:`complete` with the turn's record already read (:meth:`record`)."""
        return await self.store_answer(turn_id, answer, record) != "duplicate"

    async def store_answer(
        self, turn_id: str, answer: ChatRead, record: dict[str, object] | None
    ) -> Literal["stored", "duplicate", "gone"]:
        """:meth:`complete_record`, saying what happened: ``duplicate`` when the answer was
        stored before (a redelivered reply), ``gone`` when there is no record to store it in
        (purged or expired: not brought back)."""
        if record and record.get("status") == "done":
            return "duplicate"
        if record is None:
            return "gone"
        stored = {**record, "status": "done", "answer": answer.model_dump(mode="json")}
        return "stored" if await self.records.update(turn_id, stored) else "gone"

    async def _record(self, turn_id: str) -> dict[str, object] | None:
        return await self.records.get(turn_id)

    async def record(self, turn_id: str) -> dict[str, object] | None:
        """The stored record: status, conversation, user, trace, when it was submitted (epoch
        seconds) and the answer once there is one."""
        return await self._record(turn_id)

    async def get(self, turn_id: str) -> TurnRead | None:
        """The turn, whoever sent it (for the gateway's own work; callers use get_owned)."""
        return self._read(turn_id, await self._record(turn_id))

    async def get_owned(self, turn_id: str, owner: str) -> TurnRead | None:
        """The turn when ``owner`` sent it; None for anyone else, as for an unknown id."""
        return self._read(turn_id, await self.records.get_owned(turn_id, owner))

    @staticmethod
    def _read(turn_id: str, record: dict[str, object] | None) -> TurnRead | None:
        if record is None:
            return None
        if record.get("status") == "done":
            answer = ChatRead.model_validate(record["answer"])
            return TurnRead(turn_id=turn_id, status="done", answer=answer)
        return TurnRead(turn_id=turn_id, status="pending")


def _trace_id(record: dict[str, object] | None) -> str | None:
    value = record.get("trace_id") if record else None
    return value if isinstance(value, str) else None


def _entry_order(entry_id: str) -> tuple[int, int]:
    """A stream entry id ("<ms>-<seq>") as what it sorts by."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass
class ProgressOrder:
    """A turn's progress as its listeners saw it, so that it only moves forward.

    A progress reply is stale when its stream entry is older than the last one shown (the
    gateway handled two replies at once and the later one finished first), or when it counts
    (:attr:`TurnReply.count`) no higher than its stage already did (two crawler replicas
    published their pages out of order)."""

    last_entry: tuple[int, int] | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def forward(self, reply: TurnReply, entry_id: str | None) -> bool:
        """Whether ``reply`` moves the turn's progress forward; if so it is now the last."""
        entry = _entry_order(entry_id) if entry_id else None
        if entry is not None and self.last_entry is not None and entry <= self.last_entry:
            return False
        stage = reply.stage or ""
        if reply.count is not None and reply.count <= self.counts.get(stage, -1):
            return False
        if entry is not None:
            self.last_entry = entry
        if reply.count is not None:
            self.counts[stage] = reply.count
        return True


class TurnService:
    def __init__(
        self,
        bus: Bus,
        store: TurnStore,
        settings: GatewaySettings,
        index: ConversationIndex | None = None,
        analytics: AnalyticsRecorder | None = None,
    ) -> None:
        self.bus = bus
        self.store = store
        self.settings = settings
        self.analytics = analytics
        self.index = index or ConversationIndex(bus.redis, settings.turn_ttl_s)
        self.reply_to = reply_stream(settings.instance_id)
        self._listeners: dict[str, set[asyncio.Queue[TurnReply]]] = defaultdict(set)
        self._answers: dict[str, ChatRead] = {}
        """Answers just stored, for the listeners of their turn (no second read of Redis)."""
        self._progress: dict[str, ProgressOrder] = {}
        """What the listeners of each turn were last shown (to drop stale progress)."""
        self._records: dict[str, dict[str, object]] = {}
        """The records of the turns this instance submitted while someone listens for them, as
        written: their answer is stored without reading the record first."""

    def validate_text(self, text: str, attachments: bool = False) -> str:
        """The message stripped; 422 when empty (unless files are attached), 413 when long."""
        if attachments and not text.strip():
            return ""
        if not text or not text.strip():
            raise ApiError(ErrorCode.EMPTY_MESSAGE, "The message is empty: type a question.")
        size = len(text.encode("utf-8"))
        if size > self.settings.max_message_bytes:
            raise ApiError(
                ErrorCode.MESSAGE_TOO_LONG,
                f"The message is {size} bytes; the limit is {self.settings.max_message_bytes}. "
                "Shorten it or attach the rest as a file.",
            )
        return text.strip()

    @asynccontextmanager
    async def listen(self, turn_id: str) -> AsyncIterator[asyncio.Queue[TurnReply]]:
        """Receive the turn's progress and answer; register before submitting."""
        queue: asyncio.Queue[TurnReply] = asyncio.Queue()
        self._listeners[turn_id].add(queue)
        self._progress.setdefault(turn_id, ProgressOrder())
        try:
            yield queue
        finally:
            self._listeners[turn_id].discard(queue)
            if not self._listeners[turn_id]:
                del self._listeners[turn_id]
                self._progress.pop(turn_id, None)
                self._answers.pop(turn_id, None)
                self._records.pop(turn_id, None)

    async def submit(
        self,
        text: str,
        conversation_id: str,
        user_id: str,
        turn_id: str,
        *,
        attachments: list[str] | None = None,
        request_ticket: bool = False,
        authenticated: bool = False,
        groups: Sequence[str] = (),
    ) -> Submitted:
        """Publish the message; once this returns the turn is durably accepted. The caller
        checked that ``user_id`` owns the conversation (:meth:`ConversationIndex.resolve`) and
        the attachment ids (:meth:`AttachmentService.check_references`). ``authenticated`` says
        ``user_id`` is a verified token's subject, not an anonymous user; ``groups`` are that
        token's groups (what, with the user id, decides which documents the answer may use)."""
        text = self.validate_text(text, attachments=bool(attachments) or request_ticket)
        user = user_id
        with tracer.start_as_current_span("chat.turn", attributes={"deskpilot.turn_id": turn_id}):
            submitted = Submitted(turn_id, conversation_id, current_trace_id())
            try:
                # The turn's record, its place in the conversation and its message: one write,
                # all or nothing.
                async with self.bus.batch(transaction=True) as batch:
                    record = self.store.queue_create(batch.redis, submitted, user)
                    self.index.queue_add(batch.redis, conversation_id, "turn", turn_id, user)
                    await batch.publish(
                        Topic.MESSAGE_RECEIVED,
                        MessageReceived(
                            correlation_id=turn_id,
                            conversation_id=conversation_id,
                            user_id=user,
                            text=text,
                            reply_to=self.reply_to,
                            attachments=attachments or [],
                            request_ticket=request_ticket,
                            authenticated=authenticated,
                            groups=list(groups) if authenticated else [],
                        ),
                    )
            except (RedisError, OSError) as exc:
                log.warning("could not publish a turn", extra={"error": type(exc).__name__})
                raise ApiError(
                    ErrorCode.BUS_UNAVAILABLE,
                    "Deskpilot is briefly unavailable; your message was not sent. Try again.",
                ) from exc
        if turn_id in self._listeners:
            self._records[turn_id] = record
        return submitted

    async def ask(
        self,
        text: str,
        conversation_id: str,
        user_id: str,
        turn_id: str,
        timeout_s: float,
        *,
        attachments: list[str] | None = None,
        request_ticket: bool = False,
        authenticated: bool = False,
        groups: Sequence[str] = (),
    ) -> ChatRead:
        """:meth:`submit` and wait for the answer; raises ``TimeoutError`` after ``timeout_s``
        (the turn goes on: its answer is stored for ``GET /api/turns/{turn_id}``)."""
        async with self.listen(turn_id) as replies:
            await self.submit(
                text,
                conversation_id,
                user_id,
                turn_id,
                attachments=attachments,
                request_ticket=request_ticket,
                authenticated=authenticated,
                groups=groups,
            )
            async with asyncio.timeout(timeout_s):
                while True:
                    reply = await replies.get()
                    if reply.kind == "answer":
                        return await self.answer_of(reply)

    async def on_reply(self, reply: TurnReply, entry_id: str | None = None) -> None:
        """Handle a reply from this instance's stream (``entry_id``: its entry there): store
        answers, notify listeners. Replies are handled several at once, so a turn's progress
        may come here out of order: a stale one is not shown (:class:`ProgressOrder`)."""
        if reply.kind == "answer" and reply.body is not None:
            await self._on_answer(reply, reply.body)
            return
        order = self._progress.get(reply.correlation_id)
        if reply.kind == "progress" and order is not None and not order.forward(reply, entry_id):
            return
        self._notify(reply)

    async def _on_answer(self, reply: TurnReply, body: AnswerBody) -> None:
        """Store the answer, hand it to the turn's listeners, then count it: the user is not
        kept waiting for the analytics. The turn's record is read once for all three, and not
        at all for a turn this instance submitted and someone still waits for."""
        arrived = time.time()
        turn_id = reply.correlation_id
        record = self._records.get(turn_id)
        if record is None:
            record = await self.store.record(turn_id)
        answer = ChatRead(
            **body.model_dump(),
            conversation_id=reply.conversation_id,
            turn_id=turn_id,
            trace_id=_trace_id(record),
        )
        outcome = await self.store.store_answer(turn_id, answer, record)
        if outcome != "duplicate":
            log.info("answer received", extra={"action": answer.action.value})
            if outcome == "stored" and turn_id in self._listeners:
                self._answers[turn_id] = answer
                if turn_id in self._records and record is not None:
                    self._records[turn_id] = {**record, "status": "done"}
            self._notify(reply)
            # The listeners send the answer before it is counted (their turn of the event loop
            # comes before the analytics' write, not after it).
            await asyncio.sleep(0)
        else:
            log.info("duplicate answer ignored")
        # Counted once per turn (a marker), so also when a delivery failed after storing it.
        await self._count_answer(answer, record or {}, arrived)

    def _notify(self, reply: TurnReply) -> None:
        for queue in list(self._listeners.get(reply.correlation_id, ())):
            queue.put_nowait(reply)

    async def answer_of(self, reply: TurnReply) -> ChatRead:
        """The answer a listener was notified of, as stored."""
        if (answer := self._answers.get(reply.correlation_id)) is not None:
            return answer
        turn = await self.store.get(reply.correlation_id)
        if turn is None or turn.answer is None:
            raise ApiError(ErrorCode.UNKNOWN_TURN, "The answer expired.")
        return turn.answer

    async def _count_answer(self, answer: ChatRead, record: dict[str, object], now: float) -> None:
        """The answered turn's facts for the admin analytics (no user text)."""
        if self.analytics is None:
            return
        submitted = record.get("submitted_at")
        latency_ms = (now - submitted) * 1000 if isinstance(submitted, int | float) else None
        await self.analytics.on_answer(
            AnsweredTurn(
                turn_id=answer.turn_id,
                conversation_id=answer.conversation_id,
                at=datetime.fromtimestamp(now, UTC),
                action=answer.action,
                category=answer.category,
                latency_ms=latency_ms,
                cited_urls=[citation.url for citation in answer.citations],
                crawled=answer.crawled,
            )
        )
