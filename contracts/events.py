"""The events services exchange, one pydantic model per topic.

Every event carries the envelope fields of :class:`Event`: an id for de-duplication, a schema
version, the correlation id of the user turn it belongs to, the conversation id, when it happened,
and the W3C trace context of the span that published it. Models ignore unknown fields so a newer
producer does not break an older consumer; a consumer checks ``schema_version`` when it needs to.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field

from contracts.ids import derived_event_id
from contracts.readers import MAX_GROUPS


def new_id() -> str:
    return uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


class Event(BaseModel):
    """Envelope fields shared by every event."""

    model_config = ConfigDict(extra="ignore")

    event_id: str = Field(
        default_factory=new_id, description="Unique per event; used to de-duplicate."
    )
    schema_version: int = Field(1, ge=1, description="Version of this event's schema.")
    correlation_id: str = Field(
        description="One per user turn; every event of the turn carries it.",
        examples=["5f0c3a9e4b1d4f7e9a51c0b2d3e4f5a6"],
    )
    conversation_id: str = Field(description="The conversation the turn belongs to.")
    occurred_at: datetime = Field(default_factory=utcnow, description="When it happened (UTC).")
    traceparent: str | None = Field(
        None,
        description="W3C trace context of the publishing span.",
        examples=["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    )
    tracestate: str | None = Field(None, description="W3C tracestate, when any.")


class SealedEvent(Event):
    """How an event of a raw topic (``contracts.topics.RAW_TOPICS``) travels: its envelope in
    clear, for routing, dead letters and traces, and the whole event sealed (see
    ``contracts.sealing``), so raw user content never reaches Redis's files in clear."""

    sealed: str = Field(
        description="The event as JSON, sealed with AES-256-GCM under a key of "
        "DESKPILOT_SEAL_KEYS: `<key id>:<base64url of the 12-byte nonce, the ciphertext and the "
        "tag>`; the event id is the associated data.",
        examples=["k2026-11:3q2-7wAAAAAAAAAAAAAAAN8x..."],
    )


class Action(StrEnum):
    """What the assistant decided to do with a turn."""

    ANSWER = "answer"
    NO_ANSWER = "no_answer"
    CLARIFY = "clarify"
    CHECKLIST = "checklist"
    REFUSE = "refuse"
    CRAWL = "crawl"
    ESCALATED = "escalated"
    AUTOMATION = "automation"


class Citation(BaseModel):
    """A numbered source the answer quotes."""

    n: int = Field(ge=1, description="The number used in the answer text, as in [1].")
    url: str = Field(examples=["https://it.northwind.example/kb/vpn-password-reset"])
    title: str
    snippet: str = Field(description="The passage the answer relied on, shortened.")


class TicketRef(BaseModel):
    key: str = Field(examples=["IT-1042"])
    url: str
    status: str


class IncidentRef(BaseModel):
    """An ongoing incident the turn matched: the user need not keep troubleshooting."""

    id: str
    title: str
    status: str
    url: str | None = None
    since: datetime | None = None
    latest_update: str | None = None


class Checklist(BaseModel):
    """Troubleshooting steps the user works through one at a time."""

    steps: list[str] = Field(description="The steps, verbatim from the cited article.")
    current: int = Field(ge=0, description="Index of the step the user is on now.")


class SimilarCase(BaseModel):
    """A resolved ticket like the user's problem, offered after the knowledge-base answer."""

    ticket_id: str = Field(examples=["IT-1042"])
    summary: str
    resolution: str = Field(description="How the technician resolved it.")
    category: str | None = None
    score: float = Field(description="Cosine similarity to the question; higher is closer.")


class AnswerBody(BaseModel):
    """The assistant's reply to one turn, as users and the gateway API see it."""

    answer: str = Field(description="Plain text with light Markdown and [n] citation markers.")
    action: Action
    citations: list[Citation] = Field(default_factory=list)
    questions: list[str] = Field(
        default_factory=list, description="What the assistant needs to know (action clarify)."
    )
    checklist: Checklist | None = Field(None, description="Set when action is checklist.")
    ticket: TicketRef | None = None
    incident: IncidentRef | None = None
    category: str | None = Field(
        None,
        description="The request's category as the assistant understood it (for ratings and "
        "analytics); None for greetings and off-topic turns.",
        examples=["connectivity"],
    )
    similar_cases: list[SimilarCase] = Field(
        default_factory=list,
        description="Resolved tickets like this one; lower priority than the knowledge base.",
    )
    crawled: bool = Field(
        False,
        description="The assistant read the allowed help sites during this turn before "
        "answering (the answer may cite pages it read then).",
    )
    redaction_notice: str | None = Field(
        None,
        description="Set when the redactor removed something from the user's message: what "
        "kind of thing (never the value), and what to do about it.",
        examples=[
            "I removed a password from your message — please never share passwords, "
            "even with IT. If it was your real one, change it."
        ],
    )


class RedactionCount(BaseModel):
    entity_type: str = Field(examples=["EMAIL_ADDRESS"])
    count: int = Field(ge=1)


class MessageReceived(Event):
    """A user's message as typed: raw, un-redacted. Only the redactor may read it."""

    user_id: str = Field(description="Employee id or an anonymous per-browser id.")
    groups: list[str] = Field(
        default_factory=list,
        max_length=MAX_GROUPS,
        description="The verified user's groups (ids from the token's groups claim): what, with "
        "`user_id`, decides which documents they may read. Empty for anonymous users.",
        examples=[["6b2f1c9e-1d2a-4c1e-9f3b-2a7d5e8c0b14", "hr-team"]],
    )
    text: str = Field(description="Raw user text; deleted from the stream once redacted.")
    reply_to: str = Field(description="The reply stream of the gateway instance holding the user.")
    attachments: list[str] = Field(default_factory=list, description="Attachment ids.")
    request_ticket: bool = Field(
        False, description="The user pressed the ticket button: escalate whatever the text says."
    )
    authenticated: bool = Field(
        False,
        description="The gateway verified the user's identity (a signed token); anonymous and "
        "self-declared user ids are not authenticated.",
    )


class QueryReceived(Event):
    """A user's message after redaction: the only form of user text other services see."""

    user_id: str
    groups: list[str] = Field(
        default_factory=list,
        max_length=MAX_GROUPS,
        description="The user's groups, passed on unchanged from `message.received` (group ids "
        "are not personal text).",
    )
    text: str = Field(description="Redacted text with placeholders such as <EMAIL_ADDRESS_1>.")
    redactions: list[RedactionCount] = Field(default_factory=list)
    reply_to: str
    attachments: list[str] = Field(default_factory=list)
    request_ticket: bool = False
    authenticated: bool = False


class Passage(BaseModel):
    """A knowledge-base passage a search found (redacted at indexing, as every chunk is)."""

    title: str
    url: str = Field(examples=["https://it.northwind.example/kb/vpn-password-reset"])
    section: str = Field("", description="The heading the passage sits under, if any.")
    snippet: str = Field(description="The passage, shortened.")
    score: float = Field(description="Cosine similarity to the query in [-1, 1]; higher is closer.")


class TurnReply(Event):
    """Progress or the final answer of a turn, sent to the gateway instance in ``reply_to``.

    An attachment upload is answered the same way: its correlation id is the attachment id and
    ``kind`` is ``attachment`` (read and redacted) or ``attachment_error``.

    A turn's progress is shown in the order of its reply stream, and only forwards: a progress
    entry older than one shown, or with a ``count`` not above its stage's last, is dropped
    (crawler replicas count pages together and may publish them out of order).
    """

    kind: Literal["progress", "answer", "attachment", "attachment_error", "search"]
    stage: str | None = Field(None, examples=["searching", "composing"])
    detail: str | None = None
    count: int | None = Field(
        None,
        ge=0,
        description="How far the stage has got, counting up (the pages read of a crawl); "
        "progress that arrives after a higher count of its stage is stale.",
        examples=[3],
    )
    total: int | None = Field(None, ge=0, description="What ``count`` counts up to.", examples=[8])
    body: AnswerBody | None = Field(None, description="Set when kind is 'answer'.")
    attachment: AttachmentSummary | None = Field(None, description="Set when kind is 'attachment'.")
    error: AttachmentError | None = Field(None, description="Set when kind is 'attachment_error'.")
    passages: list[Passage] | None = Field(
        None, description="Set when kind is 'search': what the search found, best first."
    )


MAX_SEARCH_PASSAGES = 20
"""The most passages one knowledge-base search returns."""


class SearchReceived(Event):
    """A knowledge-base search as its caller typed it (the MCP tool ``search_knowledge_base``).

    Raw: it travels sealed and only the redactor reads it, which publishes it redacted on
    ``search.requested`` and deletes it. The correlation id is the search's own id, which the
    reply carries back to ``reply_to``."""

    user_id: str = Field(description="Who searches: retrieval shows what they may read.")
    groups: list[str] = Field(
        default_factory=list,
        max_length=MAX_GROUPS,
        description="The caller's groups, for the same purpose.",
    )
    authenticated: bool = Field(
        False,
        description="The gateway verified the caller (a signed token): only then do its user "
        "id and groups open restricted documents.",
    )
    query: str = Field(description="Raw query text; deleted from the stream once redacted.")
    limit: int = Field(5, ge=1, le=MAX_SEARCH_PASSAGES, description="How many passages at most.")
    reply_to: str = Field(description="The reply stream of the gateway instance that waits.")


class SearchRequested(Event):
    """A redacted knowledge-base search for the orchestrator, which runs its retrieval as
    ``user_id`` with ``groups`` and answers on ``reply_to`` with a ``TurnReply`` of kind
    ``search`` (same correlation id)."""

    user_id: str
    groups: list[str] = Field(default_factory=list, max_length=MAX_GROUPS)
    authenticated: bool = False
    query: str = Field(description="Redacted query with placeholders such as <EMAIL_ADDRESS_1>.")
    redactions: list[RedactionCount] = Field(default_factory=list)
    limit: int = Field(5, ge=1, le=MAX_SEARCH_PASSAGES)
    reply_to: str


class FeedbackReceived(Event):
    """A user's rating of their own answered turn as given, with what the answer was. Raw (its
    comment is user text): only the redactor reads it, and deletes the entry once it published
    ``feedback.recorded``. ``occurred_at`` is when the rating was given."""

    turn_id: str
    user_id: str = Field(description="The turn's own user: only they may rate it.")
    score: int = Field(ge=1, le=5)
    comment: str | None = Field(None, description="Raw user text; redacted on the way on.")
    cited_urls: list[str] = Field(
        default_factory=list, description="The documents the rated answer cited, in order."
    )
    action: Action | None = Field(None, description="What the rated answer did.")
    category: str | None = Field(None, description="The category the answer was given in.")


class FeedbackRecorded(Event):
    """A user's rating of one answered turn, with what the answer was (for feedback-aware
    retrieval and analytics). A rating of a turn rated before replaces the earlier one; the
    newer ``occurred_at`` (when the rating was given) wins."""

    turn_id: str
    user_id: str
    score: int = Field(ge=1, le=5)
    comment: str | None = Field(None, description="The user's comment, redacted.")
    rating_id: str | None = Field(
        None,
        description="Which rating this is: the id of the `feedback.received` event it was "
        "redacted from (a re-rating has a new one).",
    )
    cited_urls: list[str] = Field(
        default_factory=list,
        description="The documents the rated answer cited, in citation order.",
        examples=[["https://it.northwind.example/kb/vpn-password-reset"]],
    )
    action: Action | None = Field(None, description="What the rated answer did.")
    category: str | None = Field(None, description="The category the answer was given in.")


AttachmentKind = Literal["log", "image"]


class AttachmentSummary(BaseModel):
    """What a user and every service may see of an attachment: redacted, never its bytes."""

    id: str = Field(description="The attachment id, chosen by the gateway.")
    kind: AttachmentKind
    bytes: int = Field(ge=0, description="Size of the uploaded file.")
    filename: str = Field("", description="The uploaded file's name, redacted.")
    text_excerpt: str = Field(
        "", description="The start of the redacted text read from the file (log lines or OCR)."
    )
    signatures: list[str] = Field(
        default_factory=list,
        description="Error signatures, redacted: codes, exception names, failing components.",
        examples=[["0x80070005", "HTTP 503", "System.UnauthorizedAccessException"]],
    )
    first_error_at: str | None = Field(
        None, description="Timestamp of the first error-bearing line of a log, as written there."
    )


class AttachmentError(BaseModel):
    """Why an attachment could not be read; never quotes the file."""

    error_code: Literal[
        "unsupported_media_type", "attachment_too_large", "corrupt_attachment", "extraction_failed"
    ]
    detail: str


class AttachmentReceived(Event):
    """A file a user attached, carried whole (uploads are size-limited). Raw: only the ocr
    service reads it, and deletes the entry once it is read."""

    attachment_id: str
    user_id: str
    filename: str
    kind: AttachmentKind = Field(description="Sniffed from the bytes by the gateway.")
    content_type: str = Field(description="Sniffed from the bytes, e.g. image/png, text/plain.")
    size_bytes: int = Field(ge=0)
    content_b64: str = Field(description="The file's bytes, base64-encoded.")
    reply_to: str = Field(description="The reply stream of the gateway instance that waits.")


class AttachmentExtracted(Event):
    """Raw text read from an attachment; like a message, it goes through the redactor."""

    attachment_id: str
    user_id: str
    kind: AttachmentKind
    filename: str
    size_bytes: int = Field(ge=0)
    text: str = Field(description="The text kept: a log's head, error lines and tail, or OCR.")
    signatures: list[str] = Field(default_factory=list)
    first_error_at: str | None = None
    reply_to: str


class AttachmentRedacted(Event):
    """An attachment's text after the redactor: what the orchestrator keeps for the conversation."""

    attachment: AttachmentSummary
    user_id: str
    text: str = Field(description="All the redacted text kept from the file.")
    redactions: list[RedactionCount] = Field(default_factory=list)


class ConversationPurged(Event):
    """An operator asked for every trace of a conversation to be deleted; each service deletes
    what it keeps of it."""

    requested_by: str = Field(examples=["admin", "cli"])

    def confirmation(
        self, service: str, **details: str | int | float | bool | None
    ) -> AuditRecorded:
        """The audit record a service writes once it deleted its part (``deskpilot purge`` waits
        for them); its id is derived, so a redelivered purge confirms once."""
        return AuditRecorded(
            event_id=derived_event_id(f"purge-{service}", self.event_id),
            correlation_id=self.correlation_id,
            conversation_id=self.conversation_id,
            service=service,
            action="purge",
            reason=f"requested by {self.requested_by}",
            details=details,
        )


class CrawlBudget(BaseModel):
    max_pages: int = Field(
        10, ge=1, description="Pages published at most (skipped URLs do not count)."
    )
    max_depth: int = Field(2, ge=0, description="Links followed from a seed at most (seeds are 0).")
    deadline_s: float = Field(60.0, gt=0, description="Seconds from the job's start to its end.")
    concurrency: int = Field(4, ge=1, description="Pages of the job fetched at once, fleet-wide.")


class ContextInsufficient(Event):
    """The knowledge base could not answer; the crawler fleet should read the allowed sites.

    The crawler turns it into a crawl job (see the ``crawler`` package for the protocol). A
    redelivered event does not start a second job: the job is keyed by ``job_id``.
    """

    question: str = Field(description="Redacted question; empty means breadth-first order.")
    focus: list[str] = Field(
        default_factory=list,
        description="Words of the question that no similar article of the knowledge base is "
        "about (its key terms the sufficiency check found missing), heaviest first: links "
        "naming them are read first.",
        examples=[["cookie"]],
    )
    seed_urls: list[str]
    allowed_domains: list[str] = Field(
        default_factory=list,
        description="Hosts the job may fetch, each also allowing its subdomains; empty means the "
        "seed URLs' own hosts.",
        examples=[["help.northwind.example"]],
    )
    budget: CrawlBudget = Field(default_factory=CrawlBudget)
    job_id: str = Field(
        default_factory=new_id,
        description="The crawl job's id: chosen by the requester so it can stop the job and match "
        "``crawl.finished``.",
    )
    reply_to: str | None = Field(
        None,
        description="A gateway reply stream for progress (pages fetched out of the budget).",
    )
    source: str = Field(
        "orchestrator", description="Who asked: orchestrator, cli, bench.", examples=["cli"]
    )


class PageLink(BaseModel):
    """An outgoing link of a crawled page."""

    url: str = Field(description="Absolute, normalised URL.")
    text: str = Field("", description="Anchor text.")


class CrawledPage(BaseModel):
    """A page as the crawler read it. The crawler does not extract the knowledge base's content:
    the indexer reads ``html`` (or a PDF's ``content_b64``) with the extractor it uses for
    uploaded files. Events from crawlers before that change carry ``markdown``/``text`` instead;
    the indexer still reads them, so indexers are upgraded before crawlers."""

    url: str = Field(description="The page's normalised URL after redirects: the one to cite.")
    title: str
    html: str = Field(
        "",
        description="The page's HTML as read: the DOM after its scripts ran when it was rendered, "
        "else the document as served, decoded. Empty for a PDF.",
    )
    content_b64: str = Field(
        "",
        description="A PDF's bytes as downloaded, base64-encoded (at most CRAWLER_MAX_PAGE_BYTES "
        "before encoding). Empty for HTML.",
    )
    content_hash: str = Field(
        description="SHA-256 of the content's visible text, whitespace folded (of a PDF's bytes): "
        "the crawler's check for the same content under two URLs."
    )
    fetched_at: datetime = Field(default_factory=utcnow)
    requested_url: str | None = Field(None, description="The URL asked for, before redirects.")
    markdown: str = Field(
        "", description="Deprecated, no longer written: the crawler's own Markdown of the page."
    )
    text: str = Field(
        "", description="Deprecated, no longer written: the crawler's own plain text of the page."
    )
    links: list[PageLink] = Field(default_factory=list, description="Outgoing links, in order.")
    depth: int = Field(0, ge=0, description="Links followed from a seed to reach the page.")
    status: int = Field(200, description="HTTP status of the document.")
    content_type: str = Field("text/html", examples=["text/html", "application/pdf"])
    bytes: int = Field(0, ge=0, description="Size of the document as downloaded.")
    ms: int = Field(0, ge=0, description="Time to fetch and render the page.")
    rendered: bool = Field(
        False, description="Read after running its scripts in the browser, not from its HTML."
    )


class PagesCrawled(Event):
    job_id: str
    pages: list[CrawledPage]


class CrawlTask(Event):
    """One URL of a crawl job for whichever crawler replica reads it (topic ``crawl.tasks``)."""

    job_id: str
    url: str = Field(description="Normalised URL to fetch.")
    depth: int = Field(0, ge=0)
    parent_url: str | None = Field(None, description="The page the link was found on.")
    anchor: str = Field("", description="The link's anchor text.")
    score: float = Field(0.0, description="The link planner's score when it was queued.")


class CrawlStop(Event):
    """Ask the fleet to end a crawl job early, e.g. because the answer is now known."""

    job_id: str
    reason: str = Field("enough", examples=["enough", "cancelled"])


class CrawlPageSummary(BaseModel):
    url: str
    status: int
    depth: int
    title: str
    bytes: int
    ms: int
    rendered: bool = False


class CrawlFinished(Event):
    """A crawl job ended; published once per job (a redelivery may repeat it, same event id)."""

    job_id: str
    reason: Literal["max_pages", "deadline", "frontier_empty", "stopped"]
    pages: list[CrawlPageSummary] = Field(
        default_factory=list, description="Every page published, in the order it was fetched."
    )
    skipped: dict[str, int] = Field(
        default_factory=dict,
        description="URLs not published, by cause: robots, off_domain, duplicate, error, ...",
        examples=[{"robots": 2, "duplicate": 1}],
    )
    duration_s: float = Field(0.0, ge=0)
    pages_per_s: float = Field(0.0, ge=0)


MAX_MAPPED_PAGES = 5000
"""Pages a ``site.mapped`` event lists at most: enough for a documentation site's sitemap."""


class SitemapPage(BaseModel):
    url: str
    title: str = Field("", description="Its title when the sitemap carries one, else empty.")


class SiteMapped(Event):
    """A help site's sitemaps as a crawl job read them: the pages the site lists, in scope. Sent
    when what a site lists changed (at most once per sitemap cache period otherwise), so the
    site's profile knows its pages before they are crawled."""

    site: str = Field(description="Scheme, host and port.", examples=["https://help.example.com"])
    pages: list[SitemapPage] = Field(default_factory=list, max_length=MAX_MAPPED_PAGES)


class ChunksIndexed(Event):
    """New or changed knowledge is searchable; a turn waiting on this correlation id resumes."""

    doc_ids: list[str] = Field(default_factory=list)
    urls: list[str] = Field(
        default_factory=list, description="URLs now searchable (written now or already current)."
    )
    chunks: int = Field(0, ge=0, description="Chunks written now; 0 when all were current.")
    job_id: str | None = Field(None, description="The crawl job the pages came from, if any.")
    source_event_id: str | None = Field(
        None,
        description="The event whose content was indexed (a ``pages.crawled`` event's id), so a "
        "waiting turn counts each crawled page once however often it is redelivered.",
    )


class DocumentSubmitted(Event):
    """A document uploaded through the API, carried whole (uploads are size-limited)."""

    document_id: str = Field(description="Chosen by the gateway; the indexer keeps it as doc_id.")
    filename: str = Field(examples=["vpn-howto.pdf"])
    content_type: str
    content_b64: str = Field(description="The file's bytes, base64-encoded.")
    uploaded_by: str
    read_users: list[str] = Field(
        default_factory=list,
        max_length=MAX_GROUPS,
        description="User ids that may read the document; with `read_groups` both empty, "
        "everyone may.",
    )
    read_groups: list[str] = Field(
        default_factory=list,
        max_length=MAX_GROUPS,
        description="Group ids (as the tokens' groups claim lists them) that may read it.",
        examples=[["hr-team"]],
    )


class DocumentDeleted(Event):
    """A document to remove from the knowledge base, every chunk of it."""

    document_id: str
    deleted_by: str


class DocumentStatus(Event):
    """What became of a submitted or deleted document; the gateway keeps it for ``GET``."""

    document_id: str
    status: Literal["indexed", "failed", "deleted"]
    chunks: int = Field(0, ge=0, description="Chunks of the document now in the index.")
    detail: str | None = Field(
        None,
        description="Why it failed, or what was done; never quotes the document's content.",
        examples=["the PDF is password-protected"],
    )


class EscalationReason(StrEnum):
    """Why a conversation goes to a technician."""

    USER_REQUEST = "user_request"
    """The user asked for a person or a ticket (in words or with the ticket button)."""
    ANGER = "anger"
    """Sentiment and the conversation's course crossed the escalation threshold."""
    LOW_CONFIDENCE = "low_confidence"
    """The assistant had no answer, or every checklist step failed, and the user accepted."""
    ROUTING = "routing"
    """A request the assistant does not handle itself, routed to its category's queue."""
    RESOLVED = "resolved"
    """A silent ticket: a resolved conversation recorded for analytics and as a past case."""


class TranscriptLine(BaseModel):
    role: Literal["user", "assistant"]
    text: str = Field(description="Redacted, as the redactor wrote it.")


class TriedStep(BaseModel):
    step: str
    outcome: Literal["failed", "fixed", "not_tried"] = "failed"


class EscalationRequested(Event):
    """The orchestrator asks for a ticket; everything in it is redacted. Idempotent on
    ``idempotency_key``: a redelivery or a retry never files a second ticket."""

    user_id: str
    reply_to: str | None = Field(None, description="Where the waiting turn's gateway reads.")
    reason: EscalationReason
    reason_detail: str = Field(
        "", description="Why, in words, as logged.", examples=["the user asked for a person"]
    )
    summary: str = Field(
        description="One line derived from the problem, not the first message verbatim.",
        examples=["VPN: cannot connect after password change (Windows)"],
    )
    problem: str = Field(description="The problem statement, redacted.")
    topic: str = Field(
        description="A normalised topic key; an open ticket of the same user and topic is "
        "commented on instead of filing another.",
        examples=["connectivity:vpn"],
    )
    category: str | None = None
    queue: str | None = Field(None, description="The technician queue of the category.")
    environment: dict[str, str] = Field(
        default_factory=dict,
        description="Facts gathered: os, device, application, error codes.",
        examples=[{"os": "windows", "error_codes": "0x80070005"}],
    )
    tried: list[TriedStep] = Field(default_factory=list)
    answers_given: list[str] = Field(default_factory=list, description="Earlier answers, short.")
    citations: list[Citation] = Field(default_factory=list)
    attachments: list[AttachmentSummary] = Field(default_factory=list)
    sentiment: float | None = Field(
        None, description="The anger score at escalation, 0 calm to 1 furious."
    )
    transcript: list[TranscriptLine] = Field(default_factory=list)
    incident_id: str | None = Field(None, description="An active incident the turn matched.")
    idempotency_key: str


class TicketChange(StrEnum):
    CREATED = "created"
    COMMENTED = "commented"
    """An existing open ticket got a comment (a duplicate request, an incident update)."""
    LINKED = "linked"
    STATUS = "status"
    """The answer to a status question, read back from the backend."""
    DEFERRED = "deferred"
    """The backend failed; the request waits for a retry and the user gets the fallback."""
    FAILED = "failed"
    """Given up for good (dead-lettered); an operator must look."""


class TicketRecord(BaseModel):
    """A ticket as technicians and the admin API see it (every text in it redacted)."""

    key: str = Field(examples=["IT-1042"])
    url: str
    status: str = Field(examples=["Open", "In Progress", "Done"])
    summary: str
    description: str = ""
    labels: list[str] = Field(default_factory=list)
    category: str | None = None
    queue: str | None = None
    priority: str | None = None
    user_id: str | None = None
    conversation_id: str | None = None
    incident_id: str | None = None
    links: list[str] = Field(default_factory=list, description="Keys of linked tickets.")
    comments: list[str] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None


class TicketEvent(Event):
    """What the ticketing service did. Published on ``ticket.events`` for any internal system,
    and read by the orchestrator to tell the waiting user."""

    change: TicketChange
    ticket: TicketRef | None = None
    record: TicketRecord | None = Field(
        None, description="The ticket as it is now, for read models such as the admin API."
    )
    tickets: list[TicketRef] = Field(
        default_factory=list, description="For status answers: the user's tickets, newest first."
    )
    user_id: str | None = None
    reply_to: str | None = None
    idempotency_key: str | None = None
    incident_id: str | None = None
    detail: str | None = Field(None, description="What happened, for people; never a secret.")


class TicketStatusRequested(Event):
    """A user asked how their ticket is doing; the ticketing service reads the backend."""

    user_id: str
    reply_to: str | None = None
    key: str | None = Field(None, description="A key the user named; else their latest tickets.")


INCIDENT_RESOLVED_KEEP_S = 6 * 3600
"""How long a resolved incident is remembered by default, so a late, older update of it cannot
make it ongoing again (the orchestrator's store, the gateway's incident board)."""
INCIDENT_STALE_AFTER_S = 7 * 24 * 3600
"""By default, an ongoing incident without news for this long is forgotten: its source never
reported the resolution."""


class Incident(BaseModel):
    """An outage as a status page or an internal system reports it."""

    id: str = Field(examples=["inc-2026-031"])
    title: str
    status: str = Field(examples=["investigating", "identified", "monitoring", "resolved"])
    affected_services: list[str] = Field(default_factory=list, examples=[["VPN", "GlobalProtect"]])
    error_signatures: list[str] = Field(default_factory=list, examples=[["0x80070005"]])
    started_at: datetime | None = None
    updated_at: datetime | None = None
    url: str | None = None
    latest_update: str | None = None
    resolved: bool = False
    ticket_key: str | None = Field(None, description="The incident's own ticket, if it has one.")
    category: str | None = None

    @property
    def over(self) -> bool:
        """Resolved, or in a status that ends it (:data:`RESOLVED_STATUSES`)."""
        return self.resolved or self.status.strip().lower() in RESOLVED_STATUSES


RESOLVED_STATUSES = frozenset({"resolved", "postmortem", "completed", "closed"})
"""Incident statuses that end it (Statuspage's incident and maintenance ones included)."""


class IncidentReceived(Event):
    """An incident as a caller typed it (``POST /api/incidents``, the MCP tool
    ``report_incident``). Raw: it travels sealed and only the redactor reads it, which publishes
    it redacted on ``incident.reported`` and deletes it. The correlation and conversation ids are
    the incident id."""

    incident: Incident
    source: str = Field("api", examples=["api", "mcp"])


class IncidentReported(Event):
    """A new or changed incident, redacted when a caller typed it (status-page watcher, the
    redactor for ``POST /api/incidents`` and MCP, or any internal system). The correlation and
    conversation ids are the incident id."""

    incident: Incident
    source: str = Field("api", examples=["statuspage", "api", "mcp", "stream"])


class AuditRecorded(Event):
    """One agent action, redacted, on the durable audit stream."""

    service: str
    action: Literal[
        "retrieval",
        "crawl_request",
        "decision",
        "automation",
        "ticket",
        "configuration",
        "purge",
        "proposal",
        "tool_call",
        "source_sync",
        "notification",
    ]
    reason: str
    trace_id: str | None = None
    details: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


GapSignal = Literal["no_answer", "escalated", "low_rating"]


class ProposalSource(BaseModel):
    """Where part of a proposed article comes from: a resolved ticket or a crawled page."""

    kind: Literal["ticket", "page"]
    ref: str = Field(
        description="The ticket's id, or the page's URL.",
        examples=["IT-1042", "https://support.example.com/vpn/reset"],
    )
    title: str = Field("", description="The ticket's summary, or the page's title.")
    similarity: float = Field(0.0, description="Cosine similarity to the questions' centroid.")


class ProposedQuestion(BaseModel):
    """One redacted question of a gap, with what made it a gap."""

    text: str = Field(description="The question, redacted as the orchestrator kept it.")
    signal: GapSignal
    asked_at: datetime


class ProposalDrafted(Event):
    """A knowledge-base update the indexer drafted from a recurring gap (similar questions that
    went unanswered, were escalated or rated low). Published again, with a higher ``revision``,
    when the gap's cluster of questions changes; the gateway's review queue keeps the latest."""

    proposal_id: str = Field(
        description="Stable per gap: kept while the cluster grows.",
        examples=["3f1d2c4b5a6978877665544332211000"],
    )
    revision: int = Field(1, ge=1, description="Grows with every re-draft of the proposal.")
    title: str
    questions: list[ProposedQuestion] = Field(default_factory=list)
    article_markdown: str = Field(description="The proposed article, in Markdown.")
    sources: list[ProposalSource] = Field(default_factory=list)
    affected_article_url: str | None = Field(
        None, description="The existing article closest to the gap, when one is close enough."
    )
    affected_article_title: str | None = None


class SourceSyncRequested(Event):
    """Sync one configured knowledge source now (an admin, the command line or the schedule)."""

    source: str = Field(
        description="The source's configured name (``INDEXER_SOURCES``).",
        examples=["it-wiki"],
        pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$",
    )
    requested_by: str = Field(examples=["admin", "cli", "schedule"])


class SyncSummary(BaseModel):
    """What one sync run did, document by document."""

    total: int = Field(
        0,
        ge=0,
        description="Documents the source listed as new, changed, "
        "unchanged or deleted in this run.",
    )
    new: int = Field(0, ge=0)
    changed: int = Field(0, ge=0, description="Re-indexed: version or content hash changed.")
    unchanged: int = Field(0, ge=0, description="Nothing embedded or written.")
    deleted: int = Field(0, ge=0, description="Removed from the index (gone at the source).")
    failed: int = Field(0, ge=0, description="Not indexed this run; retried by the next one.")
    duration_s: float = Field(0.0, ge=0)


class SourceSyncCompleted(Event):
    """A source sync ended (also when it stopped on an error: ``error`` says why)."""

    source: str = Field(examples=["it-wiki"])
    run_id: str = Field(description="One per run; a resumed run keeps its id.")
    summary: SyncSummary
    error: str | None = Field(
        None,
        description="Why the run stopped before the end (its cursor stays at the last "
        "committed page, so the next run resumes there); never quotes a secret.",
        examples=["HTTP 403 from Microsoft Graph: the app lacks Sites.Read.All"],
    )
    failures: list[str] = Field(
        default_factory=list,
        description="The first failing documents, as `key: reason`.",
        max_length=20,
    )
    removal: bool = Field(
        False,
        description="No sync ran: the source was taken out of `INDEXER_SOURCES` and, after "
        "its grace period, removed; `summary.deleted` counts its documents deleted.",
    )


class SourceDraftRequested(Event):
    """Write an approved proposal's article into a configured source as a draft that a person
    publishes (a Confluence draft page, an unpublished SharePoint site page). The indexer, which
    holds the sources' credentials, writes it once per ``proposal_id`` and source."""

    proposal_id: str = Field(examples=["3f1d2c4b5a6978877665544332211000"])
    source: str = Field(
        description="The configured source to write into (``INDEXER_SOURCES``).",
        examples=["it-wiki"],
        pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$",
    )
    title: str = Field(max_length=255, examples=["Configure SAP GUI shortcuts"])
    article_markdown: str = Field(description="The approved article, in Markdown.")
    sources: list[ProposalSource] = Field(
        default_factory=list, description="What the article is drawn from: cited in the draft."
    )
    requested_by: str = Field(description="The approving admin.", examples=["alice"])


DraftOutcome = Literal["created", "failed"]


class SourceDraftCompleted(Event):
    """The outcome of a :class:`SourceDraftRequested`: the draft's link, or why there is none."""

    proposal_id: str
    source: str = Field(examples=["it-wiki"])
    status: DraftOutcome
    url: str | None = Field(
        None,
        description="Where a person reviews and publishes the draft.",
        examples=["https://example.atlassian.net/wiki/pages/resumedraft.action?draftId=65601"],
    )
    draft_id: str | None = Field(None, description="The draft's id in the source system.")
    error: str | None = Field(
        None,
        description="Why no draft was written; never quotes a secret.",
        examples=["Confluence denied the draft (HTTP 403): the account lacks 'Add page' in IT"],
    )
    missing_permission: str | None = Field(
        None,
        description="The permission the source's account or app lacks (on HTTP 403).",
        examples=["Sites.ReadWrite.All"],
    )


NoticeOutcome = Literal["no_answer", "low_confidence"]


class UnansweredNotice(Event):
    """A turn the assistant could not answer, or answered below the notice confidence, for the
    people responsible for its category. ``correlation_id`` is the turn; the question is the
    redacted text the orchestrator worked on, never what the user typed."""

    outcome: NoticeOutcome
    category: str | None = Field(
        None, description="The turn's category (the intent classifier's).", examples=["account"]
    )
    question: str = Field(
        max_length=300,
        description="The redacted question (first line, at most 300 characters).",
        examples=["My e-mail is <EMAIL_ADDRESS_1>, how do I get access to the HR portal?"],
    )
    confidence: float | None = Field(
        None, description="The best match's similarity; none when nothing matched."
    )
