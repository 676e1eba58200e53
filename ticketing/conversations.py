"""Which conversation each ticket came from: kept by the ticketing service, never in the ticket.

A ticket names its conversation only by an opaque reference (everyone who can read a Jira issue
reads its description, labels and entity properties, and a conversation id must not reach them).
Technicians still need the conversation: the ticket records the service publishes on
``ticket.events`` carry its id, which the gateway's admin read model keeps behind the technician
role. So the id is remembered here, in Redis, per ticket key, when the ticket is filed or
commented on, and added to every record published that the backend returned without one.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from contracts.events import TicketRecord

CONVERSATION_OF = "deskpilot:ticketing:conversation-of"
"""Hash: ticket key -> the conversation id the ticket was filed from (the first one wins)."""


class TicketConversations:
    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def remember(self, ticket_key: str, conversation_id: str) -> None:
        await self.redis.hsetnx(CONVERSATION_OF, ticket_key, conversation_id)

    async def attach(self, record: TicketRecord) -> TicketRecord:
        """``record`` with its conversation id when the backend did not return one."""
        if record.conversation_id:
            return record
        raw = await self.redis.hget(CONVERSATION_OF, record.key)
        if raw is None:
            return record
        conversation_id = raw.decode() if isinstance(raw, bytes) else str(raw)
        return record.model_copy(update={"conversation_id": conversation_id})
