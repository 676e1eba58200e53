"""Raw content in, redacted content out; the raw stream entry is deleted once handled.

Five kinds of raw content reach the redactor: chat messages (``message.received``), the text
the ocr service read from an attachment (``attachment.extracted``), the comments of ratings
(``feedback.received``), incidents callers report (``incident.received``) and knowledge-base
searches (``search.received``). All are redacted with the conversation's placeholders (an
incident's are its own, by its id), so a name in a screenshot, in the next message and in a
rating's comment share one. They arrive sealed; the bus
opens them (:mod:`contracts.sealing`), so what is here is plain text that never touched a disk.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence

from contracts import ids
from contracts.bus import Bus, Delivery
from contracts.events import (
    AttachmentExtracted,
    AttachmentRedacted,
    AttachmentSummary,
    ConversationPurged,
    CrawlFinished,
    FeedbackReceived,
    FeedbackRecorded,
    Incident,
    IncidentReceived,
    IncidentReported,
    MessageReceived,
    QueryReceived,
    RedactionCount,
    SearchReceived,
    SearchRequested,
    SiteMapped,
    TurnReply,
)
from contracts.topics import Group, Topic
from redactor.placeholders import KEY_PREFIX as PLACEHOLDERS_PREFIX
from redactor.placeholders import ConversationPlaceholders
from redactor.service import Redaction, Redactor
from redactor.site_terms import SiteTerms

log = logging.getLogger("deskpilot.redactor")

EXCERPT_CHARS = 600
"""How much of an attachment's redacted text the upload's answer shows."""


def derived_event_id(kind: str, source_event_id: str) -> str:
    """Deterministic, so a redelivered input yields the same downstream event id."""
    return ids.derived_event_id("deskpilot", kind, source_event_id)


def query_event_id(message_event_id: str) -> str:
    return derived_event_id("query", message_event_id)


def split_extension(filename: str) -> tuple[str, str]:
    """``("vpn-error", ".png")``: the extension is a file type, never personal data."""
    stem, dot, extension = filename.rpartition(".")
    if not dot or not stem or not extension.isalnum() or len(extension) > 5:
        return filename, ""
    return stem, "." + extension


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of ``text``, cut at a line or word boundary, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    boundary = max(cut.rfind("\n"), cut.rfind(" "))
    return (cut[:boundary] if boundary > limit // 2 else cut).rstrip() + " …"


class ConversationRedactor:
    """Redacts several texts of one conversation with the conversation's placeholders."""

    def __init__(
        self,
        redactor: Redactor,
        placeholders: ConversationPlaceholders,
        site_terms: SiteTerms | None = None,
    ) -> None:
        self.redactor = redactor
        self.placeholders = placeholders
        self.site_terms = site_terms

    async def redact(self, conversation_id: str, texts: Sequence[str]) -> list[Redaction]:
        words = await self.site_terms.words() if self.site_terms is not None else frozenset()
        found = await asyncio.to_thread(lambda: [self.redactor.find(text, words) for text in texts])
        keys = [f.key for spans in found for f in spans if not f.flag_only]
        numbers = await self.placeholders.numbers(conversation_id, keys)
        return [
            self.redactor.replace(text, spans, numbers)
            for text, spans in zip(texts, found, strict=True)
        ]


def counts(redactions: Sequence[Redaction]) -> list[RedactionCount]:
    total: Counter[str] = Counter()
    for redaction in redactions:
        total.update(redaction.summary())
    return [RedactionCount(entity_type=kind, count=n) for kind, n in sorted(total.items())]


INCIDENT_TEXTS = ("title", "status", "url", "latest_update", "ticket_key", "category")
"""An incident's free-text fields, redacted with its lists (services, error signatures). Its
id is not: it is the incident's key, limited by the gateway to letters, digits and ``_.:-``."""


async def redact_incident(
    texts: ConversationRedactor, incident: Incident
) -> tuple[Incident, list[Redaction]]:
    """``incident`` with every text a caller typed redacted, in one call (one placeholder per
    value across its fields), and the redactions made.

    Its placeholders are numbered in a namespace of the incident's own (``incident:<id>``),
    never a conversation's: the id is the caller's choice, and a conversation's numbering would
    tell whether a guessed value was in that conversation. Its status link is kept when the
    only thing found in it is the link itself (a status page's address is no one's data), and
    dropped when anything else is (an address or a token in its query): a link with a
    placeholder in it leads nowhere."""
    fields = {name: getattr(incident, name) for name in INCIDENT_TEXTS}
    present = [name for name, value in fields.items() if value]
    services, signatures = incident.affected_services, incident.error_signatures
    given = [fields[name] for name in present] + services + signatures
    redactions = await texts.redact(f"incident:{incident.id}", given)
    done = [r.text for r in redactions]
    updates: dict[str, object] = dict(zip(present, done, strict=False))
    updates["affected_services"] = done[len(present) : len(present) + len(services)]
    updates["error_signatures"] = done[len(present) + len(services) :]
    if "url" in present:
        found_in_link = set(redactions[present.index("url")].summary())
        updates["url"] = incident.url if found_in_link <= {"URL"} else None
    return incident.model_copy(update=updates), redactions


def register(
    bus: Bus,
    redactor: Redactor,
    placeholders: ConversationPlaceholders,
    concurrency: int,
    site_terms: SiteTerms | None = None,
) -> None:
    texts = ConversationRedactor(redactor, placeholders, site_terms)

    async def on_message(event: MessageReceived, delivery: Delivery) -> None:
        (redaction,) = await texts.redact(event.conversation_id, [event.text])
        query = QueryReceived(
            event_id=query_event_id(event.event_id),
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            user_id=event.user_id,
            groups=event.groups,  # ids, not personal text: passed on unredacted
            text=redaction.text,
            redactions=counts([redaction]),
            reply_to=event.reply_to,
            attachments=event.attachments,
            request_ticket=event.request_ticket,
            authenticated=event.authenticated,
        )
        # Raw text lives only until it is redacted.
        await bus.publish_replacing(delivery, (Topic.QUERY_RECEIVED, query))
        log.info(
            "redacted", extra={"redactions": redaction.summary(), "flagged": redaction.flagged}
        )

    async def on_attachment(event: AttachmentExtracted, delivery: Delivery) -> None:
        # One call, so a value in the file name, the text and a signature gets one placeholder.
        # The name's extension stays out of it: "vpn-error.png" is no web address.
        stem, extension = split_extension(event.filename)
        redacted = await texts.redact(event.conversation_id, [event.text, stem, *event.signatures])
        text, stem, *signatures = (r.text for r in redacted)
        filename = stem + extension
        summary = AttachmentSummary(
            id=event.attachment_id,
            kind=event.kind,
            bytes=event.size_bytes,
            filename=filename,
            text_excerpt=excerpt(text),
            signatures=list(dict.fromkeys(signatures)),
            first_error_at=event.first_error_at,
        )
        envelope = {
            "correlation_id": event.correlation_id,
            "conversation_id": event.conversation_id,
        }
        redacted_event = AttachmentRedacted(
            event_id=derived_event_id("attachment", event.event_id),
            attachment=summary,
            user_id=event.user_id,
            text=text,
            redactions=counts(redacted),
            **envelope,
        )
        reply = TurnReply(
            event_id=derived_event_id("attachment-reply", event.event_id),
            kind="attachment",
            attachment=summary,
            **envelope,
        )
        # The orchestrator has it before the user can reference it in a message.
        await bus.publish_replacing(
            delivery, (Topic.ATTACHMENT_REDACTED, redacted_event), (event.reply_to, reply)
        )
        log.info(
            "attachment redacted",
            extra={
                "attachment_id": event.attachment_id,
                "kind": event.kind,
                "redactions": {c.entity_type: c.count for c in counts(redacted)},
            },
        )

    async def on_feedback(event: FeedbackReceived, delivery: Delivery) -> None:
        comment = None
        if event.comment is not None and event.comment.strip():
            (redaction,) = await texts.redact(event.conversation_id, [event.comment])
            comment = redaction.text
        recorded = FeedbackRecorded(
            event_id=derived_event_id("feedback", event.event_id),
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            # When the rating was given: the newer of two ratings of a turn wins everywhere.
            occurred_at=event.occurred_at,
            rating_id=event.event_id,
            comment=comment,
            **event.model_dump(
                include={"turn_id", "user_id", "score", "cited_urls", "action", "category"}
            ),
        )
        await bus.publish_replacing(delivery, (Topic.FEEDBACK_RECORDED, recorded))
        log.info("rating redacted", extra={"with_comment": comment is not None})

    async def on_incident(event: IncidentReceived, delivery: Delivery) -> None:
        incident, redactions = await redact_incident(texts, event.incident)
        reported = IncidentReported(
            event_id=derived_event_id("incident", event.event_id),
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            occurred_at=event.occurred_at,  # the order of an incident's reports
            incident=incident,
            source=event.source,
        )
        await bus.publish_replacing(delivery, (Topic.INCIDENT_REPORTED, reported))
        log.info(
            "incident redacted",
            extra={
                "incident_id": incident.id,
                "redactions": {c.entity_type: c.count for c in counts(redactions)},
            },
        )

    async def on_search(event: SearchReceived, delivery: Delivery) -> None:
        (redaction,) = await texts.redact(event.conversation_id, [event.query])
        request = SearchRequested(
            event_id=derived_event_id("search", event.event_id),
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            query=redaction.text,
            redactions=counts([redaction]),
            **event.model_dump(include={"user_id", "groups", "authenticated", "limit", "reply_to"}),
        )
        await bus.publish_replacing(delivery, (Topic.SEARCH_REQUESTED, request))
        log.info("search redacted", extra={"redactions": redaction.summary()})

    async def on_purge(event: ConversationPurged, _: Delivery) -> None:
        await bus.redis.delete(PLACEHOLDERS_PREFIX + event.conversation_id)
        await bus.publish(Topic.AUDIT, event.confirmation("redactor", placeholders=True))
        log.info("conversation purged", extra={"conversation_id": event.conversation_id})

    bus.subscribe(
        Topic.MESSAGE_RECEIVED,
        MessageReceived,
        on_message,
        group=Group.REDACTOR,
        concurrency=concurrency,
    )
    bus.subscribe(
        Topic.ATTACHMENT_EXTRACTED,
        AttachmentExtracted,
        on_attachment,
        group=Group.REDACTOR,
        concurrency=concurrency,
    )
    bus.subscribe(
        Topic.FEEDBACK_RECEIVED, FeedbackReceived, on_feedback, group=Group.REDACTOR, concurrency=2
    )
    bus.subscribe(
        Topic.INCIDENT_RECEIVED, IncidentReceived, on_incident, group=Group.REDACTOR, concurrency=2
    )
    bus.subscribe(
        Topic.SEARCH_RECEIVED,
        SearchReceived,
        on_search,
        group=Group.REDACTOR,
        concurrency=concurrency,
    )
    bus.subscribe(Topic.CONVERSATION_PURGED, ConversationPurged, on_purge, group=Group.REDACTOR)

    async def on_crawled(event: CrawlFinished, _: Delivery) -> None:
        assert site_terms is not None  # nosec B101 # subscribed only with site terms
        read = [(page.url, page.title) for page in event.pages if 200 <= page.status < 300]
        added = await site_terms.learn(read)
        log.info("site words learnt", extra={"job_id": event.job_id, "new": added})

    async def on_mapped(event: SiteMapped, _: Delivery) -> None:
        assert site_terms is not None  # nosec B101 # subscribed only with site terms
        added = await site_terms.learn((page.url, page.title) for page in event.pages)
        log.info("site words learnt from a sitemap", extra={"site": event.site, "new": added})

    if site_terms is not None:
        bus.subscribe(Topic.CRAWL_FINISHED, CrawlFinished, on_crawled, group=Group.REDACTOR)
        bus.subscribe(Topic.SITE_MAPPED, SiteMapped, on_mapped, group=Group.REDACTOR)
