"""The turn as a list of named steps: the order the documentation gives, a step added by listing
it (the others untouched), and what a reply does decided by its type, never by its reason.

The orchestrator runs on the session's real Redis with stand-ins for the models (no encoder, no
Chroma: ``stand_ins.py``), so what is checked is how the steps make up the turn.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import cast

import pytest
import redis.asyncio as aioredis

import orchestrator.turn
from contracts.events import (
    Action,
    AnswerBody,
    EscalationReason,
    EscalationRequested,
    QueryReceived,
    TicketStatusRequested,
)
from orchestrator.config import OrchestratorSettings
from orchestrator.intent import IntentClassifier
from orchestrator.memory import ChecklistState, Conversation, ConversationStore
from orchestrator.retrieval import Retriever
from orchestrator.service import Orchestrator
from orchestrator.state import TurnState, TurnStatus, TurnStore
from orchestrator.tests.stand_ins import MONITOR, StubClassifier, StubRetriever, classified
from orchestrator.turn import TURN_STEPS, Answer, Reply, Section, Step, Steps, Turn, TurnDeps

DOCUMENTED_ORDER = (
    "checkpoint",
    "automation",
    "incident",
    "facts",
    "checklist",
    "intent",
    "retrieval",
    "routing",
    "crawl",
    "answer",
)
HOLIDAY_TEXT = "The service desk is closed on public holidays; this assistant is not."


class RecordingReplies:
    def __init__(self) -> None:
        self.answers: list[AnswerBody] = []

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        return None

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        self.answers.append(body)


class RecordingDesk:
    def __init__(self) -> None:
        self.requests: list[EscalationRequested] = []

    async def request(self, escalation: EscalationRequested) -> None:
        self.requests.append(escalation)

    async def status(self, request: TicketStatusRequested) -> None:
        raise AssertionError("no status question is asked here")


class HolidayStep(Step):
    """A step a deployment might add: questions about holidays get the desk's opening hours."""

    name = "holiday"

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, turn: Turn) -> Reply | None:
        self.asked.append(turn.text)
        if "holiday" not in turn.text.lower():
            return None
        return Answer(body=AnswerBody(answer=HOLIDAY_TEXT, action=Action.ANSWER), reason="holiday")


class SaysFixedStep(Step):
    """Replies with the reason a fixed checklist gives, but is no checklist."""

    name = "says-fixed"

    async def __call__(self, turn: Turn) -> Reply | None:
        body = AnswerBody(answer="Noted.", action=Action.ANSWER)
        return Answer(body=body, reason="fixed")


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """The shared database: every key here is named by a fresh conversation or turn id."""
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


def make_orchestrator(
    redis: aioredis.Redis, steps: Steps = TURN_STEPS, desk: RecordingDesk | None = None
) -> tuple[Orchestrator, StubClassifier]:
    classifier = StubClassifier(classified())
    deps = TurnDeps(
        retriever=cast(Retriever, StubRetriever([MONITOR])),
        intents=cast(IntentClassifier, classifier),
        turns=TurnStore(redis, 600),
        conversations=ConversationStore(redis, 600),
        desk=desk,
    )
    settings = OrchestratorSettings(cases_max=0, crawl_seed_urls=[])
    return Orchestrator(deps, settings, steps=steps), classifier


def query(text: str, conversation_id: str | None = None) -> QueryReceived:
    return QueryReceived(
        correlation_id=uuid.uuid4().hex,
        conversation_id=conversation_id or uuid.uuid4().hex,
        user_id="u1",
        text=text,
        reply_to="reply.test",
    )


def test_the_turn_asks_its_steps_in_the_documented_order() -> None:
    assert TURN_STEPS.names == DOCUMENTED_ORDER
    conversation = [step.name for step in TURN_STEPS if step.section is Section.CONVERSATION]
    assert conversation == ["checkpoint", "automation", "incident"]
    assert tuple(step.name for step in TURN_STEPS.question) == DOCUMENTED_ORDER[3:]
    # The package's own description of the turn lists the same steps in the same order.
    table = re.findall(r"^(\w+) {2,}\S", orchestrator.turn.__doc__ or "", re.MULTILINE)
    assert tuple(table) == DOCUMENTED_ORDER


def test_a_step_is_inserted_by_name_and_the_list_it_came_from_is_unchanged() -> None:
    holiday = HolidayStep()
    steps = TURN_STEPS.inserted(holiday, before="intent")
    assert steps.names == (*DOCUMENTED_ORDER[:5], "holiday", *DOCUMENTED_ORDER[5:])
    assert TURN_STEPS.inserted(holiday, after="answer").names[-1] == "holiday"
    assert TURN_STEPS.names == DOCUMENTED_ORDER
    assert steps.without("holiday").names == DOCUMENTED_ORDER
    with pytest.raises(ValueError, match="no step named 'weather'"):
        TURN_STEPS.inserted(holiday, before="weather")
    with pytest.raises(ValueError, match="unique"):
        steps.inserted(HolidayStep(), after="answer")


async def test_an_inserted_step_decides_the_turns_it_answers_and_passes_the_others(
    redis: aioredis.Redis,
) -> None:
    holiday = HolidayStep()
    orchestrator, classifier = make_orchestrator(
        redis, TURN_STEPS.inserted(holiday, before="intent")
    )
    replies = RecordingReplies()

    asked = query("On my macbook: is the service desk open over the holiday?")
    await orchestrator.handle_query(asked, replies)
    [answer] = replies.answers
    assert answer.answer == HOLIDAY_TEXT
    turn = await orchestrator.deps.turns.get(asked.correlation_id)
    assert turn is not None
    assert turn.status is TurnStatus.ANSWERED
    assert turn.reason == "holiday"
    assert classifier.texts == []  # the steps after it were not asked
    conversation = await orchestrator.deps.conversations.load(asked.conversation_id)
    assert conversation.facts["os"] == "macos"  # the facts step before it was

    other = query("How do I request a second monitor?")
    await orchestrator.handle_query(other, replies)
    assert holiday.asked[-1] == other.text
    assert replies.answers[-1].action is Action.ANSWER
    assert replies.answers[-1].citations[0].url == MONITOR.url
    turn = await orchestrator.deps.turns.get(other.correlation_id)
    assert turn is not None
    assert turn.reason == "informational peripheral_exchange; best similarity 0.820"


async def test_a_fixed_checklist_files_the_resolved_ticket_and_a_reason_alone_does_not(
    redis: aioredis.Redis,
) -> None:
    desk = RecordingDesk()
    orchestrator, _ = make_orchestrator(redis, desk=desk)
    conversation_id = uuid.uuid4().hex
    await orchestrator.deps.conversations.save(
        Conversation(
            conversation_id=conversation_id,
            topic="How do I request a second monitor?",
            category="peripheral_exchange",
            checklist=ChecklistState(
                url=MONITOR.url,
                title=MONITOR.title,
                steps=["Open the service portal.", "Choose Hardware.", "Submit the form."],
                citation_snippet="To request a second monitor",
            ),
        )
    )
    replies = RecordingReplies()
    await orchestrator.handle_query(query("that fixed it, thanks", conversation_id), replies)
    [resolved] = desk.requests
    assert resolved.reason is EscalationReason.RESOLVED
    # The topic just closed (the conversation has none after it), with the step that fixed it.
    assert resolved.problem == "How do I request a second monitor?"
    assert resolved.category == "peripheral_exchange"
    assert [(t.step, t.outcome) for t in resolved.tried] == [("Open the service portal.", "fixed")]
    assert replies.answers[-1].answer.startswith("Great, glad that fixed it.")

    # The same reason from another step files nothing: the reply's type decides, not its text.
    says_fixed, _ = make_orchestrator(
        redis, TURN_STEPS.inserted(SaysFixedStep(), before="facts"), desk=desk
    )
    await says_fixed.handle_query(query("I'd like a second monitor"), replies)
    assert replies.answers[-1].answer == "Noted."
    assert len(desk.requests) == 1
