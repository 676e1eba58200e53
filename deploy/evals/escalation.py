"""``deskpilot eval escalation``: does the escalation checkpoint hand over the right messages?

Every utterance of a labelled file is read as the first message of a conversation (empty
trajectory) by :class:`orchestrator.escalation.EscalationCheckpoint`: it escalates on an explicit
request for a person, ticket or escalation, or on an anger score at or over the threshold.

- **Recall** on the hand-over label (default ``human_handoff``): the share of its utterances
  escalated (target >= 95 %), with every miss listed.
- **False escalation** on every other label (target <= 5 %), with every false positive listed
  and why it escalated.
- Labels that ask for a ticket (``--ticket-labels``, default ``open_incident``: "I want to open
  an incident") are where a ticket is the expected outcome in Deskpilot, because a ticket *is*
  the hand-over to a technician. Their escalation share is reported on its own line, outside
  both targets; the strict false-escalation figure, with them counted as false positives, is
  printed too.
- A **threshold sweep**: how many utterances outside the hand-over label the anger score alone
  would escalate at other thresholds, the measurement behind the default.

Input: Rasa NLU YAML (``nlu:`` entries with ``intent:`` and an ``examples: |`` block of ``- ``
lines, entity annotations reduced to their text) or a CSV with ``text,label`` columns
(``--text-column``/``--label-column`` for others), read as ``deskpilot eval intents`` reads them.
Identical (text, label) pairs count once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from deploy.evals.intents import DataError, Utterance, deduplicate, load_utterances

HANDOFF_LABEL = "human_handoff"
TICKET_LABELS = ("open_incident",)
RECALL_TARGET = 0.95
FALSE_ESCALATION_TARGET = 0.05
SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def _rate(count: int, n: int) -> float | None:
    return round(count / n, 4) if n else None


def evaluate(
    data: Path,
    *,
    threshold: float | None = None,
    handoff_label: str = HANDOFF_LABEL,
    ticket_labels: tuple[str, ...] = TICKET_LABELS,
    text_column: str | None = None,
    label_column: str | None = None,
) -> dict[str, Any]:
    """The whole report as a dict (what ``--json`` prints)."""
    from orchestrator.escalation import (
        DEFAULT_ANGER_THRESHOLD,
        EscalationCheckpoint,
        EscalationPolicy,
    )

    read, data_format = load_utterances(data, text_column, label_column)
    utterances = deduplicate(read)
    if not utterances:
        raise DataError(f"{data} holds no utterances")
    policy = EscalationPolicy(
        anger_threshold=DEFAULT_ANGER_THRESHOLD if threshold is None else threshold
    )
    checkpoint = EscalationCheckpoint(policy=policy)
    started = time.perf_counter()
    decisions = [checkpoint.check(u.text) for u in utterances]
    seconds = time.perf_counter() - started

    def row(u: Utterance, i: int) -> dict[str, Any]:
        decision = decisions[i]
        return {
            "text": u.text,
            "label": u.label,
            "reason": decision.reason.value if decision.reason else None,
            "why": decision.reasons,
            "anger": decision.anger.score,
        }

    handoff = [i for i, u in enumerate(utterances) if u.label == handoff_label]
    tickets = [i for i, u in enumerate(utterances) if u.label in ticket_labels]
    others = [
        i
        for i, u in enumerate(utterances)
        if u.label != handoff_label and u.label not in ticket_labels
    ]
    escalated = [d.escalate for d in decisions]
    caught = sum(escalated[i] for i in handoff)
    false_positive = [i for i in others if escalated[i]]
    ticket_escalated = sum(escalated[i] for i in tickets)
    recall = _rate(caught, len(handoff))
    false_rate = _rate(len(false_positive), len(others))
    not_handoff = others + tickets
    sweep = [
        {
            "threshold": value,
            "anger_escalations_outside_handoff": sum(
                decisions[i].anger.score >= value for i in not_handoff
            ),
            "false_escalation_rate": _rate(
                sum(
                    decisions[i].request is not None or decisions[i].anger.score >= value
                    for i in others
                ),
                len(others),
            ),
            "handoff_recall": _rate(
                sum(
                    decisions[i].request is not None or decisions[i].anger.score >= value
                    for i in handoff
                ),
                len(handoff),
            ),
        }
        for value in SWEEP
    ]
    labels = sorted({u.label for u in utterances})
    return {
        "data": str(data),
        "format": data_format,
        "rows_read": len(read),
        "duplicates_removed": len(read) - len(utterances),
        "n": len(utterances),
        "anger_threshold": policy.anger_threshold,
        "handoff_recall": {
            "label": handoff_label,
            "escalated": caught,
            "n": len(handoff),
            "rate": recall,
            "by_request": sum(decisions[i].request is not None for i in handoff),
            "by_anger_only": sum(decisions[i].request is None and escalated[i] for i in handoff),
            "target": f">= {RECALL_TARGET:.0%}",
            "met": recall is not None and recall >= RECALL_TARGET,
            "misses": [row(utterances[i], i) for i in handoff if not escalated[i]],
        },
        "false_escalation": {
            "escalated": len(false_positive),
            "n": len(others),
            "rate": false_rate,
            "target": f"<= {FALSE_ESCALATION_TARGET:.0%}",
            "met": false_rate is not None and false_rate <= FALSE_ESCALATION_TARGET,
            "false_positives": [row(utterances[i], i) for i in false_positive],
        },
        "ticket_requests": {
            "labels": [label for label in ticket_labels if label in labels],
            "escalated": ticket_escalated,
            "n": len(tickets),
            "rate": _rate(ticket_escalated, len(tickets)),
            "not_escalated": [row(utterances[i], i)["text"] for i in tickets if not escalated[i]],
        },
        "strict_false_escalation": {
            "escalated": len(false_positive) + ticket_escalated,
            "n": len(not_handoff),
            "rate": _rate(len(false_positive) + ticket_escalated, len(not_handoff)),
        },
        "per_label": {
            label: {
                "n": sum(u.label == label for u in utterances),
                "escalated": sum(
                    e for u, e in zip(utterances, escalated, strict=True) if u.label == label
                ),
            }
            for label in labels
        },
        "sweep": sweep,
        "messages_per_second": round(len(utterances) / seconds, 1) if seconds else None,
    }


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def format_report(report: dict[str, Any]) -> str:
    recall, false = report["handoff_recall"], report["false_escalation"]
    tickets, strict = report["ticket_requests"], report["strict_false_escalation"]

    def verdict(row: dict[str, Any]) -> str:
        return "met" if row["met"] else "NOT MET"

    lines = [
        f"data: {report['data']} ({report['format']}), {report['rows_read']} rows read, "
        f"{report['duplicates_removed']} duplicates removed, n={report['n']}; every utterance "
        f"a first turn; anger threshold {report['anger_threshold']}",
        f"{recall['label']} recall: {recall['escalated']}/{recall['n']} = "
        f"{_pct(recall['rate'])} (target {recall['target']}: {verdict(recall)}; "
        f"{recall['by_request']} by explicit request, {recall['by_anger_only']} by anger only)",
        f"false escalation on other labels: {false['escalated']}/{false['n']} = "
        f"{_pct(false['rate'])} (target {false['target']}: {verdict(false)})",
    ]
    if tickets["n"]:
        lines += [
            f"ticket requests ({', '.join(tickets['labels'])}; a ticket is the hand-over, not "
            f"a target): {tickets['escalated']}/{tickets['n']} = {_pct(tickets['rate'])} "
            "escalated",
            f"strict false escalation (ticket requests counted as false): "
            f"{strict['escalated']}/{strict['n']} = {_pct(strict['rate'])}",
        ]
    lines.append(
        "per label escalated: "
        + ", ".join(
            f"{label} {row['escalated']}/{row['n']}" for label, row in report["per_label"].items()
        )
    )
    lines.append("threshold sweep (anger alone outside the hand-over label; false rate; recall):")
    for row in report["sweep"]:
        lines.append(
            f"  {row['threshold']:.1f}: {row['anger_escalations_outside_handoff']} by anger, "
            f"false {_pct(row['false_escalation_rate'])}, recall {_pct(row['handoff_recall'])}"
        )
    if recall["misses"]:
        lines.append(f"{recall['label']} not escalated:")
        lines += [f"  - {m['text']} (anger {m['anger']:.2f})" for m in recall["misses"]]
    if false["false_positives"]:
        lines.append("false escalations:")
        lines += [
            f"  - [{m['label']}] {m['text']} ({'; '.join(m['why'])})"
            for m in false["false_positives"]
        ]
    if tickets["not_escalated"]:
        lines.append("ticket requests not escalated: " + " | ".join(tickets["not_escalated"]))
    lines.append(f"{report['messages_per_second']} messages/s")
    return "\n".join(lines)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``escalation`` to the subparsers of ``deskpilot eval``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "escalation",
        help="hand-over recall and false-escalation rate of the escalation checkpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, required=True, help="Rasa NLU YAML or a CSV file")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--threshold", type=float, default=None, help="anger threshold (default: the policy's)"
    )
    parser.add_argument("--handoff-label", default=HANDOFF_LABEL, help="the hand-over label")
    parser.add_argument(
        "--ticket-labels",
        default=",".join(TICKET_LABELS),
        help="comma-separated labels that ask for a ticket (reported apart; '' for none)",
    )
    parser.add_argument("--text-column", default=None, help="CSV column of the text (text)")
    parser.add_argument("--label-column", default=None, help="CSV column of the label (label)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is not met")
    parser.set_defaults(run=run_eval_escalation)
    return parser


def run_eval_escalation(args: argparse.Namespace) -> int:
    if args.threshold is not None and not 0 <= args.threshold <= 1:
        print("deskpilot eval escalation: --threshold must be between 0 and 1", file=sys.stderr)
        return 2
    try:
        report = evaluate(
            args.data,
            threshold=args.threshold,
            handoff_label=args.handoff_label,
            ticket_labels=tuple(
                label.strip() for label in args.ticket_labels.split(",") if label.strip()
            ),
            text_column=args.text_column,
            label_column=args.label_column,
        )
    except (DataError, OSError) as exc:
        print(f"deskpilot eval escalation: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report) if args.json else format_report(report))
    if args.check:
        met = report["false_escalation"]["met"] and (
            report["handoff_recall"]["met"] or not report["handoff_recall"]["n"]
        )
        return 0 if met else 1
    return 0
