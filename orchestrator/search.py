"""Knowledge-base searches for other systems (the gateway's MCP tool ``search_knowledge_base``).

A search is no turn: no conversation, no decision, no answer to compose. The redacted query
(``search.requested``) is retrieved exactly as a turn's question is (:class:`Retriever`'s hybrid
search) and the best chunks go back as passages, which the handler sends to the asking gateway.
"""

from __future__ import annotations

import asyncio

from contracts.events import Passage, SearchRequested
from contracts.readers import Principals
from orchestrator.compose import snippet
from orchestrator.retrieval import Hit, Retriever


def passage(hit: Hit) -> Passage:
    return Passage(
        title=hit.title,
        url=hit.url,
        section=hit.section,
        snippet=snippet(hit.text),
        score=round(hit.score, 4),
    )


async def search(retriever: Retriever, request: SearchRequested) -> list[Passage]:
    """The ``request.limit`` best passages for the redacted query, best first.

    Who searches is ``request.user_id`` with ``request.groups``: only what they may read is
    searched. Searches come from the gateway's MCP clients, each verified by its token; an
    anonymous id (never sent today) would read public documents only."""
    reader = Principals.of(request.user_id, request.groups, authenticated=request.authenticated)
    hits = await asyncio.to_thread(
        retriever.search, request.query, request.limit, principals=reader
    )
    return [passage(hit) for hit in hits]
