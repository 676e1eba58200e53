"""``deskpilot eval critique``: how much of an answer the cited passages support, in the model's
drafts and after the critique (:mod:`orchestrator.llm.critique`).

The development set (``deploy/evals/data/critique.dev.jsonl``, written for this evaluation) holds
HR and IT questions, each with its passages, a draft answer that cites them ([n]) and mixes
supported and unsupported sentences, and a label per part of the draft (as
:func:`orchestrator.llm.sentences.split_answer` cuts it): supported by the passages or not.

**The support metric** needs no model: a sentence is supported when at least
:data:`RECALL_THRESHOLD` of its content words (stemmed, stop words and citation markers left out)
occur in the passages it cites (all passages when it cites none). Unsupported sentences in these
drafts add a fact (a number, a deadline, a channel, a benefit) whose words the passages do not
hold, while a sentence-embedding similarity would score such a sentence high, since it is about
the same topic as its passage. The report shows how well the metric agrees with the labels.

**The pipeline** is the one a turn runs: the draft is cut into parts, judged, the unsupported
parts removed, citations grounded again, and the confidence applied. By default the judge is
*scripted* from the labels (an oracle, with the share of supported parts as its confidence):
the figures then measure the pipeline (splitting, removal, re-grounding, the fallback to the
extractive answer, the not-sure answers), not a model's judgement. With ``--llm`` the configured
model (``LLM_BASE_URL``, ``LLM_MODEL``, ``LLM_API_KEY``) judges instead; its misses and false
alarms show up as supported parts removed and unsupported parts kept, which is what a real model
adds to the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEV_SET = Path(__file__).parent / "data" / "critique.dev.jsonl"
RECALL_THRESHOLD = 0.6
MIN_CONFIDENCE = 0.5
_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_MARKER = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_STOP = frozenset(
    [
        "a",
        "about",
        "after",
        "all",
        "also",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "before",
        "by",
        "can",
        "do",
        "does",
        "each",
        "either",
        "for",
        "from",
        "get",
        "gets",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "must",
        "my",
        "need",
        "needs",
        "no",
        "not",
        "of",
        "on",
        "once",
        "one",
        "or",
        "our",
        "per",
        "so",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "up",
        "use",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "within",
        "you",
        "your",
        "yourself",
    ]
)
_STEP_NUMBER = re.compile(r"^\s*\d+[.)]\s+")


class DataError(ValueError):
    """The development set cannot be read as this evaluation needs it."""


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    passages: list[tuple[str, str]]
    draft: str
    supported: list[bool]


def load(path: Path) -> list[Item]:
    """The items of a development set; each label list must match the draft's parts."""
    from orchestrator.llm.sentences import split_answer

    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            item = Item(
                id=str(raw["id"]),
                question=str(raw["question"]),
                passages=[(str(p["title"]), str(p["text"])) for p in raw["passages"]],
                draft=str(raw["draft"]),
                supported=[bool(flag) for flag in raw["supported"]],
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{path}:{number}: not an item ({type(exc).__name__}: {exc})") from None
        if not item.passages:
            raise DataError(f"{path}:{number} ({item.id}): no passages")
        parts = len(split_answer(item.draft).parts)
        if parts != len(item.supported):
            raise DataError(
                f"{path}:{number} ({item.id}): {len(item.supported)} labels for {parts} parts"
            )
        items.append(item)
    if not items:
        raise DataError(f"{path} holds no items")
    return items


def content_words(text: str) -> set[str]:
    """The stemmed words of ``text`` that carry its content."""
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    words = [w for w in _WORD.findall(_MARKER.sub(" ", text.lower())) if w not in _STOP]
    return set(stemmer.stemWords(words))


def supported_by(sentence: str, passages: Sequence[str]) -> bool:
    """The metric: enough of the sentence's content words are in the passages it cites."""
    cited = {int(n) for group in _MARKER.findall(sentence) for n in re.split(r"[,;]", group)}
    chosen = [passages[n - 1] for n in sorted(cited) if 1 <= n <= len(passages)] or passages
    words = content_words(sentence)
    if not words:
        return True
    held = content_words(" ".join(chosen))
    return len(words & held) / len(words) >= RECALL_THRESHOLD


class _DraftThenJudge:
    """An LLM provider for one item: it "writes" the item's draft, and judges it with the
    labels (scripted) or passes the critique to a real model."""

    name = "eval"
    enabled = True

    def __init__(self, item: Item, judge: Any) -> None:
        self.item = item
        self.judge = judge

    async def stream(self, messages: Sequence[Any]) -> AsyncGenerator[str, None]:
        yield self.item.draft

    async def chat(self, messages: Sequence[Any], *, json_mode: bool = False) -> str:
        if self.judge is not None:
            return str(await self.judge.chat(messages, json_mode=json_mode))
        labels = self.item.supported
        parts = [{"n": n, "supported": flag} for n, flag in enumerate(labels, start=1)]
        return json.dumps({"parts": parts, "confidence": round(sum(labels) / len(labels), 3)})

    async def aclose(self) -> None:
        return None


async def _evaluate(items: list[Item], judge: Any, min_confidence: float) -> dict[str, Any]:
    from contracts.events import Action, AnswerBody, Citation
    from orchestrator.llm.critique import (
        OFFER_TECHNICIAN,
        UNSURE_WITH_SUPPORT,
        critiqued_answer,
    )
    from orchestrator.llm.sentences import split_answer
    from orchestrator.retrieval import Hit

    totals = {"draft": [0, 0, 0], "after": [0, 0, 0]}  # parts, labelled supported, metric says
    agreement = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    outcomes: dict[str, int] = {}
    unsure = 0
    rows = []
    for item in items:
        hits = [
            Hit(f"{item.id}#{n}", text, f"devset://{item.id}/{n}", title, title, 0.8)
            for n, (title, text) in enumerate(item.passages, start=1)
        ]
        texts = [text for _, text in item.passages]
        parts = split_answer(item.draft).parts
        by_metric = [supported_by(part, texts) for part in parts]
        for label, metric in zip(item.supported, by_metric, strict=True):
            key = ("t" if label == metric else "f") + ("p" if metric else "n")
            agreement[key] += 1
        totals["draft"][0] += len(parts)
        totals["draft"][1] += sum(item.supported)
        totals["draft"][2] += sum(by_metric)
        extractive = AnswerBody(
            answer=f"From “{hits[0].title}” [1]:\n\n{texts[0]} [1]",
            action=Action.ANSWER,
            citations=[Citation(n=1, url=hits[0].url, title=hits[0].title, snippet=texts[0])],
        )
        result = await critiqued_answer(
            _DraftThenJudge(item, judge),  # type: ignore[arg-type]
            item.question,
            hits,
            extractive,
            min_confidence=min_confidence,
        )
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
        text = result.body.answer
        if text.startswith(UNSURE_WITH_SUPPORT) or text.endswith(OFFER_TECHNICIAN):
            unsure += 1
        if result.outcome in ("kept", "trimmed"):
            text = text.removeprefix(UNSURE_WITH_SUPPORT).removesuffix(OFFER_TECHNICIAN).strip()
            kept = split_answer(_to_passages(text, result.body.citations)).parts
            labelled = dict(zip(map(_unnumbered, parts), item.supported, strict=True))
            totals["after"][0] += len(kept)
            totals["after"][1] += sum(labelled.get(_unnumbered(part), False) for part in kept)
            totals["after"][2] += sum(supported_by(part, texts) for part in kept)
        rows.append(
            {
                "id": item.id,
                "parts": len(parts),
                "labelled_unsupported": len(parts) - sum(item.supported),
                "removed": result.removed,
                "outcome": result.outcome,
                "confidence": result.confidence,
            }
        )

    def share(count: int, n: int) -> float | None:
        return round(count / n, 4) if n else None

    n_draft, l_draft, m_draft = totals["draft"]
    n_after, l_after, m_after = totals["after"]
    tp, fp, fn = agreement["tp"], agreement["fp"], agreement["fn"]
    return {
        "judge": "model" if judge is not None else "scripted (the labels)",
        "items": len(items),
        "min_confidence": min_confidence,
        "recall_threshold": RECALL_THRESHOLD,
        "drafts": {
            "parts": n_draft,
            "supported_by_labels": share(l_draft, n_draft),
            "supported_by_metric": share(m_draft, n_draft),
        },
        "after_critique": {
            "parts": n_after,
            "supported_by_labels": share(l_after, n_after),
            "supported_by_metric": share(m_after, n_after),
            "outcomes": outcomes,
            "unsure_answers": unsure,
        },
        "metric_against_labels": {
            "agreement": share(agreement["tp"] + agreement["tn"], n_draft),
            "precision": share(tp, tp + fp),
            "recall": share(tp, tp + fn),
            **agreement,
        },
        "answers": rows,
    }


def _to_passages(text: str, citations: Sequence[Any]) -> str:
    """``text`` with its markers numbering passages again (the answer's number its citations,
    whose URLs end in the passage's number)."""
    number = {c.n: int(c.url.rsplit("/", 1)[1]) for c in citations}

    def rewrite(match: re.Match[str]) -> str:
        found = re.split(r"\s*[,;]\s*", match.group(1))
        return "".join(f"[{number.get(int(n), 0)}]" for n in found)

    return _MARKER.sub(rewrite, text)


def _unnumbered(part: str) -> str:
    """A part without its step number (the critique numbers the steps kept again)."""
    return _STEP_NUMBER.sub("", part, count=1)


def evaluate(
    data: Path = DEV_SET, *, use_model: bool = False, min_confidence: float = MIN_CONFIDENCE
) -> dict[str, Any]:
    """The whole report as a dict (what ``--json`` prints)."""
    items = load(data)
    judge = None
    if use_model:
        from orchestrator.config import OrchestratorSettings
        from orchestrator.llm import build_provider

        judge = build_provider(OrchestratorSettings())
        if not judge.enabled:
            raise DataError("--llm needs LLM_BASE_URL and LLM_MODEL")

    async def run() -> dict[str, Any]:
        try:
            return await _evaluate(items, judge, min_confidence)
        finally:
            if judge is not None:
                await judge.aclose()

    return asyncio.run(run())


def format_report(report: dict[str, Any]) -> str:
    drafts, after = report["drafts"], report["after_critique"]
    metric = report["metric_against_labels"]

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    lines = [
        f"critique evaluation: {report['items']} answers, judge: {report['judge']}",
        f"  drafts:         {drafts['parts']} parts; supported "
        f"{pct(drafts['supported_by_metric'])} by the metric, "
        f"{pct(drafts['supported_by_labels'])} by the labels",
        f"  after critique: {after['parts']} parts; supported "
        f"{pct(after['supported_by_metric'])} by the metric, "
        f"{pct(after['supported_by_labels'])} by the labels",
        f"  outcomes: {after['outcomes']}; answers marked not sure "
        f"(confidence < {report['min_confidence']}): {after['unsure_answers']}",
        f"  metric (content-word recall >= {report['recall_threshold']}) against the labels: "
        f"agreement {pct(metric['agreement'])}, precision {pct(metric['precision'])}, "
        f"recall {pct(metric['recall'])}",
    ]
    if report["judge"].startswith("scripted"):
        lines.append(
            "  The judge's verdicts are the labels: this measures the pipeline (splitting, "
            "removal, re-grounding, confidence), not a model. Run with --llm to let the "
            "configured model judge."
        )
    return "\n".join(lines)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``critique`` to the subparsers of ``deskpilot eval``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "critique",
        help="share of answer sentences the cited passages support, before and after the critique",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", type=Path, default=DEV_SET, help="the development set (JSONL)")
    parser.add_argument("--llm", action="store_true", help="let the configured model judge")
    parser.add_argument(
        "--min-confidence", type=float, default=MIN_CONFIDENCE, help="the not-sure threshold"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run_eval_critique)
    return parser


def run_eval_critique(args: argparse.Namespace) -> int:
    if not 0 <= args.min_confidence <= 1:
        print("deskpilot eval critique: --min-confidence must be between 0 and 1", file=sys.stderr)
        return 2
    try:
        report = evaluate(args.data, use_model=args.llm, min_confidence=args.min_confidence)
    except (DataError, OSError) as exc:
        print(f"deskpilot eval critique: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report) if args.json else format_report(report))
    return 0
