"""``deskpilot ingest``: index a folder or file, and record the documents for ``reindex``.

The same as the command line's original ingest, plus one step: when Redis is known (a stack runs
on the data directory, ``--redis-url`` or ``REDIS_URL``), every ingested document is recorded in
the document store, so ``deskpilot reindex`` can rebuild it later. Without Redis the documents are
indexed all the same and a note says they were not recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from deploy.cli.stackaccess import add_data_dir_argument, add_redis_url_argument, locate


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``ingest`` to ``deskpilot``'s sub-commands (``parser.add_subparsers()``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "ingest", help="index a folder or file of HTML, Markdown, text or PDF", description=__doc__
    )
    parser.add_argument("path", type=Path)
    parser.add_argument("--json", action="store_true")
    add_redis_url_argument(parser)
    add_data_dir_argument(parser)
    parser.set_defaults(run=run_ingest)
    return parser


def run_ingest(args: argparse.Namespace) -> int:
    from redis.exceptions import RedisError

    from indexer.documents import DocumentStore, record_ingested
    from indexer.embedding import Embedder
    from indexer.service import Ingestor
    from indexer.store import open_collection

    if not args.path.exists():
        print(f"deskpilot ingest: {args.path} does not exist", file=sys.stderr)
        return 2
    target = locate(args.data_dir, getattr(args, "redis_url", None))
    settings = target.settings
    ingestor = Ingestor(Embedder.from_settings(settings), open_collection(settings), settings)
    report = ingestor.ingest_path(args.path)

    recorded = 0
    if target.redis_url is None:
        print(
            "note: no stack runs on this data directory and no Redis is configured, so the "
            "documents were indexed but not recorded; deskpilot reindex will not know them",
            file=sys.stderr,
        )
    else:
        store = DocumentStore.from_url(target.redis_url)
        try:
            recorded = record_ingested(report, store)
        except (RedisError, OSError) as exc:
            print(
                f"note: Redis is unreachable ({type(exc).__name__}), so the documents were "
                "indexed but not recorded; deskpilot reindex will not know them",
                file=sys.stderr,
            )
        finally:
            store.close()
    summary = {
        "files_seen": report.files_seen,
        "files_indexed": report.files_indexed,
        "files_unchanged": report.files_unchanged,
        "files_skipped": report.files_skipped,
        "chunks_written": report.chunks_written,
        "chunks_deleted": report.chunks_deleted,
        "documents_recorded": recorded,
        "seconds": round(report.seconds, 2),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(", ".join(f"{key}={value}" for key, value in summary.items()))
    return 0
