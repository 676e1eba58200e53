"""``deskpilot eval retrieval --feedback``: the gate on ratings' effect on ranking. Counts that
lower recall@1 or MRR make the evaluation fail; counts that agree with the labels pass."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from deploy.evals.retrieval import add_parser, run_eval_retrieval
from deploy.tests.evals.kb_corpus import write_corpus


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="deskpilot eval")
    add_parser(parser.add_subparsers(dest="kind", required=True))
    return parser.parse_args(["retrieval", *argv])


@pytest.fixture
def labelled(tmp_path: Path) -> tuple[Path, Path]:
    corpus = write_corpus(tmp_path)
    queries = tmp_path / "queries.jsonl"
    lines = [
        {"query": "How do I reset my VPN password?", "relevant": ["vpn-password.md"]},
        {"query": "install the printer on my floor", "relevant": ["hardware/printer.md"]},
        {"query": "the camera image stays black", "relevant": ["webcam.md"]},
    ]
    queries.write_text("\n".join(json.dumps(line) for line in lines))
    return corpus, queries


def run(
    labelled: tuple[Path, Path], tmp_path: Path, tallies: list[dict[str, object]]
) -> tuple[int, dict[str, object]]:
    counts = tmp_path / "tallies.jsonl"
    counts.write_text("\n".join(json.dumps(t) for t in tallies) + "\n")
    corpus, queries = labelled
    args = ["--corpus", str(corpus), "--queries", str(queries), "--json"]
    code = run_eval_retrieval(_parse([*args, "--feedback", str(counts)]))
    return code, {}


def test_a_penalty_setting_that_buries_the_right_articles_fails_the_gate(
    labelled: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The change under test: a much harsher penalty than the default 0.20.
    monkeypatch.setenv("ORCHESTRATOR_FEEDBACK_PENALTY", "0.6")
    buried = [
        {"url": "vpn-password.md", "positive": 0, "negative": 3, "ratings": 3},
        {"url": "hardware/printer.md", "positive": 0, "negative": 3, "ratings": 3},
    ]
    code, _ = run(labelled, tmp_path, buried)

    result = json.loads(capsys.readouterr().out)
    assert code == 1
    feedback = result["feedback"]
    assert feedback["documents_adjusted"] == 2
    assert feedback["lowered"] is True
    assert feedback["delta"]["recall_at_1"] < 0
    assert feedback["recall_at_1"] < result["recall_at_1"]


def test_counts_that_agree_with_the_labels_pass_and_one_rater_moves_nothing(
    labelled: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agreeing = [
        {"url": "webcam.md", "positive": 3, "negative": 0, "ratings": 3},
        # One user's many bad ratings are one rater: under the minimum, no adjustment.
        {"url": "vpn-password.md", "positive": 0, "negative": 1, "ratings": 1},
    ]
    code, _ = run(labelled, tmp_path, agreeing)

    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["feedback"]["documents_adjusted"] == 1
    assert result["feedback"]["lowered"] is False
    assert result["feedback"]["recall_at_1"] >= result["recall_at_1"]


def test_bad_counts_are_refused(
    labelled: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    counts = tmp_path / "tallies.jsonl"
    counts.write_text('{"url": "vpn-password.md"}\n')
    corpus, queries = labelled
    args = ["--corpus", str(corpus), "--queries", str(queries), "--feedback", str(counts)]

    assert run_eval_retrieval(_parse(args)) == 2
    assert "line 1: not a {url, positive, negative, ratings} object" in capsys.readouterr().err
