"""The gateway's only subscription: its own reply stream."""

from __future__ import annotations

from contracts.bus import Bus, Delivery
from contracts.events import TurnReply
from contracts.topics import Group
from gateway.service import TurnService


def register(bus: Bus, turns: TurnService) -> None:
    async def on_reply(reply: TurnReply, _: Delivery) -> None:
        await turns.on_reply(reply)

    bus.subscribe(turns.reply_to, TurnReply, on_reply, group=Group.GATEWAY, concurrency=4)
