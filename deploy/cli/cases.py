"""``deskpilot cases import FILE``: load resolved tickets into the past-cases collection.

The file is CSV (header row) or JSON; see :mod:`indexer.cases` for the columns. Bad rows are
reported with their row (CSV line) or item number and skipped; the good rows are imported.
Importing is idempotent: unchanged tickets are not embedded or written again.

Exit status: 0 when every row was imported, 1 when some rows were rejected, 2 when the file
could not be imported at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from deploy.cli.stackaccess import add_data_dir_argument, locate


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``cases`` (with ``import``) to ``deskpilot``'s sub-commands."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cases", help="manage past cases (resolved tickets)", description=__doc__
    )
    actions = parser.add_subparsers(dest="cases_action", required=True)
    importer = actions.add_parser(
        "import", help="import resolved tickets from a CSV or JSON file", description=__doc__
    )
    importer.add_argument("file", type=Path)
    importer.add_argument("--json", action="store_true", help="print the outcome as JSON")
    add_data_dir_argument(importer)
    parser.set_defaults(run=run_cases)
    return parser


def run_cases(args: argparse.Namespace) -> int:
    if args.cases_action == "import":
        return _import(args)
    return 2


def _import(args: argparse.Namespace) -> int:
    from indexer.cases import CaseFileError, CaseStore, open_cases_collection, read_cases
    from indexer.embedding import Embedder

    try:
        parsed = read_cases(args.file)
    except CaseFileError as exc:
        print(f"deskpilot cases import: {exc}", file=sys.stderr)
        return 2
    for problem in parsed.problems:
        print(f"{args.file.name}: {problem}", file=sys.stderr)
    if parsed.ignored_columns:
        print(f"note: ignored column(s): {', '.join(parsed.ignored_columns)}", file=sys.stderr)

    written = unchanged = 0
    if parsed.cases:
        settings = locate(args.data_dir).settings
        store = CaseStore(Embedder.from_settings(settings), open_cases_collection(settings))
        report = store.upsert(parsed.cases)
        written, unchanged = report.written, report.unchanged
    summary = {
        "cases": len(parsed.cases),
        "written": written,
        "unchanged": unchanged,
        "rejected": len(parsed.problems),
    }
    if args.json:
        print(json.dumps({**summary, "problems": [str(p) for p in parsed.problems]}))
    else:
        print(", ".join(f"{key}={value}" for key, value in summary.items()))
    return 1 if parsed.problems else 0
