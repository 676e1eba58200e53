"""Similar resolved cases: the orchestrator's reading of the cases collection."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cases import CaseRetriever, open_cases_collection
from orchestrator.config import OrchestratorSettings

VOCABULARY = ["vpn", "drops", "wifi", "hotel", "password", "expired", "printer", "offline"]


class WordEncoder:
    """A stand-in for the sentence encoder: normalised counts of a few known words."""

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            words = re.findall(r"[a-z]+", text.lower())
            vector = [float(words.count(word)) for word in VOCABULARY]
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            vectors.append([v / norm for v in vector])
        return vectors


@pytest.fixture
def collection(tmp_path: Path) -> Any:
    settings = OrchestratorSettings(
        data_dir=tmp_path, chroma_host=None, cases_collection=f"cases-{uuid.uuid4().hex[:8]}"
    )
    return open_cases_collection(settings)


def add_case(collection: Any, ticket_id: str, text: str, resolution: str, category: str) -> None:
    """A record as the indexer's importer writes it (metadata keys are the contract)."""
    summary, _, symptoms = text.partition("\n")
    collection.upsert(
        ids=[ticket_id],
        embeddings=WordEncoder().encode([text]),
        documents=[text],
        metadatas=[
            {
                "ticket_id": ticket_id,
                "summary": summary,
                "symptoms": symptoms,
                "resolution": resolution,
                "category": category,
                "opened_at": "",
                "resolved_at": "",
                "content_hash": "x",
            }
        ],
    )


def test_similar_cases_come_best_first_above_the_minimum(collection: Any) -> None:
    add_case(collection, "IT-1", "VPN drops\nhotel wifi", "Use TCP", "connectivity")
    add_case(collection, "IT-2", "Password expired\n", "Self-service reset", "")
    add_case(collection, "IT-3", "Printer offline\n", "Re-add it", "peripheral")
    retriever = CaseRetriever(WordEncoder(), collection)

    found = retriever.similar("my vpn drops on hotel wifi", k=3, min_score=0.3)

    assert [case.ticket_id for case in found] == ["IT-1"]
    best = found[0]
    assert best.summary == "VPN drops"
    assert best.resolution == "Use TCP"
    assert best.category == "connectivity"
    assert best.score > 0.9
    expired = retriever.similar("password expired", min_score=0.5)
    assert [(case.ticket_id, case.category) for case in expired] == [("IT-2", None)]
    assert retriever.similar("vpn password", k=1, min_score=0.0)[0].ticket_id in {"IT-1", "IT-2"}
    assert retriever.similar("vpn", k=0) == []


def test_no_cases_imported_gives_none(collection: Any) -> None:
    assert CaseRetriever(WordEncoder(), collection).similar("vpn drops") == []


class CountingCollection:
    """The collection, counting the queries that reach it."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self.queries = 0

    def query(self, **kwargs: Any) -> Any:
        self.queries += 1
        return self.collection.query(**kwargs)


def test_an_empty_collection_is_asked_again_only_after_a_while(collection: Any) -> None:
    now = [100.0]
    counted = CountingCollection(collection)
    retriever = CaseRetriever(WordEncoder(), counted, empty_recheck_s=10, clock=lambda: now[0])

    assert retriever.similar("vpn drops") == []
    assert retriever.similar("printer offline") == []
    assert counted.queries == 1  # the next turns do not ask an empty collection again
    add_case(collection, "IT-1", "VPN drops\nhotel wifi", "Use TCP", "connectivity")
    now[0] += 11
    assert [case.ticket_id for case in retriever.similar("vpn drops")] == ["IT-1"]
    assert [case.ticket_id for case in retriever.similar("vpn drops hotel")] == ["IT-1"]
    assert counted.queries == 3  # a collection with cases is asked every time
