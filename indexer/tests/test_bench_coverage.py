"""The coverage benchmark on a few documents: its runs remove what they must and nothing else,
it prints what it returns, and its check catches a run that removed too much or too little."""

from __future__ import annotations

import contextlib
import copy
import io
from typing import Any

import pytest

from indexer.tests import bench_coverage

DOCUMENTS, REMOVED = 60, 7


@pytest.fixture(scope="module")
def run() -> tuple[dict[str, Any], str]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        figures = bench_coverage.main(["--documents", str(DOCUMENTS), "--removed", str(REMOVED)])
    return figures, printed.getvalue()


def test_only_the_library_taken_out_is_removed(run: tuple[dict[str, Any], str]) -> None:
    figures = run[0]
    for name in ("cannot_tell", "both_covered"):
        assert (figures[name]["deleted"], figures[name]["known_after"]) == (0, DOCUMENTS)
    assert figures["taken_out"]["deleted"] == REMOVED
    assert figures["taken_out"]["known_after"] == DOCUMENTS - REMOVED
    assert (figures["chunks_before"], figures["chunks_after"]) == (
        REMOVED * bench_coverage.CHUNKS,
        0,
    )
    gone = figures["source_removed"]
    assert (gone["deleted"], gone["known_after"]) == (REMOVED, 0)
    assert (gone["chunks_before"], gone["chunks_after"]) == (REMOVED * bench_coverage.CHUNKS, 0)
    assert bench_coverage.problems(figures) == []


def test_the_printed_figures_are_the_returned_ones(run: tuple[dict[str, Any], str]) -> None:
    figures, printed = run
    assert f"{DOCUMENTS} known documents, {REMOVED} of them in a second library" in printed
    assert f"{figures['taken_out']['deleted']} deleted" in printed
    assert f"{figures['cannot_tell']['wall_s']:8.3f} s" in printed
    assert f"cpus={figures['cpus']}" in printed
    assert f"{figures['source_removed']['deleted']} deleted, " in printed


@pytest.mark.parametrize(
    ("which", "field", "value", "expected"),
    [
        ("both_covered", "deleted", 3, "both_covered"),
        ("cannot_tell", "known_after", DOCUMENTS - 1, "cannot_tell"),
        ("taken_out", "deleted", REMOVED - 1, f"removed {REMOVED - 1}, not {REMOVED}"),
        ("taken_out", "known_after", 0, "left 0 known documents"),
        ("source_removed", "deleted", REMOVED - 1, "source_removed removed"),
        ("source_removed", "chunks_after", 2, "source_removed removed"),
    ],
)
def test_a_run_that_removed_too_much_or_too_little_is_reported(
    run: tuple[dict[str, Any], str], which: str, field: str, value: Any, expected: str
) -> None:
    wrong = copy.deepcopy(run[0])
    wrong[which][field] = value
    assert any(expected in problem for problem in bench_coverage.problems(wrong))


def test_leftover_chunks_are_reported(run: tuple[dict[str, Any], str]) -> None:
    wrong = copy.deepcopy(run[0])
    wrong["chunks_after"] = 1
    assert any("chunks" in problem for problem in bench_coverage.problems(wrong))


def test_a_removed_count_beyond_the_documents_is_refused() -> None:
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
        bench_coverage.main(["--documents", "5", "--removed", "6"])
