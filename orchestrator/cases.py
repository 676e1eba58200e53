"""Similar resolved cases: past tickets whose summary and symptoms resemble the question.

The indexer imports resolved tickets into their own collection (``DESKPILOT_CASES_COLLECTION``);
each record's embedded text is the ticket's summary and symptoms, its metadata holds
``ticket_id``, ``summary``, ``resolution`` and ``category``. Cases rank below the knowledge base:
they are offered after the answer, never instead of it, and only above ``min_score``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from contracts.events import SimilarCase
from orchestrator.config import OrchestratorSettings
from orchestrator.retrieval import open_collection


class _Encoder(Protocol):
    def encode(self, texts: list[str]) -> Sequence[Sequence[float]]: ...


def open_cases_collection(settings: OrchestratorSettings) -> Any:
    """The cases collection on the configured Chroma, created like the knowledge base's (cosine
    space, no embedding function) if no case was imported yet."""
    return open_collection(
        settings.model_copy(update={"chroma_collection": settings.cases_collection})
    )


EMPTY_RECHECK_S = 10.0
"""How long an empty cases collection (no tickets imported) is taken to stay empty."""


class CaseRetriever:
    """Finds resolved tickets similar to a question. Blocking: call it from a worker thread.

    Most deployments import no tickets at first: once a query finds the collection empty, the
    next ``empty_recheck_s`` seconds of questions are answered "none" without asking Chroma (a
    round trip and a query a turn), so a case imported meanwhile is offered that much later.
    """

    def __init__(
        self,
        encoder: _Encoder,
        collection: Any,
        *,
        empty_recheck_s: float = EMPTY_RECHECK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.encoder = encoder
        self.collection = collection
        self.empty_recheck_s = empty_recheck_s
        self.clock = clock
        self._empty_until = float("-inf")

    def similar(self, question: str, k: int = 3, min_score: float = 0.5) -> list[SimilarCase]:
        """Up to ``k`` cases with cosine similarity of at least ``min_score``, best first.

        An empty collection (no cases imported) gives an empty list. One Chroma query; the
        question's vector is usually the turn's own, already computed.
        """
        if k <= 0 or not question.strip() or self.clock() < self._empty_until:
            return []
        vector = list(self.encoder.encode([question])[0])
        result = self.collection.query(
            query_embeddings=[vector],
            n_results=k,
            include=["metadatas", "distances"],
        )
        if not (result.get("ids") or [[]])[0]:
            self._empty_until = self.clock() + self.empty_recheck_s
            return []
        cases: list[SimilarCase] = []
        metadatas = (result.get("metadatas") or [[]])[0]
        distances = (result.get("distances") or [[]])[0]
        for chunk_id, meta, distance in zip(result["ids"][0], metadatas, distances, strict=False):
            score = 1.0 - float(distance)
            if score < min_score:
                continue
            meta = meta or {}
            cases.append(
                SimilarCase(
                    ticket_id=str(meta.get("ticket_id") or chunk_id),
                    summary=str(meta.get("summary", "")),
                    resolution=str(meta.get("resolution", "")),
                    category=str(meta.get("category") or "") or None,
                    score=round(score, 4),
                )
            )
        return cases
