"""One user turn, from redacted question to reply. Knows nothing about the broker."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from contracts.events import AnswerBody, QueryReceived
from orchestrator.compose import compose_answer
from orchestrator.config import OrchestratorSettings
from orchestrator.retrieval import Retriever
from orchestrator.state import TurnState, TurnStatus, TurnStore

log = logging.getLogger("deskpilot.orchestrator")


class Replies(Protocol):
    """Where a turn's progress and answer go (the gateway instance holding the user)."""

    async def progress(self, turn: TurnState, stage: str) -> None: ...

    async def answer(self, turn: TurnState, body: AnswerBody) -> None: ...


class Orchestrator:
    def __init__(
        self, retriever: Retriever, store: TurnStore, settings: OrchestratorSettings
    ) -> None:
        self.retriever = retriever
        self.store = store
        self.settings = settings

    async def handle_query(self, query: QueryReceived, replies: Replies) -> None:
        """Answer a turn exactly once; a redelivered query re-sends the answer already given."""
        turn = await self.store.get(query.correlation_id)
        if turn is not None and turn.status is TurnStatus.ANSWERED and turn.answer is not None:
            log.info("turn already answered; sending the same answer again")
            await replies.answer(turn, turn.answer)
            return
        turn = TurnState(
            correlation_id=query.correlation_id,
            conversation_id=query.conversation_id,
            user_id=query.user_id,
            reply_to=query.reply_to,
            question=query.text,
        )
        await self.store.save(turn)

        await replies.progress(turn, "searching")
        retrieval = await asyncio.to_thread(
            self.retriever.retrieve, query.text, self.settings.top_k
        )
        hits = retrieval.hits
        await replies.progress(turn, "composing")
        body = compose_answer(
            retrieval,
            threshold=self.settings.relevance_threshold,
            see_also_margin=self.settings.see_also_margin,
            max_citations=self.settings.max_citations,
        )
        best = hits[0].score if hits else None
        turn.reason = (
            f"best similarity {best:.3f} vs threshold {self.settings.relevance_threshold}"
            if best is not None
            else "knowledge base empty"
        )
        turn.status = TurnStatus.ANSWERED
        turn.answer = body
        await self.store.save(turn)
        log.info(
            "decided",
            extra={"action": body.action.value, "reason": turn.reason, "hits": len(hits)},
        )
        await replies.answer(turn, body)
