"""The gateway's subscriptions: its own reply stream, the indexer's document statuses,
conversation purges, the ticketing service's ticket events (the admin read model), the
indexer's knowledge-base update proposals (the review queue) and reported incidents (read back
over MCP)."""

from __future__ import annotations

from contracts.bus import Bus, Delivery
from contracts.events import (
    ConversationPurged,
    DocumentStatus,
    IncidentReported,
    ProposalDrafted,
    SourceDraftCompleted,
    TicketEvent,
    TurnReply,
)
from contracts.topics import Group, Topic
from gateway.attachments import AttachmentService
from gateway.channels.delivery import ChannelTurns
from gateway.conversations import PurgeService
from gateway.documents import DocumentService
from gateway.incidents import IncidentBoard
from gateway.proposals import ProposalService, ProposalStore
from gateway.tickets import TicketReadModel
from gateway.turns import TurnService


def register(
    bus: Bus,
    turns: TurnService,
    attachments: AttachmentService,
    channels: ChannelTurns | None = None,
) -> None:
    """``channels``: when a channel (Slack) is configured, replies of its turns are delivered
    to the platform after the answer is stored, as part of handling the reply."""

    async def on_reply(reply: TurnReply, delivery: Delivery) -> None:
        if reply.kind in ("attachment", "attachment_error"):
            # Recorded before the upload request is answered, so a message can reference it.
            await attachments.on_reply(reply)
        await turns.on_reply(reply, delivery.message_id)
        if channels is not None:
            await channels.on_reply(reply)

    bus.subscribe(turns.reply_to, TurnReply, on_reply, group=Group.GATEWAY, concurrency=4)


def register_documents(bus: Bus, documents: DocumentService) -> None:
    async def on_status(event: DocumentStatus, _: Delivery) -> None:
        await documents.on_status(event)

    bus.subscribe(Topic.DOCUMENT_STATUS, DocumentStatus, on_status, group=Group.GATEWAY)


def register_purge(bus: Bus, purge: PurgeService) -> None:
    async def on_purge(event: ConversationPurged, _: Delivery) -> None:
        await purge.on_purge(event)

    bus.subscribe(Topic.CONVERSATION_PURGED, ConversationPurged, on_purge, group=Group.GATEWAY)


def register_tickets(bus: Bus, tickets: TicketReadModel, incidents: IncidentBoard | None) -> None:
    """``incidents``: the incident board (kept where MCP is on) links tickets to incidents."""

    async def on_ticket(event: TicketEvent, _: Delivery) -> None:
        await tickets.apply(event)
        if incidents is not None:
            await incidents.on_ticket(event)

    bus.subscribe(Topic.TICKET_EVENTS, TicketEvent, on_ticket, group=Group.GATEWAY)


def register_incidents(bus: Bus, incidents: IncidentBoard) -> None:
    async def on_incident(event: IncidentReported, _: Delivery) -> None:
        await incidents.apply(event)

    bus.subscribe(Topic.INCIDENT_REPORTED, IncidentReported, on_incident, group=Group.GATEWAY)


def register_proposals(bus: Bus, proposals: ProposalStore) -> None:
    async def on_proposal(event: ProposalDrafted, _: Delivery) -> None:
        await proposals.apply(event)

    bus.subscribe(Topic.PROPOSALS, ProposalDrafted, on_proposal, group=Group.GATEWAY)


def register_drafts(bus: Bus, proposals: ProposalService) -> None:
    async def on_draft(event: SourceDraftCompleted, _: Delivery) -> None:
        await proposals.on_draft_completed(event)

    bus.subscribe(Topic.SOURCE_DRAFT_COMPLETED, SourceDraftCompleted, on_draft, group=Group.GATEWAY)
