"""``deskpilot eval crawl-answer``: its pure parts (the questions file, the scoring of citations
against the expected page, the report and its targets). The eval itself is the whole-stack run;
no test starts a stack here."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from deploy.bench.crawl import site_file
from deploy.cli.main import build_parser
from deploy.evals.crawl_answer import (
    EvalSetupError,
    SiteQuestion,
    build_report,
    checked_inputs,
    cites_page,
    failure,
    indexer_backlog,
    outcome,
    page_key,
    read_question_set,
    report_lines,
    settle_indexer,
    stack_env,
    summary,
)
from tests.support import REPO_ROOT, SHARED_DATA

DISPATCH = SHARED_DATA / "sites" / "dispatch-docs"
DISPATCH_SET = REPO_ROOT / "deploy" / "evals" / "data" / "dispatch-docs.questions.yaml"
HOST = "127.0.0.1:4321"
PAGE = "/dispatch/docs/administration/faq"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "questions.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# -- the questions file --------------------------------------------------------------------------


def test_the_dispatch_set_names_pages_of_the_site_and_states_its_licence() -> None:
    assert DISPATCH.is_dir(), f"shared data missing: {DISPATCH} (see ../shared/README.md)"
    questions = read_question_set(DISPATCH_SET)
    assert len(questions.questions) >= 20
    assert site_file(DISPATCH, questions.seed) is not None
    for entry in questions.questions:
        assert site_file(DISPATCH, entry.page) is not None, entry.page
    texts = [entry.question.lower() for entry in questions.questions]
    assert len(set(texts)) == len(texts)
    assert "Apache License 2.0" in DISPATCH_SET.read_text()
    assert "Apache License" in (DISPATCH / "LICENSE").read_text()


def test_a_questions_file_is_read_with_its_seed_and_sitemap_hosts(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "seed: /docs/\nsitemap_hosts: [docs.example.org]\nquestions:\n"
        "  - {question: '  How do I install it?  ', page: /docs/install}\n",
    )
    questions = read_question_set(path)
    assert questions.seed == "/docs/"
    assert questions.sitemap_hosts == ["docs.example.org"]
    assert questions.questions == [
        SiteQuestion(question="How do I install it?", page="/docs/install")
    ]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("questions: []\n", "questions"),
        ("- just a list\n", "expected a mapping"),
        ("questions:\n  - {question: hi}\n", "questions.0.page"),
        ("questions:\n  - {question: hi, page: https://evil.example/x}\n", "URL path"),
        ("questions:\n  - {question: hi, page: docs/x}\n", "URL path"),
        ("questions:\n  - {question: '   ', page: /x}\n", "blank"),
        ("questions:\n  - {question: hi, page: /x, answer: 42}\n", "questions.0.answer"),
        ("questions: [unclosed\n", "cannot be read as YAML"),
    ],
)
def test_a_bad_questions_file_is_refused_saying_what_is_wrong(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=r"questions\.yaml") as raised:
        read_question_set(write(tmp_path, text))
    assert complaint in str(raised.value)


def test_a_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "questions.yaml"
    path.write_bytes(b"\xff\xfe\x00questions")
    with pytest.raises(ValueError, match="cannot be read"):
        read_question_set(path)


def _args(tmp_path: Path, questions: Path, **overrides: Any) -> argparse.Namespace:
    parser, _ = build_parser()
    argv = ["eval", "crawl-answer", "--site", str(DISPATCH), "--questions", str(questions)]
    args = parser.parse_args(argv)
    for name, value in overrides.items():
        setattr(args, name, value)
    return args


def test_the_inputs_are_checked_before_any_stack_starts(tmp_path: Path) -> None:
    question_set, seed = checked_inputs(_args(tmp_path, DISPATCH_SET))
    assert seed == "/dispatch/"
    assert len(question_set.questions) >= 20

    wrong_page = write(tmp_path, "questions:\n  - {question: hi, page: /dispatch/no-such-page}\n")
    with pytest.raises(EvalSetupError, match="no-such-page"):
        checked_inputs(_args(tmp_path, wrong_page, seed="/dispatch/"))
    with pytest.raises(EvalSetupError, match="seed /nowhere"):
        checked_inputs(_args(tmp_path, DISPATCH_SET, seed="/nowhere"))
    # A path out of the site's folder is no page of it, even to a page that exists there.
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<h1>Home</h1>")
    (tmp_path / "outside.html").write_text("<h1>Not the site's</h1>")
    own = write(tmp_path, "questions:\n  - {question: hi, page: /}\n")
    assert checked_inputs(_args(tmp_path, own, site=site, seed="/"))[1] == "/"
    with pytest.raises(EvalSetupError, match="seed"):
        checked_inputs(_args(tmp_path, own, site=site, seed="/../outside.html"))
    with pytest.raises(EvalSetupError, match="not a folder"):
        checked_inputs(_args(tmp_path, DISPATCH_SET, site=tmp_path / "missing"))
    used = tmp_path / "used"
    used.mkdir()
    (used / "dump.rdb").write_text("x")
    with pytest.raises(EvalSetupError, match="not empty"):
        checked_inputs(_args(tmp_path, DISPATCH_SET, data_dir=used))


def test_the_command_is_registered_under_eval() -> None:
    parser, runners = build_parser()
    args = parser.parse_args(["eval", "crawl-answer", "--site", "s", "--questions", "q"])
    assert runners[f"{args.command} {args.kind}"].__name__ == "run_eval_crawl_answer"
    assert args.seed is None
    assert args.out is None


def test_the_stack_gets_the_site_as_its_only_help_site() -> None:
    env = stack_env("http://127.0.0.1:4321/dispatch/", ["netflix.github.io"])
    assert env["CRAWL_SEED_URLS"] == "http://127.0.0.1:4321/dispatch/"
    assert env["CRAWL_ALLOWED_DOMAINS"] == "127.0.0.1"
    assert json.loads(env["CRAWLER_SITEMAP_HOST_MAP"]) == {"netflix.github.io": HOST}
    assert not any(name.startswith(("ORCHESTRATOR_CRAWL", "CRAWLER_DOMAIN")) for name in env)


# -- scoring -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        PAGE,
        f"{PAGE}.html",
        f"{PAGE}/",
        f"{PAGE}/index.html",
        f"{PAGE}#running-dispatch-database-upgrade",
        f"{PAGE}?from=search",
        "/dispatch/docs/administration/%66aq",
    ],
)
def test_a_page_matches_under_every_name_a_static_host_serves_it_by(path: str) -> None:
    assert page_key(path) == page_key(PAGE)
    assert cites_page([f"http://{HOST}{path}"], PAGE, HOST) == (True, True)


@pytest.mark.parametrize(
    "url",
    [
        f"http://{HOST}/dispatch/docs/administration/faq-old",
        f"http://{HOST}/dispatch/docs/administration",
        f"http://{HOST}/dispatch/docs/administration/faq/more",
        f"http://127.0.0.1:9999{PAGE}",  # the same path on another host
        f"https://it.northwind.example{PAGE}",
        "demo_kb/faq.md",
        "",
    ],
)
def test_another_page_or_host_is_not_the_page(url: str) -> None:
    assert cites_page([url], PAGE, HOST) == (False, False)


def test_first_and_any_citation_are_told_apart() -> None:
    right = f"http://{HOST}{PAGE}.html"
    other = f"http://{HOST}/dispatch/docs/administration/upgrading"
    assert cites_page([other, right], PAGE, HOST) == (False, True)
    assert cites_page([right, other], PAGE, HOST) == (True, True)
    assert cites_page([], PAGE, HOST) == (False, False)
    assert cites_page([f"http://elsewhere{PAGE}"], PAGE) == (True, True)


def answer(action: str, *urls: str, crawled: bool = False) -> dict[str, Any]:
    citations = [
        {"n": n, "url": url, "title": "t", "snippet": "s"} for n, url in enumerate(urls, 1)
    ]
    return {"answer": "…", "action": action, "citations": citations, "crawled": crawled}


def test_an_outcome_records_the_action_the_citations_and_the_time() -> None:
    result = outcome(answer("answer", f"http://{HOST}{PAGE}", crawled=True), PAGE, HOST, 4.56789)
    assert result == {
        "action": "answer",
        "right_first": True,
        "right_any": True,
        "crawled": True,
        "seconds": 4.568,
        "citations": [f"http://{HOST}{PAGE}"],
    }
    refused = outcome({"action": "no_answer", "citations": None}, PAGE, HOST, 1.0)
    assert (refused["action"], refused["right_any"], refused["citations"]) == (
        "no_answer",
        False,
        [],
    )


# -- the report ----------------------------------------------------------------------------------


def _results(seconds: list[float], rights: list[bool]) -> list[dict[str, Any]]:
    url = f"http://{HOST}{PAGE}"
    return [
        outcome(answer("answer", url) if right else answer("no_answer"), PAGE, HOST, s)
        for s, right in zip(seconds, rights, strict=True)
    ]


def test_a_summary_counts_right_pages_actions_and_times() -> None:
    results = _results([1.0, 2.0, 40.0, 3.0], [True, True, False, True])
    results.append(failure("HTTPStatusError: 500", 0.2))
    figures = summary(results)
    assert figures["questions"] == 5
    assert (figures["right_first"], figures["right_any"]) == (3, 3)
    assert figures["right_any_share"] == 0.6
    assert figures["actions"] == {"answer": 3, "no_answer": 1, "error": 1}
    assert figures["errors"] == 1
    # The failure's time is no answer time.
    assert (figures["p50_s"], figures["max_s"], figures["over_30_s"]) == (2.5, 40.0, 1)
    assert (figures["crawled"], figures["crawled_p50_s"]) == (0, None)
    crawling = outcome(answer("answer", crawled=True), PAGE, HOST, 12.0)
    figures = summary([*results, crawling])
    assert (figures["crawled"], figures["crawled_p50_s"], figures["crawled_max_s"]) == (
        1,
        12.0,
        12.0,
    )


def test_an_asking_with_no_answer_at_all_has_no_times() -> None:
    figures = summary([failure("ConnectError", 120.0)])
    assert (figures["p50_s"], figures["max_s"], figures["right_any_share"]) == (None, None, 0.0)


def _report(first: list[dict[str, Any]], again: list[dict[str, Any]]) -> dict[str, Any]:
    questions = [SiteQuestion(question=f"q{i}", page=PAGE) for i in range(len(first))]
    context = {"site": "site", "seed_url": f"http://{HOST}/", "knowledge_base": "demo articles"}
    return build_report(
        questions, {"first": first, "again": again}, context | {"load_avg_1m": [1.0, 2.0]}
    )


def test_the_report_holds_each_question_and_judges_the_targets() -> None:
    first = _results([5.0] * 9 + [29.0], [True] * 9 + [False])
    again = _results([0.3] * 10, [True] * 10)
    report = _report(first, again)
    assert [row["question"] for row in report["per_question"]] == [f"q{i}" for i in range(10)]
    assert report["per_question"][9]["first"]["action"] == "no_answer"
    assert report["per_question"][9]["again"]["right_first"] is True
    assert {name: row["met"] for name, row in report["targets"].items()} == {
        "first_right_page_share": True,  # 9 of 10
        "first_p50_s": True,
        "first_max_s": True,
        "again_p50_s": True,
    }
    json.dumps(report)  # what --out writes

    slow = _report(_results([9.0, 31.0], [True, False]), _results([0.6, 0.6], [True, True]))
    assert {name: row["met"] for name, row in slow["targets"].items()} == {
        "first_right_page_share": False,
        "first_p50_s": False,
        "first_max_s": False,
        "again_p50_s": False,
    }
    broken = _report([failure("x", 1.0)], [failure("x", 1.0)])
    assert broken["targets"]["first_p50_s"]["met"] is None


def test_the_printed_report_shows_each_question_the_figures_and_the_targets() -> None:
    first = _results([5.0, 12.0], [True, False])
    first[1] = outcome(
        answer("answer", f"http://{HOST}/other", f"http://{HOST}{PAGE}"), PAGE, HOST, 12.0
    )
    lines = list(report_lines(_report(first, _results([0.2, 0.3], [True, True]))))
    text = "\n".join(lines)
    rows = [line for line in lines if line.lstrip().startswith(("1 ", "2 "))]
    assert len(rows) == 2
    assert "first" in rows[0]
    assert "5.00" in rows[0]
    assert " yes " in rows[1]
    assert "12.00" in rows[1]
    assert "first: right page first 1/2, cited at all 2/2 (100%)" in text
    assert "target first asking, p50 s: 8.5 (target ≤ 8.0): NOT met" in text
    assert "target asked again, p50 s: 0.25 (target ≤ 0.5): met" in text
    assert "target first asking, right page cited: 1.0 (target ≥ 0.9): met" in text


# -- the indexer's backlog, on a real Redis ------------------------------------------------------


def test_the_indexer_backlog_counts_pages_not_delivered_and_not_acknowledged(
    fresh_redis_url: str,
) -> None:
    import redis

    client = redis.Redis.from_url(fresh_redis_url)
    assert indexer_backlog(fresh_redis_url) == 0  # nothing crawled yet: no stream
    client.xgroup_create("pages.crawled", "indexer", id="0", mkstream=True)
    client.xgroup_create("pages.crawled", "other", id="0")
    ids = [client.xadd("pages.crawled", {"page": str(n)}) for n in range(3)]
    assert indexer_backlog(fresh_redis_url) == 3
    client.xreadgroup("indexer", "worker", {"pages.crawled": ">"}, count=2)
    assert indexer_backlog(fresh_redis_url) == 3  # two being indexed, one waiting
    client.xack("pages.crawled", "indexer", *ids[:2])
    assert indexer_backlog(fresh_redis_url) == 1  # another group's backlog is not counted
    client.xreadgroup("indexer", "worker", {"pages.crawled": ">"})
    client.xack("pages.crawled", "indexer", ids[2])
    assert indexer_backlog(fresh_redis_url) == 0
    assert settle_indexer(fresh_redis_url) == {"pages_behind": 0, "waited_s": 0.0, "pages_left": 0}
    client.close()


def test_settling_gives_up_after_its_limit_and_says_what_is_left(fresh_redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(fresh_redis_url)
    client.xgroup_create("pages.crawled", "indexer", id="0", mkstream=True)
    client.xadd("pages.crawled", {"page": "1"})
    settled = settle_indexer(fresh_redis_url, limit_s=0.6)
    assert (settled["pages_behind"], settled["pages_left"]) == (1, 1)
    assert settled["waited_s"] >= 0.5
    client.close()
