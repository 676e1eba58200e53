"""The assistant's words: extractive answers, checklists, clarifying questions, refusals.

No language model is involved on this path. Every step and command in an answer is quoted
verbatim from a retrieved chunk and carries the citation marker of its source, so the answer is
only as good as the knowledge base and never invents a step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from contracts.events import Action, AnswerBody, Checklist, Citation
from orchestrator.dialogue import OS_NAMES
from orchestrator.retrieval import Hit, Retrieval

NO_ANSWER_TEXT = (
    "I couldn't find this in the IT knowledge base, so I'd rather not guess. "
    'Shall I create a ticket for a technician? Reply "yes" and I\'ll pass on what you told '
    "me, or rephrase the question if it is about something else."
)
NOT_COVERED_TEXT = (
    "I couldn't find an article about {terms} in the IT knowledge base, so I'd rather not guess. "
    'Shall I create a ticket for a technician? Reply "yes" and I\'ll pass on what you told '
    "me, or rephrase the question if it is about something else."
)
REFUSE_TEXT = (
    "That's outside what I can help with: I'm the IT service desk assistant. I can help with "
    "VPN and Wi-Fi, passwords and accounts, IT training courses, finding IT documents and "
    "contacts, and keyboards, headsets, monitors, printers and other equipment."
)
GREETING_TEXT = (
    "Hello! I'm the IT service desk assistant. Tell me what you need help with, for example "
    '"How do I reset my VPN password?" or "My headset isn\'t recognised in Teams".'
)
CAP_TEXT = (
    "I still can't tell which article fits, so a technician should look at this. Shall I "
    "create a ticket? Reply \"yes\" and I'll pass on everything you've told me."
)
SNIPPET_CHARS = 240
MAIN_SECTION_BONUS = 0.05
OS_SECTION_BONUS = 0.12
MAX_CHECKLIST_STEPS = 7

STEP = re.compile(r"^\s*(\d+)\.\s+(.*)$")
FENCE = "```"


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0]
    return cut + "…"


def steps_of(text: str) -> list[str]:
    """The numbered steps of a passage, each with the code block that follows it, verbatim."""
    steps: list[str] = []
    in_code = False
    for line in text.splitlines():
        if line.strip().startswith(FENCE):
            in_code = not in_code
            if steps:
                steps[-1] += "\n" + line
            continue
        if in_code:
            if steps:
                steps[-1] += "\n" + line
            continue
        if match := STEP.match(line):
            steps.append(match.group(2).strip())
    return steps


def has_steps(hit: Hit) -> bool:
    return len(steps_of(hit.text)) > 0


def subsection(hit: Hit) -> str:
    """The heading under the article title, if the passage sits in one."""
    parts = [part.strip() for part in hit.section.split(" > ") if part.strip()]
    if parts and parts[0] == hit.title:
        parts = parts[1:]
    return " > ".join(parts)


def os_sections(document: Sequence[Hit]) -> set[str]:
    """The operating systems an article has their own sections for."""
    found = set()
    for hit in document:
        heading = subsection(hit).lower()
        for os_name, label in OS_NAMES.items():
            if label.lower() in heading:
                found.add(os_name)
    return found


def section_os(hit: Hit) -> str | None:
    """The operating system a passage's section is for, if one."""
    heading = subsection(hit).lower()
    matches = [os_name for os_name, label in OS_NAMES.items() if label.lower() in heading]
    return matches[0] if len(matches) == 1 else None


def choose_passage(document: Sequence[Hit], margin: float, os: str | None = None) -> Hit | None:
    """The passage of the best document to quote.

    The steps are what users came for: among chunks with numbered steps that match nearly as
    well as the best chunk, the article's main procedure (its top-level section) is slightly
    preferred over variants in subsections, and a section for the user's operating system
    clearly preferred over one for another; without steps, the best chunk is quoted.
    """
    if not document:
        return None
    best = document[0]

    def preference(hit: Hit) -> float:
        value = hit.score
        if not subsection(hit):
            value += MAIN_SECTION_BONUS
        passage_os = section_os(hit)
        if os and passage_os == os:
            value += OS_SECTION_BONUS
        elif os and passage_os and passage_os != os:
            value -= OS_SECTION_BONUS
        return value

    window = margin + (OS_SECTION_BONUS if os else 0.0)
    candidates = [hit for hit in document if has_steps(hit) and hit.score >= best.score - window]
    if not candidates:
        return best
    return max(candidates, key=preference)


def whole_section(document: Sequence[Hit], passage: Hit) -> Hit:
    """The passage with its section's neighbouring chunks, so a procedure that the chunker split
    ("6. ..." in one chunk, "1. ..." in the one before) is quoted whole."""
    same = {
        hit.chunk_index: hit
        for hit in document
        if hit.url == passage.url and hit.section == passage.section
    }
    first = last = passage.chunk_index
    while first - 1 in same:
        first -= 1
    while last + 1 in same:
        last += 1
    if first == last:
        return passage
    text = same[first].text if first in same else passage.text
    for index in range(first + 1, last + 1):
        text = _join_overlapping(text, same[index].text)
    return replace(passage, text=text, chunk_index=first)


def _join_overlapping(before: str, after: str) -> str:
    """Join consecutive chunks, dropping the lines the second repeats from the first's end."""
    tail = {line.strip() for line in before.strip().splitlines()[-6:] if line.strip()}
    lines = after.strip().splitlines()
    while lines and (not lines[0].strip() or lines[0].strip() in tail):
        lines.pop(0)
    return before.rstrip() + "\n" + "\n".join(lines)


def os_supplement(document: Sequence[Hit], passage: Hit, os: str | None) -> list[Hit]:
    """The article's section for the user's OS, when the quoted passage is not already it.

    General steps often end in "run the commands for your system below"; the user's own
    system's section is then the part they need most.
    """
    if not os or section_os(passage) == os:
        return []
    own = [hit for hit in document if hit.url == passage.url and section_os(hit) == os]
    return [whole_section(document, max(own, key=lambda hit: hit.score))] if own else []


def cite_lines(text: str, marker: str) -> str:
    """Put the citation marker after every paragraph and step, never inside a code block."""
    out: list[str] = []
    in_code = False
    for line in text.strip().splitlines():
        if line.strip().startswith(FENCE):
            in_code = not in_code
            out.append(line)
            continue
        if in_code or not line.strip() or line.rstrip().endswith(marker):
            out.append(line)
            continue
        out.append(f"{line.rstrip()} {marker}")
    return "\n".join(out)


def condensed(text: str) -> str:
    """Only the steps and commands, for users who write like administrators."""
    steps = steps_of(text)
    if not steps:
        return text
    return "\n".join(f"{n}. {step}" for n, step in enumerate(steps, start=1))


@dataclass(frozen=True)
class Article:
    """The one article an answer names, quotes and cites, and whose steps a checklist follows:
    retrieved chunks of one document, best first.

    Every part of an answer is taken from here (the title it names, the passage it quotes, the
    citation [1], a checklist's steps), and an article cannot hold two documents' chunks, so
    no ranking can make an answer name one article and quote another.
    """

    chunks: tuple[Hit, ...]

    def __post_init__(self) -> None:
        if not self.chunks:
            raise ValueError("an article needs at least one chunk; it has no chunk")
        if len({hit.url for hit in self.chunks}) > 1:
            raise ValueError("an article's chunks all come from one document")

    @property
    def url(self) -> str:
        return self.chunks[0].url

    @property
    def title(self) -> str:
        return self.chunks[0].title

    @property
    def best(self) -> Hit:
        """The chunk that matched the question best (by similarity)."""
        return max(self.chunks, key=lambda hit: hit.score)

    def passage(self, os: str | None = None) -> Hit:
        """What an answer quotes: the section with the steps (the user's OS's, if any), whole."""
        chosen = choose_passage(self.chunks, margin=PASSAGE_MARGIN, os=os) or self.chunks[0]
        return whole_section(self.chunks, chosen)


PASSAGE_MARGIN = 0.15
"""How much less similar than the article's best chunk a passage with steps may be and still
be quoted in its place (:func:`choose_passage`)."""


def article_of(retrieval: Retrieval, url: str) -> Article:
    """The retrieved chunks of ``url``'s document as an article."""
    return Article(tuple(sorted(retrieval.document(url), key=lambda hit: -hit.score)))


def answering_article(
    retrieval: Retrieval,
    threshold: float,
    answers: Callable[[Article], bool] | None = None,
) -> Article | None:
    """The article to answer from: the best ranked document with a chunk at least ``threshold``
    similar to the question that ``answers`` it (every one, without ``answers``); ``None`` when
    no document does."""
    tried: set[str] = set()
    for hit in retrieval.hits:
        if hit.score < threshold or hit.url in tried:
            continue
        tried.add(hit.url)
        article = article_of(retrieval, hit.url)
        if answers is None or answers(article):
            return article
    return None


def see_also_hits(
    retrieval: Retrieval, article: Article, threshold: float, margin: float, limit: int
) -> list[Hit]:
    """Other documents about as similar as the article answered from, one hit each."""
    best = article.best.score
    see_also: list[Hit] = []
    seen = {article.url}
    for hit in retrieval.hits:
        if len(see_also) >= limit:
            break
        if hit.score < max(threshold, best - margin) or hit.url in seen:
            continue
        seen.add(hit.url)
        see_also.append(hit)
    return see_also


def compose_answer(
    retrieval: Retrieval,
    *,
    threshold: float,
    see_also_margin: float,
    max_citations: int,
    os: str | None = None,
    technical: bool = False,
    article: Article | None = None,
) -> AnswerBody:
    """Quote one article and cite it, plus closely related articles as see-also.

    The article is ``article`` when given (the turn chose it), else the best ranked document
    that reaches ``threshold`` (:func:`answering_article`). Returns ``no_answer`` when there is
    none.
    """
    article = article or answering_article(retrieval, threshold)
    if article is None:
        return AnswerBody(answer=NO_ANSWER_TEXT, action=Action.NO_ANSWER)

    passage = article.passage(os)
    citations = [citation(1, passage)]
    see_also = see_also_hits(retrieval, article, threshold, see_also_margin, max_citations - 1)
    citations += [citation(n, hit) for n, hit in enumerate(see_also, start=2)]

    parts = [f"From “{article.title}” [1]:"]
    for quoted in [passage, *os_supplement(article.chunks, passage, os)]:
        if heading := subsection(quoted):
            parts.append(f"{heading}:")
        body = condensed(quoted.text) if technical else quoted.text
        parts.append(cite_lines(body, "[1]"))
    if see_also:
        related = "; ".join(f"{hit.title} [{n}]" for n, hit in enumerate(see_also, start=2))
        parts.append(f"See also: {related}.")
    return AnswerBody(answer="\n\n".join(parts), action=Action.ANSWER, citations=citations)


def checklist_steps(passage: Hit) -> list[str]:
    """The steps a checklist from ``passage`` walks through, at most
    :data:`MAX_CHECKLIST_STEPS`."""
    return steps_of(passage.text)[:MAX_CHECKLIST_STEPS]


def compose_checklist(
    article: Article, passage: Hit, steps: Sequence[str], current: int = 0
) -> AnswerBody:
    """Offer the steps of ``passage`` (the article's, :meth:`Article.passage`, and
    :func:`checklist_steps` of it) one at a time; the user reports back after each."""
    total = len(steps)
    lines = [
        f"Let's work through this together, one step at a time, following “{article.title}” [1].",
        f"Step {current + 1} of {total}: {cite_lines(steps[current], '[1]')}",
        'When you have tried it, reply "done, still broken" for the next step, or "that fixed it".',
    ]
    return AnswerBody(
        answer="\n\n".join(lines),
        action=Action.CHECKLIST,
        citations=[citation(1, passage)],
        checklist=Checklist(steps=list(steps), current=current),
    )


def compose_checklist_step(
    title: str, url: str, snippet_text: str, steps: Sequence[str], current: int
) -> AnswerBody:
    """The next step of a checklist already under way."""
    total = len(steps)
    cited = Citation(n=1, url=url, title=title, snippet=snippet_text)
    text = (
        f"OK, next step ({current + 1} of {total}): {cite_lines(steps[current], '[1]')}\n\n"
        'Reply "done, still broken" or "that fixed it".'
    )
    return AnswerBody(
        answer=text,
        action=Action.CHECKLIST,
        citations=[cited],
        checklist=Checklist(steps=list(steps), current=current),
    )


def compose_clarify(questions: Sequence[str], preface: str | None = None) -> AnswerBody:
    lines = [preface or "To point you to the right steps, I need a little more detail:"]
    lines += [f"- {question}" for question in questions]
    return AnswerBody(answer="\n".join(lines), action=Action.CLARIFY, questions=list(questions))


def not_covered_text(missing: Sequence[str]) -> str:
    """The honest no-answer, naming what no article covers (the question's key terms no
    similar article has) when that is known."""
    if not missing:
        return NO_ANSWER_TEXT
    quoted = [f"“{term}”" for term in missing[:3]]
    terms = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return NOT_COVERED_TEXT.format(terms=terms)


def compose_text(text: str, action: Action) -> AnswerBody:
    return AnswerBody(answer=text, action=action)


def citation(n: int, hit: Hit) -> Citation:
    return Citation(n=n, url=hit.url, title=hit.title, snippet=snippet(hit.text))
