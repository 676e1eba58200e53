"""Hybrid retrieval on a real Chroma collection with the real query encoder.

Chunks are written as the indexer writes them (normalised embeddings of section path + body, the
body as the document, the same metadata keys), straight into a persistent Chroma in ``tmp_path``.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np
import pytest

from orchestrator import retrieval as retrieval_module
from orchestrator.embedding import QueryEncoder, one_embedding_per_text
from orchestrator.retrieval import (
    HybridConfig,
    Retriever,
    chunk_os,
    keyword_tokens,
    light_stem,
    normalise_os,
)
from orchestrator.tests.articles import ARTICLES, VPN_BODY, VPN_URL, add


@pytest.fixture
def kb(collection: Any, encoder: QueryEncoder) -> Any:
    for url, title, section, body in ARTICLES:
        add(collection, encoder, url, title, section, body)
    for index, system in enumerate(("Windows", "macOS", "Linux")):
        add(
            collection,
            encoder,
            VPN_URL,
            "Install the VPN client",
            f"Install the VPN client > On {system}",
            VPN_BODY,
            index=index,
        )
    return collection


def test_a_keyword_only_match_is_found(collection: Any, encoder: QueryEncoder) -> None:
    for url, title, section, body in ARTICLES:
        if url != "https://kb.example/licence":
            add(collection, encoder, url, title, section, body)
    # A chunk the dense model cannot find: its vector is that of unrelated text, as happens
    # with identifiers and jargon the model never learnt.
    collection.add(
        ids=["licence"],
        embeddings=encoder.encode(["A recipe for lemon cake with poppy seeds."]),
        documents=["Message LX-7731 means the licence server has no free seat left."],
        metadatas=[{"url": "https://kb.example/licence", "title": "Licences", "chunk_index": 0}],
    )
    question = "what does LX-7731 mean"

    dense = Retriever(encoder, collection, HybridConfig(mode="dense")).search(question, 10)
    hybrid = Retriever(encoder, collection).search(question, 2)

    assert dense[-1].chunk_id == "licence"  # the dense ranker puts it last
    (licence,) = [hit for hit in hybrid if hit.chunk_id == "licence"]
    assert licence.keyword_score > 0
    # Found by keywords, its score is still its cosine similarity (low), not a rank score.
    cake = encoder.encode([question, "A recipe for lemon cake with poppy seeds."])
    cosine = sum(x * y for x, y in zip(*cake, strict=True))
    assert licence.score == pytest.approx(cosine, abs=1e-4)
    assert licence.score < max(hit.score for hit in hybrid)


def test_a_paraphrase_is_found(kb: Any, encoder: QueryEncoder) -> None:
    retrieval = Retriever(encoder, kb).retrieve("I can't remember my login secret", 3)

    best = retrieval.hits[0]
    assert best.url == "https://kb.example/password"
    assert best.fused_score > 0
    assert retrieval.best_document[0].url == best.url
    assert retrieval.confidence == max(hit.score for hit in retrieval.hits)


@pytest.mark.parametrize(
    ("os", "expected"),
    [("windows", "Windows"), ("macos", "macOS"), ("mac", "macOS"), ("linux", "Linux")],
)
def test_the_users_operating_system_is_preferred(
    kb: Any, encoder: QueryEncoder, os: str, expected: str
) -> None:
    hits = Retriever(encoder, kb).search("how do I install the VPN client", 3, os=os)

    assert hits[0].section == f"Install the VPN client > On {expected}"
    assert hits[0].os == normalise_os(os)


def test_os_metadata_counts_and_any_stays_neutral(collection: Any, encoder: QueryEncoder) -> None:
    body = "Open the Wi-Fi menu and pick the NW-Corp network."
    add(collection, encoder, "https://kb.example/a", "Join Wi-Fi", "Join Wi-Fi", body, os="any")
    add(collection, encoder, "https://kb.example/b", "Join Wi-Fi", "Join Wi-Fi", body, os="linux")
    retriever = Retriever(encoder, collection)

    for_linux = retriever.search("join the wifi", 2, os="linux")
    for_windows = retriever.search("join the wifi", 2, os="windows")

    best_unboosted = 3 / (60 + 1)  # first in all three rankings, no boost
    assert for_linux[0].url == "https://kb.example/b"
    assert for_linux[0].fused_score > best_unboosted
    assert all(hit.fused_score <= best_unboosted + 1e-9 for hit in for_windows)


def test_the_keyword_index_follows_the_collection(kb: Any, encoder: QueryEncoder) -> None:
    retriever = Retriever(encoder, kb, HybridConfig(refresh_interval_s=0))
    question = "QZ-5512"
    assert all(hit.keyword_score == 0 for hit in retriever.search(question, 3))

    new_id = add(
        kb, encoder, "https://kb.example/plotter", "Plotters", "Plotters", "QZ-5512 needs A0."
    )
    after = retriever.search(question, 3)

    assert after[0].chunk_id == new_id
    assert after[0].keyword_score > 0

    # A changed chunk (same count: one deleted, one added) is picked up too.
    kb.delete(ids=[new_id])
    add(kb, encoder, "https://kb.example/plotter", "Plotters", "Plotters", "RV-9000 needs A1.")
    assert all(hit.keyword_score == 0 for hit in retriever.search(question, 3))
    assert retriever.search("RV-9000", 1)[0].keyword_score > 0


def test_the_refresh_check_is_throttled(kb: Any, encoder: QueryEncoder) -> None:
    # Both throttles long, so a slow machine (embedding the new chunk taking over a second)
    # cannot let the dense-hit rebuild in.
    config = HybridConfig(refresh_interval_s=3600, rebuild_min_interval_s=3600)
    retriever = Retriever(encoder, kb, config)
    retriever.search("printer", 1)  # builds the index
    add(kb, encoder, "https://kb.example/plotter", "Plotters", "Plotters", "QZ-5512 needs A0.")

    assert all(hit.keyword_score == 0 for hit in retriever.search("QZ-5512", 3))
    retriever.refresh(force=True)
    assert retriever.search("QZ-5512", 1)[0].keyword_score > 0


def test_a_due_check_runs_beside_the_question_not_in_it(
    kb: Any, encoder: QueryEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over 100,000 chunks a rebuild takes seconds: a question answers from the snapshot there
    is while the check runs in the background, and the next question sees what it found."""
    config = HybridConfig(refresh_interval_s=0.01, rebuild_min_interval_s=3600)
    retriever = Retriever(encoder, kb, config)
    retriever.search("printer", 1)  # the first snapshot is built in the asking thread
    add(kb, encoder, "https://kb.example/plotter", "Plotters", "Plotters", "QZ-5512 needs A0.")
    release = threading.Event()
    reading = threading.Event()
    read_records = retrieval_module._records

    def slow_records(collection: Any, ids: Any = None) -> Any:
        reading.set()
        assert release.wait(30), "the test never let the rebuild finish"
        return read_records(collection, ids)

    monkeypatch.setattr(retrieval_module, "_records", slow_records)
    time.sleep(0.02)  # the check is due

    hits = retriever.search("QZ-5512", 3)  # answered while the rebuild is held

    assert reading.wait(30), "no rebuild started"
    assert all(hit.keyword_score == 0 for hit in hits)
    checking = retriever._checking
    assert checking is not None
    assert checking.is_alive()
    assert retriever.search("QZ-5512", 3)  # a second question does not wait either
    assert retriever._checking is checking  # nor does it start a second check
    release.set()
    checking.join(30)
    assert retriever.search("QZ-5512", 1)[0].keyword_score > 0


def test_an_empty_collection_gives_nothing(collection: Any, encoder: QueryEncoder) -> None:
    retrieval = Retriever(encoder, collection).retrieve("how do I reset my password", 5)

    assert retrieval.hits == []
    assert retrieval.best_document == []
    assert retrieval.confidence is None


def test_refreshing_an_empty_collection_is_no_error(
    collection: Any, encoder: QueryEncoder, caplog: pytest.LogCaptureFixture
) -> None:
    """An empty collection is an empty snapshot, not a reshape error (seen in bench chat)."""
    retriever = Retriever(encoder, collection)

    retriever.refresh(force=True)  # raised ValueError (reshape of an empty array) before
    assert retriever.retrieve("how do I reset my password", 5).hits == []
    assert not [r for r in caplog.records if r.levelname in {"ERROR", "CRITICAL"}]

    add(collection, encoder, VPN_URL, "Install the VPN client", "Install", VPN_BODY)
    retriever.refresh(force=True)
    assert [hit.url for hit in retriever.retrieve("install the vpn client", 5).hits] == [VPN_URL]


def test_keyword_tokens() -> None:
    assert keyword_tokens("How do I connect to the office Wi-Fi's printers?") == [
        "connect",
        "office",
        "wi",
        "fi",
        "wifi",
        "printer",
    ]
    assert [light_stem(w) for w in ("policies", "boxes", "class", "status", "bus")] == [
        "policy",
        "boxe",
        "class",
        "status",
        "bus",
    ]


def test_operating_systems_of_a_chunk() -> None:
    assert chunk_os("Install > On Windows", "") == {"windows"}
    assert chunk_os("Move windows between workspaces", "") == set()
    assert chunk_os("Setup", "macOS, linux") == {"macos", "linux"}
    assert chunk_os("Setup", "any") == set()
    assert normalise_os("Mac OS") == "macos"
    assert normalise_os("any") is None


PLOTTER_BODY = "1. Load A0 paper in the plotter.\n2. Choose the QZ-5512 profile."
PLOTTER_QUESTION = "how do I load paper in the plotter"


def test_a_chunk_written_after_the_snapshot_is_ranked_with_it_at_once(
    kb: Any, encoder: QueryEncoder
) -> None:
    config = HybridConfig(refresh_interval_s=3600, rebuild_min_interval_s=0)
    retriever = Retriever(encoder, kb, config)
    retriever.search("printer", 1)  # builds the snapshot, and no check for an hour
    url = "https://kb.example/plotter"
    new_id = add(kb, encoder, url, "Use the plotter", "Plotter", PLOTTER_BODY)

    retrieval = retriever.retrieve(PLOTTER_QUESTION, 3)

    # Dense search sees Chroma as it is; the unknown chunk rebuilt the snapshot, so the chunk
    # also has its keyword and document ranks, and its document comes from the new snapshot.
    assert retrieval.hits[0].chunk_id == new_id
    assert retrieval.hits[0].keyword_score > 0
    assert [hit.chunk_id for hit in retrieval.best_document] == [new_id]


class RowCounting:
    """A collection that counts the rows read with their embeddings (a snapshot's cost)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self.rows = 0

    def get(self, **kwargs: Any) -> Any:
        page = self.collection.get(**kwargs)
        if "embeddings" in kwargs.get("include", []):
            self.rows += len(page["ids"])
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self.collection, name)


def test_a_changed_collection_reads_only_the_new_chunks_and_ranks_as_if_rebuilt(
    kb: Any, encoder: QueryEncoder
) -> None:
    counting = RowCounting(kb)
    retriever = Retriever(encoder, counting, HybridConfig(refresh_interval_s=3600))
    retriever.refresh(force=True)
    stored = kb.count()
    assert counting.rows == stored

    url = "https://kb.example/plotter"
    new_id = add(kb, encoder, url, "Use the plotter", "Plotter", PLOTTER_BODY)
    gone = kb.get(where={"url": VPN_URL})["ids"][0]
    kb.delete(ids=[gone])
    retriever.refresh(force=True)

    assert counting.rows == stored + 1  # the new chunk alone was read
    snapshot = retriever._index
    assert snapshot is not None
    assert new_id in snapshot.position
    assert gone not in snapshot.position
    rebuilt = Retriever(encoder, kb, HybridConfig(refresh_interval_s=3600))
    rebuilt.refresh(force=True)
    assert rebuilt._index is not None
    assert snapshot.marker == rebuilt._index.marker
    for question in (PLOTTER_QUESTION, "install the vpn client", "printer"):
        mine = retriever.retrieve(question, 5)
        theirs = rebuilt.retrieve(question, 5)
        assert [(h.chunk_id, round(h.score, 5), round(h.keyword_score, 5)) for h in mine.hits] == [
            (h.chunk_id, round(h.score, 5), round(h.keyword_score, 5)) for h in theirs.hits
        ]
        assert mine.terms is not None
        assert theirs.terms is not None
        assert mine.terms.chunks == theirs.terms.chunks

    kb.delete(ids=list(snapshot.position))
    retriever.refresh(force=True)
    assert retriever._index is None  # emptied: dense search only, as at the start


def test_a_chunk_written_just_after_a_rebuild_is_read_from_chroma(
    kb: Any, encoder: QueryEncoder
) -> None:
    config = HybridConfig(refresh_interval_s=3600, rebuild_min_interval_s=3600)
    retriever = Retriever(encoder, kb, config)
    retriever.search("printer", 1)
    url = "https://kb.example/plotter"
    new_id = add(kb, encoder, url, "Use the plotter", "Plotter", PLOTTER_BODY)

    retrieval = retriever.retrieve(PLOTTER_QUESTION, 8)

    fresh = [hit for hit in retrieval.hits if hit.chunk_id == new_id]
    assert fresh, "dense search sees Chroma as it is"
    assert (fresh[0].text, fresh[0].url, fresh[0].keyword_score) == (PLOTTER_BODY, url, 0)
    vector = np.asarray(encoder.encode([PLOTTER_QUESTION])[0], dtype=np.float32)
    document = retriever._document(vector, fresh[0], 12, retriever._index)
    assert [hit.chunk_id for hit in document] == [new_id]  # not in the snapshot: from Chroma
    # The throttle holds the rebuild back, but the next check is not an hour away.
    assert retriever._checked_at == -math.inf


def test_the_snapshot_gives_the_cosines_and_document_chroma_gives(
    kb: Any, encoder: QueryEncoder
) -> None:
    question = "how do I install the VPN client on my Mac"
    hybrid = Retriever(encoder, kb).retrieve(question, 5)
    plain = Retriever(encoder, kb, HybridConfig(mode="dense")).retrieve(question, 5)

    from_chroma = {hit.chunk_id: hit.score for hit in plain.hits}
    assert {hit.chunk_id for hit in hybrid.hits} == set(from_chroma)
    for hit in hybrid.hits:
        assert hit.score == pytest.approx(from_chroma[hit.chunk_id], abs=1e-4)
    assert [h.chunk_id for h in hybrid.best_document] == [h.chunk_id for h in plain.best_document]
    assert [h.score for h in hybrid.best_document] == pytest.approx(
        [h.score for h in plain.best_document], abs=1e-4
    )


def test_a_turn_embeds_its_question_once(encoder: QueryEncoder) -> None:
    calls: list[list[str]] = []
    original = encoder._encode

    def counting(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return original(texts)

    encoder._encode = counting  # type: ignore[method-assign]
    try:
        with one_embedding_per_text():
            first = encoder.encode(["reset my  password"])
            again = encoder.encode(["reset my password", "add a printer"])
        outside = encoder.encode(["reset my password"])
    finally:
        del encoder._encode

    assert calls == [["reset my password"], ["add a printer"], ["reset my password"]]
    assert again[0] == first[0] == outside[0]
    again[0][0] = 42.0  # a caller's copy: the memo is not changed through it
    assert first[0][0] != 42.0
