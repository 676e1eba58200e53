"""Turns that wait on a crawl, with real Redis, a real Chroma collection and the real models.

The crawler fleet's place is taken by a recorder of what the orchestrator asks of it (the bus
path, with the real fleet, is tested on the stack in ``tests/test_crawl_loop.py``); the pages it
would have read are written into the collection the way the indexer writes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
import redis.asyncio as aioredis

from contracts.events import Action, ChunksIndexed, QueryReceived
from contracts.periodic import every
from orchestrator.config import OrchestratorSettings
from orchestrator.crawl import DEADLINES_KEY, sweep_due
from orchestrator.embedding import QueryEncoder
from orchestrator.intent import IntentClassifier
from orchestrator.service import Orchestrator
from orchestrator.sites import SiteProfiles
from orchestrator.state import TurnStatus
from orchestrator.sufficiency import Verdict, judge_article
from orchestrator.tests import stand_ins
from orchestrator.tests.articles import add
from orchestrator.tests.crawl_turns import SEED, make_orchestrator
from orchestrator.tests.stand_ins import RecordingFleet, RecordingReplies
from orchestrator.turn import question as question_steps
from tests.support import wait_until

PAGE = "http://help.example/badges/zephyr.html"
QUESTION = "How do I load a new ribbon into the Zephyr badge printer?"
PAGE_BODY = (
    "To load a new ribbon into the Zephyr badge printer:\n"
    "1. Open the printer's front cover.\n"
    "2. Lift the print head and take out the empty ribbon cassette.\n"
    "3. Slide the new ribbon cassette in until it clicks, then close the cover."
)


@pytest.fixture
def collection(articles_collection: Any) -> Any:
    return articles_collection


def query(text: str = QUESTION) -> QueryReceived:
    """The badge printer question (or ``text``) as the redactor hands it on."""
    return stand_ins.query(text)


def indexed(event: QueryReceived, *urls: str) -> ChunksIndexed:
    return ChunksIndexed(
        correlation_id=event.correlation_id,
        conversation_id=event.conversation_id,
        urls=list(urls),
        chunks=1,
        job_id=event.correlation_id,
        source_event_id="pages-" + "+".join(urls),
    )


@pytest.fixture
def orchestrator(
    encoder: QueryEncoder,
    intents: IntentClassifier,
    collection: Any,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
) -> Orchestrator:
    return make_orchestrator(encoder, intents, collection, redis, fleet)


async def test_a_question_the_kb_lacks_waits_on_a_crawl_and_is_answered_from_the_page(
    orchestrator: Orchestrator,
    fleet: RecordingFleet,
    collection: Any,
    encoder: QueryEncoder,
    redis: aioredis.Redis,
) -> None:
    event, replies = query(), RecordingReplies()

    await orchestrator.handle_query(event, replies)

    assert replies.answers == []  # not answered yet, and no worker waits
    assert ("crawling", replies.progress_seen[-1][1]) == replies.progress_seen[-1]
    (request,) = fleet.requests
    assert request.seed_urls == [SEED]
    assert request.job_id == request.correlation_id == event.correlation_id
    assert request.reply_to == "reply.test"
    assert "Zephyr" in request.question
    turn = await orchestrator.deps.turns.get(event.correlation_id)
    assert turn is not None
    assert turn.status is TurnStatus.CRAWLING
    assert await redis.zscore(DEADLINES_KEY, event.correlation_id) is not None

    # The indexer wrote the crawled page and said so.
    add(collection, encoder, PAGE, "Zephyr badge printer ribbons", "Load a ribbon", PAGE_BODY)
    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, PAGE))

    (answer,) = replies.answers
    assert answer.action in {Action.ANSWER, Action.CHECKLIST}
    assert answer.citations[0].url == PAGE
    assert "front cover" in answer.answer
    assert answer.crawled  # the analytics count it as a crawled turn, whatever came first
    assert ("indexed", "1 page read and indexed") in replies.progress_seen
    assert fleet.stops == [event.correlation_id]  # enough: the crawl ends early
    assert await redis.zscore(DEADLINES_KEY, event.correlation_id) is None
    turn = await orchestrator.deps.turns.get(event.correlation_id)
    assert turn is not None
    assert turn.status is TurnStatus.ANSWERED

    # A redelivered chunks.indexed or crawl.finished changes nothing.
    await orchestrator.resume(event.correlation_id, replies, finished=1)
    assert len(replies.answers) == 1


async def test_pages_that_do_not_answer_keep_the_turn_waiting_until_the_crawl_ends(
    orchestrator: Orchestrator, fleet: RecordingFleet, collection: Any, encoder: QueryEncoder
) -> None:
    event, replies = query(), RecordingReplies()
    await orchestrator.handle_query(event, replies)
    other = "http://help.example/parking.html"
    add(collection, encoder, other, "Parking", "Parking", "Visitors park on level -2 of garage B.")

    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, other))
    assert replies.answers == []

    await orchestrator.resume(event.correlation_id, replies, finished=1)
    (answer,) = replies.answers
    assert answer.action is Action.NO_ANSWER
    assert answer.answer.startswith("I also read 1 page of the IT help site")
    assert fleet.stops == []  # it ended by itself


async def test_a_turn_past_its_deadline_is_answered_once_by_the_sweep(
    encoder: QueryEncoder,
    intents: IntentClassifier,
    collection: Any,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
) -> None:
    # Two replicas, no crawler: nothing but the deadline resumes the turn.
    replicas = [
        make_orchestrator(
            encoder, intents, collection, redis, fleet, crawl_deadline_s=0.2, crawl_grace_s=0
        )
        for _ in range(2)
    ]
    event, replies = query(), RecordingReplies()
    await replicas[0].handle_query(event, replies)
    assert replies.answers == []

    rounds = [0 for _ in replicas]
    async with contextlib.AsyncExitStack() as stack:
        for index, replica in enumerate(replicas):

            async def sweep(r: Orchestrator = replica, i: int = index) -> None:
                await sweep_due(
                    r.deps.waits,  # type: ignore[arg-type]
                    lambda cid: r.resume(cid, replies, deadline=True),
                )
                rounds[i] += 1

            await stack.enter_async_context(every(0.05, sweep, name="sweep"))
        await wait_until(lambda: replies.answers, 20)
        answered_at = list(rounds)
        # Each replica then sweeps twice more (a whole round begun after the answer), and no
        # second answer comes of it.
        await wait_until(
            lambda: all(n >= a + 2 for n, a in zip(rounds, answered_at, strict=True)), 20
        )

    (answer,) = replies.answers
    assert answer.action is Action.NO_ANSWER
    assert await redis.zcard(DEADLINES_KEY) == 0


async def test_concurrent_resumptions_answer_once(
    orchestrator: Orchestrator, collection: Any, encoder: QueryEncoder
) -> None:
    event, replies = query(), RecordingReplies()
    await orchestrator.handle_query(event, replies)
    add(collection, encoder, PAGE, "Zephyr badge printer ribbons", "Load a ribbon", PAGE_BODY)

    await asyncio.gather(
        orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, PAGE)),
        orchestrator.resume(event.correlation_id, replies, finished=1),
        orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, PAGE)),
    )

    assert len(replies.answers) == 1
    assert replies.answers[0].citations[0].url == PAGE


async def test_without_seed_urls_the_turn_is_answered_at_once(
    encoder: QueryEncoder,
    intents: IntentClassifier,
    collection: Any,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
) -> None:
    orchestrator = make_orchestrator(encoder, intents, collection, redis, fleet)
    orchestrator.settings.crawl_seed_urls = []
    replies = RecordingReplies()

    await orchestrator.handle_query(query(), replies)

    assert fleet.requests == []
    (answer,) = replies.answers
    assert answer.action is Action.NO_ANSWER


async def test_a_page_that_only_names_the_topic_does_not_end_the_crawl(
    orchestrator: Orchestrator, fleet: RecordingFleet, collection: Any, encoder: QueryEncoder
) -> None:
    event, replies = query(), RecordingReplies()
    await orchestrator.handle_query(event, replies)
    hub = "http://help.example/badges/"
    add(collection, encoder, hub, "Zephyr badge printer", "Zephyr badge printer", "Ribbons.")

    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, hub))
    assert replies.answers == []  # covered, but says nothing: the crawl goes on
    assert fleet.stops == []

    add(collection, encoder, PAGE, "Zephyr badge printer ribbons", "Load a ribbon", PAGE_BODY)
    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, PAGE))
    (answer,) = replies.answers
    assert answer.citations[0].url == PAGE
    assert fleet.stops == [event.correlation_id]


async def test_a_finished_crawl_waits_for_its_last_pages_to_be_indexed(
    orchestrator: Orchestrator, fleet: RecordingFleet, collection: Any, encoder: QueryEncoder
) -> None:
    event, replies = query(), RecordingReplies()
    await orchestrator.handle_query(event, replies)
    other = "http://help.example/parking.html"
    add(collection, encoder, other, "Parking", "Parking", "Visitors park on level -2 of garage B.")
    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, other))
    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, other))

    # The crawl published two pages; one was indexed (its redelivery counts once).
    await orchestrator.resume(event.correlation_id, replies, finished=2)
    assert replies.answers == []

    add(collection, encoder, PAGE, "Zephyr badge printer ribbons", "Load a ribbon", PAGE_BODY)
    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, PAGE))
    (answer,) = replies.answers
    assert answer.citations[0].url == PAGE
    assert fleet.stops == []  # it had ended already


TONER_QUESTION = "How do I change the toner cartridge of the shared laser printer?"
TONER_PAGE = "http://help.example/printers/toner.html"
TONER_BODY = (
    "Change the toner cartridge when the printer's display asks for it:\n"
    "1. Open the front door of the printer.\n"
    "2. Pull the empty toner cartridge out by its handle.\n"
    "3. Shake the new toner cartridge and push it in until it clicks."
)


async def test_a_similar_article_that_is_not_about_the_question_sends_a_crawl_toward_it(
    orchestrator: Orchestrator,
    fleet: RecordingFleet,
    collection: Any,
    encoder: QueryEncoder,
) -> None:
    """The knowledge base's printer article is similar (above the relevance threshold) but
    says nothing about toner: the turn crawls, planned toward the words it lacks, and is
    answered from the page about them."""
    orchestrator.settings = orchestrator.settings.model_copy(update={"sufficiency_check": True})
    event, replies = query(TONER_QUESTION), RecordingReplies()
    retrieval = orchestrator.deps.retriever.retrieve(TONER_QUESTION, 5)
    assert retrieval.hits[0].url == "https://kb.example/printer"
    assert retrieval.confidence >= OrchestratorSettings().relevance_threshold

    await orchestrator.handle_query(event, replies)

    assert replies.answers == []
    (request,) = fleet.requests
    assert "toner" in request.focus
    assert "cartridge" in request.focus
    assert "printer" not in request.focus  # the article's title has it
    assert request.question.startswith(TONER_QUESTION)

    add(collection, encoder, TONER_PAGE, "Change the toner cartridge", "Toner", TONER_BODY)
    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, TONER_PAGE))
    (answer,) = replies.answers
    assert answer.citations[0].url == TONER_PAGE
    assert "front door" in answer.answer


async def test_without_a_crawl_the_similar_article_is_not_given_as_the_answer(
    orchestrator: Orchestrator, fleet: RecordingFleet
) -> None:
    orchestrator.settings = orchestrator.settings.model_copy(
        update={"crawl_enabled": False, "sufficiency_check": True}
    )
    replies = RecordingReplies()
    await orchestrator.handle_query(query(TONER_QUESTION), replies)
    (answer,) = replies.answers
    assert answer.action is Action.NO_ANSWER
    assert answer.citations == []
    assert "“toner”" in answer.answer or "“cartridge”" in answer.answer
    assert fleet.requests == []


DISPLAY_QUESTION = "The display switches off while I read, how can I keep it on longer?"
DELAY_PAGE = "http://help.example/power/blank-screen.html"
DELAY_BODY = (
    "Choose how long the computer waits before it turns the display off when idle: open Power "
    "settings and change the delay, or set it to Never."
)


async def test_a_page_in_other_words_answers_once_the_crawl_is_over(
    orchestrator: Orchestrator, fleet: RecordingFleet, collection: Any, encoder: QueryEncoder
) -> None:
    """The crawled page says "blank screen delay" where the user says "switches off" and "keep
    it on longer": its words do not vouch for it, so the turn waits while the crawl may still
    read a page in the question's words. Once the crawl is over, a decline would be final, and
    the page that stands out among those found answers."""
    orchestrator.settings = orchestrator.settings.model_copy(update={"sufficiency_check": True})
    event, replies = query(DISPLAY_QUESTION), RecordingReplies()
    await orchestrator.handle_query(event, replies)
    assert len(fleet.requests) == 1

    add(collection, encoder, DELAY_PAGE, "Blank screen delay", "Power settings", DELAY_BODY)
    await orchestrator.resume(event.correlation_id, replies, indexed=indexed(event, DELAY_PAGE))
    assert replies.answers == []  # the crawl goes on
    assert fleet.stops == []

    await orchestrator.resume(event.correlation_id, replies, finished=1)
    (answer,) = replies.answers
    assert answer.action is Action.ANSWER
    assert answer.citations[0].url == DELAY_PAGE
    assert "Power settings" in answer.answer


async def test_without_a_crawl_a_page_that_stands_out_answers_at_once(
    orchestrator: Orchestrator, fleet: RecordingFleet, collection: Any, encoder: QueryEncoder
) -> None:
    """With no help site to read, declining is final from the start: the page that stands out
    answers, while a merely similar one (the toner question above) still does not."""
    orchestrator.settings = orchestrator.settings.model_copy(
        update={"crawl_enabled": False, "sufficiency_check": True}
    )
    add(collection, encoder, DELAY_PAGE, "Blank screen delay", "Power settings", DELAY_BODY)
    replies = RecordingReplies()
    await orchestrator.handle_query(query(DISPLAY_QUESTION), replies)
    (answer,) = replies.answers
    assert answer.citations[0].url == DELAY_PAGE
    assert fleet.requests == []


async def test_a_question_whose_crawl_read_nothing_new_is_answered_at_once_when_asked_again(
    encoder: QueryEncoder,
    intents: IntentClassifier,
    collection: Any,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
) -> None:
    """Every page the crawl's plan reached had been read within the freshness window: the
    question is answered from what is indexed, and asked again (another conversation, other
    spacing and case) it is answered at once instead of waiting on a crawl that would read
    nothing. Another question still crawls, and a crawl that read pages settles nothing."""
    sites = SiteProfiles(redis)
    orchestrator = make_orchestrator(
        encoder, intents, collection, redis, fleet, sites, sufficiency_check=True
    )
    add(collection, encoder, DELAY_PAGE, "Blank screen delay", "Power settings", DELAY_BODY)
    first, replies = query(DISPLAY_QUESTION), RecordingReplies()
    await orchestrator.handle_query(first, replies)
    assert len(fleet.requests) == 1  # the words do not vouch for the page: the site is read
    await orchestrator.resume(first.correlation_id, replies, finished=0, read_nothing=True)
    (answer,) = replies.answers
    assert answer.citations[0].url == DELAY_PAGE

    again = RecordingReplies()
    await orchestrator.handle_query(
        query("  the display SWITCHES off while I read, how can I keep it on longer?"), again
    )
    (answer,) = again.answers
    assert answer.citations[0].url == DELAY_PAGE
    assert len(fleet.requests) == 1  # no second crawl
    assert [stage for stage, _ in again.progress_seen if stage == "crawling"] == []

    toner, toner_replies = query(TONER_QUESTION), RecordingReplies()
    await orchestrator.handle_query(toner, toner_replies)
    assert len(fleet.requests) == 2
    await orchestrator.resume(toner.correlation_id, toner_replies, finished=3)
    await orchestrator.handle_query(query(TONER_QUESTION), RecordingReplies())
    assert len(fleet.requests) == 3  # that crawl read pages: asked again, the site is read again


async def test_what_the_redactor_replaced_is_not_asked_about(
    orchestrator: Orchestrator,
    collection: Any,
    encoder: QueryEncoder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check weighs what the user asked about, not the details the redactor took out:
    it gets the question with the placeholders (which it leaves out), not with the words they
    read as to the models ("an email address", "a card number")."""
    orchestrator.settings = orchestrator.settings.model_copy(
        update={"crawl_enabled": False, "sufficiency_check": True}
    )
    add(collection, encoder, TONER_PAGE, "Change the toner cartridge", "Toner", TONER_BODY)
    judged: list[list[str]] = []

    def judge(question: str, *args: Any, **kwargs: Any) -> Verdict:
        verdict = judge_article(question, *args, **kwargs)
        judged.append([term.word for term in verdict.terms])
        return verdict

    monkeypatch.setattr(question_steps, "judge_article", judge)
    replies = RecordingReplies()
    text = f"Hi, I'm <PERSON_1> (<EMAIL_ADDRESS_1>, card <CREDIT_CARD_1>). {TONER_QUESTION}"
    await orchestrator.handle_query(query(text), replies)

    (answer,) = replies.answers
    assert answer.citations[0].url == TONER_PAGE
    assert judged
    assert all("toner" in words for words in judged)
    assert not {word for words in judged for word in words} & {"email", "address", "number"}
