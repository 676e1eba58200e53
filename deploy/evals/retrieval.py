"""``deskpilot eval retrieval``: how well the knowledge base finds the page that answers a query.

The corpus is indexed by the indexer's own :class:`~indexer.service.Ingestor` (current
``INDEXER_*`` chunking settings) into a fresh collection in a temporary Chroma directory, so the
figures never depend on, or touch, a running stack's data. Each query then goes through the same
:class:`~orchestrator.retrieval.Retriever` the orchestrator uses.

Scoring is per *document*: the retrieved chunks are turned into a ranking of documents by each
document's best chunk (later chunks of an already-ranked document are skipped). A retrieved document
is relevant when its source path or URL ends with one of the query's ``relevant`` names (whole path
components: ``mag.html`` does not match ``a11y-mag.html``).

* ``recall_at_k``: the share of a query's relevant documents among the top ``k`` documents,
  averaged over queries (with one relevant document per query: the share of queries answered in
  the top ``k``).
* ``success_at_k``: the share of queries with at least one relevant document among the top ``k``
  (the same as ``recall_at_k`` where each query has one relevant document; for sets that judge
  several documents relevant to a query, the share of queries a reader would find answered).
* ``mrr``: mean over queries of 1 / rank of the first relevant document within the top 10
  documents, 0 when none is there (MRR@10).

Every run also ranks the queries with the plain dense baseline (``--baseline dense``, the
default: the question's embedding against the chunks' alone, no keyword ranker, no document
ranking) on the same index, and reports it beside the figures with the difference, so a gain is
always read against it (``--baseline none`` skips it; nothing is run twice when ``--mode dense``).

The queries file has one JSON object per line: ``{"query": str, "relevant": [str, ...]}``; other
keys are ignored, blank lines and lines starting with ``#`` (a set's note on how it was written)
skipped.

``--redact`` puts each query through the redactor first (:class:`redactor.service.Redactor`, its
default settings), as a turn receives a message: for messages as people type them, with names,
addresses and pasted secrets in them. Retrieval then searches the text with the placeholders read
as words and the sufficiency check judges it with the placeholders in, as the turn does.

``--feedback SOURCE`` gates users' ratings (``orchestrator/feedback.py``): the queries run again
with the rank adjustments that rating counts give under the current ``ORCHESTRATOR_FEEDBACK_*``
settings, the figures with them are printed beside those without, and the exit code is 1 when
they lower recall@1 or MRR. SOURCE is the orchestrator's Redis (``redis://...``, the live counts)
or a JSONL file of ``{"url", "positive", "negative", "ratings"}``; a count's ``url`` names a
document as ``relevant`` does (its URL or the end of its path).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

CUTOFFS = (1, 5, 10)
MRR_CUTOFF = 10
# Chunks fetched per query to rank documents from: a document usually has several chunks among
# the best, so many more chunks than the deepest cutoff are needed for 10 distinct documents.
CHUNK_DEPTH = 60


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    relevant: tuple[str, ...]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``retrieval`` to the subparsers of ``deskpilot eval``; returns the new parser."""
    from orchestrator.retrieval import Mode

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "retrieval",
        help="recall@k and MRR of knowledge-base retrieval on labelled queries",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--corpus", type=Path, required=True, help="folder or file to index")
    parser.add_argument(
        "--queries",
        type=Path,
        required=True,
        help='JSONL of {"query", "relevant": [...]}, or the YAML questions of eval crawl-answer',
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--mode",
        choices=get_args(Mode),
        default="hybrid",
        help="ranker(s) to use: the orchestrator's hybrid default, or one alone (ablation)",
    )
    parser.add_argument(
        "--baseline",
        choices=("dense", "none"),
        default="dense",
        help="also rank the queries by the plain dense baseline on the same index and report it "
        "beside the figures (default), or not",
    )
    parser.add_argument(
        "--misses", action="store_true", help="also list queries whose page is not ranked first"
    )
    parser.add_argument(
        "--answers",
        action="store_true",
        help="also count which page an answer would cite, with similarity alone and with the "
        "sufficiency check, with the right page indexed and without it",
    )
    parser.add_argument(
        "--redact",
        action="store_true",
        help="put each query through the redactor first, as a turn receives a typed message",
    )
    parser.add_argument(
        "--feedback",
        metavar="SOURCE",
        help="rating counts to apply (redis://... or a JSONL of {url, positive, negative, "
        "ratings}); exit 1 when they lower recall@1 or MRR",
    )
    return parser


def run_eval_retrieval(args: argparse.Namespace) -> int:
    """Run the evaluation ``args`` describe, print the figures; returns the exit code."""
    for label, path in (("corpus", args.corpus), ("queries", args.queries)):
        if not path.exists():
            print(f"deskpilot eval retrieval: {label} {path} does not exist", file=sys.stderr)
            return 2
    try:
        queries = read_queries(args.queries)
    except ValueError as exc:
        print(f"deskpilot eval retrieval: {exc}", file=sys.stderr)
        return 2
    if not queries:
        print(f"deskpilot eval retrieval: no queries in {args.queries}", file=sys.stderr)
        return 2
    if args.redact:
        queries = redacted(queries)
    tallies = None
    if args.feedback:
        try:
            tallies = _tallies(args.feedback)
        except (OSError, ValueError) as exc:
            print(f"deskpilot eval retrieval: --feedback {args.feedback}: {exc}", file=sys.stderr)
            return 2
    result = evaluate(
        args.corpus,
        queries,
        mode=args.mode,
        misses=args.misses,
        tallies=tallies,
        answers=args.answers,
        baseline=None if args.baseline == "none" else args.baseline,
    )
    if args.json:
        print(json.dumps(result))
    else:
        _print_human(result)
    return 1 if result.get("feedback", {}).get("lowered") else 0


def _tallies(source: str) -> dict[str, Any]:
    import asyncio

    from orchestrator.feedback import live_tallies, read_tallies

    if source.startswith(("redis://", "rediss://")):
        return asyncio.run(live_tallies(source))
    return read_tallies(Path(source).read_text(encoding="utf-8").splitlines())


def read_queries(path: Path) -> list[Query]:
    """Parse a queries file; raises ``ValueError`` naming the first bad line. A YAML file is a
    questions file of ``deskpilot eval crawl-answer`` (each question's page is what answers it),
    so the whole loop's questions are scored on the site indexed whole too."""
    if path.suffix in (".yaml", ".yml"):
        from deploy.evals.crawl_answer import read_question_set

        return [Query(q.question, (q.page,)) for q in read_question_set(path).questions]
    queries: list[Query] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            record = json.loads(line)
            text, relevant = record["query"], record["relevant"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a {{query, relevant}} object ({exc})") from exc
        if not isinstance(text, str) or not isinstance(relevant, list) or not relevant:
            raise ValueError(f"{path}:{number}: query must be a string, relevant a non-empty list")
        queries.append(Query(text, tuple(str(name) for name in relevant)))
    return queries


def redacted(queries: Sequence[Query]) -> list[Query]:
    """``queries`` as the redactor leaves them (placeholders for what it finds)."""
    from redactor.config import RedactorSettings
    from redactor.service import Redactor

    redactor = Redactor(RedactorSettings())
    return [Query(redactor.redact(query.text).text, query.relevant) for query in queries]


def evaluate(
    corpus: Path,
    queries: Sequence[Query],
    *,
    mode: str = "hybrid",
    misses: bool = False,
    tallies: Mapping[str, Any] | None = None,
    answers: bool = False,
    baseline: str | None = "dense",
) -> dict[str, Any]:
    """Index ``corpus`` into a throw-away collection, run ``queries``, return the figures; with
    rating ``tallies`` (URL or path name -> ``orchestrator.feedback.Tally``), run them again
    with the adjustments those give and report both (``feedback``); with ``answers``, which
    page an answer would cite (:mod:`deploy.evals.answers`); with a ``baseline`` mode other
    than ``mode``, the queries ranked by it on the same index, scored beside (``baseline``)."""
    from indexer.config import IndexerSettings
    from indexer.embedding import Embedder
    from indexer.service import Ingestor
    from indexer.store import open_collection

    with tempfile.TemporaryDirectory(prefix="deskpilot-eval-") as data_dir:
        settings = IndexerSettings(
            data_dir=Path(data_dir),
            chroma_host=None,
            chroma_collection=f"eval-{uuid.uuid4().hex[:12]}",
            seed_demo_kb=False,
        )
        embedder = Embedder.from_settings(settings)
        collection = open_collection(settings)
        report = Ingestor(embedder, collection, settings).ingest_path(corpus)
        paths = {doc.url: str(doc.path) for doc in report.documents if doc.path is not None}

        retriever = _retriever(collection, settings, mode)
        seconds: list[float] = []
        rankings = _rankings(retriever, queries, seconds)
        plain = None
        if baseline is not None and baseline != mode:
            plain = _rankings(_retriever(collection, settings, baseline), queries)
        with_feedback = None
        if tallies is not None:
            with_feedback = _with_feedback(
                tallies, paths, queries, rankings, collection, settings, mode
            )

        answered = None
        if answers:
            from deploy.evals.answers import answer_figures

            answered = answer_figures(
                retriever,
                queries,
                lambda query, url: is_relevant(url, paths.get(url), query.relevant),
                misses=misses,
            )

    result = score(queries, rankings, paths)
    if plain is not None:
        result["baseline"] = _beside(baseline or "", score(queries, plain, paths), result)
    if answered is not None:
        result["answers"] = answered
    if with_feedback is not None:
        result["feedback"] = with_feedback
    result.update(
        {
            "mode": mode,
            "ranking": (
                f"documents ranked by their best chunk among the top {CHUNK_DEPTH} chunks; "
                "later chunks of a ranked document are skipped"
            ),
            "documents": report.files_indexed,
            "files_skipped": report.files_skipped,
            "chunks": report.chunks_written,
            "index_seconds": round(report.seconds, 2),
            "chunks_per_second": round(report.chunks_written / report.seconds, 1)
            if report.seconds
            else None,
            "query_ms_p50": round(1000 * statistics.median(seconds), 1),
            "query_ms_p95": round(1000 * _percentile(seconds, 0.95), 1),
            "chunking": {
                name: value
                for name, value in settings.model_dump().items()
                if name.startswith("chunk_")
            },
        }
    )
    if not misses:
        result.pop("misses")
    return result


def _with_feedback(
    tallies: Mapping[str, Any],
    paths: dict[str, str],
    queries: Sequence[Query],
    plain: Sequence[Sequence[str]],
    collection: Any,
    settings: Any,
    mode: str,
) -> dict[str, Any]:
    """The queries again with the rank adjustments of ``tallies``, scored beside ``plain``."""
    from orchestrator.feedback import FeedbackSettings, FixedAdjustments, adjustments_of

    by_name = adjustments_of(tallies, FeedbackSettings())
    adjustments = {
        url: value
        for url in paths
        for name, value in by_name.items()
        if is_relevant(url, paths.get(url), [name])
    }
    retriever = _retriever(collection, settings, mode, FixedAdjustments(adjustments))
    rankings = _rankings(retriever, queries)
    before, after = score(queries, plain, paths), score(queries, rankings, paths)
    figures = ("recall_at_1", "recall_at_5", "recall_at_10", "mrr")
    return {
        "documents_adjusted": len(adjustments),
        **{name: after[name] for name in figures},
        "delta": {name: round(after[name] - before[name], 4) for name in figures},
        "lowered": after["recall_at_1"] < before["recall_at_1"] or after["mrr"] < before["mrr"],
    }


def _retriever(collection: Any, settings: Any, mode: str, feedback: Any = None) -> Any:
    """The orchestrator's retriever over ``collection`` ranking by ``mode``, its keyword index
    built (outside any timed query)."""
    from orchestrator.embedding import QueryEncoder
    from orchestrator.retrieval import HybridConfig, Retriever

    retriever = Retriever(
        QueryEncoder(settings.torch_threads),
        collection,
        HybridConfig(mode=mode),  # type: ignore[arg-type]
        feedback=feedback,
    )
    retriever.refresh(force=True)
    return retriever


def _rankings(
    retriever: Any, queries: Sequence[Query], seconds: list[float] | None = None
) -> list[list[str]]:
    """Each query's document ranking by ``retriever``; each search's time appended to
    ``seconds`` when given."""
    rankings: list[list[str]] = []
    for query in queries:
        started = time.perf_counter()
        hits = retriever.search(query.text, CHUNK_DEPTH)
        if seconds is not None:
            seconds.append(time.perf_counter() - started)
        rankings.append(rank_documents(hit.url for hit in hits))
    return rankings


def _beside(mode: str, plain: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """The baseline's figures and the evaluated mode's difference from them."""
    figures = [name for name in plain if name.startswith(("recall_at_", "success_at_"))]
    figures.append("mrr")
    return {
        "mode": mode,
        **{name: plain[name] for name in figures},
        "delta": {name: round(result[name] - plain[name], 4) for name in figures},
    }


def rank_documents(urls: Iterable[str]) -> list[str]:
    """Documents in order of their best chunk: each URL once, at its first position."""
    return list(dict.fromkeys(urls))


def is_relevant(url: str, path: str | None, names: Sequence[str]) -> bool:
    """Whether the document's source path or URL ends with one of ``names`` (whole components)."""
    for location in (path, url):
        if not location:
            continue
        location = location.replace("\\", "/").split("#", 1)[0].split("?", 1)[0]
        for name in names:
            name = name.strip("/")
            if location == name or location.endswith("/" + name):
                return True
    return False


def score(
    queries: Sequence[Query], rankings: Sequence[Sequence[str]], paths: dict[str, str]
) -> dict[str, Any]:
    """recall@{1,5,10} and MRR@10 of document ``rankings`` (URLs, best first) for ``queries``."""
    recall = dict.fromkeys(CUTOFFS, 0.0)
    success = dict.fromkeys(CUTOFFS, 0)
    reciprocal = 0.0
    missed: list[dict[str, Any]] = []
    for query, ranking in zip(queries, rankings, strict=True):
        flags = [is_relevant(url, paths.get(url), query.relevant) for url in ranking]
        names = set(query.relevant)
        for cutoff in CUTOFFS:
            top = ranking[:cutoff]
            found = sum(any(is_relevant(u, paths.get(u), [name]) for u in top) for name in names)
            recall[cutoff] += found / len(names)
            success[cutoff] += any(flags[:cutoff])
        first = next((rank for rank, flag in enumerate(flags, start=1) if flag), None)
        if first is not None and first <= MRR_CUTOFF:
            reciprocal += 1.0 / first
        if first != 1:
            best = ranking[0] if ranking else None
            missed.append(
                {
                    "query": query.text,
                    "relevant": list(query.relevant),
                    "rank": first,
                    "first": paths.get(best, best) if best else None,
                }
            )
    n = len(queries)
    result: dict[str, Any] = {"n": n}
    for cutoff in CUTOFFS:
        result[f"recall_at_{cutoff}"] = round(recall[cutoff] / n, 4)
    for cutoff in CUTOFFS:
        result[f"success_at_{cutoff}"] = round(success[cutoff] / n, 4)
    result["mrr"] = round(reciprocal / n, 4)
    result["misses"] = missed
    return result


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _print_human(result: dict[str, Any]) -> None:
    print(
        f"n={result['n']}  recall@1={result['recall_at_1']:.3f}  "
        f"recall@5={result['recall_at_5']:.3f}  recall@10={result['recall_at_10']:.3f}  "
        f"MRR={result['mrr']:.3f}  ({result['mode']})"
    )
    print(
        f"indexed {result['documents']} documents into {result['chunks']} chunks in "
        f"{result['index_seconds']} s ({result['chunks_per_second']} chunks/s); "
        f"query p50 {result['query_ms_p50']} ms, p95 {result['query_ms_p95']} ms"
    )
    if (
        result["success_at_1"] != result["recall_at_1"]
        or result["success_at_5"] != result["recall_at_5"]
    ):
        print(
            f"some queries have several relevant documents: success@1="
            f"{result['success_at_1']:.3f}  success@5={result['success_at_5']:.3f}  "
            f"success@10={result['success_at_10']:.3f}"
        )
    baseline = result.get("baseline")
    if baseline is not None:
        delta = baseline["delta"]
        print(
            f"plain {baseline['mode']} baseline: recall@1={baseline['recall_at_1']:.3f}  "
            f"recall@5={baseline['recall_at_5']:.3f}  recall@10={baseline['recall_at_10']:.3f}  "
            f"MRR={baseline['mrr']:.3f}  success@1={baseline['success_at_1']:.3f}  "
            f"success@5={baseline['success_at_5']:.3f}  ({result['mode']} minus baseline: "
            f"recall@1 {delta['recall_at_1']:+.3f}, MRR {delta['mrr']:+.3f})"
        )
    print(f"scoring: {result['ranking']}")
    feedback = result.get("feedback")
    if feedback is not None:
        verdict = "LOWERED: do not ship" if feedback["lowered"] else "not lowered"
        print(
            f"with ratings ({feedback['documents_adjusted']} documents adjusted): "
            f"recall@1={feedback['recall_at_1']:.3f} MRR={feedback['mrr']:.3f} "
            f"(delta {feedback['delta']['recall_at_1']:+.3f} / {feedback['delta']['mrr']:+.3f}): "
            f"{verdict}"
        )
    if "answers" in result:
        from deploy.evals.answers import format_answer_figures

        for line in format_answer_figures(result["answers"]):
            print(line)
    for miss in result.get("misses", []):
        print(f"  rank {miss['rank']}: {miss['query']!r} -> {miss['first']}")
