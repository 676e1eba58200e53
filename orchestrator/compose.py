"""Extractive answers: quote the knowledge base, cite it, and say so honestly when it cannot help.

No language model is involved on this path: every sentence of an answer comes from a retrieved
chunk, so the answer is only as good as the knowledge base, and never invents a step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from contracts.events import Action, AnswerBody, Citation
from orchestrator.retrieval import Hit, Retrieval

NO_ANSWER_TEXT = (
    "I couldn't find this in the IT knowledge base, so I'd rather not guess. "
    'I can hand it to a technician: reply "create a ticket" and describe what you see, '
    "or rephrase the question if it is about something else."
)
SNIPPET_CHARS = 240
MAIN_SECTION_BONUS = 0.05
STEPS = re.compile(r"^\s*\d+\.\s", re.MULTILINE)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0]
    return cut + "…"


def has_steps(hit: Hit) -> bool:
    return bool(STEPS.search(hit.text))


def choose_passage(document: Sequence[Hit], margin: float) -> Hit | None:
    """The passage of the best document to quote.

    The steps are what users came for: among chunks with numbered steps that match nearly as
    well as the best chunk, the article's main procedure (its top-level section) is slightly
    preferred over variants in subsections; without steps, the best chunk is quoted.
    """
    if not document:
        return None
    best = document[0]
    candidates = [hit for hit in document if has_steps(hit) and hit.score >= best.score - margin]
    if not candidates:
        return best
    return max(
        candidates, key=lambda hit: hit.score + (MAIN_SECTION_BONUS if not _subsection(hit) else 0)
    )


def compose_answer(
    retrieval: Retrieval,
    *,
    threshold: float,
    see_also_margin: float,
    max_citations: int,
) -> AnswerBody:
    """Quote the best-matching article and cite it, plus closely related articles as see-also.

    Returns ``no_answer`` when nothing reaches ``threshold``.
    """
    relevant = [hit for hit in retrieval.hits if hit.score >= threshold]
    if not relevant:
        return AnswerBody(answer=NO_ANSWER_TEXT, action=Action.NO_ANSWER)

    best = relevant[0]
    document = retrieval.best_document or [best]
    passage = choose_passage(document, margin=0.15) or best
    citations = [_citation(1, passage)]

    see_also: list[Hit] = []
    seen_urls = {best.url}
    for hit in relevant[1:]:
        if len(citations) >= max_citations or hit.score < best.score - see_also_margin:
            break
        if hit.url in seen_urls:
            continue
        seen_urls.add(hit.url)
        see_also.append(hit)
        citations.append(_citation(len(citations) + 1, hit))

    parts = [f"From “{best.title}” [1]:"]
    subsection = _subsection(passage)
    if subsection:
        parts.append(f"{subsection}:")
    parts.append(passage.text.strip())
    if see_also:
        related = "; ".join(f"{hit.title} [{n}]" for n, hit in enumerate(see_also, start=2))
        parts.append(f"See also: {related}.")
    return AnswerBody(answer="\n\n".join(parts), action=Action.ANSWER, citations=citations)


def _subsection(hit: Hit) -> str:
    """The heading under the article title, if the passage sits in one."""
    parts = [part.strip() for part in hit.section.split(" > ") if part.strip()]
    if parts and parts[0] == hit.title:
        parts = parts[1:]
    return " > ".join(parts)


def _citation(n: int, hit: Hit) -> Citation:
    return Citation(n=n, url=hit.url, title=hit.title, snippet=snippet(hit.text))
