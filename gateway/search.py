"""Knowledge-base searches, answered by the orchestrator's retrieval over the bus.

The request/reply of a turn, without the turn: the query goes sealed to the redactor on
``search.received`` (a raw topic), which publishes it redacted on ``search.requested``; the
orchestrator searches as the caller (``user_id``, ``groups``) and answers on this instance's
reply stream (a :class:`contracts.events.TurnReply` of kind ``search``), where
:meth:`gateway.turns.TurnService.listen` hands it over. Nothing of a search is stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from redis.exceptions import RedisError

from contracts.bus import Bus
from contracts.events import Passage, SearchReceived, new_id
from contracts.topics import Topic
from gateway.errors import ApiError, ErrorCode
from gateway.turns import TurnService

log = logging.getLogger("deskpilot.gateway.search")


class SearchService:
    def __init__(self, bus: Bus, turns: TurnService) -> None:
        self.bus = bus
        self.turns = turns

    async def search(
        self,
        query: str,
        user_id: str,
        groups: Sequence[str],
        limit: int,
        timeout_s: float,
        *,
        authenticated: bool,
    ) -> list[Passage]:
        """The passages best answering ``query`` that ``user_id`` may read, best first (its
        ``groups`` count only when ``authenticated``: a verified token's).

        ``ApiError`` for an empty or too long query (422, 413) or an unavailable bus (503);
        ``TimeoutError`` when no answer came within ``timeout_s``."""
        text = self.turns.validate_text(query)
        search_id = new_id()
        request = SearchReceived(
            correlation_id=search_id,
            conversation_id=search_id,
            user_id=user_id,
            groups=list(groups) if authenticated else [],
            authenticated=authenticated,
            query=text,
            limit=limit,
            reply_to=self.turns.reply_to,
        )
        async with self.turns.listen(search_id) as replies:
            try:
                await self.bus.publish(Topic.SEARCH_RECEIVED, request)
            except (RedisError, OSError) as exc:
                log.warning("could not publish a search", extra={"error": type(exc).__name__})
                raise ApiError(
                    ErrorCode.BUS_UNAVAILABLE,
                    "Deskpilot is briefly unavailable; the search was not sent. Try again.",
                ) from exc
            async with asyncio.timeout(timeout_s):
                while True:
                    reply = await replies.get()
                    if reply.kind == "search":
                        return list(reply.passages or [])
