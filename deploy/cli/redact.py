"""``deskpilot redact [FILE|-] [--json]``: the redactor on text, one text per line, offline.

Without ``--json`` each line comes back redacted; with it, one JSON object per line:
``{"text": <redacted>, "entities": [{"type", "start", "end", "score"}]}``, offsets into the input
line. The values found are never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from redactor.config import RedactorSettings
    from redactor.service import Redactor


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "redact",
        help="redact text, one text per line (a file or standard input)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", nargs="?", default="-", help="a text file, or - (the default)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    return parser


def run_redact(args: argparse.Namespace) -> int:
    source = str(args.file)
    if source != "-" and not Path(source).is_file():
        print(f"deskpilot redact: {source} is not a file", file=sys.stderr)
        return 2
    from redactor.config import RedactorSettings

    redactor = load_redactor(RedactorSettings())
    if source == "-":
        return _redact_lines(redactor, sys.stdin, args.json)
    with open(source, encoding="utf-8", errors="replace") as handle:
        return _redact_lines(redactor, handle, args.json)


def load_redactor(settings: RedactorSettings) -> Redactor:
    """The redactor ``deskpilot redact`` runs and ``deskpilot eval redaction`` measures. Loading
    spaCy and building the recognizers costs seconds of CPU, so a process builds one (tests that
    run the commands in-process put one shared redactor here)."""
    from redactor.service import Redactor

    return Redactor(settings)


def _redact_lines(redactor: Any, lines: TextIO, as_json: bool) -> int:
    for raw in lines:
        line = raw.rstrip("\n")
        redacted = redactor.redact(line).text
        if as_json:
            entities = [
                {"type": d.entity_type, "start": d.start, "end": d.end, "score": d.score}
                for d in redactor.detect(line)
            ]
            print(json.dumps({"text": redacted, "entities": entities}, ensure_ascii=False))
        else:
            print(redacted)
        sys.stdout.flush()
    return 0
