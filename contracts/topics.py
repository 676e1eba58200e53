"""Every stream and consumer-group name in one place.

A topic is a Redis stream. Each service reads a topic through its own consumer group, so two
services never compete for the same message, while replicas of one service share the work.
"""

from __future__ import annotations

from enum import StrEnum


class Topic(StrEnum):
    """Streams that carry events between services."""

    MESSAGE_RECEIVED = "message.received"
    """Raw user text from the gateway; only the redactor reads it, and deletes it once redacted."""
    ATTACHMENT_RECEIVED = "attachment.received"
    """Raw attachment bytes from the gateway; only the ocr service reads them."""
    ATTACHMENT_EXTRACTED = "attachment.extracted"
    """Raw text read from an attachment (OCR, log parsing); goes to the redactor like a message."""
    ATTACHMENT_REDACTED = "attachment.redacted"
    """An attachment's redacted text and signatures; the orchestrator keeps them for the turn."""
    CONVERSATION_PURGED = "conversation.purged"
    """An operator's request to delete everything kept of one conversation."""
    QUERY_RECEIVED = "query.received"
    """Redacted user text; the orchestrator starts a turn from it."""
    CONTEXT_INSUFFICIENT = "context.insufficient"
    """A turn needs more context: the crawler fleet starts a crawl job from it."""
    PAGES_CRAWLED = "pages.crawled"
    """One event per page a crawl job fetched, with its HTML (or a PDF's bytes); the indexer
    extracts and indexes it."""
    CRAWL_TASKS = "crawl.tasks"
    """Per-URL work of crawl jobs, shared by every crawler replica (internal to the fleet)."""
    CRAWL_STOP = "crawl.stop"
    """Ends a crawl job early (the orchestrator has enough)."""
    CRAWL_FINISHED = "crawl.finished"
    """A crawl job ended (budget, deadline, empty frontier or stop), with its summary."""
    SITE_MAPPED = "site.mapped"
    """The pages a help site's sitemaps list, when they changed: the site's profile (scope, the
    redactor's site words) knows them before they are crawled."""
    CHUNKS_INDEXED = "chunks.indexed"
    """Chunks of a document or crawled page were written; a turn waiting on a crawl resumes."""
    ESCALATION_REQUESTED = "escalation.requested"
    """The orchestrator asks the ticketing service for a ticket (idempotent per key)."""
    TICKET_STATUS_REQUESTED = "ticket.status.requested"
    """A user asked how their ticket is doing; the ticketing service reads the backend."""
    TICKET_EVENTS = "ticket.events"
    """Created, commented, linked, status, deferred, failed: for the orchestrator and any other
    internal system (dashboards, chat-ops)."""
    INCIDENT_REPORTED = "incident.reported"
    """A new or changed incident; the orchestrator matches turns to it, ticketing links tickets."""
    INCIDENT_RECEIVED = "incident.received"
    """An incident as a caller typed it (REST, MCP); only the redactor reads it, and deletes it
    once it published the redacted incident on ``incident.reported``."""
    SEARCH_RECEIVED = "search.received"
    """A knowledge-base search as its caller typed it (MCP); only the redactor reads it, and
    deletes it once it published the redacted search on ``search.requested``."""
    SEARCH_REQUESTED = "search.requested"
    """A redacted knowledge-base search; the orchestrator answers it on the asking gateway's
    reply stream with the passages found."""
    AUDIT = "audit.log"
    """Every agent action, redacted, with its trace and turn ids; read back by the admin API."""
    FEEDBACK_RECEIVED = "feedback.received"
    """A user rated their answer, with a raw comment; only the redactor reads it, and deletes it
    once it published the redacted rating on ``feedback.recorded``."""
    FEEDBACK_RECORDED = "feedback.recorded"
    """A user rated an answer (comment redacted); the orchestrator weighs the cited documents by
    their ratings, the gateway keeps the rating with the conversation."""
    DOCUMENT_SUBMITTED = "document.submitted"
    """An admin uploaded a document; the indexer ingests it."""
    DOCUMENT_DELETED = "document.deleted"
    """An admin deleted a document; the indexer removes its chunks."""
    DOCUMENT_STATUS = "document.status"
    """The indexer's outcome for a submitted or deleted document (indexed, failed, deleted)."""
    SOURCE_SYNC_REQUESTED = "source.sync.requested"
    """Sync one configured knowledge source (SharePoint, Confluence) now; any indexer replica
    runs it, from the source's last committed cursor."""
    SOURCE_SYNC_COMPLETED = "source.sync.completed"
    """A source sync ended, with its summary (new, changed, unchanged, deleted, failed)."""
    PROPOSALS = "proposal.drafted"
    """A knowledge-base update proposal the indexer drafted from a recurring gap; the gateway's
    review queue keeps it."""
    SOURCE_DRAFT_REQUESTED = "source.draft.requested"
    """An approved proposal to write as a draft (never published) into a configured source
    (a Confluence space, a SharePoint site); the indexer, which holds the credentials, writes it."""
    SOURCE_DRAFT_COMPLETED = "source.draft.completed"
    """The outcome of a draft request (its link, or why it failed); the gateway keeps it on the
    proposal and the audit stream."""
    NOTICE_UNANSWERED = "notice.unanswered"
    """A turn the assistant could not answer, or answered with low confidence, with its category
    and redacted question; the ticketing service tells the people responsible for the category."""


RAW_TOPICS: frozenset[str] = frozenset(
    {
        Topic.MESSAGE_RECEIVED,
        Topic.ATTACHMENT_RECEIVED,
        Topic.ATTACHMENT_EXTRACTED,
        Topic.FEEDBACK_RECEIVED,
        Topic.INCIDENT_RECEIVED,
        Topic.SEARCH_RECEIVED,
    }
)
"""Streams that carry raw, un-redacted user content. Their events travel sealed (the bus seals
on publish and opens on delivery, ``contracts.sealing``), so no file Redis writes holds them in
clear. An entry is deleted once handled; one that fails for good, or does not open, is
dead-lettered without its content (ids and why only), never with it."""

DELETED_ONCE_HANDLED: frozenset[str] = RAW_TOPICS | {
    Topic.DOCUMENT_SUBMITTED,
    Topic.PAGES_CRAWLED,
}
"""Streams whose one reading group deletes each entry (XDEL) once it handled it: raw user content,
and the bulky ones, an uploaded document's bytes and a crawled page's HTML or PDF (tens of KB, up
to megabytes), whose extracted form the indexer keeps. They are not bounded by trimming instead:
an approximate MAXLEN drops the oldest entries whether or not their group read them yet."""


class Group(StrEnum):
    """Consumer groups, one per consuming service."""

    GATEWAY = "gateway"
    REDACTOR = "redactor"
    ORCHESTRATOR = "orchestrator"
    INDEXER = "indexer"
    CRAWLER = "crawler"
    TICKETING = "ticketing"
    OCR = "ocr"


LINGERING: dict[str, int] = {Topic.AUDIT: 200}
"""Topics nobody waits on, and how many milliseconds after they were read their entries are
handled: their readers read them in batches and acknowledge them together (see
``contracts.bus.Bus.subscribe``). A turn's audit records are written with its answer, which the
gateway is handing over at that moment; their readers (analytics, the gap window) keep clear of
it."""

REPLY_PREFIX = "reply."
DLQ_SUFFIX = ".dlq"


def reply_stream(gateway_instance: str) -> str:
    """The stream a gateway instance reads its own turns' progress and answers from.

    Replies go to the instance that holds the user's connection, not to every gateway.
    """
    return f"{REPLY_PREFIX}{gateway_instance}"


def dead_letter_stream(topic: str) -> str:
    """Where a message that failed too often is kept, with its error, for operators to replay."""
    return f"{topic}{DLQ_SUFFIX}"


SEALED_BY: dict[Topic, tuple[Group, ...]] = {
    Topic.MESSAGE_RECEIVED: (Group.GATEWAY,),
    Topic.ATTACHMENT_RECEIVED: (Group.GATEWAY,),
    Topic.ATTACHMENT_EXTRACTED: (Group.OCR,),
    Topic.FEEDBACK_RECEIVED: (Group.GATEWAY,),
    Topic.INCIDENT_RECEIVED: (Group.GATEWAY,),
    Topic.SEARCH_RECEIVED: (Group.GATEWAY,),
}
"""Who publishes each raw topic, sealing it. With the groups that read raw topics, these are
the services that need ``DESKPILOT_SEAL_KEYS`` (and refuse to start without it in production)."""


def seal_key_holders() -> frozenset[str]:
    """The services that seal or open raw content: every publisher and reader of a raw topic."""
    readers = {group for topic in RAW_TOPICS for group in SUBSCRIPTIONS.get(Topic(topic), ())}
    writers = {group for groups in SEALED_BY.values() for group in groups}
    return frozenset(str(group) for group in readers | writers)


SUBSCRIPTIONS: dict[Topic, tuple[Group, ...]] = {
    Topic.MESSAGE_RECEIVED: (Group.REDACTOR,),
    Topic.ATTACHMENT_RECEIVED: (Group.OCR,),
    Topic.ATTACHMENT_EXTRACTED: (Group.REDACTOR,),
    Topic.ATTACHMENT_REDACTED: (Group.ORCHESTRATOR,),
    Topic.CONVERSATION_PURGED: (
        Group.GATEWAY,
        Group.REDACTOR,
        Group.ORCHESTRATOR,
        Group.INDEXER,
    ),
    Topic.QUERY_RECEIVED: (Group.ORCHESTRATOR,),
    Topic.CONTEXT_INSUFFICIENT: (Group.CRAWLER,),
    Topic.CRAWL_TASKS: (Group.CRAWLER,),
    Topic.CRAWL_STOP: (Group.CRAWLER,),
    Topic.PAGES_CRAWLED: (Group.INDEXER,),
    Topic.CHUNKS_INDEXED: (Group.ORCHESTRATOR,),
    Topic.CRAWL_FINISHED: (Group.ORCHESTRATOR, Group.GATEWAY, Group.REDACTOR),
    Topic.SITE_MAPPED: (Group.ORCHESTRATOR, Group.REDACTOR),
    Topic.DOCUMENT_SUBMITTED: (Group.INDEXER,),
    Topic.DOCUMENT_DELETED: (Group.INDEXER,),
    Topic.DOCUMENT_STATUS: (Group.GATEWAY,),
    Topic.ESCALATION_REQUESTED: (Group.TICKETING,),
    Topic.TICKET_STATUS_REQUESTED: (Group.TICKETING,),
    Topic.TICKET_EVENTS: (Group.ORCHESTRATOR, Group.GATEWAY),
    Topic.INCIDENT_RECEIVED: (Group.REDACTOR,),
    Topic.INCIDENT_REPORTED: (Group.ORCHESTRATOR, Group.TICKETING, Group.GATEWAY),
    Topic.SEARCH_RECEIVED: (Group.REDACTOR,),
    Topic.SEARCH_REQUESTED: (Group.ORCHESTRATOR,),
    Topic.FEEDBACK_RECEIVED: (Group.REDACTOR,),
    Topic.FEEDBACK_RECORDED: (Group.ORCHESTRATOR, Group.INDEXER, Group.GATEWAY),
    Topic.AUDIT: (Group.GATEWAY, Group.INDEXER),
    Topic.PROPOSALS: (Group.GATEWAY,),
    Topic.SOURCE_SYNC_REQUESTED: (Group.INDEXER,),
    Topic.SOURCE_DRAFT_REQUESTED: (Group.INDEXER,),
    Topic.SOURCE_DRAFT_COMPLETED: (Group.GATEWAY,),
    Topic.NOTICE_UNANSWERED: (Group.TICKETING,),
}
"""Which groups read which topic. Every service creates all of these groups at start-up, so a
group exists before the first event for it is published, whichever service starts first."""
