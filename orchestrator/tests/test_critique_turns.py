"""The critique in a turn: which answers it checks (``ORCHESTRATOR_LLM_CRITIQUE``), and what a
turn it doubts does (says it is not sure, offers a technician, reports itself on
``notice.unanswered``). Stand-ins for the retriever and the classifier, the real provider against
the local chat-completions server; the notice goes through the session's real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import Action, AnswerBody, QueryReceived, UnansweredNotice
from contracts.settings import ServiceSettings
from orchestrator.handlers import BusReplies
from orchestrator.llm import NoLLM, OpenAICompatible
from orchestrator.llm.critique import OFFER_TECHNICIAN, UNSURE_WITH_SUPPORT
from orchestrator.memory import Conversation, ConversationStore
from orchestrator.tests.stand_ins import MONITOR, StubRetriever, Turn, classified, make, query
from tests.support.fake_openai import FakeOpenAI, critique, critiqued_parts, json_mode, reading

SYNCED = replace(MONITOR, source="it-wiki")
DRAFT = "Open the service portal and choose Hardware [1]. Monitors arrive within two hours [1]."
QUESTION = "How do I request a second monitor?"


def judge(supported: list[bool], confidence: float) -> Any:
    """A responder: the reading, the draft, and the critique ``supported``/``confidence``."""

    def respond(body: dict[str, Any]) -> str:
        if critiqued_parts(body):
            return critique(supported, confidence)
        return reading() if json_mode(body) else DRAFT

    return respond


@pytest.mark.parametrize("mode", ["off", "sources"])
async def test_sources_mode_leaves_uploaded_and_demo_articles_as_the_model_wrote_them(
    fake: FakeOpenAI,
    llm: OpenAICompatible,
    mode: str,
) -> None:
    fake.responder = judge([True, False], 0.9)
    turn = Turn(llm, classified(), [MONITOR])
    turn.orchestrator.settings.llm_critique = mode  # type: ignore[assignment]
    body, _ = await turn.say(QUESTION)
    assert body.answer == DRAFT
    assert not any(critiqued_parts(request.body) for request in fake.requests)


@pytest.mark.parametrize("mode", ["sources", "all"])
async def test_an_answer_from_a_synced_source_is_critiqued(
    fake: FakeOpenAI,
    llm: OpenAICompatible,
    mode: str,
) -> None:
    fake.responder = judge([True, False], 0.9)
    turn = Turn(llm, classified(), [SYNCED])
    turn.orchestrator.settings.llm_critique = mode  # type: ignore[assignment]
    body, _ = await turn.say(QUESTION)
    assert body.answer == "Open the service portal and choose Hardware [1]."
    stages = [stage for stage, _ in turn.replies.progress_seen]
    assert "writing" not in stages  # an unchecked draft is never shown


async def test_without_a_model_the_answer_is_the_same_whatever_the_mode() -> None:
    answers = []
    for mode in ("off", "all"):
        turn = Turn(NoLLM(), classified(), [SYNCED])
        turn.orchestrator.settings.llm_critique = mode  # type: ignore[assignment]
        answers.append(await turn.say(QUESTION))
    assert answers[0] == answers[1]
    assert answers[0][0].answer.startswith("From “Request a second monitor” [1]:")


@pytest.fixture
async def client(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A database of the test's own."""
    connection = aioredis.from_url(fresh_redis_url)
    yield connection
    await connection.aclose()


async def over_the_bus(
    url: str,
    client: aioredis.Redis,
    provider: OpenAICompatible,
    asked: QueryReceived,
) -> tuple[AnswerBody, Conversation]:
    """The turn run as the service runs it (its answer and records written to Redis, and its
    notice published); what it answered and what the conversation holds afterwards."""
    bus = Bus(ServiceSettings(redis_url=url), "orchestrator-test")
    await bus.start()
    try:
        orchestrator, turns = make(client, [], StubRetriever([SYNCED]), llm=provider)
        orchestrator.settings.llm_critique = "sources"
        replies = BusReplies(bus, turns, orchestrator.deps.conversations)
        await orchestrator.handle_query(asked, replies)
        await replies.drain(asked.correlation_id)
    finally:
        await bus.stop()
    state = await turns.get(asked.correlation_id)
    assert state is not None
    assert state.answer is not None
    conversation = await ConversationStore(client, 600).load(asked.conversation_id)
    return state.answer, conversation


async def test_a_doubted_answer_says_so_offers_a_technician_and_is_reported(
    fake: FakeOpenAI,
    llm: OpenAICompatible,
    fresh_redis_url: str,
    client: aioredis.Redis,
) -> None:
    fake.responder = judge([True, False], 0.2)
    asked = query("My e-mail is <EMAIL_ADDRESS_1>, how do I request a second monitor?")
    answer, conversation = await over_the_bus(fresh_redis_url, client, llm, asked)
    assert answer.action is Action.ANSWER
    assert answer.answer == (
        f"{UNSURE_WITH_SUPPORT}\n\nOpen the service portal and choose Hardware [1].\n\n"
        f"{OFFER_TECHNICIAN}"
    )
    assert conversation.ticket_offer  # a "yes" now files a ticket
    entries: Any = await client.xrange("notice.unanswered")
    [notice] = [decode_entry(fields, UnansweredNotice) for _, fields in entries]
    assert notice.outcome == "low_confidence"
    assert notice.correlation_id == asked.correlation_id
    assert notice.question == asked.text  # the redacted question, placeholder and all


async def test_a_confident_critique_sends_no_notice(
    fake: FakeOpenAI,
    llm: OpenAICompatible,
    fresh_redis_url: str,
    client: aioredis.Redis,
) -> None:
    fake.responder = judge([True, True], 0.9)
    answer, conversation = await over_the_bus(fresh_redis_url, client, llm, query())
    assert answer.answer == DRAFT
    assert await client.xrange("notice.unanswered") == []
    assert conversation.ticket_offer is None
