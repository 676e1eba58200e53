"""``deskpilot eval crawl-answer``: the whole loop, from a question to an answer citing the page.

One run:

1. serves ``--site`` on loopback as a static host does (:class:`deploy.bench.crawl.StaticSite`);
2. starts the whole stack on a fresh data directory, crawler on, with that site as its only help
   site: ``CRAWL_SEED_URLS`` is the served ``--seed`` page and nothing else is allowed; the
   loopback network is opened to the crawler (``CRAWLER_ALLOW_NETWORKS``) and the hosts the site's
   sitemap names are mapped onto it (``CRAWLER_SITEMAP_HOST_MAP``). Every other setting is the
   default, the crawl's politeness and budget included; the knowledge base holds only what a
   stack seeds by default, the bundled demo articles (``INDEXER_SEED_DEMO_KB``), which stay: a
   question about the site answered from one of them counts as a wrong page;
3. asks each question in a new conversation of a new anonymous user over the REST API
   (``POST /api/chat``, waiting for the final answer; a turn past the gateway's wait is fetched
   from ``/api/turns/{id}`` until it is done), one at a time, then asks them all again;
4. scores each answer: the expected page's path as the first citation's, and among any of its
   citations (paths compared without ``.html``, ``/index.html`` or a trailing slash, on the
   served host only); and reports the action, whether the turn crawled, and the time to the
   answer (p50 and max per asking), beside the issue's targets.

Rate limits are off (``GATEWAY_RATE_LIMIT_ENABLED=false``): the eval asks more often than a
person would. The stack's logs stay in ``--data-dir`` when one is given (else a temporary folder,
removed at the end).

The questions file is YAML: ``seed`` (the default start page), ``sitemap_hosts`` (hosts its
sitemap names in place of the served one), and ``questions``, a list of ``{question, page}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from deploy.bench.chat import percentile
from deploy.cli.crawlfleet import CrawlSetupError

TARGET_RIGHT_FIRST = 0.90
TARGET_P50_FIRST_S = 8.0
TARGET_MAX_FIRST_S = 30.0
TARGET_P50_AGAIN_S = 0.5
POLL_LIMIT_S = 300.0
"""How long a turn past the gateway's wait is polled for before it counts as failed."""
ASKINGS = ("first", "again")
SETTLE_LIMIT_S = 600.0
"""How long the indexer may take to catch up with the first asking's crawls."""


class SiteQuestion(BaseModel):
    """One question and the path of the page that answers it."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    page: str = Field(description="URL path of the answering page, e.g. /docs/install")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is blank")
        return value.strip()

    @field_validator("page")
    @classmethod
    def _a_path(cls, value: str) -> str:
        if not value.startswith("/") or urlsplit(value).netloc:
            raise ValueError(f"page must be a URL path starting with /, not {value!r}")
        return value


class QuestionSet(BaseModel):
    """A questions file: the site's start page, its sitemap's hosts, the questions."""

    model_config = ConfigDict(extra="ignore")

    seed: str = "/"
    sitemap_hosts: list[str] = Field(default_factory=list)
    questions: list[SiteQuestion] = Field(min_length=1)


def read_question_set(path: Path) -> QuestionSet:
    """Parse a questions file; raises ``ValueError`` saying what is wrong and where."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot be read as YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with `questions`, got {type(data).__name__}")
    try:
        return QuestionSet.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise ValueError(f"{path}: {problems}") from exc


# -- scoring -------------------------------------------------------------------------------------


def page_key(path: str) -> str:
    """A page's path as a static host serves it under several names: ``/a/b``, ``/a/b.html``,
    ``/a/b/`` and ``/a/b/index.html`` are one page."""
    key = unquote(path).split("#", 1)[0].split("?", 1)[0]
    for suffix in ("/index.html", ".html"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key.rstrip("/") or "/"


def cites_page(urls: Sequence[str], page: str, host: str | None = None) -> tuple[bool, bool]:
    """Whether the first citation, and whether any, is ``page`` (on ``host`` when given)."""
    wanted = page_key(page)

    def is_page(url: str) -> bool:
        parts = urlsplit(url)
        return (host is None or parts.netloc == host) and page_key(parts.path) == wanted

    return (bool(urls) and is_page(urls[0]), any(is_page(url) for url in urls))


def outcome(answer: dict[str, Any], page: str, host: str | None, seconds: float) -> dict[str, Any]:
    """What one asking gave: action, citations and whether they name the page, time."""
    urls = [str(citation.get("url", "")) for citation in answer.get("citations") or []]
    first, anywhere = cites_page(urls, page, host)
    return {
        "action": str(answer.get("action", "?")),
        "right_first": first,
        "right_any": anywhere,
        "crawled": bool(answer.get("crawled")),
        "seconds": round(seconds, 3),
        "citations": urls,
    }


def failure(error: str, seconds: float) -> dict[str, Any]:
    """An asking that got no answer (an HTTP error, a turn that never finished)."""
    return {
        "action": "error",
        "right_first": False,
        "right_any": False,
        "crawled": False,
        "seconds": round(seconds, 3),
        "citations": [],
        "error": error,
    }


def summary(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Right page (first citation, any), actions, and time to answer of one asking of all."""
    count = len(results)
    times = [result["seconds"] for result in results if result["action"] != "error"]
    crawling = [result["seconds"] for result in results if result["crawled"]]
    return {
        "questions": count,
        "right_first": sum(result["right_first"] for result in results),
        "right_any": sum(result["right_any"] for result in results),
        "right_first_share": round(sum(r["right_first"] for r in results) / count, 4)
        if count
        else None,
        "right_any_share": round(sum(r["right_any"] for r in results) / count, 4)
        if count
        else None,
        "actions": dict(Counter(result["action"] for result in results).most_common()),
        "crawled": sum(result["crawled"] for result in results),
        "errors": count - len(times),
        "p50_s": round(statistics.median(times), 3) if times else None,
        "p90_s": round(percentile(times, 90), 3) if times else None,
        "max_s": round(max(times), 3) if times else None,
        "over_30_s": sum(time_s > TARGET_MAX_FIRST_S for time_s in times),
        # Later questions are often answered from pages an earlier question's crawl read: the
        # turns that crawled themselves are the cold ones.
        "crawled_p50_s": round(statistics.median(crawling), 3) if crawling else None,
        "crawled_max_s": round(max(crawling), 3) if crawling else None,
    }


def targets(overall: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each target of the issue, its figure and whether it is met (None: no figure).

    Right page counts a citation anywhere in the answer; an asking that failed counts against
    it, and its time is left out of p50 and max (a failure is reported as such)."""
    first, again = overall["first"], overall["again"]

    def row(figure: float | None, target: float, at_least: bool) -> dict[str, Any]:
        met = None if figure is None else figure >= target if at_least else figure <= target
        return {"figure": figure, "target": target, "met": met}

    return {
        "first_right_page_share": row(first["right_any_share"], TARGET_RIGHT_FIRST, True),
        "first_p50_s": row(first["p50_s"], TARGET_P50_FIRST_S, False),
        "first_max_s": row(first["max_s"], TARGET_MAX_FIRST_S, False),
        "again_p50_s": row(again["p50_s"], TARGET_P50_AGAIN_S, False),
    }


def build_report(
    questions: Sequence[SiteQuestion],
    askings: dict[str, list[dict[str, Any]]],
    context: dict[str, Any],
) -> dict[str, Any]:
    """The report: per question each asking's outcome, per asking the summary, the targets."""
    overall = {name: summary(askings[name]) for name in ASKINGS}
    return {
        **context,
        "per_question": [
            {"question": q.question, "page": q.page, **{n: askings[n][i] for n in ASKINGS}}
            for i, q in enumerate(questions)
        ],
        "overall": overall,
        "targets": targets(overall),
    }


def _mark(result: dict[str, Any]) -> str:
    return "first" if result["right_first"] else "yes" if result["right_any"] else "no"


def report_lines(report: dict[str, Any]) -> Iterator[str]:
    """The report as a table and a summary for a person."""
    yield f"site {report['site']} served at {report['seed_url']} (the stack's only help site)"
    yield f"knowledge base before the first question: {report['knowledge_base']}"
    header = f"{'#':>2}  {'page':<42} {'1st: cited':<10} {'action':<10} {'s':>6}  "
    yield header + f"{'again: cited':<12} {'action':<10} {'s':>6}"
    for number, row in enumerate(report["per_question"], start=1):
        first, again = row["first"], row["again"]
        page = row["page"] if len(row["page"]) <= 42 else "…" + row["page"][-41:]
        yield (
            f"{number:>2}  {page:<42} {_mark(first):<10} {first['action']:<10} "
            f"{first['seconds']:>6.2f}  {_mark(again):<12} {again['action']:<10} "
            f"{again['seconds']:>6.2f}"
        )
    for name in ASKINGS:
        figures = report["overall"][name]
        yield (
            f"{name}: right page first {figures['right_first']}/{figures['questions']}, "
            f"cited at all {figures['right_any']}/{figures['questions']} "
            f"({_share(figures['right_any_share'])}); actions {figures['actions']}; errors "
            f"{figures['errors']}; time p50 {figures['p50_s']} s, p90 {figures['p90_s']} s, max "
            f"{figures['max_s']} s, over 30 s {figures['over_30_s']}; {figures['crawled']} turns "
            f"crawled: p50 {figures['crawled_p50_s']} s, max {figures['crawled_max_s']} s"
        )
    labels = {
        "first_right_page_share": "first asking, right page cited",
        "first_p50_s": "first asking, p50 s",
        "first_max_s": "first asking, max s",
        "again_p50_s": "asked again, p50 s",
    }
    for key, row in report["targets"].items():
        op = "≥" if key == "first_right_page_share" else "≤"
        verdict = {True: "met", False: "NOT met", None: "no figure"}[row["met"]]
        yield f"target {labels[key]}: {row['figure']} (target {op} {row['target']}): {verdict}"
    settling = report.get("indexer_before_again")
    if settling:
        yield (
            f"before asking again: {settling['pages_behind']} crawled pages were not indexed yet; "
            f"waited {settling['waited_s']} s, {settling['pages_left']} left"
        )
    yield f"load average (1 min) before / after: {report['load_avg_1m']}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


# -- the run -------------------------------------------------------------------------------------


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``crawl-answer`` to the subparsers of ``deskpilot eval``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "crawl-answer",
        help="the whole loop on a help site: right page cited, action, time to answer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--site", type=Path, required=True, help="folder of a static site")
    parser.add_argument(
        "--questions",
        type=Path,
        required=True,
        help="YAML of {seed, questions: [{question, page}]}",
    )
    parser.add_argument(
        "--seed", default=None, help="path of the site's start page (default: the file's seed)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the report here as JSON")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="a new or empty folder for the stack's data and logs, kept (default: temporary)",
    )
    return parser


def run_eval_crawl_answer(args: argparse.Namespace) -> int:
    """Run the evaluation ``args`` describe, print the table; returns the exit code."""
    from deploy.cli.crawlfleet import reporting_errors

    return reporting_errors("deskpilot eval crawl-answer", lambda: _evaluate(args))


class EvalSetupError(CrawlSetupError):
    """The eval cannot start (exit code 2): a bad site, questions file, seed or data directory,
    or a stack that does not become healthy."""


def checked_inputs(args: argparse.Namespace) -> tuple[QuestionSet, str]:
    """The question set and the seed path, once every page they name is on the site."""
    from deploy.bench.crawl import site_file

    if not args.site.is_dir():
        raise EvalSetupError(f"--site {args.site} is not a folder")
    try:
        question_set = read_question_set(args.questions)
    except ValueError as exc:
        raise EvalSetupError(str(exc)) from exc
    seed = args.seed or question_set.seed
    if site_file(args.site, seed) is None:
        raise EvalSetupError(f"the seed {seed} is no page of {args.site}")
    missing = [q.page for q in question_set.questions if site_file(args.site, q.page) is None]
    if missing:
        raise EvalSetupError(f"pages the questions name are not on the site: {missing}")
    if args.data_dir is not None and args.data_dir.exists() and any(args.data_dir.iterdir()):
        raise EvalSetupError(
            f"--data-dir {args.data_dir} is not empty (the eval needs a new stack)"
        )
    return question_set, seed


def _evaluate(args: argparse.Namespace) -> int:
    from deploy.bench.crawl import StaticSite
    from deploy.cli.crawlfleet import check_browser

    question_set, seed = checked_inputs(args)
    check_browser()
    load_before = os.getloadavg()[0]
    with StaticSite(args.site) as site, _data_dir(args.data_dir) as data_dir:
        seed_url = site.url(seed)
        host = urlsplit(seed_url).netloc
        env = stack_env(seed_url, question_set.sitemap_hosts)
        say(f"starting the stack in {data_dir} with {seed_url} as its only help site ...")
        with _running_stack(data_dir, env) as stack:
            askings: dict[str, list[dict[str, Any]]] = {}
            settling: dict[str, Any] = {}
            for name in ASKINGS:
                if name == "again":
                    settling = settle_indexer(stack.redis_url)
                say(f"asking {len(question_set.questions)} questions ({name}) ...")
                askings[name] = [
                    ask_one(stack.url, q.question, q.page, host, lambda text: say(f"  {text}"))
                    for q in question_set.questions
                ]
        context = {
            "site": str(args.site),
            "seed_url": seed_url,
            "questions_file": str(args.questions),
            "knowledge_base": default_knowledge_base(),
            "settings": {k: v for k, v in env.items() if k != "DESKPILOT_ADMIN_TOKEN"},
            "logs": str(data_dir / "logs") if args.data_dir else None,
            "indexer_before_again": settling,
            "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        }
        report = build_report(question_set.questions, askings, context)
    for line in report_lines(report):
        print(line)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        say(f"report written to {args.out}")
    return 0


def default_knowledge_base() -> str:
    """What a stack's knowledge base holds before its first question, by default."""
    from indexer.service import demo_kb_path

    articles = sum(1 for _ in demo_kb_path().glob("*.md"))
    return (
        f"the {articles} bundled demo articles (INDEXER_SEED_DEMO_KB, on by default); "
        "no past cases, no other documents"
    )


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def stack_env(seed_url: str, sitemap_hosts: Sequence[str]) -> dict[str, str]:
    """The settings the eval's stack gets beyond the defaults: the one help site, the loopback
    network opened to the crawler, the sitemap's hosts mapped onto it, no rate limits."""
    served = urlsplit(seed_url).netloc
    return {
        "CRAWL_SEED_URLS": seed_url,
        "CRAWL_ALLOWED_DOMAINS": urlsplit(seed_url).hostname or "",
        "CRAWLER_ALLOW_NETWORKS": "127.0.0.0/8",
        "CRAWLER_SITEMAP_HOST_MAP": json.dumps(dict.fromkeys(sitemap_hosts, served)),
        "GATEWAY_RATE_LIMIT_ENABLED": "false",
    }


@contextmanager
def _data_dir(given: Path | None) -> Iterator[Path]:
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="deskpilot-eval-crawl-") as folder:
        yield Path(folder)


@contextmanager
def _running_stack(data_dir: Path, env: dict[str, str]) -> Iterator[Any]:
    """The whole stack as ``deskpilot up`` starts it, crawler on."""
    from deploy.runner import RunnerSettings, Stack, free_port

    settings = RunnerSettings(data_dir=data_dir, crawler="on", ready_timeout_s=900)
    stack = Stack(settings, port=free_port(), extra_env=env, say=say)
    try:
        stack.start()
        if not stack.wait_ready():
            raise EvalSetupError(
                f"the stack did not become healthy ({stack.not_ready()}); its logs: "
                f"{data_dir / 'logs'}"
            )
        yield stack
    finally:
        stack.stop()


def indexer_backlog(redis_url: str) -> int:
    """Crawled pages the indexer has not indexed yet: its group's entries not yet delivered
    (lag) and those delivered but not acknowledged (pending) on ``pages.crawled``."""
    import redis

    from contracts.topics import Group, Topic

    client = redis.Redis.from_url(redis_url)
    try:
        groups = client.xinfo_groups(str(Topic.PAGES_CRAWLED))
    except redis.ResponseError:
        return 0  # no stream yet: nothing was crawled
    finally:
        client.close()
    for group in groups:
        name = group["name"].decode() if isinstance(group["name"], bytes) else group["name"]
        if name == str(Group.INDEXER):
            return int(group.get("lag") or 0) + int(group.get("pending") or 0)
    return 0


def settle_indexer(redis_url: str, limit_s: float = SETTLE_LIMIT_S) -> dict[str, Any]:
    """Wait until the indexer has indexed every page the first asking's crawls read, so that
    asking again measures what the stack learned; how many pages were behind and for how long
    (a first asking's turn that ended while its pages waited was answered without them)."""
    started = time.monotonic()
    behind = remaining = indexer_backlog(redis_url)
    if behind:
        say(f"waiting for the indexer: {behind} crawled pages not indexed yet ...")
    while remaining and time.monotonic() - started < limit_s:
        time.sleep(0.5)
        remaining = indexer_backlog(redis_url)
    return {
        "pages_behind": behind,
        "waited_s": round(time.monotonic() - started, 1),
        "pages_left": remaining,
    }


def ask_one(
    url: str,
    question: str,
    page: str,
    host: str,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Ask ``question`` in a new conversation of a new anonymous user and score the answer."""
    import httpx

    started = time.perf_counter()
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            anonymous = client.post("/api/anonymous")
            anonymous.raise_for_status()
            headers = {"Authorization": f"Bearer {anonymous.json()['anonymous_token']}"}
            started = time.perf_counter()
            answer = final_answer(client, headers, question)
            result = outcome(answer, page, host, time.perf_counter() - started)
    except (httpx.HTTPError, ValueError, KeyError, TimeoutError) as exc:
        result = failure(f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
    progress(
        f"{result['seconds']:6.2f} s {result['action']:<10} {_mark(result):<5} {question[:60]}"
    )
    return result


def final_answer(client: Any, headers: dict[str, str], question: str) -> dict[str, Any]:
    """``POST /api/chat``; past the gateway's wait (504 with the turn id), the turn fetched from
    ``/api/turns/{id}`` until it is done."""
    response = client.post("/api/chat", json={"text": question}, headers=headers)
    if response.status_code == 504:
        turn_id = response.json().get("turn_id")
        if not turn_id:
            raise ValueError(f"504 without a turn id: {response.text[:200]}")
        deadline = time.monotonic() + POLL_LIMIT_S
        while time.monotonic() < deadline:
            turn = client.get(f"/api/turns/{turn_id}", headers=headers)
            turn.raise_for_status()
            body = turn.json()
            if body.get("status") == "done" and body.get("answer"):
                answer: dict[str, Any] = body["answer"]
                return answer
            time.sleep(0.2)
        raise TimeoutError(f"turn {turn_id} not done after {POLL_LIMIT_S:.0f} s more")
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result
