"""The review queue of knowledge-base update proposals, fed by the indexer's ``proposal.drafted``.

Each proposal is one Redis hash, ``deskpilot:gateway:proposal:<id>``: the latest draft (the
event as JSON) and its revision, the review status and the decision. A sorted set,
``deskpilot:gateway:proposals``, lists ids by when they were last drafted. Two Lua scripts keep
each step atomic: a draft replaces the stored one only when its revision is higher (redelivered
or reordered events converge), and a decision only moves a pending proposal on, so two admins
cannot both approve one.

A re-draft (the gap grew) updates a pending proposal's content; an approved or rejected one
keeps its decision, and shows the new questions.

Approving publishes the article as a Markdown document upload, through the same path as
``POST /api/documents``, so the indexer ingests it like any upload; the proposal then holds the
document's id. Every decision goes on the audit stream (``action="proposal"``).

An approval may name a target, one of the configured knowledge sources (Confluence, SharePoint):
the gateway asks for a draft there (``source.draft.requested``) and keeps the request on the
proposal (field ``target_draft``); the indexer, which holds the sources' credentials, writes it
and reports back (``source.draft.completed``), which the proposal and the audit stream record.
The approval itself never waits for the source: a source that is down leaves the draft
"requested" while the indexer retries, then "failed" with why. Only the outcome of the latest
request is kept: an outcome is matched to its request by id, so a replayed or stale one changes
nothing.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from datetime import datetime
from typing import Any

import redis.asyncio as aioredis

from contracts.bus import Bus
from contracts.events import (
    AuditRecorded,
    ProposalDrafted,
    SourceDraftCompleted,
    SourceDraftRequested,
    new_id,
    utcnow,
)
from contracts.ids import derived_event_id
from contracts.sources import read_source
from contracts.topics import Topic
from gateway.documents import DocumentService
from gateway.errors import ApiError, ErrorCode
from gateway.models import ProposalDraftRead, ProposalRead, ProposalStatus, ProposalSummary

log = logging.getLogger("deskpilot.gateway.proposals")

PROPOSAL_PREFIX = "deskpilot:gateway:proposal:"
INDEX_KEY = "deskpilot:gateway:proposals"
AUDIT_CONVERSATION = "knowledge-proposals"
"""The conversation id of proposal decisions on the audit stream (GET /api/admin/audit/...)."""
PROPOSAL_ID = re.compile(r"^[0-9a-f]{8,64}$")

# KEYS[1] the proposal's hash, KEYS[2] the index. ARGV: revision, draft JSON, id, score.
# Returns 1 when stored, 0 when the stored draft is as new or newer.
_DRAFT = """
local stored = tonumber(redis.call('HGET', KEYS[1], 'revision') or '0')
if stored >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'revision', ARGV[1], 'draft', ARGV[2])
redis.call('HSETNX', KEYS[1], 'status', 'pending')
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
return 1
"""

# KEYS[1] the proposal's hash. ARGV: the status required, the new status, the decision JSON.
# Returns the status found (the change is made only when it is the one required).
_DECIDE = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return '' end
if status == ARGV[1] then
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'decision', ARGV[3])
end
return status
"""


# KEYS[1] the proposal's hash. ARGV: the field, the value expected, the new value. Sets the
# field only when it holds the expected value (compare and set); returns 1 when set.
_SWAP = """
local found = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if found ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""
TARGET_DRAFT = "target_draft"
DRAFT_STALE_S = 3600.0
"""A draft request unanswered this long may be asked again (its outcome was lost: the indexer
reports one within its retries, DESKPILOT_MAX_DELIVERIES times DESKPILOT_RECLAIM_IDLE_MS)."""


def slug(title: str) -> str:
    """A file name for the article: lowercase words joined by hyphens."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    return "-".join(words)[:80].strip("-") or "proposal"


class ProposalStore:
    """The proposals' read model in Redis."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._draft = client.register_script(_DRAFT)
        self._decide = client.register_script(_DECIDE)
        self._swap = client.register_script(_SWAP)

    async def apply(self, event: ProposalDrafted) -> bool:
        """Keep ``event`` as the proposal's draft unless a newer revision is stored."""
        stored = await self._draft(
            keys=[PROPOSAL_PREFIX + event.proposal_id, INDEX_KEY],
            args=[
                event.revision,
                event.model_dump_json(),
                event.proposal_id,
                event.occurred_at.timestamp(),
            ],
        )
        return bool(stored)

    async def decide(
        self,
        proposal_id: str,
        required: ProposalStatus,
        status: ProposalStatus,
        decision: dict[str, Any],
    ) -> str | None:
        """Move the proposal from ``required`` to ``status``; the status found (None: unknown)."""
        found = await self._decide(
            keys=[PROPOSAL_PREFIX + proposal_id], args=[required, status, json.dumps(decision)]
        )
        text = found.decode() if isinstance(found, bytes) else str(found)
        return text or None

    async def target_draft(self, proposal_id: str) -> tuple[str, dict[str, Any] | None]:
        """The draft request kept on the proposal: as stored (for :meth:`swap_draft`), and
        read."""
        raw: Any = await self.client.hget(PROPOSAL_PREFIX + proposal_id, TARGET_DRAFT)
        text = raw.decode() if isinstance(raw, bytes) else (raw or "")
        return text, json.loads(text) if text else None

    async def swap_draft(self, proposal_id: str, expected: str, draft: dict[str, Any]) -> bool:
        """Replace the proposal's draft request unless it changed since it read ``expected``."""
        swapped = await self._swap(
            keys=[PROPOSAL_PREFIX + proposal_id], args=[TARGET_DRAFT, expected, json.dumps(draft)]
        )
        return bool(swapped)

    async def get(self, proposal_id: str) -> ProposalRead | None:
        if not PROPOSAL_ID.match(proposal_id):
            return None
        raw: Any = await self.client.hgetall(PROPOSAL_PREFIX + proposal_id)
        return _read(raw) if raw else None

    async def listing(self, status: ProposalStatus | None, limit: int) -> list[ProposalSummary]:
        ids: Any = await self.client.zrevrange(INDEX_KEY, 0, -1)
        summaries: list[ProposalSummary] = []
        for raw_id in ids:
            raw: Any = await self.client.hgetall(PROPOSAL_PREFIX + raw_id.decode())
            if not raw:
                continue
            proposal = _read(raw)
            if status is not None and proposal.status != status:
                continue
            summaries.append(
                ProposalSummary(
                    id=proposal.id,
                    title=proposal.title,
                    status=proposal.status,
                    revision=proposal.revision,
                    questions=len(proposal.questions),
                    signals=dict(Counter(q.signal for q in proposal.questions)),
                    affected_article_url=proposal.affected_article_url,
                    drafted_at=proposal.drafted_at,
                )
            )
            if len(summaries) >= limit:
                break
        return summaries


def _read(raw: dict[bytes, bytes]) -> ProposalRead:
    draft = ProposalDrafted.model_validate_json(raw[b"draft"])
    decision = json.loads(raw[b"decision"]) if b"decision" in raw else {}
    return ProposalRead(
        id=draft.proposal_id,
        title=draft.title,
        status=raw[b"status"].decode(),
        revision=draft.revision,
        questions=draft.questions,
        article_markdown=draft.article_markdown,
        sources=draft.sources,
        affected_article_url=draft.affected_article_url,
        affected_article_title=draft.affected_article_title,
        drafted_at=draft.occurred_at,
        decided_by=decision.get("decided_by"),
        decided_at=decision.get("decided_at"),
        reason=decision.get("reason"),
        document_id=decision.get("document_id"),
        draft=(
            ProposalDraftRead.model_validate_json(raw[TARGET_DRAFT.encode()])
            if TARGET_DRAFT.encode() in raw
            else None
        ),
    )


class ProposalService:
    """The review queue's actions: read, approve (ingest the article, and ask for a draft in a
    source), ask for a draft again, reject, export; and the drafts' outcomes."""

    def __init__(self, bus: Bus, store: ProposalStore, documents: DocumentService) -> None:
        self.bus = bus
        self.store = store
        self.documents = documents

    async def get(self, proposal_id: str) -> ProposalRead:
        proposal = await self.store.get(proposal_id)
        if proposal is None:
            raise ApiError(ErrorCode.UNKNOWN_PROPOSAL, "No such proposal is known.")
        return proposal

    async def approve(
        self, proposal_id: str, actor: str, target: str | None = None
    ) -> ProposalRead:
        """Ingest the proposed article as a Markdown document, and ask for a draft in
        ``target`` (a configured source) when one is named; 409 unless pending, 404 for a
        target no indexer announced (checked before anything changes)."""
        proposal = await self.get(proposal_id)
        if target is not None:
            await self._source(target)
        claimed = {"decided_by": actor, "decided_at": utcnow().isoformat()}
        await self._move(proposal_id, "pending", "approving", claimed)
        try:
            accepted = await self.documents.submit(
                f"{slug(proposal.title)}.md", proposal.article_markdown.encode("utf-8")
            )
        except Exception:
            await self.store.decide(proposal_id, "approving", "pending", {})
            raise
        decision = claimed | {"document_id": accepted.id}
        await self.store.decide(proposal_id, "approving", "approved", decision)
        targeted = {"target": target} if target else {}
        await self._audit(proposal_id, actor, "approved", document_id=accepted.id, **targeted)
        if target is not None:
            # Not queued: the approval stands all the same, and its draft says "failed".
            await self._request_draft(proposal, actor, target, expected="")
        return await self.get(proposal_id)

    async def request_draft(self, proposal_id: str, actor: str, target: str) -> ProposalRead:
        """Ask (again) for an approved proposal's draft in ``target``: after a failure (the
        permission granted since), or into another source. 409 unless approved, or while a
        request is under way or a draft exists in that source."""
        proposal = await self.get(proposal_id)
        await self._source(target)
        if proposal.status != "approved":
            raise ApiError(
                ErrorCode.VERSION_CONFLICT,
                f"The proposal is {proposal.status}; only an approved proposal becomes a draft.",
            )
        stored, current = await self.store.target_draft(proposal_id)
        if current is not None and (
            (current["status"] == "requested" and not _stale(current["requested_at"]))
            or (current["status"] == "created" and current["source"] == target)
        ):
            raise ApiError(
                ErrorCode.VERSION_CONFLICT,
                f"A draft in {current['source']} is {current['status']}; see `draft`.",
            )
        if not await self._request_draft(proposal, actor, target, expected=stored):
            raise ApiError(
                ErrorCode.BUS_UNAVAILABLE, "The draft request could not be queued; ask again."
            )
        return await self.get(proposal_id)

    async def _source(self, name: str) -> None:
        if await read_source(self.store.client, name) is None:
            raise ApiError(ErrorCode.UNKNOWN_SOURCE, "no source of that name is configured")

    async def _request_draft(
        self, proposal: ProposalRead, actor: str, target: str, *, expected: str
    ) -> bool:
        """Keep a new draft request on the proposal and queue it for the indexer; False when it
        could not be queued (the draft is then "failed", and may be asked for again)."""
        request_id = new_id()
        draft = {
            "source": target,
            "status": "requested",
            "request_id": request_id,
            "requested_at": utcnow().isoformat(),
        }
        if not await self.store.swap_draft(proposal.id, expected, draft):
            raise ApiError(
                ErrorCode.VERSION_CONFLICT, "Another admin asked for a draft at the same moment."
            )
        request = SourceDraftRequested(
            correlation_id=request_id,
            conversation_id=AUDIT_CONVERSATION,
            proposal_id=proposal.id,
            source=target,
            title=proposal.title[:255],
            article_markdown=proposal.article_markdown,
            sources=proposal.sources,
            requested_by=actor,
        )
        try:
            await self.bus.publish(Topic.SOURCE_DRAFT_REQUESTED, request)
        except Exception:
            log.warning("draft request not queued", extra={"source": target}, exc_info=True)
            failed = draft | {"status": "failed", "error": "the request could not be queued"}
            await self.store.swap_draft(proposal.id, json.dumps(draft), failed)
            return False
        return True

    async def on_draft_completed(self, event: SourceDraftCompleted) -> bool:
        """Keep the outcome on the proposal and the audit stream; an outcome that answers no
        request the proposal holds (replayed, stale, forged) is dropped.

        The outcome is kept first, with its event id, then audited, then marked audited: an
        outcome redelivered before that mark (its audit record could not be published) finds
        itself kept and publishes the record again, under the same event id (derived from the
        outcome's), which the audit stream's consumers de-duplicate."""
        stored, current = await self.store.target_draft(event.proposal_id)
        if current is None or current.get("request_id") != event.correlation_id:
            log.warning("draft outcome for no current request", extra={"source": event.source})
            return False
        if current["source"] != event.source:
            return False
        if current["status"] != "requested":
            if current.get("outcome_id") == event.event_id and not current.get("audited"):
                await self._audit_outcome(event, stored, current)
            return False
        current |= {
            "status": event.status,
            "url": event.url,
            "error": event.error,
            "missing_permission": event.missing_permission,
            "completed_at": utcnow().isoformat(),
            "outcome_id": event.event_id,
        }
        if not await self.store.swap_draft(event.proposal_id, stored, current):
            return False
        await self._audit_outcome(event, json.dumps(current), current)
        return True

    async def _audit_outcome(
        self, event: SourceDraftCompleted, stored: str, kept: dict[str, Any]
    ) -> None:
        """Record the outcome ``kept`` (as ``stored``) on the audit stream, then mark it so."""
        details: dict[str, str] = {"target": event.source, "draft_status": event.status}
        if event.url:
            details["draft_url"] = event.url
        if event.error:
            details["error"] = event.error[:300]
        if event.missing_permission:
            details["missing_permission"] = event.missing_permission
        await self._record(
            event.proposal_id,
            f"draft {event.status} in {event.source} for proposal {event.proposal_id}",
            {"proposal_id": event.proposal_id, "decision": f"draft_{event.status}", **details},
            event_id=derived_event_id("proposal-draft-audit", event.event_id),
        )
        await self.store.swap_draft(event.proposal_id, stored, kept | {"audited": True})

    async def reject(self, proposal_id: str, actor: str, reason: str) -> ProposalRead:
        """Dismiss the proposal with ``reason``; 409 unless pending."""
        await self.get(proposal_id)
        decision = {"decided_by": actor, "decided_at": utcnow().isoformat(), "reason": reason}
        await self._move(proposal_id, "pending", "rejected", decision)
        await self._audit(proposal_id, actor, "rejected", reason=reason[:300])
        return await self.get(proposal_id)

    async def _move(
        self,
        proposal_id: str,
        required: ProposalStatus,
        status: ProposalStatus,
        decision: dict[str, Any],
    ) -> None:
        found = await self.store.decide(proposal_id, required, status, decision)
        if found is None:
            raise ApiError(ErrorCode.UNKNOWN_PROPOSAL, "No such proposal is known.")
        if found != required:
            raise ApiError(
                ErrorCode.VERSION_CONFLICT,
                f"The proposal is {found}; only a pending proposal can be decided.",
            )

    async def _audit(self, proposal_id: str, actor: str, decision: str, **details: str) -> None:
        await self._record(
            proposal_id,
            f"{actor} {decision} proposal {proposal_id}",
            {"proposal_id": proposal_id, "decision": decision, "decided_by": actor} | details,
        )

    async def _record(
        self,
        proposal_id: str,
        reason: str,
        details: dict[str, str],
        *,
        event_id: str | None = None,
    ) -> None:
        await self.bus.publish(
            Topic.AUDIT,
            AuditRecorded(
                event_id=event_id or new_id(),
                correlation_id=new_id(),
                conversation_id=AUDIT_CONVERSATION,
                service="gateway",
                action="proposal",
                reason=reason,
                details=dict(details),
            ),
        )
        log.info("proposal recorded", extra={"proposal_id": proposal_id, "reason": reason})


def _stale(requested_at: str) -> bool:
    asked = datetime.fromisoformat(requested_at)
    return (utcnow() - asked).total_seconds() > DRAFT_STALE_S


def export_markdown(proposal: ProposalRead) -> str:
    """The article as Markdown to paste into a SharePoint page (its text web part takes
    Markdown): the proposed article, unchanged."""
    return proposal.article_markdown
