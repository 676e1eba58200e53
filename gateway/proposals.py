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
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from typing import Any

import redis.asyncio as aioredis

from contracts.bus import Bus
from contracts.events import AuditRecorded, ProposalDrafted, new_id, utcnow
from contracts.topics import Topic
from gateway.documents import DocumentService
from gateway.errors import ApiError, ErrorCode
from gateway.models import ProposalRead, ProposalStatus, ProposalSummary

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
    )


class ProposalService:
    """The review queue's actions: read, approve (ingest the article), reject, export."""

    def __init__(self, bus: Bus, store: ProposalStore, documents: DocumentService) -> None:
        self.bus = bus
        self.store = store
        self.documents = documents

    async def get(self, proposal_id: str) -> ProposalRead:
        proposal = await self.store.get(proposal_id)
        if proposal is None:
            raise ApiError(ErrorCode.UNKNOWN_PROPOSAL, "No such proposal is known.")
        return proposal

    async def approve(self, proposal_id: str, actor: str) -> ProposalRead:
        """Ingest the proposed article as a Markdown document; 409 unless pending."""
        proposal = await self.get(proposal_id)
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
        await self._audit(proposal_id, actor, "approved", document_id=accepted.id)
        return await self.get(proposal_id)

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
        await self.bus.publish(
            Topic.AUDIT,
            AuditRecorded(
                correlation_id=new_id(),
                conversation_id=AUDIT_CONVERSATION,
                service="gateway",
                action="proposal",
                reason=f"{actor} {decision} proposal {proposal_id}",
                details={"proposal_id": proposal_id, "decision": decision, "decided_by": actor}
                | details,
            ),
        )
        log.info("proposal decided", extra={"proposal_id": proposal_id, "decision": decision})


def export_markdown(proposal: ProposalRead) -> str:
    """The article as Markdown to paste into a SharePoint page (its text web part takes
    Markdown): the proposed article, unchanged."""
    return proposal.article_markdown
