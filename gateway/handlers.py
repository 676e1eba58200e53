"""The gateway's subscriptions: its own reply stream, and the indexer's document statuses."""

from __future__ import annotations

from contracts.bus import Bus, Delivery
from contracts.events import DocumentStatus, TurnReply
from contracts.topics import Group, Topic
from gateway.documents import DocumentService
from gateway.service import TurnService


def register(bus: Bus, turns: TurnService) -> None:
    async def on_reply(reply: TurnReply, _: Delivery) -> None:
        await turns.on_reply(reply)

    bus.subscribe(turns.reply_to, TurnReply, on_reply, group=Group.GATEWAY, concurrency=4)


def register_documents(bus: Bus, documents: DocumentService) -> None:
    async def on_status(event: DocumentStatus, _: Delivery) -> None:
        await documents.on_status(event)

    bus.subscribe(Topic.DOCUMENT_STATUS, DocumentStatus, on_status, group=Group.GATEWAY)
