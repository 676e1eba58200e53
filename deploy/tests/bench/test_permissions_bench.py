"""``deskpilot bench permissions`` on a tiny corpus: it leaves nothing behind (its Chroma
directory is removed, even when a run fails) and writes locally whatever Chroma server the
shell names."""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import pytest

from deploy.bench import permissions


def tiny(options: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    kinds = parser.add_subparsers()
    permissions.add_parser(kinds)
    base = ["permissions", "--documents", "12", "--chunks-per-document", "3", "--groups", "4"]
    return parser.parse_args([*base, "--questions", "12", *(options or [])])


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the bench's temporary directory goes, to see what it leaves."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # A Chroma server named in the shell is not the bench's: nothing listens there.
    monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("CHROMA_PORT", "9")
    return tmp_path


def test_a_run_measures_and_removes_its_directory(temp_root: Path) -> None:
    result = permissions.run(tiny())

    assert result["chunks"] == 12 * 3  # the crawl's chunks, taken in and let go again
    assert result["snapshot_update_chunks"] == 50
    assert result["snapshot_updated_s"] >= 0
    assert result["unreadable_hits"] == 0
    assert result["unfiltered_p50_ms"] > 0
    assert result["filtered_p50_ms"] > 0
    assert list(temp_root.iterdir()) == []


def test_a_failed_run_removes_its_directory(temp_root: Path) -> None:
    # Fewer questions than the quantiles need: the run fails after the corpus was written.
    with pytest.raises(statistics.StatisticsError):
        permissions.run(tiny(["--questions", "1"]))

    assert list(temp_root.iterdir()) == []


def test_a_kept_corpus_is_reused_for_the_same_options_only(temp_root: Path) -> None:
    kept = temp_root / "kept"
    first = permissions.run(tiny(["--corpus-dir", str(kept)]))
    again = permissions.run(tiny(["--corpus-dir", str(kept)]))
    other = permissions.run(tiny(["--corpus-dir", str(kept), "--seed", "17"]))

    assert (first["corpus_reused"], again["corpus_reused"], other["corpus_reused"]) == (
        False,
        True,
        False,
    )
    assert first["chunks"] == again["chunks"] == other["chunks"] == 12 * 3
    # The same corpus drawn again: the same readers, so the same share readable.
    assert again["readable_share"] == first["readable_share"]
    assert again["unreadable_hits"] == 0
    assert [path.name for path in temp_root.iterdir()] == ["kept"]


def test_as_a_turn_the_question_is_embedded_within_the_timing(temp_root: Path) -> None:
    result = permissions.run(tiny(["--as-turn"]))

    assert result["as_turn"] is True
    assert result["encode_p50_ms"] > 0
    # Each timing holds its question's embedding.
    assert result["unfiltered_p50_ms"] > result["encode_p50_ms"] / 2
    # Measured on every run (a tiny corpus's figures round to about 0).
    assert {"snapshot_memory_mb", "snapshot_check_s"} <= result.keys()
