"""The steps that answer the question from the knowledge base, in the order of the turn.

With an LLM configured, the model reads the message in one call (scope, kind, category, asks
for a person: :func:`orchestrator.llm.read_message`) while the knowledge base is searched, and
that reading takes the learned classifier's place; when the model fails, times out or replies
with anything but a valid reading, the classifier decides as it does without a model. The
reason logged says which one did (:class:`~orchestrator.turn.base.Reader`). The model also
words the answer from the retrieved passages, and the user sees it being written (``writing``
progress).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Final, Literal

from contracts.events import Action, AnswerBody, Citation, EscalationReason, SimilarCase
from orchestrator.compose import (
    CAP_TEXT,
    GREETING_TEXT,
    REFUSE_TEXT,
    Article,
    answering_article,
    checklist_steps,
    compose_answer,
    compose_checklist,
    compose_checklist_step,
    compose_clarify,
    compose_text,
    not_covered_text,
    os_sections,
    section_os,
    snippet,
)
from orchestrator.dialogue import (
    checklist_feedback,
    detect_facts,
    is_follow_up,
    is_greeting,
    is_technical,
    is_vague,
    readable,
    search_text,
)
from orchestrator.intent import Intent
from orchestrator.llm import critique_applies, critiqued_answer, generate_answer, read_message
from orchestrator.memory import ChecklistState, Conversation, StepOutcome
from orchestrator.retrieval import Hit
from orchestrator.sufficiency import Verdict, judge_article, last_resort
from orchestrator.turn.base import Answer, Crawl, Escalate, Reader, Reply, Step, Turn

VAGUE_QUESTIONS = (
    "What are you trying to do, and which device or application is affected?",
    "What happens instead? If there is an error message, please copy its text.",
)
OS_QUESTION = "Which operating system are you on: Windows, macOS or Linux?"
OS_MATCH_MARGIN = 0.05
WHAT_DO_YOU_NEED = "What do you need help with?"
ANYTHING_ELSE = "Is there anything else I can help with?"
THANKS = re.compile(r"\b(thanks?|thank you|thx|cheers)\b", re.IGNORECASE)
FIXED: Final = "fixed"
"""The reason of a turn whose checklist step fixed the problem."""


class FactsStep(Step):
    """Notes what the message says about the user's setup (operating system, error codes) and
    whether they write technically, for this answer and later ones. Never replies."""

    name = "facts"

    async def __call__(self, turn: Turn) -> Reply | None:
        turn.conversation.facts.update(detect_facts(turn.text))
        turn.conversation.technical = turn.conversation.technical or is_technical(turn.text)
        return None


class ChecklistStep(Step):
    """A report on the checklist step in progress ("done, still broken", "that fixed it")
    moves the checklist on; when it fixed the problem, the conversation is filed as resolved."""

    name = "checklist"

    async def __call__(self, turn: Turn) -> Reply | None:
        checklist = turn.conversation.checklist
        if checklist is None or checklist.current >= len(checklist.steps):
            return None
        feedback = checklist_feedback(turn.text)
        if feedback is None:
            return None
        return advance_checklist(turn.conversation, checklist, feedback)


def advance_checklist(
    conversation: Conversation, checklist: ChecklistState, feedback: Literal["fixed", "failed"]
) -> Answer:
    """The next step, the end of the topic when it is fixed, or a ticket offer when every
    step failed."""
    resolved_topic = {"topic": conversation.topic, "category": conversation.category}
    step = checklist.steps[checklist.current]
    checklist.tried.append(StepOutcome(step=step, outcome=feedback))
    source = Citation(
        n=1, url=checklist.url, title=checklist.title, snippet=checklist.citation_snippet
    )
    if feedback == "fixed":
        conversation.tried += checklist.tried
        conversation.checklist = None
        conversation.topic = None
        text = (
            f"Great, glad that fixed it. For next time, the steps are in “{checklist.title}” "
            "[1]. Is there anything else I can help with?"
        )
        body = AnswerBody(answer=text, action=Action.ANSWER, citations=[source])
        # The ticket describes the topic just closed.
        resolved = conversation.model_copy(update=resolved_topic, deep=True)
        return Answer(body=body, reason=FIXED, resolved=resolved)
    checklist.current += 1
    if checklist.current < len(checklist.steps):
        body = compose_checklist_step(
            checklist.title,
            checklist.url,
            checklist.citation_snippet,
            checklist.steps,
            checklist.current,
        )
        return Answer(body=body, reason=f"step {checklist.current} failed; next step")
    text = (
        f"I'm sorry: none of the {len(checklist.steps)} steps from “{checklist.title}” [1] "
        "fixed it, so this needs a technician. Shall I create a ticket with what we tried? "
        'Reply "yes" and I\'ll pass it all on.'
    )
    body = AnswerBody(answer=text, action=Action.NO_ANSWER, citations=[source])
    return Answer(body=body, reason="every checklist step failed")


class IntentStep(Step):
    """Reads the message: its intent and whether it follows up on the topic. Answers a greeting
    or thanks; a message too vague to search ("it's not working") gets targeted questions, at
    most ``clarify_cap`` rounds per topic, then a ticket offer."""

    name = "intent"

    async def __call__(self, turn: Turn) -> Reply | None:
        deps, settings, text, conversation = turn.deps, turn.settings, turn.text, turn.conversation
        turn.follow_up = is_follow_up(text, conversation)
        turn.asked = search_text(text, conversation)
        if deps.llm.enabled:
            # The model's reading is the slow part: search meanwhile (most messages are searched).
            turn.early_search = turn.background.soon(
                deps.retriever.retrieve,
                turn.search_text,
                settings.top_k,
                os=turn.os,
                principals=turn.principals,
            )
            turn.read_intent, turn.reader = await read_intent(turn)
        else:
            turn.read_intent = await asyncio.to_thread(deps.intents.classify, readable(text))
            turn.reader = Reader.CLASSIFIER
        if is_greeting(text) or (turn.intent.conversational and not turn.follow_up):
            if THANKS.search(text):
                body = compose_clarify([ANYTHING_ELSE], "You're welcome!")
                return Answer(body=body, reason="thanks" + turn.by)
            body = compose_clarify([WHAT_DO_YOU_NEED], GREETING_TEXT)
            return Answer(body=body, reason="greeting" + turn.by)
        if not turn.follow_up and not turn.off_topic and is_vague(text):
            if conversation.clarify_rounds >= settings.clarify_cap:
                body = compose_text(CAP_TEXT, Action.NO_ANSWER)
                return Answer(body=body, reason="still vague after the cap" + turn.by)
            conversation.clarify_rounds += 1
            known_error = "error" in conversation.facts
            questions = [q for q in VAGUE_QUESTIONS if not (known_error and "error" in q)]
            return Answer(body=compose_clarify(questions), reason="too vague to search" + turn.by)
        return None


async def read_intent(turn: Turn) -> tuple[Intent, Reader]:
    """The model's reading of the message if it gives a valid one, else the classifier's."""
    intents = turn.deps.intents
    reading = await read_message(
        turn.deps.llm, turn.text, list(intents.queues), topic=turn.conversation.topic
    )
    if reading is not None:
        return reading.as_intent(intents.queues), Reader.LLM
    intent = await asyncio.to_thread(intents.classify, readable(turn.text))
    return intent, Reader.FALLBACK


class RetrievalStep(Step):
    """Searches the knowledge base (a follow-up such as "im on linux" together with the active
    topic) and records the best match. Declines a question the intent puts outside IT support
    when the knowledge base agrees: a strong match in the company's own articles (its product
    names, its jargon) outweighs the intent."""

    name = "retrieval"

    async def __call__(self, turn: Turn) -> Reply | None:
        deps, settings = turn.deps, turn.settings
        search = turn.early_search or turn.background.soon(
            deps.retriever.retrieve,
            turn.search_text,
            settings.top_k,
            os=turn.os,
            principals=turn.principals,
        )
        turn.similar_cases = similar_cases_early(turn)
        # The user hears of the search while it runs.
        await turn.replies.progress(turn.state, "searching")
        turn.retrieved = await search
        retrieval = turn.retrieval
        best = retrieval.confidence
        find_answer(turn)
        if turn.answering is None and await crawl_settled(turn):
            turn.settled = True
            find_answer(turn)  # a decline is final now
        verdict = turn.verdict
        refused = turn.off_topic and not turn.similar
        kept = await help_site_subjects(turn) if refused else None
        turn.note(
            "retrieval",
            turn.confidence if verdict is None else f"{turn.confidence}; {verdict.reason}",
            hits=len(retrieval.hits),
            best=None if best is None else round(best, 4),
            top_url=retrieval.hits[0].url if retrieval.hits else None,
            answered_from=turn.answering.url if turn.answering else None,
            missing=", ".join(verdict.missing) if verdict else None,
            in_scope_by=kept,
        )
        if refused and kept is None:
            reason = f"outside IT support (scope score {turn.intent.scope_score:.2f}; "
            reason += f"{turn.confidence})"
            return Answer(body=compose_text(REFUSE_TEXT, Action.REFUSE), reason=reason + turn.by)
        if turn.follow_up and turn.reader is not Reader.LLM:
            # A follow-up ("im on linux") is the topic's kind of request, not a request of its
            # own. (The model read it with the topic already.)
            turn.read_intent = await asyncio.to_thread(deps.intents.classify, turn.search_text)
        return None


async def help_site_subjects(turn: Turn) -> str | None:
    """Why a question the scope model doubts is read from the configured help sites instead of
    refused (:mod:`orchestrator.sites`), or None: it names a subject of their profile, or no
    page of theirs has been read yet, so they are read before refusing (after that crawl, only
    a question that names their subjects, or one they answer, is kept). Only with help sites to
    crawl, and only within ``scope_site_margin`` under the threshold."""
    deps, settings = turn.deps, turn.settings
    if (
        deps.sites is None
        or not deps.may_crawl(settings)
        or turn.intent.scope_score < settings.scope_threshold - settings.scope_site_margin
    ):
        return None
    profile = await deps.sites.profile(settings.crawl_seed_urls)
    if named := profile.subjects_named(turn.asked):
        return f"names the help site's {', '.join(named)}"
    if profile.pages == 0 and turn.allow_crawl:
        return "the help site is not read yet: read before refusing"
    return None


def find_answer(turn: Turn) -> None:
    """Note the article that answers the question (:attr:`Turn.answering`): the best ranked
    one similar enough that covers the question's key terms (:mod:`orchestrator.sufficiency`;
    any similar one with the check switched off), or, when no crawl can follow a decline, one
    that stands out among those found (:func:`~orchestrator.sufficiency.last_resort`). A
    question with attachments is judged by similarity alone: the files' words (error codes, log
    lines) are not what an article is about."""
    settings, retrieval = turn.settings, turn.retrieval
    verdicts: list[Verdict] = []
    final = not turn.crawling and (
        turn.settled or not (turn.allow_crawl and turn.deps.may_crawl(settings))
    )

    def answers(article: Article) -> bool:
        verdict = judge_article(turn.asked, article, retrieval.terms, os=turn.os)
        if final:
            verdict = last_resort(verdict, article, retrieval)
        verdicts.append(verdict)
        return verdict.sufficient

    check = settings.sufficiency_check and not turn.attached and not turn.state.attachment_note
    turn.answering = answering_article(
        retrieval, settings.relevance_threshold, answers if check else None
    )
    turn.verdict = verdicts[0] if verdicts else None


async def crawl_settled(turn: Turn) -> bool:
    """Whether a crawl for this question read no new page lately, so none is started for it
    now (``crawl_settled_s``; :meth:`orchestrator.sites.SiteProfiles.settled`)."""
    deps, settings = turn.deps, turn.settings
    if (
        deps.sites is None
        or not settings.crawl_settled_s
        or not turn.allow_crawl
        or not deps.may_crawl(settings)
    ):
        return False
    return await deps.sites.settled(settings.crawl_seed_urls, turn.search_text)


def similar_cases_early(turn: Turn) -> asyncio.Task[list[SimilarCase]] | None:
    """Start looking for similar resolved cases beside the knowledge-base search (a Chroma
    round trip of its own); only an answer uses them."""
    cases, settings = turn.deps.cases, turn.settings
    if cases is None or not settings.cases_max:
        return None
    return turn.background.soon(
        cases.similar, turn.search_text, settings.cases_max, settings.cases_min_score
    )


class RoutingStep(Step):
    """Requests of a category the assistant routes to technicians (``route_categories``) go
    straight to a ticket in the category's queue."""

    name = "routing"

    async def __call__(self, turn: Turn) -> Reply | None:
        intent = turn.intent
        if (
            turn.follow_up
            or intent.category not in turn.settings.route_categories
            or turn.deps.desk is None
        ):
            return None
        turn.conversation.new_topic(turn.text, intent.category)
        reason = f"{intent.category} requests go to the {intent.queue} queue"
        return Escalate(cause=EscalationReason.ROUTING, reason=reason + turn.by)


class CrawlStep(Step):
    """A question the knowledge base does not cover waits on a crawl of the IT help sites, when
    crawling is configured (never when the turn is decided again after its crawl)."""

    name = "crawl"

    async def __call__(self, turn: Turn) -> Reply | None:
        if (
            turn.covered
            or turn.settled
            or not turn.allow_crawl
            or not turn.deps.may_crawl(turn.settings)
        ):
            return None
        turn.state.crawl_question = turn.search_text
        turn.state.crawl_focus = list(turn.verdict.missing) if turn.verdict is not None else []
        return Crawl(reason=f"{turn.not_covered}; crawling" + turn.by)


class AnswerStep(Step):
    """When no article answers (none similar enough, or none about the question's key terms),
    an honest ``no_answer`` that names what is missing. Otherwise, all from that one article
    (:attr:`Turn.answering`): when it has separate steps per operating system and the user's
    is unknown, the question which one (once per topic); a troubleshooting request with a
    procedure of three or more steps becomes a checklist; anything else is answered by quoting
    the article's steps with citations (worded by the LLM when one is configured), with similar
    resolved cases."""

    name = "answer"

    async def __call__(self, turn: Turn) -> Reply | None:
        settings, conversation, retrieval = turn.settings, turn.conversation, turn.retrieval
        article = turn.answering
        if article is None:
            missing = turn.verdict.missing if turn.verdict is not None else ()
            body = compose_text(not_covered_text(missing), Action.NO_ANSWER)
            return Answer(body=body, reason=turn.not_covered + turn.by)
        intent = turn.intent
        if not turn.follow_up:
            conversation.new_topic(turn.text, intent.category)

        if ask_for_os(turn, article.chunks):
            conversation.asked.append("os")
            conversation.clarify_rounds += 1
            body = compose_clarify([OS_QUESTION])
            return Answer(body=body, reason="the steps differ per operating system" + turn.by)

        await turn.replies.progress(turn.state, "composing")
        passage = article.passage(turn.os)
        steps = checklist_steps(passage)
        if intent.kind == "troubleshooting" and len(steps) >= 3:
            conversation.checklist = ChecklistState(
                url=article.url,
                title=article.title,
                steps=steps,
                citation_snippet=snippet(passage.text),
            )
            reason = f"troubleshooting, {len(steps)} steps; {turn.confidence}"
            body = compose_checklist(article, passage, steps)
            return Answer(body=body, reason=reason + turn.by)

        body = compose_answer(
            retrieval,
            threshold=settings.relevance_threshold,
            see_also_margin=settings.see_also_margin,
            max_citations=settings.max_citations,
            os=turn.os,
            technical=conversation.technical,
            article=article,
        )
        if turn.deps.llm.enabled:
            body = await written_by_the_model(turn, passage, body)
        if turn.similar_cases is not None:
            # After the knowledge base, and only when a resolved ticket is really alike.
            body.similar_cases = await turn.similar_cases
        reason = f"{intent.kind} {intent.category}; {turn.confidence}"
        return Answer(body=body, reason=reason + turn.by)


def ask_for_os(turn: Turn, document: Sequence[Hit]) -> bool:
    """One OS's variant of the steps matches about as well as anything, the user's OS is
    unknown and was not asked for in this topic: which one applies is worth asking."""
    top = max(hit.score for hit in document)
    return (
        any(section_os(hit) and hit.score >= top - OS_MATCH_MARGIN for hit in document)
        and len(os_sections(document)) >= 2
        and not turn.os
        and "os" not in turn.conversation.asked
        and turn.conversation.clarify_rounds < turn.settings.clarify_cap
    )


async def written_by_the_model(turn: Turn, passage: Hit, extractive: AnswerBody) -> AnswerBody:
    """The answer worded by the model from the same passages; any failure falls back to the
    extractive answer. The user sees it being written, unless it is critiqued first
    (``llm_critique``): then only what the critique leaves is sent, and its confidence is the
    turn's (:attr:`Turn.judged`)."""
    hits = [passage, *turn.retrieval.hits]
    context = list({hit.chunk_id: hit for hit in hits if hit.score > 0}.values())
    settings = turn.settings
    if critique_applies(settings.llm_critique, passage):
        critiqued = await critiqued_answer(
            turn.deps.llm,
            turn.text,
            context,
            extractive,
            min_confidence=settings.critique_min_confidence,
        )
        turn.judged = critiqued.confidence  # in the decision's audit record
        return critiqued.body

    async def writing(so_far: str) -> None:
        await turn.replies.progress(turn.state, "writing", so_far)

    return await generate_answer(
        turn.deps.llm,
        turn.text,
        context,
        extractive,
        on_text=writing,
        interval_s=settings.llm_stream_interval_s,
    )
