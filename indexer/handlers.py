"""The indexer's subscriptions: uploaded documents to ingest, documents to delete, pages the
crawler fleet read.

Each handler runs the blocking work in a thread, then reports the outcome on
``document.status`` (and ``chunks.indexed`` when chunks changed). Redelivery is harmless: the
work is idempotent (see :mod:`indexer.uploads`) and the same status is simply reported again.
"""

from __future__ import annotations

import asyncio

from contracts.bus import Bus, Delivery
from contracts.events import (
    AuditRecorded,
    ChunksIndexed,
    ConversationPurged,
    DocumentDeleted,
    DocumentStatus,
    DocumentSubmitted,
    Event,
    FeedbackRecorded,
    PagesCrawled,
    SourceDraftCompleted,
    SourceDraftRequested,
    SourceSyncCompleted,
    SourceSyncRequested,
    SyncSummary,
    new_id,
)
from contracts.readers import Readers
from contracts.sources import SOURCES_CONVERSATION
from contracts.topics import Group, Topic
from indexer.crawled import CrawledPages
from indexer.gaps import GapWindow
from indexer.sources.base import Draft, DraftCitation, DraftError
from indexer.sources.removal import RemovalResult
from indexer.sources.runner import SourceRunner, UnknownSource
from indexer.sources.sync import SyncBusy, SyncResult
from indexer.uploads import UploadResult, UploadService


def upload_readers(event: DocumentSubmitted) -> Readers | None:
    """Who may read an upload: everyone unless the admin named users or groups."""
    if not event.read_users and not event.read_groups:
        return None
    return Readers(public=False, users=tuple(event.read_users), groups=tuple(event.read_groups))


def register(bus: Bus, uploads: UploadService, crawled: CrawledPages) -> None:
    async def on_submitted(event: DocumentSubmitted, delivery: Delivery) -> None:
        try:
            readers = upload_readers(event)
        except ValueError as exc:  # the gateway checks them: a producer of its own sent these
            await _report(bus, event, event.document_id, UploadResult("failed", detail=str(exc)))
            return
        try:
            result = await asyncio.to_thread(
                uploads.submit, event.document_id, event.filename, event.content_b64, readers
            )
        except Exception as exc:
            # Chroma or Redis failed. The bus retries; on the last attempt the admin learns it
            # failed (the message then goes to the dead-letter stream, where it can be replayed).
            if delivery.deliveries >= bus.settings.max_deliveries:
                detail = (
                    f"indexing failed {delivery.deliveries} times ({type(exc).__name__}); "
                    "an operator can replay it: deskpilot dlq replay document.submitted"
                )
                await _report(bus, event, event.document_id, UploadResult("failed", detail=detail))
            raise
        await _report(bus, event, event.document_id, result)
        if result.chunks_written:
            await bus.publish(
                Topic.CHUNKS_INDEXED,
                ChunksIndexed(
                    correlation_id=event.correlation_id,
                    conversation_id=event.conversation_id,
                    doc_ids=[event.document_id],
                    urls=[result.url] if result.url else [],
                    chunks=result.chunks_written,
                ),
            )
        # The bytes are no longer needed (the extracted form is stored): keep the stream small.
        await delivery.delete_entry()

    async def on_deleted(event: DocumentDeleted, _: Delivery) -> None:
        result = await asyncio.to_thread(uploads.delete, event.document_id)
        await _report(bus, event, event.document_id, result)

    async def on_pages_crawled(event: PagesCrawled, delivery: Delivery) -> None:
        result = await asyncio.to_thread(crawled.index, event.pages)
        # Also when nothing changed: the turn waiting on this correlation id searches again, and
        # the pages it needs may have been indexed by an earlier crawl.
        await bus.publish(
            Topic.CHUNKS_INDEXED,
            ChunksIndexed(
                correlation_id=event.correlation_id,
                conversation_id=event.conversation_id,
                doc_ids=result.doc_ids,
                urls=result.urls,
                chunks=result.chunks_written,
                job_id=event.job_id,
                source_event_id=event.event_id,
            ),
        )
        # The pages' HTML (tens of KB each) is stored in its extracted form now: drop the entry.
        # Only the indexer reads this topic; an entry not handled yet is never trimmed instead.
        await delivery.delete_entry()

    bus.subscribe(Topic.DOCUMENT_SUBMITTED, DocumentSubmitted, on_submitted, group=Group.INDEXER)
    bus.subscribe(Topic.PAGES_CRAWLED, PagesCrawled, on_pages_crawled, group=Group.INDEXER)
    bus.subscribe(Topic.DOCUMENT_DELETED, DocumentDeleted, on_deleted, group=Group.INDEXER)


def register_gaps(bus: Bus, window: GapWindow) -> None:
    """Gap questions for knowledge-base update proposals: the orchestrator's decision records
    and users' ratings (see :mod:`indexer.gaps`)."""

    async def on_audit(record: AuditRecorded, _: Delivery) -> None:
        await window.on_audit(record)

    async def on_feedback(event: FeedbackRecorded, _: Delivery) -> None:
        await window.on_feedback(event)

    async def on_purge(event: ConversationPurged, _: Delivery) -> None:
        turns = await window.purge(event.conversation_id)
        await bus.publish(Topic.AUDIT, event.confirmation("indexer", gap_turns=turns))

    # Read in lingering batches (contracts.topics.LINGERING): nobody waits on them.
    bus.subscribe(Topic.AUDIT, AuditRecorded, on_audit, group=Group.INDEXER)
    bus.subscribe(Topic.FEEDBACK_RECORDED, FeedbackRecorded, on_feedback, group=Group.INDEXER)
    bus.subscribe(Topic.CONVERSATION_PURGED, ConversationPurged, on_purge, group=Group.INDEXER)


def register_sources(bus: Bus, runner: SourceRunner) -> None:
    """Source syncs: whichever replica takes the request runs it, and reports the summary on
    ``source.sync.completed`` and the audit stream (the catalogue has it for the admin API)."""

    async def on_sync(event: SourceSyncRequested, _: Delivery) -> None:
        try:
            result = await asyncio.to_thread(runner.sync, event.source)
        except SyncBusy:
            # A run of this source is under way on some replica: it covers this request.
            return
        except UnknownSource as exc:
            result = SyncResult(run_id="", summary=SyncSummary(), error=str(exc))
        completed = SourceSyncCompleted(
            correlation_id=event.correlation_id,
            conversation_id=event.conversation_id,
            source=event.source,
            run_id=result.run_id,
            summary=result.summary,
            error=result.error,
            failures=result.failures[:20],
        )
        await bus.publish(Topic.SOURCE_SYNC_COMPLETED, completed)
        summary = result.summary
        await bus.publish(
            Topic.AUDIT,
            AuditRecorded(
                correlation_id=event.correlation_id,
                conversation_id=event.conversation_id,
                service="indexer",
                action="source_sync",
                reason="stopped early" if result.error else "completed",
                details={
                    "source": event.source,
                    "requested_by": event.requested_by,
                    "run_id": result.run_id,
                    **summary.model_dump(),
                    "error": result.error,
                },
            ),
        )

    bus.subscribe(Topic.SOURCE_SYNC_REQUESTED, SourceSyncRequested, on_sync, group=Group.INDEXER)


async def remove_sources(bus: Bus, runner: SourceRunner) -> None:
    """One check of the sources taken out of the configuration (:mod:`indexer.sources.removal`):
    hide or put back, remove those due, publish each one's summary, and only then let it go."""
    for result in await asyncio.to_thread(runner.remove_due):
        await publish_removal(bus, result)
        await asyncio.to_thread(runner.removed, result)


async def publish_removal(bus: Bus, result: RemovalResult) -> None:
    """A source taken out of the configuration is removed: its summary on
    ``source.sync.completed`` (``removal`` set) and the audit stream, like a sync run's."""
    correlation_id = new_id()
    await bus.publish(
        Topic.SOURCE_SYNC_COMPLETED,
        SourceSyncCompleted(
            correlation_id=correlation_id,
            conversation_id=SOURCES_CONVERSATION,
            source=result.name,
            run_id=result.removal_id,
            summary=result.summary,
            removal=True,
        ),
    )
    await bus.publish(
        Topic.AUDIT,
        AuditRecorded(
            correlation_id=correlation_id,
            conversation_id=SOURCES_CONVERSATION,
            service="indexer",
            action="source_sync",
            reason="removed: no longer configured",
            details={
                "source": result.name,
                "requested_by": "configuration",
                "run_id": result.removal_id,
                "removal": True,
                **result.summary.model_dump(),
                "error": None,
            },
        ),
    )


def register_drafts(bus: Bus, runner: SourceRunner) -> None:
    """Approved proposals written as drafts into a source (the credentials stay here). A
    failure worth retrying (the source is down, 5xx, throttled past patience) goes back to the
    bus, which delivers it again after ``reclaim_idle_ms``; the last attempt, and any other
    failure, is reported on the proposal with why."""

    async def on_draft(event: SourceDraftRequested, delivery: Delivery) -> None:
        draft = Draft(
            key=event.proposal_id,
            title=event.title,
            markdown=event.article_markdown,
            citations=tuple(DraftCitation(s.title, s.ref) for s in event.sources),
        )
        last = delivery.deliveries >= bus.settings.max_deliveries
        outcome: dict[str, str | None]
        try:
            link = await asyncio.to_thread(runner.draft, event.source, draft)
            outcome = {"status": "created", "url": link.url, "draft_id": link.draft_id}
        except DraftError as exc:
            if exc.retry and not last:
                raise
            attempts = f" (after {delivery.deliveries} attempts)" if exc.retry else ""
            outcome = {
                "status": "failed",
                "error": f"{exc}{attempts}",
                "missing_permission": exc.missing_permission,
            }
        except UnknownSource as exc:
            outcome = {"status": "failed", "error": str(exc)}
        except Exception as exc:  # Redis or a bug: retried, and reported on the last attempt
            if not last:
                raise
            outcome = {
                "status": "failed",
                "error": f"writing the draft failed ({type(exc).__name__})",
            }
        await bus.publish(
            Topic.SOURCE_DRAFT_COMPLETED,
            SourceDraftCompleted.model_validate(
                {
                    "correlation_id": event.correlation_id,
                    "conversation_id": event.conversation_id,
                    "proposal_id": event.proposal_id,
                    "source": event.source,
                    **outcome,
                }
            ),
        )

    bus.subscribe(Topic.SOURCE_DRAFT_REQUESTED, SourceDraftRequested, on_draft, group=Group.INDEXER)


async def _report(bus: Bus, cause: Event, document_id: str, result: UploadResult) -> None:
    await bus.publish(
        Topic.DOCUMENT_STATUS,
        DocumentStatus(
            correlation_id=cause.correlation_id,
            conversation_id=cause.conversation_id,
            document_id=document_id,
            status=result.status,
            chunks=result.chunks,
            detail=result.detail,
        ),
    )
