"""What the gateway keeps per conversation, who owns it, and how an operator purges it all.

Turn records, ratings and attachment records are keyed by their own ids; this index lists them
per conversation (``deskpilot:gateway:conversation:<id>``, a set of ``turn:<id>`` and
``attachment:<id>``) and expires with the longest-lived of them.

Every conversation, turn and attachment has an owner: the user who made it (a user token's
subject, or an anonymous user the gateway issued a token to). Conversation ids are issued by
the gateway, never chosen by a caller, and each is kept with its owner
(``deskpilot:gateway:conversation-owner:<id>``). Turn and attachment records are Redis hashes of
the record and its owner (:class:`OwnedRecords`), read back only for their owner: anyone else
gets exactly what a nonexistent id gets, after the same single round trip to Redis.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any, Literal

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from contracts.bus import Bus
from contracts.events import ConversationPurged, new_id
from contracts.ids import is_conversation_id
from contracts.topics import Topic
from gateway.analytics import MARKER_PREFIX, AnalyticsRecorder
from gateway.errors import ApiError, ErrorCode

log = logging.getLogger("deskpilot.gateway.conversations")

INDEX_PREFIX = "deskpilot:gateway:conversation:"
OWNER_PREFIX = "deskpilot:gateway:conversation-owner:"
TURN_PREFIX = "deskpilot:gateway:turn:"
FEEDBACK_PREFIX = "deskpilot:gateway:feedback:"
ATTACHMENT_PREFIX = "deskpilot:gateway:attachment:"

Member = Literal["turn", "attachment"]

UNKNOWN_CONVERSATION = "No such conversation is known (or it expired): start a new one."
"""The one answer to a conversation id the caller does not own, whether it exists or not."""

# KEYS[1]: the record. ARGV[1]: the caller. The record when the caller owns it, else false.
# A missing record and someone else's cost the same one HGET; a key of another type (a record
# from before owners were kept) is nobody's.
_GET_OWNED = """
local owner = redis.pcall('HGET', KEYS[1], 'owner')
if type(owner) == 'string' and owner == ARGV[1] then
  return redis.call('HGET', KEYS[1], 'record')
end
return false
"""

# KEYS[1]: the record. Its JSON, whoever owns it; false when it is missing or a key of another
# type. One round trip (the gateway reads a turn's record before it sends the turn's answer).
_GET = """
local record = redis.pcall('HGET', KEYS[1], 'record')
if type(record) == 'string' then
  return record
end
return false
"""

# KEYS[1]: the record. ARGV[1]: its new JSON. Replaces the record of an existing hash only (a
# purged or expired one is not brought back); keeps its owner and its expiry. 1 when replaced.
_UPDATE = """
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return 0
end
redis.call('HSET', KEYS[1], 'record', ARGV[1])
return 1
"""


class OwnedRecords:
    """JSON records kept with their owner, one Redis hash each (``owner``, ``record``).

    :meth:`get_owned` is what callers' requests use: the record only for its owner, decided
    inside Redis, so a record of someone else and a missing one cost the same and look the same.
    :meth:`get` is for the gateway's own work (replies from other services)."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self._get = client.register_script(_GET)
        self._get_owned = client.register_script(_GET_OWNED)
        self._update = client.register_script(_UPDATE)

    async def create(self, record_id: str, owner: str, record: dict[str, Any], ttl_s: int) -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            self.queue_create(pipe, record_id, owner, record, ttl_s)
            await pipe.execute()

    def queue_create(
        self, pipe: Pipeline, record_id: str, owner: str, record: dict[str, Any], ttl_s: int
    ) -> None:
        """:meth:`create` as commands queued on ``pipe``, written with what else it holds."""
        key = self.prefix + record_id
        pipe.delete(key)
        pipe.hset(key, mapping={"owner": owner, "record": json.dumps(record)})
        pipe.expire(key, ttl_s)

    async def update(self, record_id: str, record: dict[str, Any]) -> bool:
        """Replace an existing record (owner and expiry kept); False when it is gone."""
        return bool(await self._update(keys=[self.prefix + record_id], args=[json.dumps(record)]))

    async def get(self, record_id: str) -> dict[str, Any] | None:
        raw = await self._get(keys=[self.prefix + record_id])
        return json.loads(raw) if raw else None

    async def get_owned(self, record_id: str, owner: str) -> dict[str, Any] | None:
        raw = await self._get_owned(keys=[self.prefix + record_id], args=[owner])
        return json.loads(raw) if raw else None


class ConversationIndex:
    def __init__(self, client: aioredis.Redis, ttl_s: int, claim_ttl_s: int = 3600) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.claim_ttl_s = min(claim_ttl_s, ttl_s)

    async def open(self, owner: str) -> str:
        """A new conversation of ``owner``; kept ``claim_ttl_s`` until its first turn or
        attachment, which keeps it as long as the index (so a flood of connections that never
        say anything leaves nothing for long)."""
        conversation_id = new_id()
        await self.client.set(OWNER_PREFIX + conversation_id, owner, ex=self.claim_ttl_s)
        return conversation_id

    async def owns(self, conversation_id: str, owner: str) -> bool:
        """Whether ``owner`` owns the conversation: one read whether it exists, is someone
        else's or is malformed, and a constant-time comparison."""
        key = OWNER_PREFIX + (conversation_id if is_conversation_id(conversation_id) else "")
        stored = await self.client.get(key)
        found = stored.decode() if isinstance(stored, bytes) else (stored or "")
        return hmac.compare_digest(found.encode(), owner.encode()) and bool(found)

    async def resolve(self, requested: str | None, owner: str) -> str:
        """The conversation a request of ``owner`` goes to: the one it names, when ``owner``
        owns it (404 ``unknown_conversation`` otherwise, the same for a nonexistent id), or a
        new one when it names none."""
        if requested is None:
            return await self.open(owner)
        if not await self.owns(requested, owner):
            raise ApiError(ErrorCode.UNKNOWN_CONVERSATION, UNKNOWN_CONVERSATION)
        return requested

    async def add(self, conversation_id: str, kind: Member, member_id: str, owner: str) -> None:
        """List a turn or attachment of the conversation, whose owner the caller checked."""
        async with self.client.pipeline(transaction=True) as pipe:
            self.queue_add(pipe, conversation_id, kind, member_id, owner)
            await pipe.execute()

    def queue_add(
        self, pipe: Pipeline, conversation_id: str, kind: Member, member_id: str, owner: str
    ) -> None:
        """:meth:`add` as commands queued on ``pipe``, written with what else it holds."""
        key = INDEX_PREFIX + conversation_id
        pipe.sadd(key, f"{kind}:{member_id}")
        pipe.expire(key, self.ttl_s)
        pipe.set(OWNER_PREFIX + conversation_id, owner, ex=self.ttl_s)

    async def purge(self, conversation_id: str) -> int:
        """Delete every record of the conversation the gateway keeps; returns how many keys."""
        key = INDEX_PREFIX + conversation_id
        members = await self.client.smembers(key)
        doomed = [key, OWNER_PREFIX + conversation_id]
        for raw in members:
            kind, _, member_id = (raw.decode() if isinstance(raw, bytes) else raw).partition(":")
            if kind == "turn":
                doomed += [TURN_PREFIX + member_id, FEEDBACK_PREFIX + member_id]
                # The analytics' once-only markers name the turn (the day counters do not).
                doomed.append(MARKER_PREFIX + f"answer:{member_id}")
            elif kind == "attachment":
                doomed.append(ATTACHMENT_PREFIX + member_id)
        deleted = int(await self.client.delete(*doomed))
        log.info("conversation purged", extra={"keys": deleted})
        return deleted


class PurgeService:
    """Queues a conversation's purge for every service, and does the gateway's own part: its
    records, and the unanswered wordings its analytics kept."""

    def __init__(self, bus: Bus, index: ConversationIndex, analytics: AnalyticsRecorder) -> None:
        self.bus = bus
        self.index = index
        self.analytics = analytics

    async def request(self, conversation_id: str, requested_by: str) -> str:
        """Queue the purge; returns its id, the correlation id of every service's confirmation
        on the audit stream."""
        purge_id = new_id()
        await self.bus.publish(
            Topic.CONVERSATION_PURGED,
            ConversationPurged(
                correlation_id=purge_id,
                conversation_id=conversation_id,
                requested_by=requested_by,
            ),
        )
        return purge_id

    async def on_purge(self, event: ConversationPurged) -> None:
        deleted = await self.index.purge(event.conversation_id)
        wordings = await self.analytics.purge(event.conversation_id)
        await self.bus.publish(
            Topic.AUDIT,
            event.confirmation("gateway", keys=deleted, unanswered_wordings=wordings),
        )
