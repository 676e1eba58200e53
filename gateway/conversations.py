"""What the gateway keeps per conversation, so an operator can purge it all.

Turn records, ratings and attachment records are keyed by their own ids; this index lists them
per conversation (``deskpilot:gateway:conversation:<id>``, a set of ``turn:<id>`` and
``attachment:<id>``) and expires with the longest-lived of them.
"""

from __future__ import annotations

import logging
from typing import Literal

import redis.asyncio as aioredis

from contracts.bus import Bus
from contracts.events import ConversationPurged, new_id
from contracts.topics import Topic
from gateway.analytics import CRAWLED_PREFIX, MARKER_PREFIX

log = logging.getLogger("deskpilot.gateway.conversations")

INDEX_PREFIX = "deskpilot:gateway:conversation:"
TURN_PREFIX = "deskpilot:gateway:turn:"
FEEDBACK_PREFIX = "deskpilot:gateway:feedback:"
ATTACHMENT_PREFIX = "deskpilot:gateway:attachment:"

Member = Literal["turn", "attachment"]


class ConversationIndex:
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def add(self, conversation_id: str, kind: Member, member_id: str) -> None:
        key = INDEX_PREFIX + conversation_id
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.sadd(key, f"{kind}:{member_id}")
            pipe.expire(key, self.ttl_s)
            await pipe.execute()

    async def purge(self, conversation_id: str) -> int:
        """Delete every record of the conversation the gateway keeps; returns how many keys."""
        key = INDEX_PREFIX + conversation_id
        members = await self.client.smembers(key)
        doomed = [key]
        for raw in members:
            kind, _, member_id = (raw.decode() if isinstance(raw, bytes) else raw).partition(":")
            if kind == "turn":
                doomed += [TURN_PREFIX + member_id, FEEDBACK_PREFIX + member_id]
                # The analytics' once-only markers name the turn (the day counters do not).
                doomed += [MARKER_PREFIX + f"answer:{member_id}", CRAWLED_PREFIX + member_id]
            elif kind == "attachment":
                doomed.append(ATTACHMENT_PREFIX + member_id)
        deleted = int(await self.client.delete(*doomed))
        log.info("conversation purged", extra={"keys": deleted})
        return deleted


class PurgeService:
    """Queues a conversation's purge for every service, and does the gateway's own part."""

    def __init__(self, bus: Bus, index: ConversationIndex) -> None:
        self.bus = bus
        self.index = index

    async def request(self, conversation_id: str, requested_by: str) -> None:
        await self.bus.publish(
            Topic.CONVERSATION_PURGED,
            ConversationPurged(
                correlation_id=new_id(),
                conversation_id=conversation_id,
                requested_by=requested_by,
            ),
        )

    async def on_purge(self, event: ConversationPurged) -> None:
        deleted = await self.index.purge(event.conversation_id)
        await self.bus.publish(Topic.AUDIT, event.confirmation("gateway", keys=deleted))
