"""Raw message in, redacted query out; the raw stream entry is deleted once handled."""

from __future__ import annotations

import asyncio
import logging
import uuid

from contracts.bus import Bus, Delivery
from contracts.events import MessageReceived, QueryReceived, RedactionCount
from contracts.topics import Group, Topic
from redactor.placeholders import ConversationPlaceholders
from redactor.service import Redactor

log = logging.getLogger("deskpilot.redactor")


def query_event_id(message_event_id: str) -> str:
    """Deterministic, so a redelivered message yields the same downstream event id."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"deskpilot:query:{message_event_id}").hex


def register(
    bus: Bus, redactor: Redactor, placeholders: ConversationPlaceholders, concurrency: int
) -> None:
    async def on_message(event: MessageReceived, delivery: Delivery) -> None:
        found = await asyncio.to_thread(redactor.find, event.text)
        # The same value keeps its placeholder in every message of the conversation.
        numbers = await placeholders.numbers(
            event.conversation_id, [f.key for f in found if not f.flag_only]
        )
        redaction = redactor.replace(event.text, found, numbers)
        query = QueryReceived(
            event_id=query_event_id(event.event_id),
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            user_id=event.user_id,
            text=redaction.text,
            redactions=[
                RedactionCount(entity_type=kind, count=count)
                for kind, count in sorted(redaction.summary().items())
            ],
            reply_to=event.reply_to,
            attachments=event.attachments,
        )
        await bus.publish(Topic.QUERY_RECEIVED, query)
        # Raw text lives only until it is redacted.
        await delivery.delete_entry()
        log.info(
            "redacted", extra={"redactions": redaction.summary(), "flagged": redaction.flagged}
        )

    bus.subscribe(
        Topic.MESSAGE_RECEIVED,
        MessageReceived,
        on_message,
        group=Group.REDACTOR,
        concurrency=concurrency,
    )
