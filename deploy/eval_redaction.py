"""``deskpilot eval redaction --data FILE [--json]``: how much personal data the redactor finds.

Input: the presidio-research JSON format, a list of records with ``full_text`` and ``spans``
(``entity_type``, ``start_position``, ``end_position``).

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
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
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


def add_parser(evaluations: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = evaluations.add_parser(
        "redaction",
        help="recall, precision and F2 of the redactor on labelled text",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, required=True, help="presidio-research JSON file")
    parser.add_argument("--json", action="store_true")
    return parser


@dataclass
class Tally:
    found: Counter[str] = field(default_factory=Counter)
    gold: Counter[str] = field(default_factory=Counter)
    right: Counter[str] = field(default_factory=Counter)
    reported: Counter[str] = field(default_factory=Counter)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def score(records: list[dict[str, Any]], detect: Any) -> Tally:
    """Count found gold spans and right reports over ``records`` with ``detect(text)``."""
    tally = Tally()
    for record in records:
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
        for kind, span in reported:
            tally.reported[kind] += 1
            if any(_overlaps(span, other) for _, other in gold):
                tally.right[kind] += 1
    return tally


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _f2(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None or precision + recall == 0:
        return None
    return round(5 * precision * recall / (4 * precision + recall), 4)


def report(tally: Tally, seconds: float, records: int) -> dict[str, Any]:
    found = sum(tally.found[kind] for kind in IN_SCOPE)
    gold = sum(tally.gold[kind] for kind in IN_SCOPE)
    recall = _ratio(found, gold)
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
    return {
        "records": records,
        "in_scope": list(IN_SCOPE),
        "recall": recall,
        "precision": precision,
        "f2": _f2(precision, recall),
        "per_type": per_type,
        "messages_per_s": round(records / seconds, 1) if seconds else None,
        "targets": {
            "recall_at_least_0_92": recall is not None and recall >= RECALL_TARGET,
            "precision_at_least_0_85": precision is not None and precision >= PRECISION_TARGET,
        },
    }


def run_eval_redaction(args: argparse.Namespace) -> int:
    path: Path = args.data
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"deskpilot eval redaction: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(records, list) or not all(
        isinstance(r, dict) and "full_text" in r for r in records
    ):
        print(
            f"deskpilot eval redaction: {path} is not a list of records with full_text and spans",
            file=sys.stderr,
        )
        return 2
    from redactor.config import RedactorSettings
    from redactor.service import Redactor

    redactor = Redactor(RedactorSettings())
    started = time.perf_counter()
    tally = score(records, redactor.detect)
    result = report(tally, time.perf_counter() - started, len(records))
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{result['records']} records: recall {result['recall']} over {', '.join(IN_SCOPE)}; "
        f"precision {result['precision']}; F2 {result['f2']}; {result['messages_per_s']} texts/s"
    )
    for kind, row in result["per_type"].items():
        scope = "in scope" if row["in_scope"] else "not in scope"
        print(
            f"  {kind:<18} gold {row['gold']:>4} recall {row['recall']}  "
            f"reported {row['reported']:>4} precision {row['precision']}  F2 {row['f2']} ({scope})"
        )
    print(f"targets: {result['targets']}")
    return 0
