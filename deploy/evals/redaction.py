"""``deskpilot eval redaction --data FILE [--json]``: how much personal data the redactor finds.

Input, either of:

* the presidio-research JSON format, a list of records with ``full_text`` and ``spans``
  (``entity_type``, ``start_position``, ``end_position``);
* Deskpilot's marked-up text format (``redactor/tests/data/secrets_pii.*.txt``): records that
  start with a line ``=== <kind>`` (chat, email, log, config, shell), the text on the lines
  after it, and every value to redact marked inline as ``⟦TYPE|value⟧``. A record without a
  mark is a near miss: anything reported in it is a false positive.

* **Recall** per gold type: a labelled span counts as found when any span the redactor reports
  overlaps it (whatever type the redactor gives it: a redacted value is gone either way). The
  overall recall is over the in-scope types only (:data:`IN_SCOPE`, target >= 0.92).
* **Precision** per reported type and overall: a reported span is right when it overlaps any
  labelled span, of any type (target >= 0.85). A report on text nobody labelled is a false
  positive, even when it is a product name the allow-list missed.
* F2 weighs recall twice as much as precision: a missed value leaks, an extra placeholder only
  costs some context.

The dataset's type names map to the redactor's in one table (:data:`TYPE_MAP`); types with no
counterpart are reported for recall but are not in scope.

Two more recalls split the gold spans by what they are: **secrets recall** over passwords,
PINs, keys, tokens and credentials (:data:`SECRET_TYPES`, target >= 0.98) and **PII recall** over
personal data (:data:`PII_TYPES`, target >= 0.95); each is ``None`` for a file without such spans.
Near misses (records with no gold span) that still got a report are counted, per source kind.

Wrong reports (on text nobody labelled) are counted per reported type, and those that hold an
internal host name (``REDACTOR_HOSTNAME_PATTERNS``) apart: company policy redacts internal host
names, which a data set may leave unlabelled, so the report also gives the precision without
them, to show how much of the wrong reports is that policy and how much is mistakes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Dataset type -> the redactor's type(s) for it. Recall is type-agnostic (above); the table says
# which gold types the redactor is meant to cover, and names the counterpart for the report.
TYPE_MAP: dict[str, tuple[str, ...]] = {
    "PERSON": ("PERSON",),
    "STREET_ADDRESS": ("STREET_ADDRESS", "LOCATION"),
    "GPE": ("LOCATION",),
    "CREDIT_CARD": ("CREDIT_CARD",),
    "PHONE_NUMBER": ("PHONE_NUMBER",),
    "EMAIL_ADDRESS": ("EMAIL_ADDRESS",),
    "IBAN_CODE": ("IBAN_CODE",),
    "IP_ADDRESS": ("IP_ADDRESS",),
    "US_SSN": ("US_SSN",),
    "US_DRIVER_LICENSE": ("US_DRIVER_LICENSE",),
    "DOMAIN_NAME": ("URL",),
    "ZIP_CODE": ("LOCATION",),
}
IN_SCOPE: tuple[str, ...] = (
    "PERSON",
    "STREET_ADDRESS",
    "CREDIT_CARD",
    "PHONE_NUMBER",
    "EMAIL_ADDRESS",
    "US_SSN",
    "IBAN_CODE",
    "IP_ADDRESS",
    "US_DRIVER_LICENSE",
)
RECALL_TARGET = 0.92
PRECISION_TARGET = 0.85

# Gold types that are secrets (whatever the redactor calls them: recall is type-agnostic).
SECRET_TYPES: frozenset[str] = frozenset(
    {
        "PASSWORD", "PIN", "API_KEY", "BASIC_AUTH", "BEARER_TOKEN", "JWT", "PRIVATE_KEY",
        "CREDENTIAL_URL", "AWS_ACCESS_KEY", "AWS_SECRET_KEY", "GITHUB_TOKEN", "SLACK_TOKEN",
        "GOOGLE_API_KEY", "AZURE_KEY",
    }
)  # fmt: skip
# Gold types that are personal data about someone.
PII_TYPES: frozenset[str] = frozenset({*IN_SCOPE, "DATE_OF_BIRTH", "PASSPORT", "EMPLOYEE_ID"})
SECRETS_RECALL_TARGET = 0.98
PII_RECALL_TARGET = 0.95

_RECORD_HEADER = re.compile(r"^=== ?(?P<kind>[\w-]*)\s*$")
_MARK = re.compile(r"⟦(?P<type>[A-Z][A-Z0-9_]*)\|(?P<value>[^⟧]*)⟧")


class DataFormatError(ValueError):
    """The file is neither presidio-research JSON nor the marked-up text format."""


def parse_marked_up(text: str) -> list[dict[str, Any]]:
    """Records of the marked-up text format, as presidio-research records plus their ``kind``.

    Lines before the first ``===`` header are the file's comments. A record's text is its lines
    without the marks, with trailing blank lines dropped; each ``⟦TYPE|value⟧`` becomes a span
    over ``value``.
    """
    records: list[dict[str, Any]] = []
    kind: str | None = None
    body: list[str] = []

    def close() -> None:
        if kind is None:
            return
        marked = "\n".join(body).rstrip("\n")
        if not marked.strip():
            raise DataFormatError(f"record {len(records) + 1} ({kind}) has no text")
        records.append({**_unmark(marked, len(records) + 1), "kind": kind})

    for line in text.splitlines():
        header = _RECORD_HEADER.match(line)
        if header:
            close()
            kind, body = header.group("kind") or "text", []
        elif kind is not None:
            body.append(line)
    close()
    if not records:
        raise DataFormatError("no record: a record starts with a line '=== <kind>'")
    return records


def _unmark(marked: str, number: int) -> dict[str, Any]:
    pieces: list[str] = []
    spans: list[dict[str, Any]] = []
    cursor = length = 0
    for mark in _MARK.finditer(marked):
        before = marked[cursor : mark.start()]
        pieces.append(before)
        length += len(before)
        value = mark.group("value")
        if not value:
            raise DataFormatError(f"record {number}: an empty mark {mark.group(0)!r}")
        spans.append(
            {
                "entity_type": mark.group("type"),
                "start_position": length,
                "end_position": length + len(value),
            }
        )
        pieces.append(value)
        length += len(value)
        cursor = mark.end()
    pieces.append(marked[cursor:])
    full_text = "".join(pieces)
    if "⟦" in full_text or "⟧" in full_text:
        raise DataFormatError(f"record {number}: a mark is not closed or has no TYPE|")
    return {"full_text": full_text, "spans": spans}


def load_records(path: Path) -> list[dict[str, Any]]:
    """The labelled records of ``path`` in either format (see the module's docstring)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except ValueError as exc:
            raise DataFormatError(f"not valid JSON: {exc}") from exc
        if not isinstance(records, list) or not all(
            isinstance(r, dict) and "full_text" in r for r in records
        ):
            raise DataFormatError("not a list of records with full_text and spans")
        return records
    if any(_RECORD_HEADER.match(line) for line in text.splitlines()):
        return parse_marked_up(text)
    raise DataFormatError(
        "not a list of records with full_text and spans, nor records marked up as '=== <kind>'"
    )


def add_parser(evaluations: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = evaluations.add_parser(
        "redaction",
        help="recall, precision and F2 of the redactor on labelled text",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="presidio-research JSON file, or a file in the marked-up text format",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--show-misses",
        action="store_true",
        help="also list the record numbers of missed spans and of reports on unlabelled text",
    )
    return parser


@dataclass
class Tally:
    found: Counter[str] = field(default_factory=Counter)
    gold: Counter[str] = field(default_factory=Counter)
    right: Counter[str] = field(default_factory=Counter)
    reported: Counter[str] = field(default_factory=Counter)
    near_misses: Counter[str] = field(default_factory=Counter)
    """Records without gold spans, per source kind."""
    near_misses_reported: Counter[str] = field(default_factory=Counter)
    """Of those, the ones with a report, per source kind."""
    missed: list[tuple[str, str]] = field(default_factory=list)
    """(gold type, record number) of every gold span not found, for ``--show-misses``."""
    false_positives: list[tuple[str, str]] = field(default_factory=list)
    """(reported type, record number) of every report on unlabelled text."""
    wrong: Counter[str] = field(default_factory=Counter)
    """Reports on unlabelled text, per reported type."""
    wrong_on_internal_hosts: Counter[str] = field(default_factory=Counter)
    """Of those, the ones that hold an internal host name, per reported type."""


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def score(
    records: list[dict[str, Any]],
    detect: Any,
    internal_host: Callable[[str], bool] | None = None,
) -> Tally:
    """Count found gold spans and right reports over ``records`` with ``detect(text)``;
    ``internal_host`` says whether a wrongly reported value holds an internal host name."""
    tally = Tally()
    for number, record in enumerate(records, start=1):
        text = str(record["full_text"])
        gold = [
            (str(s["entity_type"]), (int(s["start_position"]), int(s["end_position"])))
            for s in record.get("spans") or []
        ]
        reported = [(d.entity_type, (d.start, d.end)) for d in detect(text)]
        for kind, span in gold:
            tally.gold[kind] += 1
            if any(_overlaps(span, other) for _, other in reported):
                tally.found[kind] += 1
            else:
                tally.missed.append((kind, f"#{number}"))
        for kind, span in reported:
            tally.reported[kind] += 1
            if any(_overlaps(span, other) for _, other in gold):
                tally.right[kind] += 1
            else:
                tally.false_positives.append((kind, f"#{number}"))
                tally.wrong[kind] += 1
                if internal_host is not None and internal_host(text[span[0] : span[1]]):
                    tally.wrong_on_internal_hosts[kind] += 1
        if not gold:
            source = str(record.get("kind", "text"))
            tally.near_misses[source] += 1
            if reported:
                tally.near_misses_reported[source] += 1
    return tally


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _f2(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None or precision + recall == 0:
        return None
    return round(5 * precision * recall / (4 * precision + recall), 4)


def _recall_over(tally: Tally, kinds: frozenset[str] | tuple[str, ...]) -> float | None:
    return _ratio(sum(tally.found[k] for k in kinds), sum(tally.gold[k] for k in kinds))


def report(tally: Tally, seconds: float, records: int) -> dict[str, Any]:
    recall = _recall_over(tally, IN_SCOPE)
    secrets_recall = _recall_over(tally, SECRET_TYPES)
    pii_recall = _recall_over(tally, PII_TYPES)
    precision = _ratio(sum(tally.right.values()), sum(tally.reported.values()))
    per_type: dict[str, dict[str, Any]] = {}
    for kind in sorted(set(tally.gold) | set(tally.reported)):
        kind_recall = _ratio(tally.found[kind], tally.gold[kind])
        kind_precision = _ratio(tally.right[kind], tally.reported[kind])
        per_type[kind] = {
            "gold": tally.gold[kind],
            "recall": kind_recall,
            "reported": tally.reported[kind],
            "precision": kind_precision,
            "f2": _f2(kind_precision, kind_recall),
            "in_scope": kind in IN_SCOPE,
            "ours": list(TYPE_MAP.get(kind, ())),
        }
    targets = {
        "recall_at_least_0_92": recall is not None and recall >= RECALL_TARGET,
        "precision_at_least_0_85": precision is not None and precision >= PRECISION_TARGET,
    }
    if secrets_recall is not None:
        targets["secrets_recall_at_least_0_98"] = secrets_recall >= SECRETS_RECALL_TARGET
    if pii_recall is not None:
        targets["pii_recall_at_least_0_95"] = pii_recall >= PII_RECALL_TARGET
    near_misses = {
        kind: {"records": n, "reported": tally.near_misses_reported[kind]}
        for kind, n in sorted(tally.near_misses.items())
    }
    on_hosts = sum(tally.wrong_on_internal_hosts.values())
    return {
        "records": records,
        "in_scope": list(IN_SCOPE),
        "recall": recall,
        "secrets_recall": secrets_recall,
        "pii_recall": pii_recall,
        "precision": precision,
        "f2": _f2(precision, recall),
        "per_type": per_type,
        "near_misses": near_misses,
        "wrong_reports": dict(sorted(tally.wrong.items())),
        "wrong_reports_on_internal_hosts": on_hosts,
        "precision_without_internal_hosts": _ratio(
            sum(tally.right.values()), sum(tally.reported.values()) - on_hosts
        ),
        "messages_per_s": round(records / seconds, 1) if seconds else None,
        "targets": targets,
    }


def run_eval_redaction(args: argparse.Namespace) -> int:
    path: Path = args.data
    try:
        records = load_records(path)
    except DataFormatError as exc:
        print(f"deskpilot eval redaction: {path}: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"deskpilot eval redaction: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    from deploy.cli.redact import load_redactor
    from redactor.config import RedactorSettings

    settings = RedactorSettings()
    redactor = load_redactor(settings)
    host_patterns = [re.compile(p, re.IGNORECASE) for p in settings.hostname_patterns]

    def internal_host(value: str) -> bool:
        return any(pattern.search(value) for pattern in host_patterns)

    started = time.perf_counter()
    tally = score(records, redactor.detect, internal_host)
    result = report(tally, time.perf_counter() - started, len(records))
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{result['records']} records: recall {result['recall']} over {', '.join(IN_SCOPE)}; "
        f"precision {result['precision']}; F2 {result['f2']}; {result['messages_per_s']} texts/s"
    )
    print(f"secrets recall {result['secrets_recall']}; PII recall {result['pii_recall']}")
    for source, row in result["near_misses"].items():
        print(f"  near misses ({source}): {row['reported']} of {row['records']} got a report")
    for kind, row in result["per_type"].items():
        scope = "in scope" if row["in_scope"] else "not in scope"
        print(
            f"  {kind:<18} gold {row['gold']:>4} recall {row['recall']}  "
            f"reported {row['reported']:>4} precision {row['precision']}  F2 {row['f2']} ({scope})"
        )
    wrong = ", ".join(f"{kind} {n}" for kind, n in result["wrong_reports"].items()) or "none"
    print(
        f"wrong reports per type: {wrong}; {result['wrong_reports_on_internal_hosts']} of them "
        f"hold an internal host name (redacted by policy); precision without those "
        f"{result['precision_without_internal_hosts']}"
    )
    print(f"targets: {result['targets']}")
    if getattr(args, "show_misses", False):
        for kind, where in tally.missed:
            print(f"  missed {kind} in record {where}")
        for kind, where in tally.false_positives:
            print(f"  reported {kind} on unlabelled text in record {where}")
    return 0
