"""``deskpilot``: run the stack, feed it knowledge, ask it, measure it, operate it."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any


def _data_dir_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where Redis's AOF, Chroma and logs live "
        "(default: $DESKPILOT_DATA_DIR or ~/.deskpilot)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deskpilot", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help="start the whole stack on embedded defaults")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--verbose", action="store_true", help="stream service logs to the terminal")
    _data_dir_arg(up)

    ingest = commands.add_parser("ingest", help="index a folder or file of HTML, Markdown, text")
    ingest.add_argument("path", type=Path)
    ingest.add_argument("--json", action="store_true")
    _data_dir_arg(ingest)

    ask = commands.add_parser("ask", help="ask the running stack a question")
    ask.add_argument("question")
    ask.add_argument("--url", default="http://127.0.0.1:8000")
    ask.add_argument("--conversation-id", default=None)
    ask.add_argument("--json", action="store_true", help="print exactly the /api/chat response")
    ask.add_argument("--timeout", type=float, default=60.0)

    bench = commands.add_parser("bench", help="benchmarks")
    bench_kinds = bench.add_subparsers(dest="kind", required=True)
    chat = bench_kinds.add_parser("chat", help="turn latency and throughput, and the floor")
    chat.add_argument("--turns", type=int, default=200)
    chat.add_argument("--concurrency", type=int, default=8)
    chat.add_argument("--url", default="http://127.0.0.1:8000")
    chat.add_argument("--json", action="store_true")
    chat.add_argument("--skip-floor", action="store_true")
    _data_dir_arg(chat)

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
        _data_dir_arg(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        from deploy.runner import up

        return up(args.data_dir, args.port, args.host, args.verbose)
    if args.command == "ingest":
        return _ingest(args)
    if args.command == "ask":
        return _ask(args)
    if args.command == "bench":
        from deploy.bench import run_chat_bench

        return run_chat_bench(args)
    if args.command == "dlq":
        from deploy.dlq import run_dlq

        return asyncio.run(run_dlq(args))
    return 2


def _ingest(args: argparse.Namespace) -> int:
    from deploy.runner import RunnerSettings, read_runtime
    from indexer.config import IndexerSettings
    from indexer.embedding import Embedder
    from indexer.service import Ingestor
    from indexer.store import open_collection

    if not args.path.exists():
        print(f"deskpilot ingest: {args.path} does not exist", file=sys.stderr)
        return 2
    overrides: dict[str, Any] = {"data_dir": args.data_dir} if args.data_dir else {}
    settings = IndexerSettings(**overrides)
    runtime = read_runtime(RunnerSettings(**overrides).data_dir.expanduser().resolve())
    if not settings.chroma_host and runtime:
        # A stack runs on this data dir: write through its Chroma server, never beside it.
        settings = settings.model_copy(
            update={"chroma_host": runtime["chroma_host"], "chroma_port": runtime["chroma_port"]}
        )
    ingestor = Ingestor(Embedder.from_settings(settings), open_collection(settings), settings)
    report = ingestor.ingest_path(args.path)
    summary = {
        "files_seen": report.files_seen,
        "files_indexed": report.files_indexed,
        "files_unchanged": report.files_unchanged,
        "files_skipped": report.files_skipped,
        "chunks_written": report.chunks_written,
        "chunks_deleted": report.chunks_deleted,
        "seconds": round(report.seconds, 2),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(", ".join(f"{key}={value}" for key, value in summary.items()))
    return 0


def _ask(args: argparse.Namespace) -> int:
    import httpx

    payload: dict[str, Any] = {"text": args.question}
    if args.conversation_id:
        payload["conversation_id"] = args.conversation_id
    try:
        response = httpx.post(f"{args.url}/api/chat", json=payload, timeout=args.timeout)
    except httpx.HTTPError as exc:
        print(f"deskpilot ask: cannot reach {args.url}: {exc}", file=sys.stderr)
        return 2
    body = response.json()
    if args.json:
        print(json.dumps(body))
        return 0 if response.is_success else 1
    if not response.is_success:
        print(f"error {response.status_code}: {body.get('detail')}", file=sys.stderr)
        return 1
    print(body["answer"])
    if body["citations"]:
        print()
        for citation in body["citations"]:
            print(f"[{citation['n']}] {citation['title']} — {citation['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
