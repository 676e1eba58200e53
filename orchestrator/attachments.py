"""Attachments of a conversation, as the redactor handed them over (redacted).

Each ``attachment.redacted`` event is kept under ``deskpilot:orchestrator:attachment:<id>`` for
``ORCHESTRATOR_CONVERSATION_TTL_S`` (refreshed whenever a message references it), so a message
that references the attachment, on any replica, can use its text and error signatures. A
conversation's attachments, turns and memory are listed in one index so that a purge finds them.
"""

from __future__ import annotations

import re

import redis.asyncio as aioredis
from pydantic import BaseModel
from redis.asyncio.client import Pipeline

from contracts.events import AttachmentRedacted, AttachmentSummary

ATTACHMENT_PREFIX = "deskpilot:orchestrator:attachment:"
INDEX_PREFIX = "deskpilot:orchestrator:conversation-keys:"

CONTEXT_CHARS = 400
"""How much of an attachment's text joins the question for searching."""
_ERROR_LINE = re.compile(
    r"error|fail|exception|denied|refused|timed? ?out|unable|cannot|can't|invalid|0x[0-9a-f]{6,}",
    re.IGNORECASE,
)
_SPACE = re.compile(r"\s+")


class StoredAttachment(BaseModel):
    conversation_id: str
    summary: AttachmentSummary
    text: str


def search_context(attachment: StoredAttachment) -> str:
    """What an attachment adds to the question for searching: its signatures and the lines
    that carry an error (for a screenshot, the text it shows), at most :data:`CONTEXT_CHARS`."""
    summary = attachment.summary
    lines = [line.strip() for line in attachment.text.splitlines() if line.strip()]
    if summary.kind == "log":
        lines = [line for line in lines if _ERROR_LINE.search(line)]
    text = _SPACE.sub(" ", " ".join([*summary.signatures, *lines]))
    return text[:CONTEXT_CHARS]


def describe(attachments: list[StoredAttachment]) -> str:
    """One sentence telling the user what was read from their files."""
    parts = []
    for attachment in attachments:
        summary = attachment.summary
        what = "screenshot" if summary.kind == "image" else "log"
        name = f" {summary.filename}" if summary.filename else ""
        if summary.signatures:
            shown = ", ".join(summary.signatures[:4])
            since = f" (first at {summary.first_error_at})" if summary.first_error_at else ""
            parts.append(f"your {what}{name} shows {shown}{since}")
        elif summary.text_excerpt:
            parts.append(f"I read your {what}{name} but found no error code in it")
        else:
            parts.append(f"I found no text in your {what}{name}")
    return "From your attachments: " + "; ".join(parts) + "."


class AttachmentStore:
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def put(self, event: AttachmentRedacted) -> None:
        stored = StoredAttachment(
            conversation_id=event.conversation_id, summary=event.attachment, text=event.text
        )
        async with self.client.pipeline(transaction=True) as pipe:
            key = ATTACHMENT_PREFIX + event.attachment.id
            pipe.set(key, stored.model_dump_json(), ex=self.ttl_s)
            pipe.sadd(INDEX_PREFIX + event.conversation_id, key)
            pipe.expire(INDEX_PREFIX + event.conversation_id, self.ttl_s)
            await pipe.execute()

    async def get_many(self, ids: list[str], conversation_id: str) -> list[StoredAttachment]:
        """The conversation's attachments among ``ids`` (others, and expired ones, are left out),
        their expiry refreshed."""
        if not ids:
            return []
        keys = [ATTACHMENT_PREFIX + attachment_id for attachment_id in ids]
        found = []
        for key, raw in zip(keys, await self.client.mget(keys), strict=True):
            if raw is None:
                continue
            attachment = StoredAttachment.model_validate_json(raw)
            if attachment.conversation_id == conversation_id:
                found.append(attachment)
                await self.client.expire(key, self.ttl_s)
        return found


class ConversationKeys:
    """The Redis keys the orchestrator keeps for a conversation, for purging."""

    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def add(self, conversation_id: str, *keys: str) -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            self.queue_add(pipe, conversation_id, *keys)
            await pipe.execute()

    def queue_add(self, pipe: Pipeline, conversation_id: str, *keys: str) -> None:
        """:meth:`add` as commands queued on ``pipe``, written with what else it holds."""
        pipe.sadd(INDEX_PREFIX + conversation_id, *keys)
        pipe.expire(INDEX_PREFIX + conversation_id, self.ttl_s)

    async def purge(self, conversation_id: str, *more: str) -> int:
        index = INDEX_PREFIX + conversation_id
        members = [
            m.decode() if isinstance(m, bytes) else m for m in await self.client.smembers(index)
        ]
        return int(await self.client.delete(index, *members, *more))
