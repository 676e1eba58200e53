"""``deskpilot eval critique`` on its development set, and on sets it must refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.evals.critique import DataError, evaluate, format_report, load, supported_by


def test_the_development_set_is_read_whole() -> None:
    items = load(Path(__file__).parents[2] / "evals" / "data" / "critique.dev.jsonl")
    assert len(items) >= 20
    # Every draft mixes what its passages support with what they do not, but one.
    assert sum(any(i.supported) and not all(i.supported) for i in items) >= len(items) - 1


def test_the_scripted_critique_removes_what_the_labels_reject() -> None:
    report = evaluate()
    drafts, after = report["drafts"], report["after_critique"]
    assert drafts["supported_by_labels"] < 0.8
    assert after["supported_by_labels"] == 1.0  # an oracle judge leaves nothing unsupported
    assert after["supported_by_metric"] > drafts["supported_by_metric"]
    assert after["outcomes"].get("extractive") == 1  # nothing supported: the passage is quoted
    assert after["unsure_answers"] == 2
    assert report["metric_against_labels"]["agreement"] >= 0.9
    assert "measures the pipeline" in format_report(report)


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Full-time staff get 25 days of paid leave [1].", True),
        ("Unused days are paid out in April [1].", False),
        ("Days carried over expire after 31 March [2].", True),
        ("Days carried over expire after 31 March [1].", False),  # cites the wrong passage
    ],
)
def test_the_metric_reads_the_cited_passages(sentence: str, expected: bool) -> None:
    passages = [
        "Full-time employees get 25 days of paid annual leave.",
        "Carried-over days expire after 31 March.",
    ]
    assert supported_by(sentence, passages) is expected


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            '{"id": "x", "question": "q", "passages": [{"title": "t", "text": "x"}], '
            '"draft": "Alpha. Beta.", "supported": [true]}',
            "1 labels for 2 parts",
        ),
        ('{"id": "x"}', "not an item"),
        (
            '{"id": "x", "question": "q", "passages": [], "draft": "A [1].", "supported": [true]}',
            "no passages",
        ),
        ("not json", "not an item"),
    ],
)
def test_a_bad_set_is_refused_with_the_line(tmp_path: Path, line: str, error: str) -> None:
    data = tmp_path / "set.jsonl"
    data.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=error):
        load(data)


def test_an_empty_set_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "empty.jsonl"
    data.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="no items"):
        evaluate(data)
