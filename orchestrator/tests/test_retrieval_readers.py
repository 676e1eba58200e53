"""Permission-aware retrieval on a real Chroma collection with the real query encoder: a reader
only ever gets chunks they may read, on every path (dense, keyword, the document ranking, the
best document's chunks), and the readable chunks rank as if the others did not exist."""

from __future__ import annotations

import math
from typing import Any

import bm25s
import numpy as np
import pytest
import redis

from contracts.live import EPOCH_KEY, LIVE_KEY, LiveReader
from contracts.readers import ANONYMOUS, EVERYONE, PUBLIC, Principals, Readers
from orchestrator.embedding import QueryEncoder
from orchestrator.retrieval import (
    HybridConfig,
    Retriever,
    _Gate,
    _Record,
    _Snapshot,
    keyword_tokens,
)
from orchestrator.tests.articles import ARTICLES, put, snapshot_records

SALARY_URL = "https://wiki.example/hr/salary-bands"
SALARY = (
    "Salary bands 2026",
    "Salary bands 2026 > Engineering",
    "Engineering salary bands: band E3 pays 71,000 to 84,000; the Orbis bonus is 9 percent. "
    "Raise a band review with your HR partner.",
)
QUESTION = "What are the engineering salary bands and the Orbis bonus?"
HR = Principals(user_id="u-hana", groups=frozenset({"hr-team"}))
IT = Principals(user_id="u-ivan", groups=frozenset({"it-staff"}))


@pytest.fixture
def kb(collection: Any, encoder: QueryEncoder) -> Any:
    for url, title, section, body in ARTICLES:
        put(collection, encoder, url, title, section, body, None)
    hr_only = Readers(public=False, groups=("hr-team",))
    title, section, body = SALARY
    put(collection, encoder, SALARY_URL, title, section, body, hr_only)
    put(
        collection,
        encoder,
        SALARY_URL,
        title,
        f"{title} > Bonus",
        "Orbis bonus: 9%.",
        hr_only,
        index=1,
    )
    # A public page on the same topic, which must rank where it would without the HR page.
    put(
        collection,
        encoder,
        "https://kb.example/pay-questions",
        "Questions about pay",
        "Questions about pay",
        "Questions about salary bands or a bonus go to your HR partner through the HR portal.",
        None,
    )
    return collection


def urls(hits: Any) -> list[str]:
    return [hit.url for hit in hits]


@pytest.mark.parametrize("exact_dense_limit", [20_000, 0], ids=["exact", "chroma-index"])
def test_a_restricted_chunk_that_would_rank_first_is_invisible_to_others(
    kb: Any, encoder: QueryEncoder, exact_dense_limit: int
) -> None:
    # Also when Chroma's index, which knows nothing of readers, finds the nearest chunks.
    retriever = Retriever(encoder, kb, HybridConfig(exact_dense_limit=exact_dense_limit))
    for_hr = retriever.retrieve(QUESTION, 5, principals=HR)
    assert for_hr.hits[0].url == SALARY_URL  # it is the best match for whoever may read it
    assert urls(for_hr.best_document) == [SALARY_URL, SALARY_URL]

    for reader in (IT, ANONYMOUS, Principals(user_id="u-x", groups=frozenset({"hr-team-x"}))):
        found = retriever.retrieve(QUESTION, 5, principals=reader)
        assert SALARY_URL not in urls(found.hits) + urls(found.best_document)
        assert not [hit for hit in found.hits if "Orbis" in hit.text or "Salary" in hit.title]
        assert found.hits[0].url == "https://kb.example/pay-questions"


@pytest.mark.parametrize("exact_dense_limit", [20_000, 0], ids=["exact", "chroma-index"])
def test_readers_rank_as_if_the_restricted_document_did_not_exist(
    kb: Any, encoder: QueryEncoder, exact_dense_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same question over the same public chunks, once with the HR page in the collection
    (read by someone outside HR) and once without it: the same hits, in the same order, with
    the same cosines. Dense search is exact in both (Chroma's index is, over so few chunks),
    so only the filtering could differ; also when the reader's dense search asks Chroma's
    index, as for one who may read more than ``exact_dense_limit`` chunks."""
    # Fewer candidates than chunks: filtering must not let the HR chunks take places of the
    # top 3.
    config = HybridConfig(candidates=3, exact_dense_limit=exact_dense_limit)
    asked: list[int] = []
    query = kb.query

    def counted(**kwargs: Any) -> Any:
        asked.append(kwargs["n_results"])
        return query(**kwargs)

    monkeypatch.setattr(kb, "query", counted)
    with_hr = Retriever(encoder, kb, config).retrieve(QUESTION, 3, principals=IT)
    # Exact: the snapshot alone; else Chroma, for more than the 3 candidates (IT reads 5 of 7).
    assert asked == ([] if exact_dense_limit else [math.ceil(2 * 3 * 7 / 5)])
    restricted = kb.get(where={"readers_public": False})["ids"]
    assert len(restricted) == 2
    kb.delete(ids=restricted)
    without_hr = Retriever(encoder, kb, config).retrieve(QUESTION, 3, principals=EVERYONE)
    assert [h.chunk_id for h in with_hr.hits] == [h.chunk_id for h in without_hr.hits]
    assert [h.score for h in with_hr.hits] == pytest.approx(
        [h.score for h in without_hr.hits], abs=1e-4
    )
    # The fusion sees no trace of the HR page either: no rank was taken by it on any path.
    assert [h.fused_score for h in with_hr.hits] == pytest.approx(
        [h.fused_score for h in without_hr.hits]
    )


def test_a_user_listed_by_id_reads_it_and_the_keyword_path_filters_too(
    kb: Any, encoder: QueryEncoder
) -> None:
    put(
        kb,
        encoder,
        "https://wiki.example/it/breakglass",
        "Break-glass account",
        "Break-glass account",
        "The ZX-4411 break-glass account is kept in the vault; two admins open it together.",
        Readers(public=False, users=("u-ivan",)),
    )
    keyword = Retriever(encoder, kb, HybridConfig(mode="keyword"))
    assert urls(keyword.search("ZX-4411", 3, principals=IT))[:1] == [
        "https://wiki.example/it/breakglass"
    ]
    assert "https://wiki.example/it/breakglass" not in urls(
        keyword.search("ZX-4411", 3, principals=HR)
    )
    # A different user with the same id as a *group* name gets nothing: users and groups are
    # separate name spaces.
    lookalike = Principals(user_id="u-other", groups=frozenset({"u-ivan"}))
    assert "https://wiki.example/it/breakglass" not in urls(
        keyword.search("ZX-4411", 3, principals=lookalike)
    )
    dense = Retriever(encoder, kb, HybridConfig(mode="dense"))
    assert "https://wiki.example/it/breakglass" not in urls(
        dense.search("break-glass account vault", 10, principals=ANONYMOUS)
    )
    assert urls(dense.search("break-glass account vault", 1, principals=IT)) == [
        "https://wiki.example/it/breakglass"
    ]


def test_an_anonymous_reader_sees_public_chunks_only_even_as_a_named_user(
    kb: Any, encoder: QueryEncoder
) -> None:
    # An unauthenticated turn names a user id and groups: neither counts.
    reader = Principals.of("u-hana", ["hr-team"], authenticated=False)
    assert reader == ANONYMOUS
    found = Retriever(encoder, kb).retrieve(QUESTION, 10, principals=reader)
    assert SALARY_URL not in urls(found.hits)
    # Groups that cannot be filed are dropped, never matched by a part.
    odd = Principals.of("u-1", ["hr-team|it-staff", "", " hr-team", 7], authenticated=True)  # type: ignore[list-item]
    assert odd.groups == frozenset()


def test_a_chunk_written_since_the_snapshot_is_filtered_too(kb: Any, encoder: QueryEncoder) -> None:
    config = HybridConfig(refresh_interval_s=3600, rebuild_min_interval_s=3600)
    retriever = Retriever(encoder, kb, config)
    retriever.search("printer", 1, principals=IT)  # the snapshot; no rebuild for an hour
    secret = put(
        kb,
        encoder,
        "https://wiki.example/hr/layoffs",
        "Restructuring plan",
        "Restructuring plan",
        "The plotter room closes; plotter jobs move to the Kestrel print shop.",
        Readers(public=False, groups=("executives",)),
    )
    question = "where do plotter jobs go now"
    exec_reader = Principals(user_id="u-e", groups=frozenset({"executives"}))
    # Readers who may not read everything search the snapshot: the new chunk reaches them when
    # it is rebuilt, which ``chunks.indexed`` forces at once.
    assert secret not in [h.chunk_id for h in retriever.search(question, 8, principals=IT)]
    retriever.refresh(force=True)
    assert secret not in [h.chunk_id for h in retriever.search(question, 8, principals=IT)]
    assert secret in [h.chunk_id for h in retriever.search(question, 8, principals=exec_reader)]
    # One who reads everything (an operator's tool) asks Chroma, which has it at once.
    another = put(
        kb,
        encoder,
        "https://wiki.example/hr/layoffs-2",
        "Restructuring plan, part two",
        "Restructuring plan, part two",
        "Plotter jobs of the night shift go to the Kestrel print shop's night counter.",
        Readers(public=False, groups=("executives",)),
    )
    assert another in [h.chunk_id for h in retriever.search(question, 20, principals=EVERYONE)]
    assert another not in [h.chunk_id for h in retriever.search(question, 20, principals=IT)]


def test_a_permission_change_shows_at_the_next_snapshot(kb: Any, encoder: QueryEncoder) -> None:
    retriever = Retriever(encoder, kb, HybridConfig(refresh_interval_s=0))
    assert SALARY_URL not in urls(retriever.search(QUESTION, 5, principals=IT))
    # A sync files new readers as a new generation: chunks with new ids (the generation is part
    # of them), the old ones deleted (here at once; the sync waits out a grace period).
    old = kb.get(where={"url": SALARY_URL}, include=["metadatas", "documents", "embeddings"])
    readers = Readers(public=False, groups=("it-staff",)).metadata()
    kb.add(
        ids=[f"{chunk_id}-g2" for chunk_id in old["ids"]],
        embeddings=old["embeddings"],
        documents=old["documents"],
        metadatas=[{**meta, **readers} for meta in old["metadatas"]],
    )
    kb.delete(ids=old["ids"])
    assert SALARY_URL in urls(retriever.search(QUESTION, 5, principals=IT))
    assert SALARY_URL not in urls(retriever.search(QUESTION, 5, principals=HR))


def test_the_snapshot_mask_matches_the_rule(kb: Any, encoder: QueryEncoder) -> None:
    retriever = Retriever(encoder, kb)
    retriever.refresh(force=True)
    snapshot = retriever._index
    assert snapshot is not None
    assert snapshot.readable(EVERYONE) is None
    for reader in (HR, IT, ANONYMOUS):
        mask = snapshot.readable(reader)
        expected = np.asarray([reader.may_read(r.readers) for r in snapshot.records])
        # None: every record readable (HR reads all of this collection), without a mask.
        assert (expected if mask is None else mask == expected).all()
        assert (mask is None) == bool(expected.all())


def test_a_switched_generation_is_seen_whole_by_a_restricted_reader(
    kb: Any, encoder: QueryEncoder, fresh_redis_url: str
) -> None:
    """A sync writes a page's new generation beside the old one, then publishes it: a reader
    who searches the snapshot alone must not see neither version in between (the old one is
    no longer published, the new one not yet in the snapshot)."""
    client = redis.Redis.from_url(fresh_redis_url)
    url, doc_id = "https://wiki.example/hr/onboarding", "source-onboarding"
    hr_only = Readers(public=False, groups=("people-team",))
    # Reads the onboarding page, not the salary bands: searches the snapshot alone.
    reader = Principals(user_id="u-p", groups=frozenset({"people-team"}))

    def write(generation: str, body: str) -> None:
        kb.add(
            ids=[f"{doc_id}-{generation}"],
            embeddings=encoder.encode([f"Onboarding\n\n{body}"]),
            documents=[body],
            metadatas=[
                {
                    "doc_id": doc_id,
                    "url": url,
                    "title": "Onboarding",
                    "section": "Onboarding",
                    "chunk_index": 0,
                    "generation": generation,
                    **hr_only.metadata(),
                }
            ],
        )
        with client.pipeline(transaction=True) as pipe:
            pipe.hset(LIVE_KEY, doc_id, generation)
            pipe.incr(EPOCH_KEY)
            pipe.execute()

    write("g1", "New starters collect their laptop from the Heron desk on day one.")
    config = HybridConfig(refresh_interval_s=3600, rebuild_min_interval_s=0)
    retriever = Retriever(encoder, kb, config, live=LiveReader(client))
    question = "where do new starters collect their laptop"
    assert "Heron" in retriever.search(question, 1, principals=reader)[0].text

    write("g2", "New starters collect their laptop from the Puffin desk on day one.")
    found = retriever.search(question, 1, principals=reader)
    assert found, "neither version shown"
    assert "Puffin" in found[0].text
    assert not [h for h in retriever.search(question, 10, principals=reader) if "Heron" in h.text]
    client.close()


def _snapshot(texts: list[tuple[str, Readers]]) -> _Snapshot:
    records = snapshot_records(texts)
    return _Snapshot(records, np.zeros((len(records), 4)), "marker")


HIDDEN = Readers(public=False, groups=("executives",))


def test_the_keyword_scores_of_a_reader_weigh_no_word_of_a_chunk_they_may_not_read() -> None:
    """BM25 weighs a word by how rare it is: were it counted over every chunk, the restricted
    chunks' words would shift a reader's ranking. Two collections alike but for the words of
    their restricted chunks give a reader the very same keyword scores."""
    public = [
        ("The kiosk prints visitor badges in the lobby.", PUBLIC),
        ("Visitor parking is on level two; the kiosk there sells tickets.", PUBLIC),
        ("Badges for contractors come from facilities.", PUBLIC),
    ]
    with_kiosk = _snapshot(
        [*public, *[("The kiosk plan for the merger, kiosk by kiosk.", HIDDEN)] * 3]
    )
    without = _snapshot(
        [*public, *[("The vault plan for the merger, vault by vault.", HIDDEN)] * 3]
    )
    reader = Principals(user_id="u-1", groups=frozenset({"it-staff"}))
    for question in ("visitor kiosk", "kiosk badges", "merger kiosk"):
        found = [snap.search(question, 10, snap.readable(reader)) for snap in (with_kiosk, without)]
        assert [p for p, _ in found[0]] == [p for p, _ in found[1]], question
        assert [v for _, v in found[0]] == pytest.approx([v for _, v in found[1]]), question
        assert all(position < len(public) for position, _ in found[0])
    # Everything kept: exactly bm25s's own scores over the same tokens.
    everyone = np.ones(len(with_kiosk.records), dtype=bool)
    tokens = keyword_tokens("visitor kiosk merger")
    reference = bm25s.BM25(method="lucene")
    corpus = [keyword_tokens(f"{r.section}\n{r.text}") for r in with_kiosk.records]
    reference.index(corpus, show_progress=False)
    assert with_kiosk.keywords.scores(tokens, everyone).tolist() == (
        reference.get_scores(tokens).tolist()
    )


def test_a_chunk_written_since_an_all_public_snapshot_takes_no_dense_rank(
    collection: Any,
    encoder: QueryEncoder,
) -> None:
    """With nothing restricted in the snapshot, a reader's dense search asks Chroma, which also
    has the restricted chunks written since: they are dropped before ranks are given (the last
    door of the gate alone would drop them after, shifting every readable chunk's rank)."""
    for url, title, section, body in ARTICLES:
        put(collection, encoder, url, title, section, body, None)
    config = HybridConfig(refresh_interval_s=3600, rebuild_min_interval_s=3600)
    question = "How do I reset my VPN password?"
    before = Retriever(encoder, collection, config).retrieve(question, 3, principals=IT)
    retriever = Retriever(encoder, collection, config)
    retriever.search("printer", 1, principals=IT)  # the snapshot: all public; no rebuild
    hidden = [
        put(
            collection,
            encoder,
            f"https://wiki.example/it/vpn-admin-{n}",
            "VPN password reset for admins",
            "VPN password reset for admins",
            f"Reset a VPN password from the admin console, step {n}: open Accounts, Reset.",
            Readers(public=False, groups=("vpn-admins",)),
        )
        for n in range(3)
    ]
    after = retriever.retrieve(question, 3, principals=IT)
    assert not {h.chunk_id for h in after.hits} & set(hidden)
    assert [h.url for h in after.hits] == [h.url for h in before.hits]
    assert [h.fused_score for h in after.hits] == pytest.approx(
        [h.fused_score for h in before.hits]
    )


def test_a_readers_word_statistics_count_only_what_they_may_read(
    kb: Any, encoder: QueryEncoder
) -> None:
    """What the sufficiency check weighs a question's words by: a word only restricted chunks
    hold is, for a reader who may not read them, a word no chunk holds."""
    hr, it = (Retriever(encoder, kb).retrieve(QUESTION, 3, principals=p) for p in (HR, IT))
    assert hr.terms is not None
    assert it.terms is not None
    (orbis,) = keyword_tokens("Orbis")
    assert hr.terms.holding.get(orbis, 0) == 2
    assert it.terms.holding.get(orbis, 0) == 0
    assert it.terms.chunks == hr.terms.chunks - 2
    assert it.terms.idf(orbis) == it.terms.idf("never-written-anywhere")


def test_the_gate_shows_no_chunk_its_reader_may_not_read_whatever_found_it() -> None:
    def record(chunk_id: str, readers: Readers) -> _Record:
        return _Record(
            chunk_id, "text", f"https://kb/{chunk_id}", "t", "s", 0, frozenset(), readers=readers
        )

    records = [
        record("public", PUBLIC),
        record("hr", Readers(public=False, groups=("hr-team",))),
        record("ivan", Readers(public=False, users=("u-ivan",))),
    ]
    assert _Gate(None, IT).keep(records) == [True, False, True]
    assert _Gate(None, HR).keep(records) == [True, True, False]
    assert _Gate(None, ANONYMOUS).keep(records) == [True, False, False]
