"""``deskpilot eval retrieval``: end to end on a tiny corpus, and the scoring on known rankings."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from deploy.evals.retrieval import (
    Query,
    add_parser,
    is_relevant,
    read_queries,
    run_eval_retrieval,
    score,
)
from deploy.tests.evals.kb_corpus import write_corpus


def write_queries(tmp_path: Path, *lines: dict[str, object]) -> Path:
    """A queries file of ``lines``, one JSON object each, and a blank line at the end."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    return queries


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="deskpilot eval")
    add_parser(parser.add_subparsers(dest="kind", required=True))
    return parser.parse_args(["retrieval", *argv])


def test_eval_indexes_the_corpus_and_scores_the_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path)
    queries = write_queries(
        tmp_path,
        {"query": "How do I reset my VPN password?", "relevant": ["vpn-password.md"]},
        {"query": "install the printer on my floor", "relevant": ["hardware/printer.md"]},
        # The relevant page is not in the corpus: a miss at every cutoff.
        {"query": "my webcam picture is black", "relevant": ["missing.md"]},
        # Two relevant pages, one of them in the corpus and found first: half recall.
        {"query": "the camera image stays black", "relevant": ["webcam.md", "missing.md"]},
    )

    code = run_eval_retrieval(
        _parse(["--corpus", str(corpus), "--queries", str(queries), "--json", "--misses"])
    )

    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n"] == 4
    assert result["recall_at_1"] == result["recall_at_5"] == result["recall_at_10"] == 0.625
    assert result["mrr"] == 0.75  # (1 + 1 + 0 + 1) / 4
    assert result["documents"] == 3
    assert result["chunks"] >= 3
    assert isinstance(result["chunks_per_second"], float)  # a rate: 0.0 on a slow machine too
    assert "best chunk" in result["ranking"]
    assert [miss["query"] for miss in result["misses"]] == ["my webcam picture is black"]
    # The plain dense baseline is ranked on the same index and reported beside, with the
    # difference; the fourth query has two relevant pages and one of them first: answered.
    baseline = result["baseline"]
    assert baseline["mode"] == "dense"
    for name in ("recall_at_1", "recall_at_5", "success_at_1", "mrr"):
        assert baseline["delta"][name] == pytest.approx(result[name] - baseline[name], abs=1e-4)
    assert result["success_at_1"] == 0.75


def test_the_baseline_is_plain_dense_retrieval_beside_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The baseline line a report prints is what ``--mode dense`` alone scores."""
    corpus = write_corpus(tmp_path)
    queries = write_queries(
        tmp_path,
        {"query": "self-service portal", "relevant": ["vpn-password.md"]},
        {"query": "printer named after my floor", "relevant": ["hardware/printer.md"]},
        {"query": "Teams uses the camera", "relevant": ["missing.md"]},
    )
    argv = ["--corpus", str(corpus), "--queries", str(queries)]

    code = run_eval_retrieval(_parse([*argv, "--mode", "dense", "--baseline", "none", "--json"]))
    assert code == 0
    dense = json.loads(capsys.readouterr().out)
    assert run_eval_retrieval(_parse(argv)) == 0
    report = capsys.readouterr().out

    assert "baseline" not in dense  # nothing beside when asked for none (or run as dense)
    (line,) = [line for line in report.splitlines() if line.startswith("plain dense baseline:")]
    assert f"recall@1={dense['recall_at_1']:.3f}" in line
    assert f"MRR={dense['mrr']:.3f}" in line
    assert "(hybrid minus baseline: recall@1 " in line


def test_eval_refuses_missing_files_and_bad_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"query": "no relevant list"}\n')

    assert run_eval_retrieval(_parse(["--corpus", str(tmp_path / "nope"), "--queries", "q"])) == 2
    assert run_eval_retrieval(_parse(["--corpus", str(tmp_path), "--queries", str(queries)])) == 2
    assert "queries.jsonl:1" in capsys.readouterr().err


def test_the_crawl_answer_questions_are_queries_too(tmp_path: Path) -> None:
    """The whole loop's questions file is read as queries: each question's page answers it."""
    questions = tmp_path / "site.questions.yaml"
    questions.write_text(
        "seed: /docs/\nquestions:\n"
        "  - question: How do I add the network printer?\n    page: /docs/printer\n"
        "  - question: Where is the VPN client?\n    page: /docs/vpn.html\n"
    )
    assert read_queries(questions) == [
        Query("How do I add the network printer?", ("/docs/printer",)),
        Query("Where is the VPN client?", ("/docs/vpn.html",)),
    ]
    questions.write_text("seed: /docs/\nquestions: []\n")
    with pytest.raises(ValueError, match="questions"):
        read_queries(questions)


def test_scores_of_known_rankings() -> None:
    queries = [
        Query("a", ("a.html",)),
        Query("b", ("b.html",)),
        Query("c", ("c.html",)),
        Query("d", ("d.html", "e.html")),
    ]
    ranking = [f"file:///kb/{name}.html" for name in "xyzwvutsrqpo"]
    rankings = [
        ["file:///kb/a.html", *ranking],  # rank 1
        [*ranking[:2], "file:///kb/b.html"],  # rank 3
        [*ranking[:11], "file:///kb/c.html"],  # rank 12: past every cutoff
        [*ranking[:4], "file:///kb/e.html", "file:///kb/d.html"],  # ranks 5 and 6
    ]

    result = score(queries, rankings, paths={})

    assert result["n"] == 4
    assert result["recall_at_1"] == 0.25
    assert result["recall_at_5"] == pytest.approx((1 + 1 + 0 + 0.5) / 4, abs=1e-4)
    assert result["recall_at_10"] == pytest.approx((1 + 1 + 0 + 1) / 4, abs=1e-4)
    assert result["mrr"] == pytest.approx((1 + 1 / 3 + 0 + 1 / 5) / 4, abs=1e-4)
    # Success counts a query answered by any of its relevant pages: d's second page at rank 5.
    assert result["success_at_1"] == 0.25
    assert result["success_at_5"] == 0.75
    assert result["success_at_10"] == 0.75


@pytest.mark.parametrize(
    ("url", "path", "names", "expected"),
    [
        ("https://kb/x", "/data/kb/a11y-mag.html", ["a11y-mag.html"], True),
        ("https://kb/x", "/data/kb/a11y-mag.html", ["mag.html"], False),  # whole names only
        ("https://help.example/net/wifi.html#top", None, ["wifi.html"], True),
        ("file:///kb/hardware/printer.md", None, ["hardware/printer.md"], True),
        ("file:///kb/printer.md", None, ["hardware/printer.md"], False),
    ],
)
def test_relevance_is_a_path_suffix(
    url: str, path: str | None, names: list[str], expected: bool
) -> None:
    assert is_relevant(url, path, names) is expected


def test_answers_counts_the_page_an_answer_would_cite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path)
    queries = write_queries(
        tmp_path,
        {"query": "How do I reset my VPN password?", "relevant": ["vpn-password.md"]},
        {"query": "How do I add the network printer?", "relevant": ["hardware/printer.md"]},
    )

    code = run_eval_retrieval(
        _parse(["--corpus", str(corpus), "--queries", str(queries), "--json", "--answers"])
    )

    assert code == 0
    answers = json.loads(capsys.readouterr().out)["answers"]
    for rule in ("similarity", "sufficiency", "final"):
        assert answers[rule] == {"right": 2, "wrong": 0, "declined": 0}
        without = answers[f"{rule}_without_page"]
        assert without["right"] == 0
        assert without["wrong"] + without["declined"] == 2
    # Without their pages, nothing else in this corpus is about a VPN password or a printer,
    # and no other page stands out enough to answer where no crawl follows.
    assert answers["sufficiency_without_page"]["declined"] == 2
    assert answers["final_without_page"]["declined"] == 2


def test_redacted_answers_judge_messages_as_a_turn_receives_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path)
    queries = tmp_path / "chatty.jsonl"
    printer = {
        "query": "Hi, I'm Jana Novak (jana.novak@northwind.example), I moved desks yesterday. "
        "How do I add the network printer?",
        "relevant": ["hardware/printer.md"],
    }
    mislabelled = {"query": "How do I reset my VPN password?", "relevant": ["webcam.md"]}
    queries.write_text(
        "# how this set was written: a note, not a query\n"
        + "\n".join(json.dumps(line) for line in (printer, mislabelled))
        + "\n"
    )

    argv = ["--corpus", str(corpus), "--queries", str(queries), "--json", "--answers"]
    code = run_eval_retrieval(_parse([*argv, "--redact", "--misses"]))

    assert code == 0
    out = capsys.readouterr().out
    assert "jana.novak@" not in out  # judged, listed and printed redacted only
    result = json.loads(out)
    assert result["n"] == 2  # the note is no query
    answers = result["answers"]
    assert answers["sufficiency"] == {"right": 1, "wrong": 1, "declined": 0}, answers["misses"]
    (miss,) = answers["misses"]
    assert miss["query"] == mislabelled["query"]
    assert miss["outcome"] == "wrong"
    assert miss["cited"].endswith("vpn-password.md")
    # What the check said of the page it cited (this corpus is too small for key terms).
    assert miss["judged"] == [f"{miss['cited']}: no key term to check"]
