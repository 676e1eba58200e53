"""How much the redactor flags in real IT-support text that holds no personal data worth removing.

Run ``python -m redactor.tests.it_false_positives`` from the repository root, next to the shared
data folder (or pass ``--intents`` and ``--tickets``). It redacts every utterance of the Rasa
help-desk NLU file and every ticket of the IT ticket categories file (lower-cased ticket text) and
prints how many spans of each entity type were reported: in this text every PERSON, LOCATION or
STREET_ADDRESS is a false positive (product names, places in the office, version numbers), so the
counts should stay low and be compared before and after a change of recognizers. ``--show N``
prints the first N flagged spans of each type with their sentence, to see what went wrong.

Not collected by pytest (it takes about a minute over 8,000 tickets on one core); the unit tests
pin the individual cases (``test_recognizers.py``).
"""

from __future__ import annotations

import argparse
import csv
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml

from redactor.config import RedactorSettings
from redactor.service import Redactor
from tests.support import SHARED_DATA

_ENTITY_MARKUP = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def intent_utterances(path: Path) -> list[str]:
    """The examples of every intent in a Rasa NLU file, entity mark-up removed."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    utterances = []
    for block in document.get("nlu", []):
        if "intent" not in block:
            continue
        for line in str(block.get("examples", "")).splitlines():
            text = line.strip().removeprefix("- ").strip()
            if text:
                utterances.append(_ENTITY_MARKUP.sub(r"\1", text))
    return utterances


def ticket_texts(path: Path, limit: int | None) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = [row["Document"] for row in csv.DictReader(handle)]
    return rows[:limit] if limit else rows


def count(redactor: Redactor, texts: list[str], show: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    for text in texts:
        for found in redactor.find(text):
            kind = found.result.entity_type
            counts[kind] += 1
            if len(examples[kind]) < show:
                start, end = found.result.start, found.result.end
                examples[kind].append(
                    f"{text[start:end]!r} in {text[max(0, start - 60) : end + 60]!r}"
                )
    for kind, lines in sorted(examples.items()):
        for line in lines:
            print(f"    {kind}: {line}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--intents", type=Path, default=SHARED_DATA / "intents/rasa-helpdesk-nlu.yml"
    )
    parser.add_argument(
        "--tickets", type=Path, default=SHARED_DATA / "tickets/it-ticket-categories.train.csv"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N tickets")
    parser.add_argument("--show", type=int, default=0, help="print N examples per type")
    args = parser.parse_args()
    redactor = Redactor(RedactorSettings())
    for name, texts in (
        ("intents", intent_utterances(args.intents)),
        ("tickets", ticket_texts(args.tickets, args.limit)),
    ):
        started = time.perf_counter()
        counts = count(redactor, texts, args.show)
        seconds = time.perf_counter() - started
        flagged = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())) or "nothing"
        people = sum(counts[k] for k in ("PERSON", "LOCATION", "STREET_ADDRESS"))
        print(
            f"{name}: {len(texts)} texts, {sum(counts.values())} spans flagged "
            f"({people} person/location/address): {flagged} [{seconds:.1f} s]"
        )


if __name__ == "__main__":
    main()
