"""Translate bus messages into orchestrator calls and results into reply events."""

from __future__ import annotations

from contracts.bus import Bus, Delivery
from contracts.events import AnswerBody, QueryReceived, TurnReply
from contracts.topics import Group, Topic
from orchestrator.embedding import one_embedding_per_text
from orchestrator.service import Orchestrator
from orchestrator.state import TurnState


class BusReplies:
    """Sends a turn's progress and answer to the reply stream named in the turn."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        reply = _reply(turn, kind="progress", stage=stage, detail=detail)
        await self.bus.publish(turn.reply_to, reply)

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        await self.bus.publish(turn.reply_to, _reply(turn, kind="answer", body=body))


def _reply(turn: TurnState, **fields: object) -> TurnReply:
    return TurnReply.model_validate(
        {"correlation_id": turn.correlation_id, "conversation_id": turn.conversation_id, **fields}
    )


def register(bus: Bus, orchestrator: Orchestrator, concurrency: int) -> None:
    replies = BusReplies(bus)

    async def on_query(event: QueryReceived, _: Delivery) -> None:
        with one_embedding_per_text():  # the question is embedded once for the whole turn
            await orchestrator.handle_query(event, replies)

    bus.subscribe(
        Topic.QUERY_RECEIVED,
        QueryReceived,
        on_query,
        group=Group.ORCHESTRATOR,
        concurrency=concurrency,
    )
