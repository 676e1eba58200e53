"""The keyword index scores as bm25s does, and an updated index scores as one built whole.

The corpus is the GNOME desktop help (``../shared/data/kb/gnome-help``, read in place): each
page's paragraphs as chunks, under the page's title, tokenised as the snapshot tokenises them;
its development queries are the questions.
"""

from __future__ import annotations

import functools
import html
import json
import re

import bm25s
import numpy as np
import pytest

from contracts.readers import PUBLIC, Principals, Readers
from orchestrator.keyword_index import KeywordIndex
from orchestrator.retrieval import _Snapshot, keyword_tokens
from orchestrator.tests.articles import snapshot_records
from tests.support import SHARED_DATA

GNOME_HELP = SHARED_DATA / "kb" / "gnome-help"
QUERIES = SHARED_DATA / "eval" / "gnome-help-queries.dev.jsonl"


@functools.cache
def gnome_chunks() -> tuple[tuple[str, ...], ...]:
    """The tokens of every paragraph of the GNOME help, the page's title first."""
    assert GNOME_HELP.is_dir(), f"shared data missing: {GNOME_HELP} (see ../shared/README.md)"
    chunks = []
    for path in sorted(GNOME_HELP.glob("*.html")):
        page = path.read_text(errors="replace")
        found = re.search(r"<title[^>]*>(.*?)</title>", page, re.S)
        title = html.unescape(found.group(1)) if found else path.stem
        for paragraph in re.findall(r"<p\b[^>]*>(.*?)</p>", page, re.S):
            text = html.unescape(re.sub(r"<[^>]+>", " ", paragraph))
            chunks.append(tuple(keyword_tokens(f"{title}\n{text}")) or ("",))
    assert len(chunks) > 1000
    return tuple(chunks)


@functools.cache
def gnome_questions() -> tuple[tuple[str, ...], ...]:
    """The tokens of the GNOME help's development queries."""
    lines = QUERIES.read_text().splitlines()
    return tuple(tuple(keyword_tokens(json.loads(line)["query"])) for line in lines if line)


def test_its_scores_are_bm25s_own_on_a_real_corpus() -> None:
    """Lucene's BM25 as bm25s computes it, to the bit: the rankings of the snapshot that used
    bm25s are the rankings of this index."""
    chunks = gnome_chunks()
    reference = bm25s.BM25(method="lucene")
    reference.index([list(chunk) for chunk in chunks], show_progress=False)
    index = KeywordIndex.built(chunks)
    columns = reference.scores["indptr"]
    compared = 0
    for question in gnome_questions():
        tokens = [t for t in question if t in reference.vocab_dict]
        if not tokens:
            continue
        assert index.scores(tokens).tolist() == reference.get_scores(tokens).tolist(), question
        # A word repeated, apart and together, counts each time, in the question's order.
        repeated = [*tokens, tokens[0], tokens[0], *tokens[::-1]]
        assert index.scores(repeated).tolist() == reference.get_scores(repeated).tolist()
        for token in tokens:
            column = reference.vocab_dict[token]
            assert index.holding(token) == columns[column + 1] - columns[column]
        compared += 1
    assert compared > 100
    # bm25s puts "" in every vocabulary, held or not.
    assert set(index.tokens()) - {""} == set(reference.vocab_dict) - {""}


def _same(updated: KeywordIndex, whole: KeywordIndex, questions: list[list[str]]) -> None:
    """Every token and question scores the same in both, to the bit, also under a mask."""
    tokens = set(whole.tokens())
    assert set(updated.tokens()) == tokens
    assert len(updated) == len(whole)
    mask = np.random.default_rng(5).random(len(whole)) < 0.4
    for token in tokens:
        assert updated.holding(token) == whole.holding(token), token
        assert updated.holding(token, mask) == whole.holding(token, mask), token
    for question in [*questions, *([t] for t in sorted(tokens))]:
        assert np.array_equal(updated.scores(question), whole.scores(question)), question
        assert np.array_equal(updated.scores(question, mask), whole.scores(question, mask))


def test_an_update_that_adds_and_removes_chunks_scores_as_the_index_built_whole() -> None:
    """Chunks dropped from everywhere in the index and others added, twice over: every
    token's chunk count and every score (IDF and average length of the chunks there are)
    are those of an index built over the result."""
    chunks = list(gnome_chunks())
    questions = [list(q) for q in gnome_questions()]
    rng = np.random.default_rng(16)
    first, later = chunks[:2000], chunks[2000:]
    index = KeywordIndex.built(first)
    rows = list(first)
    for added in (later[: len(later) // 2], later[len(later) // 2 :]):
        kept = np.flatnonzero(rng.random(len(rows)) < 0.7)
        index = index.updated(kept, added)
        rows = [rows[i] for i in kept.tolist()] + list(added)
        _same(index, KeywordIndex.built(rows), questions)
    # Kept rows in another order than they had: renumbered, not only filtered.
    order = rng.permutation(len(rows))
    _same(index.updated(order, []), KeywordIndex.built([rows[i] for i in order]), questions)


@pytest.mark.parametrize("others", [1, 50], ids=["most-words-gone", "few-words-gone"])
def test_a_token_only_removed_chunks_had_is_in_the_index_no_more(others: int) -> None:
    """Whether the index forgets the emptied columns at once (most of its words went) or
    keeps them for later (few did), the token is unknown, as in an index built without it."""
    kept = [["printer", "toner", f"floor{i}"] for i in range(others)]
    index = KeywordIndex.built([["vault", "merger", "codes", "room", "plan", "printer"], *kept])
    assert "vault" in index
    updated = index.updated(np.arange(1, others + 1), [["printer", "paper"]])

    assert "vault" not in updated
    assert "merger" not in updated
    assert "vault" not in set(updated.tokens())
    assert updated.holding("vault") == 0
    assert not updated.scores(["vault"]).any()
    _same(updated, KeywordIndex.built([*kept, ["printer", "paper"]]), [["vault", "printer"]])


def test_a_mask_scores_the_chunks_it_keeps_as_an_index_of_them_alone() -> None:
    """A reader's inverse document frequencies count the chunks they may read, not the
    others: with every chunk as long (so the average length is theirs too), the kept chunks
    score as in an index of them alone."""
    chunks = [
        ["kiosk", "badge", "lobby", "visitor"],
        ["kiosk", "kiosk", "merger", "plan"],
        ["kiosk", "merger", "vault", "plan"],
        ["visitor", "parking", "kiosk", "ticket"],
        ["badge", "contractor", "facility", "desk"],
    ]
    mask = np.array([True, False, False, True, True])
    alone = KeywordIndex.built([c for c, kept in zip(chunks, mask, strict=True) if kept])
    index = KeywordIndex.built(chunks)
    for question in (["kiosk"], ["visitor", "kiosk"], ["badge", "kiosk", "kiosk"]):
        scores = index.scores(question, mask)
        assert not scores[~mask].any()
        assert np.array_equal(scores[mask], alone.scores(question)), question
        assert not np.array_equal(scores, index.scores(question)), "the mask changed nothing"


def test_an_index_emptied_or_built_empty_holds_nothing_and_takes_chunks_again() -> None:
    index = KeywordIndex.built([["vpn", "client"], ["vpn", "token"]])
    for empty in (KeywordIndex.empty(), KeywordIndex.built([]), index.updated([], [])):
        assert len(empty) == 0
        assert list(empty.tokens()) == []
        assert "vpn" not in empty
        assert empty.scores(["vpn"]).tolist() == []
        _same(empty.updated([], [["vpn", "reset"]]), KeywordIndex.built([["vpn", "reset"]]), [])


def test_an_empty_snapshot_finds_nothing_and_has_no_statistics() -> None:
    snapshot = _Snapshot([], np.zeros((0, 4)), "marker")
    assert snapshot.search("vpn client", 5) == []
    assert snapshot.terms() is None


def test_a_snapshot_without_a_removed_chunk_weighs_its_words_as_one_built_without_it() -> None:
    """The snapshot's own path: a word only the removed chunk had finds nothing and is in
    no reader's statistics; the others rank and count as in a snapshot built whole."""
    hidden = Readers(public=False, groups=("executives",))
    texts = [
        ("The vault code for the merger room.", hidden),
        ("The kiosk prints visitor badges in the lobby.", PUBLIC),
        ("Visitor parking is on level two; the kiosk there sells tickets.", PUBLIC),
        ("Badges for contractors come from facilities.", hidden),
    ]
    records = snapshot_records(texts)
    snapshot = _Snapshot(records, np.zeros((len(records), 4)), "before")
    assert snapshot.search("vault", 5)
    kept = np.arange(1, len(records))
    updated = _Snapshot(
        records[1:], np.zeros((len(kept), 4)), "after", snapshot.keywords.updated(kept, [])
    )
    whole = _Snapshot(records[1:], np.zeros((len(kept), 4)), "after")
    executive = Principals(user_id="u-e", groups=frozenset({"executives"}))
    for principals in (Principals(user_id="u-1"), executive):
        assert updated.search("vault", 5, updated.readable(principals)) == []
        terms = updated.terms(updated.readable(principals))
        expected = whole.terms(whole.readable(principals))
        assert terms is not None
        assert expected is not None
        assert "vault" not in terms.holding
        assert dict(terms.holding) == dict(expected.holding)
        for question in ("visitor kiosk badges", "kiosk parking lobby"):
            mask = updated.readable(principals)
            assert updated.search(question, 5, mask) == whole.search(question, 5, mask)
