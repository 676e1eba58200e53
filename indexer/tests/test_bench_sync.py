"""The sync benchmark on a tiny space: its figures must agree with each other, and its check must
catch a second sync that did work it should not have."""

from __future__ import annotations

import contextlib
import copy
import io
import random
from typing import Any

import pytest

from indexer.embedding import Embedder
from indexer.sources.state import SyncState
from indexer.tests import bench_sync

PAGES = 5


@pytest.fixture(scope="module")
def run(embedder: Embedder) -> tuple[dict[str, Any], str]:
    """The bench's figures on a tiny space, and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        figures = bench_sync.main(["--pages", str(PAGES), "--seed", "3"], embedder=embedder)
    return figures, printed.getvalue()


@pytest.fixture
def figures(run: tuple[dict[str, Any], str]) -> dict[str, Any]:
    return run[0]


def test_first_sync_indexes_every_page_and_second_embeds_nothing(
    figures: dict[str, Any],
) -> None:
    first, second = figures["first"], figures["second"]
    assert figures["pages"] == PAGES
    assert first["error"] is None
    assert second["error"] is None
    assert first["summary"]["new"] == PAGES == first["summary"]["total"]
    assert figures["chunks"] >= PAGES  # every page has a few sections
    # Every chunk is embedded (and the sentences of sections long enough to split).
    assert first["texts_embedded"] >= figures["chunks"]
    assert first["bodies_fetched"] == PAGES
    assert second["summary"]["unchanged"] == PAGES == second["summary"]["total"]
    assert second["summary"]["new"] == second["summary"]["changed"] == 0
    assert second["texts_embedded"] == 0
    assert second["bodies_fetched"] == 0
    assert first["pages_per_s"] == round(PAGES / first["wall_s"], 2)
    assert first["chunks_per_s"] == round(figures["chunks"] / first["wall_s"], 2)
    assert bench_sync.problems(figures) == []


def test_the_printed_figures_are_the_returned_ones(run: tuple[dict[str, Any], str]) -> None:
    figures, printed = run
    assert f"space: {PAGES} pages (seed 3), {figures['words']} words" in printed
    assert f"{figures['chunks']} chunks" in printed
    assert f"texts embedded {figures['first']['texts_embedded']}" in printed
    assert "texts embedded 0, page bodies fetched 0" in printed
    assert f"'unchanged': {PAGES}" in printed
    assert f"cpus={figures['cpus']}" in printed
    assert "load average at the end" in printed


@pytest.mark.parametrize(
    ("which", "field", "value", "expected"),
    [
        ("second", "texts_embedded", 12, "embedded 12 texts"),
        ("second", "bodies_fetched", 1, "fetched 1 bodies"),
        ("second", "error", "Confluence answered 503", "second sync: error"),
    ],
)
def test_a_second_sync_that_did_work_is_reported(
    figures: dict[str, Any], which: str, field: str, value: Any, expected: str
) -> None:
    wrong = copy.deepcopy(figures)
    wrong[which][field] = value
    assert any(expected in problem for problem in bench_sync.problems(wrong))


def test_counts_that_do_not_add_up_are_reported(figures: dict[str, Any]) -> None:
    wrong = copy.deepcopy(figures)
    wrong["second"]["summary"]["unchanged"] = PAGES - 1
    wrong["second"]["summary"]["changed"] = 1
    assert any(f"{PAGES - 1} unchanged" in p for p in bench_sync.problems(wrong))
    wrong = copy.deepcopy(figures)
    wrong["first"]["summary"]["new"] = PAGES - 1
    wrong["first"]["summary"]["failed"] = 1
    assert len(bench_sync.problems(wrong)) == 2


def test_the_bench_exits_non_zero_when_the_second_sync_embeds(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sync that forgot what it indexed (every page looks new again) fails the bench."""
    monkeypatch.setattr(SyncState, "known", lambda self, key: None)
    with pytest.raises(SystemExit) as stopped:
        bench_sync.main(["--pages", "2"], embedder=embedder)
    assert stopped.value.code == 1
    assert "WRONG: second sync: 0 unchanged, not 2" in capsys.readouterr().err


def test_the_same_seed_makes_the_same_space_and_another_seed_another() -> None:
    def space(seed: int) -> list[tuple[str, str, list[str]]]:
        rng = random.Random(seed)
        return [bench_sync.generate_page(rng, number) for number in range(1, 21)]

    assert space(7) == space(7)
    assert space(7) != space(8)
    titles = [title for title, _, _ in space(7)]
    assert len(set(titles)) == len(titles)
    bodies = [body for _, body, _ in space(7)]
    assert all(body.count("<h2>") >= 3 and "<ol>" in body for body in bodies)


def test_a_page_count_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench_sync.main(["--pages", "0"])
    assert stopped.value.code == 2
    assert "--pages must be at least 1" in capsys.readouterr().err
