"""``deskpilot``: run the stack, feed it knowledge, ask it, measure it, operate it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable

from deploy.cli.stackaccess import add_data_dir_argument

Runner = Callable[[argparse.Namespace], int]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Runner]]:
    """The parser, and for each command path ("eval intents") the function that runs it."""
    from deploy.bench import crawl as bench_crawl
    from deploy.bench import permissions as bench_permissions
    from deploy.bench import start as bench_start
    from deploy.cli import (
        ask,
        asyncapi,
        cases,
        crawl,
        ingest,
        purge,
        redact,
        reindex,
        sources,
        teams,
        tickets,
    )
    from deploy.evals import (
        crawl_answer,
        critique,
        escalation,
        intents,
        ocr,
        redaction,
        retrieval,
        screenshots,
    )

    parser = argparse.ArgumentParser(prog="deskpilot", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    runners: dict[str, Runner] = {}

    up = commands.add_parser("up", help="start the whole stack on embedded defaults")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--verbose", action="store_true", help="stream service logs to the terminal")
    add_data_dir_argument(up)
    runners["up"] = _up

    ingest.add_parser(commands)
    runners["ingest"] = ingest.run_ingest
    reindex.add_parser(commands)
    runners["reindex"] = reindex.run_reindex
    cases.add_parser(commands)
    runners["cases"] = cases.run_cases
    tickets.add_parser(commands)
    runners["tickets"] = tickets.run_tickets
    crawl.add_parser(commands)
    runners["crawl"] = crawl.run_crawl
    sources.add_parser(commands)
    runners["sources"] = sources.run_sources

    ask.add_parser(commands)
    runners["ask"] = ask.run_ask

    bench = commands.add_parser("bench", help="benchmarks")
    bench_kinds = bench.add_subparsers(dest="kind", required=True)
    chat = bench_kinds.add_parser("chat", help="turn latency and throughput, and the floor")
    chat.add_argument("--turns", type=int, default=200)
    chat.add_argument("--concurrency", type=int, default=8)
    chat.add_argument("--url", default="http://127.0.0.1:8000")
    chat.add_argument("--json", action="store_true")
    chat.add_argument("--skip-floor", action="store_true")
    add_data_dir_argument(chat)
    runners["bench chat"] = _bench_chat
    bench_crawl.add_parser(bench_kinds)
    runners["bench crawl"] = bench_crawl.run_crawl_bench
    bench_start.add_parser(bench_kinds)
    runners["bench start"] = bench_start.run_start_bench
    bench_permissions.add_parser(bench_kinds)
    runners["bench permissions"] = bench_permissions.run_permissions_bench

    evaluate = commands.add_parser("eval", help="quality evaluations")
    evaluations = evaluate.add_subparsers(dest="kind", required=True)
    retrieval.add_parser(evaluations)
    runners["eval retrieval"] = retrieval.run_eval_retrieval
    intents.add_parser(evaluations)
    runners["eval intents"] = intents.run_eval_intents
    escalation.add_parser(evaluations)
    runners["eval escalation"] = escalation.run_eval_escalation
    redaction.add_parser(evaluations)
    runners["eval redaction"] = redaction.run_eval_redaction
    ocr.add_parser(evaluations)
    runners["eval ocr"] = ocr.run_eval_ocr
    crawl_answer.add_parser(evaluations)
    runners["eval crawl-answer"] = crawl_answer.run_eval_crawl_answer
    critique.add_parser(evaluations)
    runners["eval critique"] = critique.run_eval_critique
    screenshots.add_parser(commands)
    runners["screenshots"] = screenshots.run_screenshots

    redact.add_parser(commands)
    runners["redact"] = redact.run_redact
    purge.add_parser(commands)
    runners["purge"] = purge.run_purge
    asyncapi.add_parser(commands)
    runners["asyncapi"] = asyncapi.run_asyncapi
    teams.add_parser(commands)
    runners["teams-app"] = teams.run_teams_app

    dlq = commands.add_parser("dlq", help="inspect and replay dead-letter streams")
    dlq_actions = dlq.add_subparsers(dest="action", required=True)
    dlq_list = dlq_actions.add_parser("list", help="show dead-lettered messages of a topic")
    dlq_list.add_argument("topic")
    dlq_list.add_argument("--count", type=int, default=20)
    dlq_replay = dlq_actions.add_parser("replay", help="put dead-lettered messages back")
    dlq_replay.add_argument("topic")
    dlq_replay.add_argument("--id", dest="entry_ids", action="append", default=None)
    for sub in (dlq_list, dlq_replay):
        sub.add_argument("--redis-url", default=None)
        add_data_dir_argument(sub)
    runners["dlq"] = _dlq
    return parser, runners


def main(argv: list[str] | None = None) -> int:
    parser, runners = build_parser()
    args = parser.parse_args(argv)
    kind = getattr(args, "kind", None)
    runner = runners.get(f"{args.command} {kind}") or runners[args.command]
    return runner(args)


def _up(args: argparse.Namespace) -> int:
    from deploy.runner import up

    return up(args.data_dir, args.port, args.host, args.verbose)


def _bench_chat(args: argparse.Namespace) -> int:
    from deploy.bench.chat import run_chat_bench

    return run_chat_bench(args)


def _dlq(args: argparse.Namespace) -> int:
    from deploy.cli.dlq import run_dlq

    return asyncio.run(run_dlq(args))


if __name__ == "__main__":
    sys.exit(main())
