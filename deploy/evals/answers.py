"""``deskpilot eval retrieval --answers``: which page an answer would cite, not only how pages rank.

Each query is retrieved as a turn retrieves it (``ORCHESTRATOR_TOP_K`` chunks) and the article
the orchestrator would answer from is chosen (:func:`orchestrator.compose.answering_article`):

* **similarity alone**: the best ranked document with a chunk at least
  ``ORCHESTRATOR_RELEVANCE_THRESHOLD`` similar (the rule before the sufficiency check);
* **with the sufficiency check**: the best ranked such document that also covers the question's
  key terms (:mod:`orchestrator.sufficiency`), as a turn judges while a crawl of the help sites
  can follow a decline;
* **with the check, no crawl to follow**: as a turn judges when a decline is final (no help
  site, or after the crawl), where an article that stands out among those found answers too
  (:func:`orchestrator.sufficiency.last_resort`).

Each is counted as answered citing the right page, answered citing another page, or declined
(``no_answer``, or a crawl where help sites are configured). Then again **without the right
page**: its chunks are taken out of each retrieval, as if the knowledge base did not hold it;
every answer is then from a wrong page, and declining (so that the help site is read) is right.

A query with the redactor's placeholders in (``--redact``) is searched with them read as words and
judged with them in, as a turn does (``Turn.search_text`` and ``Turn.asked``). With ``misses``,
each query the check does not answer from its right page is listed with what the check said.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

Relevant = Callable[[Any, str], bool]


def answer_figures(
    retriever: Any, queries: Sequence[Any], relevant: Relevant, *, misses: bool = False
) -> dict[str, Any]:
    """Answered right / wrong / declined with similarity alone and with the check, with the
    right page and without it; ``relevant(query, url)`` says whether a page answers a query."""
    from orchestrator.compose import Article, answering_article
    from orchestrator.config import OrchestratorSettings
    from orchestrator.dialogue import readable
    from orchestrator.retrieval import Retrieval
    from orchestrator.sufficiency import Verdict, judge_article, last_resort

    settings = OrchestratorSettings()
    threshold = settings.relevance_threshold
    counts: dict[str, dict[str, int]] = {
        f"{rule}{case}": {"right": 0, "wrong": 0, "declined": 0}
        for rule in ("similarity", "sufficiency", "final")
        for case in ("", "_without_page")
    }
    missed: list[dict[str, Any]] = []

    def without(retrieval: Retrieval, query: Any) -> Retrieval:
        hits = [hit for hit in retrieval.hits if not relevant(query, hit.url)]
        documents = {u: d for u, d in retrieval.documents.items() if not relevant(query, u)}
        best = retrieval.best_document
        if best and relevant(query, best[0].url):
            best = []
        return replace(retrieval, hits=hits, best_document=best, documents=documents)

    for query in queries:
        full = retriever.retrieve(readable(query.text), settings.top_k)
        for case, retrieval in (("", full), ("_without_page", without(full, query))):
            verdicts: list[tuple[str, Verdict]] = []

            def answers(
                article: Article,
                final: bool,
                retrieval: Retrieval = retrieval,
                query: Any = query,
                verdicts: list[tuple[str, Verdict]] = verdicts,
            ) -> bool:
                verdict = judge_article(query.text, article, retrieval.terms)
                if final:
                    verdict = last_resort(verdict, article, retrieval)
                else:
                    verdicts.append((article.url, verdict))
                return verdict.sufficient

            for rule, check in (
                ("similarity", None),
                ("sufficiency", partial(answers, final=False)),
                ("final", partial(answers, final=True)),
            ):
                article = answering_article(retrieval, threshold, check)
                outcome = (
                    "declined"
                    if article is None
                    else "right"
                    if relevant(query, article.url)
                    else "wrong"
                )
                counts[f"{rule}{case}"][outcome] += 1
                if misses and rule == "sufficiency" and not case and outcome != "right":
                    missed.append(
                        {
                            "query": query.text,
                            "outcome": outcome,
                            "cited": article.url if article else None,
                            "judged": [f"{url}: {v.reason}" for url, v in verdicts],
                        }
                    )
    figures = {"threshold": threshold, "top_k": settings.top_k, **counts}
    return {**figures, "misses": missed} if misses else figures


def format_answer_figures(figures: dict[str, Any]) -> list[str]:
    """The figures as lines for a person."""

    def line(name: str, label: str) -> str:
        row = figures[name]
        return (
            f"  {label}: right page {row['right']}, another page {row['wrong']}, "
            f"declined {row['declined']}"
        )

    return [
        f"answers (threshold {figures['threshold']}, top {figures['top_k']} chunks):",
        line("similarity", "similarity alone"),
        line("sufficiency", "with the sufficiency check"),
        line("final", "with the check, no crawl to follow (a page that stands out answers)"),
        "without the right page in the knowledge base (declining is right):",
        line("similarity_without_page", "similarity alone"),
        line("sufficiency_without_page", "with the sufficiency check"),
        line("final_without_page", "with the check, no crawl to follow"),
        *(
            f"  {miss['outcome']}: {miss['query']!r} -> {miss['cited']}\n"
            + "".join(f"      {judged}\n" for judged in miss["judged"]).rstrip()
            for miss in figures.get("misses", [])
        ),
    ]
