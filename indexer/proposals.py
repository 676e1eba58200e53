"""Knowledge-base update proposals drafted from recurring gaps.

Each round (``INDEXER_GAPS_INTERVAL_S``) clusters the window's gap questions
(:mod:`indexer.gaps`) and drafts a proposal for every cluster of at least
``INDEXER_GAPS_MIN_SIZE`` questions: a title (the question closest to the cluster's centre), the
questions, an article assembled from the resolutions of the closest resolved tickets (the
cases collection) and the closest crawled pages (the knowledge base's crawled chunks), its
sources, and the closest existing article when one is close enough.

Idempotent per cluster: a proposal keeps the id of the cluster it was first drafted for (a
cluster that shares questions with an earlier proposal takes that proposal's id, so it is
re-drafted as it grows), and is published again only when its member questions changed, with a
higher ``revision``. Replicas take turns through a Redis lock, so one round runs at a time.

On demand: ``python -m indexer.proposals`` runs one round now with the indexer's settings.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import redis
import redis.asyncio as aioredis

from contracts.bus import Bus
from contracts.events import ProposalDrafted, ProposalSource, ProposedQuestion, new_id
from contracts.live import read_live, versioned_doc_ids, visible
from contracts.readers import public_only_where
from contracts.topics import Topic
from indexer.gaps import PREFIX, Cluster, GapQuestion, GapWindow, as_text, cluster

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

    from indexer.config import IndexerSettings
    from indexer.embedding import Embedder

log = logging.getLogger("deskpilot.indexer.proposals")

OWNER_PREFIX = PREFIX + "owner:"
"""Per question key: the proposal it belongs to."""
FINGERPRINT_PREFIX = PREFIX + "fingerprint:"
"""Per proposal: the hash of its member questions when last published."""
REVISION_PREFIX = PREFIX + "revision:"
"""Per proposal: its last revision; kept (a few bytes) so revisions only ever grow."""
LOCK_KEY = PREFIX + "lock"
PROPOSAL_CONVERSATION = "knowledge-proposals"
"""The conversation id proposal events carry (they belong to no user's conversation)."""

MAX_TICKETS = 3
MAX_PAGES = 3
MAX_KB_RESULTS = 12
MAX_EXCERPT_CHARS = 700
MAX_TITLE_CHARS = 90


def is_crawled(metadata: dict[str, Any]) -> bool:
    """Whether a knowledge-base chunk comes from a crawled page rather than an article.

    A ``source`` metadata value of ``crawled`` says so when the indexer records one; otherwise a
    crawled page is a web URL without a category (articles carry a category in their front
    matter, uploads have ``upload://`` URLs).
    """
    source = metadata.get("source")
    if source is not None:
        return str(source) == "crawled"
    url = str(metadata.get("url") or "")
    return url.startswith(("http://", "https://")) and not metadata.get("category")


def title_of(question: str) -> str:
    """A proposal title from a question: one line, capitalised, without the question mark."""
    text = " ".join(question.split()).rstrip(" ?!.")
    if len(text) > MAX_TITLE_CHARS:
        text = text[:MAX_TITLE_CHARS].rsplit(" ", 1)[0] + "…"
    return text[:1].upper() + text[1:]


@dataclass(frozen=True, slots=True)
class Draft:
    """What the knowledge base and the past cases offer for one gap."""

    title: str
    article_markdown: str
    sources: list[ProposalSource]
    affected_url: str | None
    affected_title: str | None


class Drafter:
    """Assembles a proposal's article from the cases and knowledge-base collections (blocking:
    run it in a thread)."""

    def __init__(
        self,
        knowledge: Collection,
        cases: Collection | None,
        min_similarity: float,
        live: Any = None,
    ) -> None:
        self.knowledge = knowledge
        self.cases = cases
        self.min_similarity = min_similarity
        self.live = live
        """A synchronous redis client to read synced documents' published generations with
        (:mod:`contracts.live`): a chunk of a generation not published (replaced, or of a
        source taken out of the configuration) is no source of a proposal. None: not read."""

    def draft(self, questions: list[GapQuestion], centroid: Sequence[float], title: str) -> Draft:
        tickets = self._tickets(centroid)
        pages, affected = self._knowledge(centroid)
        sources = [
            ProposalSource(kind="ticket", ref=tid, title=meta["summary"], similarity=score)
            for tid, meta, score in tickets
        ] + [
            ProposalSource(kind="page", ref=url, title=page_title, similarity=score)
            for url, page_title, _, score in pages
        ]
        article = _article(title, questions, tickets, pages, affected)
        return Draft(
            title=title,
            article_markdown=article,
            sources=sources,
            affected_url=affected[0] if affected else None,
            affected_title=affected[1] if affected else None,
        )

    def _tickets(self, centroid: Sequence[float]) -> list[tuple[str, dict[str, str], float]]:
        if self.cases is None or self.cases.count() == 0:
            return []
        result = self.cases.query(
            query_embeddings=[centroid],
            n_results=MAX_TICKETS,
            include=["metadatas", "distances"],
        )
        found = []
        ids = result["ids"][0]
        metadatas = (result.get("metadatas") or [[]])[0]
        distances = (result.get("distances") or [[]])[0]
        for case_id, meta, distance in zip(ids, metadatas, distances, strict=False):
            score = round(1.0 - float(distance), 4)
            if score < self.min_similarity or not meta:
                continue
            found.append(
                (
                    str(meta.get("ticket_id") or case_id),
                    {k: str(meta.get(k) or "") for k in ("summary", "symptoms", "resolution")},
                    score,
                )
            )
        return found

    def _knowledge(
        self, centroid: Sequence[float]
    ) -> tuple[list[tuple[str, str, str, float]], tuple[str, str, float] | None]:
        if self.knowledge.count() == 0:
            return [], None
        # Public chunks only: a proposal is read by reviewers and becomes an article for
        # everyone, so a restricted page must leave no trace in it (not even as the closest
        # article).
        result = self.knowledge.query(
            query_embeddings=[centroid],
            n_results=MAX_KB_RESULTS,
            where=public_only_where(),
            include=["metadatas", "documents", "distances"],
        )
        pages: list[tuple[str, str, str, float]] = []
        affected: tuple[str, str, float] | None = None
        metadatas = (result.get("metadatas") or [[]])[0]
        documents = (result.get("documents") or [[]])[0]
        distances = (result.get("distances") or [[]])[0]
        shown = [True] * len(metadatas)
        if self.live is not None:
            shown = visible(metadatas, read_live(self.live, versioned_doc_ids(metadatas)))
        rows = zip(metadatas, documents, distances, shown, strict=False)
        for meta, body, distance, readable in rows:
            score = round(1.0 - float(distance), 4)
            if score < self.min_similarity or not meta or not readable:
                continue
            url, title = str(meta.get("url") or ""), str(meta.get("title") or "")
            if is_crawled(dict(meta)):
                if len(pages) < MAX_PAGES and all(url != seen[0] for seen in pages):
                    pages.append((url, title, body or "", score))
            elif affected is None:
                affected = (url, title, score)
        return pages, affected


def _excerpt(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_EXCERPT_CHARS:
        return text
    return text[:MAX_EXCERPT_CHARS].rsplit(" ", 1)[0] + " …"


def _article(
    title: str,
    questions: list[GapQuestion],
    tickets: list[tuple[str, dict[str, str], float]],
    pages: list[tuple[str, str, str, float]],
    affected: tuple[str, str, float] | None,
) -> str:
    """The proposed article in Markdown, ready for a reviewer to edit and paste."""
    lines = [f"# {title}", ""]
    lines += ["## Problem", ""]
    symptoms = [meta["symptoms"] for _, meta, _ in tickets if meta["symptoms"]]
    lines.append(symptoms[0] if symptoms else questions[0].text)
    lines += ["", "## Solution", ""]
    if not tickets and not pages:
        lines.append(
            "No resolved ticket or help page matches these questions yet: write the steps here."
        )
    for number, (ticket_id, meta, _) in enumerate(tickets, 1):
        lines.append(f"{number}. {meta['resolution'].strip()} (as resolved in {ticket_id})")
    for url, page_title, body, _ in pages:
        lines += ["", f"From [{page_title or url}]({url}):", "", _excerpt(body)]
    if affected:
        lines += [
            "",
            "## Related article",
            "",
            f"Update or link [{affected[1] or affected[0]}]({affected[0]}), the closest "
            "existing article.",
        ]
    lines += ["", "## Sources", ""]
    lines += [f"- Ticket {ticket_id}: {meta['summary']}" for ticket_id, meta, _ in tickets]
    lines += [f"- [{page_title or url}]({url})" for url, page_title, _, _ in pages]
    if not tickets and not pages:
        lines.append("- none yet")
    return "\n".join(lines).strip() + "\n"


def fingerprint(questions: list[GapQuestion]) -> str:
    return hashlib.sha256("\n".join(sorted(q.key for q in questions)).encode()).hexdigest()


class GapDetector:
    """One gap-detection round at a time: cluster, draft, publish what changed."""

    def __init__(
        self,
        bus: Bus,
        window: GapWindow,
        embedder: Embedder,
        drafter: Drafter,
        settings: IndexerSettings,
    ) -> None:
        self.bus = bus
        self.window = window
        self.client: aioredis.Redis = window.client
        self.embedder = embedder
        self.drafter = drafter
        self.settings = settings
        self._vectors: dict[str, list[float]] = {}

    async def run(self) -> list[ProposalDrafted]:
        """A round, unless another replica holds the lock; the proposals published."""
        lock_s = max(1, int(self.settings.gaps_interval_s / 2))
        token = new_id()
        if not await self.client.set(LOCK_KEY, token, nx=True, ex=lock_s):
            return []
        try:
            return await self.run_once()
        finally:
            if as_text(await self.client.get(LOCK_KEY)) == token:
                await self.client.delete(LOCK_KEY)

    async def run_once(self) -> list[ProposalDrafted]:
        await self.window.prune()
        questions = await self.window.questions(self.settings.gaps_max_questions)
        if len(questions) < self.settings.gaps_min_size:
            return []
        vectors = await asyncio.to_thread(self._embed, [q.text for q in questions])
        # Seconds for thousands of unrelated questions: off the event loop, like the embedding.
        groups = await asyncio.to_thread(cluster, vectors, self.settings.gaps_similarity)
        published = []
        for group in groups:
            if len(group.members) < self.settings.gaps_min_size:
                break  # largest first
            members = [questions[i] for i in group.members]
            event = await self._propose(members, group, vectors)
            if event is not None:
                published.append(event)
        log.info("gap round done", extra={"questions": len(questions), "published": len(published)})
        return published

    def _embed(self, texts: list[str]) -> list[list[float]]:
        missing = sorted({t for t in texts if t not in self._vectors})
        for text, vector in zip(missing, self.embedder.encode(missing), strict=True):
            self._vectors[text] = vector
        if len(self._vectors) > 4 * self.settings.gaps_max_questions:
            self._vectors = {t: self._vectors[t] for t in texts}
        return [self._vectors[t] for t in texts]

    async def _propose(
        self, members: list[GapQuestion], group: Cluster, vectors: list[list[float]]
    ) -> ProposalDrafted | None:
        owners = await self.client.mget([OWNER_PREFIX + q.key for q in members])
        known = Counter(as_text(o) for o in owners if o is not None)
        proposal_id = known.most_common(1)[0][0] if known else fingerprint(members)[:32]
        members_print = fingerprint(members)
        previous = await self.client.get(FINGERPRINT_PREFIX + proposal_id)
        if previous is not None and as_text(previous) == members_print:
            return None
        centroid = group.centroid
        closest = max(group.members, key=lambda i: float(np.asarray(vectors[i]) @ centroid))
        title = title_of(members[group.members.index(closest)].text)
        draft = await asyncio.to_thread(
            self.drafter.draft, members, [float(x) for x in centroid], title
        )
        revision = int(await self.client.incr(REVISION_PREFIX + proposal_id))
        event = ProposalDrafted(
            correlation_id=new_id(),
            conversation_id=PROPOSAL_CONVERSATION,
            proposal_id=proposal_id,
            revision=revision,
            title=draft.title,
            questions=[
                ProposedQuestion(text=q.text, signal=q.signal, asked_at=q.asked_at) for q in members
            ],
            article_markdown=draft.article_markdown,
            sources=draft.sources,
            affected_article_url=draft.affected_url,
            affected_article_title=draft.affected_title,
        )
        await self.bus.publish(Topic.PROPOSALS, event)
        ttl = self.window.ttl_s
        async with self.client.pipeline(transaction=True) as pipe:
            for q in members:
                pipe.set(OWNER_PREFIX + q.key, proposal_id, ex=ttl)
            pipe.set(FINGERPRINT_PREFIX + proposal_id, members_print, ex=ttl)
            await pipe.execute()
        log.info(
            "proposal drafted",
            extra={
                "proposal_id": proposal_id,
                "revision": revision,
                "questions": len(members),
                "sources": len(draft.sources),
            },
        )
        return event


async def run_round(settings: IndexerSettings) -> list[ProposalDrafted]:
    """One gap-detection round now, outside the service (an operator's "draft proposals now");
    skipped when a running indexer's round holds the lock."""
    from indexer.cases import open_cases_collection
    from indexer.embedding import Embedder
    from indexer.store import open_collection

    bus = Bus(settings, "indexer")
    await bus.broker.connect()
    try:
        embedder = await asyncio.to_thread(Embedder.from_settings, settings)
        knowledge = await asyncio.to_thread(open_collection, settings)
        cases = await asyncio.to_thread(open_cases_collection, settings)
        window = GapWindow(bus.redis, settings.gaps_window_days)
        live = redis.Redis.from_url(settings.redis_url)
        drafter = Drafter(knowledge, cases, settings.gaps_source_similarity, live)
        try:
            return await GapDetector(bus, window, embedder, drafter, settings).run()
        finally:
            live.close()
    finally:
        await bus.stop()


if __name__ == "__main__":
    from indexer.config import IndexerSettings as _Settings

    drafted = asyncio.run(run_round(_Settings()))
    print(f"{len(drafted)} proposal(s) drafted or re-drafted")
