"""``deskpilot reindex``: rebuild the knowledge-base collection from the document store.

See :mod:`indexer.reindex` for what is rebuilt and when a document is embedded again.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from deploy.cli.stackaccess import add_data_dir_argument, add_redis_url_argument, locate


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``reindex`` to ``deskpilot``'s sub-commands (``parser.add_subparsers()``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "reindex",
        help="rebuild the knowledge base from the stored documents (after changing chunking)",
        description=__doc__,
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="embed every document again, even unchanged ones (after changing the model)",
    )
    parser.add_argument(
        "--keep-orphans",
        action="store_true",
        help="keep chunks of documents the store does not know (e.g. ingested without Redis)",
    )
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    add_redis_url_argument(parser)
    add_data_dir_argument(parser)
    parser.set_defaults(run=run_reindex)
    return parser


def run_reindex(args: argparse.Namespace) -> int:
    from redis.exceptions import RedisError

    from indexer.documents import DocumentStore
    from indexer.embedding import Embedder
    from indexer.reindex import EmptyStore, reindex
    from indexer.service import Ingestor
    from indexer.store import open_collection

    target = locate(args.data_dir, args.redis_url)
    if target.redis_url is None:
        print(
            "deskpilot reindex: the documents are stored in Redis, and no stack runs on this data "
            "directory; start it (deskpilot up) or pass --redis-url",
            file=sys.stderr,
        )
        return 2
    store = DocumentStore.from_url(target.redis_url)
    try:
        store.ping()
    except (RedisError, OSError) as exc:
        print(f"deskpilot reindex: cannot reach Redis ({type(exc).__name__})", file=sys.stderr)
        return 2
    settings = target.settings
    collection = open_collection(settings)
    ingestor = Ingestor(Embedder.from_settings(settings), collection, settings)
    try:
        report = reindex(
            ingestor, collection, store, force=args.force, remove_orphans=not args.keep_orphans
        )
    except EmptyStore as exc:
        print(
            f"deskpilot reindex: {exc}. Ingest the documents again first (deskpilot ingest), "
            "or pass --keep-orphans.",
            file=sys.stderr,
        )
        return 1
    finally:
        store.close()
    summary = report.summary()
    if args.json:
        print(json.dumps(summary))
    else:
        print(", ".join(f"{key}={value}" for key, value in summary.items()))
    return 0
