"""Channel turns' replies delivered in order: a turn's progress never replaces its answer."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import redis.asyncio as aioredis

from contracts.events import Action, AnswerBody, TurnReply
from gateway.channels.delivery import TURN_PREFIX, ChannelTurn, ChannelTurns
from gateway.models import ChatRead

TURN = "a" * 32


class Recorder:
    """A channel that is slow to take answers, as a platform on the other side of the world."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def progress(self, turn: ChannelTurn, reply: TurnReply) -> None:
        self.calls.append(f"progress:{reply.stage}")

    async def answer(self, turn: ChannelTurn, answer: ChatRead) -> None:
        await asyncio.sleep(0.05)
        self.calls.append("answer")


def replies() -> tuple[TurnReply, TurnReply]:
    envelope = {"correlation_id": TURN, "conversation_id": "c" * 32}
    body = AnswerBody(answer="Done.", action=Action.ANSWER)
    return (
        TurnReply(kind="answer", body=body, **envelope),
        TurnReply(kind="progress", stage="searching", **envelope),
    )


async def test_progress_handled_with_or_after_the_answer_is_not_shown(
    redis: aioredis.Redis,
) -> None:
    turns = ChannelTurns(
        cast(Any, None), cast(Any, None), redis, delivery_ttl_s=60, conversation_ttl_s=60
    )
    recorder = Recorder()
    turns.deliverers["slack"] = recorder
    await redis.set(TURN_PREFIX + TURN, ChannelTurn(channel="slack", user_id="u").model_dump_json())
    answer, late_progress = replies()
    # Handled side by side, the answer first: the progress waits for it, then is dropped.
    await asyncio.gather(turns.on_reply(answer), turns.on_reply(late_progress))
    await turns.on_reply(late_progress)
    await turns.on_reply(answer)  # redelivered: not posted again
    assert recorder.calls == ["answer"]
    assert not turns._locks  # nothing kept per turn once delivered
