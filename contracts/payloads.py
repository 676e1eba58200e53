"""Which event travels on which stream: the payload model of every topic.

:mod:`contracts.topics` names the streams and :mod:`contracts.events` the events; this map ties
them together, so a producer, a consumer and the AsyncAPI document (``deskpilot asyncapi``) agree
on what an entry of a stream holds. Every topic carries exactly one model (no topic is without a
payload); the reply streams of the gateway instances (``reply.<instance>``) carry
:data:`REPLY_PAYLOAD`.
"""

from __future__ import annotations

from contracts import events
from contracts.events import Event
from contracts.topics import Topic

PAYLOADS: dict[Topic, type[Event]] = {
    Topic.MESSAGE_RECEIVED: events.MessageReceived,
    Topic.ATTACHMENT_RECEIVED: events.AttachmentReceived,
    Topic.ATTACHMENT_EXTRACTED: events.AttachmentExtracted,
    Topic.ATTACHMENT_REDACTED: events.AttachmentRedacted,
    Topic.CONVERSATION_PURGED: events.ConversationPurged,
    Topic.QUERY_RECEIVED: events.QueryReceived,
    Topic.CONTEXT_INSUFFICIENT: events.ContextInsufficient,
    Topic.PAGES_CRAWLED: events.PagesCrawled,
    Topic.CRAWL_TASKS: events.CrawlTask,
    Topic.CRAWL_STOP: events.CrawlStop,
    Topic.CRAWL_FINISHED: events.CrawlFinished,
    Topic.SITE_MAPPED: events.SiteMapped,
    Topic.CHUNKS_INDEXED: events.ChunksIndexed,
    Topic.ESCALATION_REQUESTED: events.EscalationRequested,
    Topic.TICKET_STATUS_REQUESTED: events.TicketStatusRequested,
    Topic.TICKET_EVENTS: events.TicketEvent,
    Topic.INCIDENT_RECEIVED: events.IncidentReceived,
    Topic.INCIDENT_REPORTED: events.IncidentReported,
    Topic.SEARCH_RECEIVED: events.SearchReceived,
    Topic.SEARCH_REQUESTED: events.SearchRequested,
    Topic.AUDIT: events.AuditRecorded,
    Topic.FEEDBACK_RECEIVED: events.FeedbackReceived,
    Topic.FEEDBACK_RECORDED: events.FeedbackRecorded,
    Topic.PROPOSALS: events.ProposalDrafted,
    Topic.DOCUMENT_SUBMITTED: events.DocumentSubmitted,
    Topic.DOCUMENT_DELETED: events.DocumentDeleted,
    Topic.DOCUMENT_STATUS: events.DocumentStatus,
    Topic.SOURCE_SYNC_REQUESTED: events.SourceSyncRequested,
    Topic.SOURCE_SYNC_COMPLETED: events.SourceSyncCompleted,
    Topic.SOURCE_DRAFT_REQUESTED: events.SourceDraftRequested,
    Topic.SOURCE_DRAFT_COMPLETED: events.SourceDraftCompleted,
    Topic.NOTICE_UNANSWERED: events.UnansweredNotice,
}
"""The model each topic's entries hold (sealed on a raw topic, :data:`contracts.topics.RAW_TOPICS`,
and opened again on delivery). A new topic needs its model here: a test refuses a topic without."""

REPLY_PAYLOAD: type[Event] = events.TurnReply
"""What a gateway instance's reply stream (:func:`contracts.topics.reply_stream`) carries."""
