"""Channel turns: a platform's message made into a web-chat turn, and its answer taken back.

:meth:`ChannelTurns.start` submits the message exactly as the web chat does
(:meth:`gateway.turns.TurnService.submit`: one transaction with the turn's record, sealed on
``message.received`` for the redactor), as the platform user's principal, in the conversation
the platform's thread or chat is mapped to. Before that it keeps where the answer goes: a
:class:`ChannelTurn` under ``deskpilot:gateway:channel-turn:<turn id>`` (ids of the platform's
channel and thread, never user text).

The turn's progress and answer reach this instance's reply stream like any turn's; the gateway's
reply handler stores the answer (for ``GET /api/turns``, ratings, analytics) and then hands the
reply to :meth:`ChannelTurns.on_reply`, which finds the record and lets the channel's
:class:`Deliverer` post it. Delivery is part of handling the reply, so it has the bus's
guarantees: a gateway that dies, or a platform that is down, leaves the reply pending and it is
delivered when it is claimed again; the record says once it was delivered, so a redelivered reply
is not posted twice. Progress is best effort (shown once per stage, never retried).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from typing import Literal, Protocol

import redis.asyncio as aioredis
from pydantic import BaseModel, Field, ValidationError

from contracts.events import TurnReply, new_id
from gateway.conversations import ConversationIndex
from gateway.directory import Directory, NoDirectory
from gateway.errors import ApiError
from gateway.models import ChatRead
from gateway.turns import TurnService

log = logging.getLogger("deskpilot.gateway.channels")

TURN_PREFIX = "deskpilot:gateway:channel-turn:"
CONVERSATION_PREFIX = "deskpilot:gateway:channel-conversation:"
MAX_PROGRESS_TRACKED = 10_000

Channel = Literal["slack", "teams"]


class ChannelTurn(BaseModel):
    """Where one channel turn's progress and answer go."""

    channel: Channel
    user_id: str = Field(description="The principal who asked (the turn's owner).")
    target: dict[str, str] = Field(
        default_factory=dict,
        description="The platform's address of the reply: workspace, channel, thread, the "
        "placeholder message to replace, a response URL.",
    )
    delivered: bool = False


class DeliveryFailed(Exception):
    """The platform could not take the answer now (down, rate limited past the retries): the
    reply is handled again later."""


class Deliverer(Protocol):
    """A channel's way of showing a turn: progress (best effort) and the answer."""

    async def progress(self, turn: ChannelTurn, reply: TurnReply) -> None: ...

    async def answer(self, turn: ChannelTurn, answer: ChatRead) -> None:
        """Post the answer; raise :class:`DeliveryFailed` to have it tried again later."""
        ...


class ChannelTurns:
    """Starts channel turns and delivers their replies through the channel's deliverer."""

    def __init__(
        self,
        turns: TurnService,
        index: ConversationIndex,
        client: aioredis.Redis,
        *,
        delivery_ttl_s: int,
        conversation_ttl_s: int,
        directory: Directory | None = None,
    ) -> None:
        self.turns = turns
        self.directory: Directory = directory or NoDirectory()
        self.index = index
        self.client = client
        self.delivery_ttl_s = delivery_ttl_s
        self.conversation_ttl_s = conversation_ttl_s
        self.deliverers: dict[str, Deliverer] = {}
        self._shown: OrderedDict[str, str] = OrderedDict()
        """The last progress stage shown per turn (a stage is shown once)."""
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        """One lock per turn being delivered; gone once nobody holds or awaits it."""

    async def conversation(self, key: str, owner: str) -> str:
        """The conversation a platform's thread or chat (``key``) is for ``owner``: the one it
        was mapped to while it lasts and ``owner`` owns it, else a new one of theirs. Callers
        put the user in ``key``: two people in one thread have a conversation each."""
        mapped = CONVERSATION_PREFIX + key
        current = await self.client.get(mapped)
        if current is not None:
            conversation_id = current.decode() if isinstance(current, bytes) else str(current)
            if await self.index.owns(conversation_id, owner):
                await self.client.expire(mapped, self.conversation_ttl_s)
                return conversation_id
        conversation_id = await self.index.open(owner)
        await self.client.set(mapped, conversation_id, ex=self.conversation_ttl_s)
        return conversation_id

    async def start(
        self,
        turn: ChannelTurn,
        text: str,
        conversation_id: str,
        *,
        request_ticket: bool = False,
    ) -> str:
        """Submit ``text`` as ``turn.user_id`` (verified by the platform: authenticated, with
        the groups the directory lists for them) in ``conversation_id``; returns the turn id.
        Raises the web chat's :class:`ApiError` (an empty or too long message, the bus
        unavailable), and then keeps no record."""
        text = self.turns.validate_text(text, attachments=request_ticket)
        groups = await self.directory.groups_of(turn.user_id)
        turn_id = new_id()
        key = TURN_PREFIX + turn_id
        # Before the message: a fast answer must find where it goes.
        await self.client.set(key, turn.model_dump_json(), ex=self.delivery_ttl_s)
        try:
            await self.turns.submit(
                text,
                conversation_id,
                turn.user_id,
                turn_id,
                request_ticket=request_ticket,
                authenticated=True,
                groups=groups,
            )
        except ApiError:
            await self.client.delete(key)
            raise
        return turn_id

    async def on_reply(self, reply: TurnReply) -> None:
        """Deliver a turn reply when its turn came from a channel (one read for any turn).

        The gateway handles several replies at once, so a turn's last progress may be handled
        while, or after, its answer is: a turn's replies are delivered one at a time (a lock
        per turn), and once the answer is delivered nothing more is, so a late "searching…"
        never replaces the answer it preceded."""
        if reply.kind not in ("progress", "answer"):
            return
        lock = self._locks.get(reply.correlation_id)
        if lock is None:
            lock = self._locks[reply.correlation_id] = asyncio.Lock()
        async with lock:
            await self._deliver(reply)

    async def _deliver(self, reply: TurnReply) -> None:
        key = TURN_PREFIX + reply.correlation_id
        turn = _parse(await self.client.get(key))
        if turn is None or turn.delivered:
            return
        deliverer = self.deliverers.get(turn.channel)
        if deliverer is None:
            log.warning("no deliverer for a channel turn", extra={"channel": turn.channel})
            return
        if reply.kind == "progress":
            await self._progress(deliverer, turn, reply)
            return
        if reply.body is None:
            return
        answer = ChatRead(
            **reply.body.model_dump(),
            conversation_id=reply.conversation_id,
            turn_id=reply.correlation_id,
            trace_id=None,
        )
        # DeliveryFailed goes up: the reply stays pending and is delivered when reclaimed.
        await deliverer.answer(turn, answer)
        self._shown.pop(reply.correlation_id, None)
        delivered = turn.model_copy(update={"delivered": True})
        await self.client.set(key, delivered.model_dump_json(), keepttl=True)
        log.info("channel answer delivered", extra={"channel": turn.channel})

    async def _progress(self, deliverer: Deliverer, turn: ChannelTurn, reply: TurnReply) -> None:
        stage = reply.stage or ""
        if self._shown.get(reply.correlation_id) == stage:
            return
        self._shown[reply.correlation_id] = stage
        self._shown.move_to_end(reply.correlation_id)
        while len(self._shown) > MAX_PROGRESS_TRACKED:
            self._shown.popitem(last=False)
        try:
            await deliverer.progress(turn, reply)
        except DeliveryFailed as exc:
            log.info("progress not shown", extra={"channel": turn.channel, "error": str(exc)})


def _parse(raw: bytes | str | None) -> ChannelTurn | None:
    if not raw:
        return None
    try:
        return ChannelTurn.model_validate_json(raw)
    except ValidationError:
        return None
