"""The turn with an LLM configured: the model's reading decides, the classifier stands in.

The orchestrator runs with a stand-in retriever and classifier (no models, no Chroma) and the
real OpenAI-compatible provider against the local fake server, so what is checked is the turn's
logic: which reading is used, what runs concurrently, what the user sees while the model writes.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from pydantic import SecretStr

from contracts.events import Action, AnswerBody
from contracts.readers import ANONYMOUS, Principals
from orchestrator.config import OrchestratorSettings
from orchestrator.intent import Intent, IntentClassifier
from orchestrator.llm import LLMProvider, NoLLM, OpenAICompatible, OpenAICompatibleConfig
from orchestrator.memory import Conversation, ConversationStore
from orchestrator.retrieval import Hit, Retrieval, Retriever
from orchestrator.service import BY_CLASSIFIER, BY_LLM, Orchestrator
from orchestrator.state import TurnState, TurnStore
from orchestrator.turn import TurnDeps
from tests.support.fake_openai import TEST_KEY, FakeOpenAI, Reply, reading, server_error

QUEUES = {
    "connectivity": "Network",
    "peripheral_exchange": "Hardware Logistics",
    "other": "Service Desk",
}
MONITOR = Hit(
    chunk_id="request-second-monitor#0",
    text="To request a second monitor:\n\n1. Open the service portal.\n2. Choose Hardware.\n"
    "3. Submit the form with your manager's name.",
    url="https://it.northwind.example/kb/request-second-monitor",
    title="Request a second monitor",
    section="Request a second monitor",
    score=0.82,
)
UNRELATED = Hit(
    chunk_id="office-wifi#0",
    text="Connect to NW-Corp and sign in with your account.",
    url="https://it.northwind.example/kb/office-wifi",
    title="Office Wi-Fi",
    section="Office Wi-Fi",
    score=0.12,
)


def classified(**changes: Any) -> Intent:
    values: dict[str, Any] = {
        "kind": "informational",
        "kind_confidence": 0.9,
        "category": "peripheral_exchange",
        "category_confidence": 0.9,
        "queue": "Hardware Logistics",
        "in_scope": True,
        "scope_score": 0.95,
        "conversational": False,
        "request_human": False,
        "request_human_score": 0.01,
    }
    return Intent.model_validate({**values, **changes})


class StubClassifier:
    """The learned classifier's place: a fixed intent, and the texts it was asked about."""

    def __init__(self, intent: Intent) -> None:
        self.intent = intent
        self.queues = dict(QUEUES)
        self.texts: list[str] = []

    def classify(self, text: str) -> Intent:
        self.texts.append(text)
        return self.intent


class StubRetriever:
    """Returns fixed hits; ``searched`` is set once a search has started."""

    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits
        self.searched = threading.Event()
        self.queries: list[str] = []
        self.readers: list[Principals] = []

    def retrieve(
        self, question: str, k: int, *, os: str | None = None, principals: Principals = ANONYMOUS
    ) -> Retrieval:
        self.queries.append(question)
        self.readers.append(principals)
        self.searched.set()
        return Retrieval(hits=self.hits[:k], best_document=self.hits[:1])


class RecordedReplies:
    def __init__(self) -> None:
        self.progress_seen: list[tuple[str, str | None]] = []

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        self.progress_seen.append((stage, detail))

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        raise AssertionError("decide() does not send the answer")


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[OpenAICompatible]:
    config = OpenAICompatibleConfig(
        base_url=fake.base_url,
        model="fake-model",
        api_key=SecretStr(TEST_KEY),
        read_timeout_s=5.0,
        max_retries=1,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
    )
    provider = OpenAICompatible(config)
    yield provider
    await provider.aclose()


class Turn:
    """One orchestrator with stand-ins, and a conversation to run messages through."""

    def __init__(self, llm: LLMProvider, intent: Intent, hits: list[Hit]) -> None:
        self.classifier = StubClassifier(intent)
        self.retriever = StubRetriever(hits)
        self.replies = RecordedReplies()
        self.conversation = Conversation(conversation_id="conv-1")
        deps = TurnDeps(
            retriever=cast(Retriever, self.retriever),
            intents=cast(IntentClassifier, self.classifier),
            turns=cast(TurnStore, None),  # decide() keeps no state of its own
            conversations=cast(ConversationStore, None),
            llm=llm,
        )
        self.orchestrator = Orchestrator(deps, OrchestratorSettings(llm_stream_interval_s=0))

    async def say(
        self, text: str, *, groups: list[str] | None = None, authenticated: bool = False
    ) -> tuple[AnswerBody, str]:
        turn = TurnState(
            correlation_id="turn-1",
            conversation_id="conv-1",
            user_id="u-1",
            groups=groups or [],
            authenticated=authenticated,
            reply_to="replies.test",
            question=text,
        )
        return await self.orchestrator.decide(text, self.conversation, turn, self.replies)


WEATHER = "What's the weather like in Paris tomorrow?"


async def test_the_search_is_for_the_turns_reader() -> None:
    turn = Turn(NoLLM(), classified(), [MONITOR])
    await turn.say("How do I request a second monitor?", groups=["hr-team"], authenticated=True)
    await turn.say("How do I request a second monitor?", groups=["hr-team"], authenticated=False)
    assert turn.retriever.readers == [
        Principals(user_id="u-1", groups=frozenset({"hr-team"})),
        ANONYMOUS,  # groups an unverified user claims count for nothing
    ]


async def test_without_a_model_the_classifier_decides() -> None:
    turn = Turn(NoLLM(), classified(in_scope=False, scope_score=0.1), [UNRELATED])
    body, reason = await turn.say(WEATHER)
    assert body.action is Action.REFUSE
    assert reason == "outside IT support (scope score 0.10; best similarity 0.120)"
    assert turn.classifier.texts == [WEATHER]


async def test_the_models_reading_takes_the_classifiers_place(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(reading(category="connectivity"))
    turn = Turn(llm, classified(in_scope=False, scope_score=0.1), [UNRELATED])
    body, reason = await turn.say(WEATHER)
    # The classifier would have refused; the model reads it as IT, which the KB does not cover.
    assert body.action is Action.NO_ANSWER
    assert reason.endswith(BY_LLM)
    assert turn.classifier.texts == []
    [request] = fake.requests
    assert request.body["response_format"] == {"type": "json_object"}
    assert f"<message>\n{WEATHER}\n</message>" in request.messages[-1]["content"]


@pytest.mark.parametrize(
    "failure",
    [Reply("It is about the weather."), Reply(reading(kind="chit-chat")), server_error(500)],
)
async def test_without_a_valid_reading_the_classifier_decides(
    fake: FakeOpenAI, llm: OpenAICompatible, failure: Reply
) -> None:
    fake.enqueue(failure, failure, reading())
    turn = Turn(llm, classified(in_scope=False, scope_score=0.1), [UNRELATED])
    body, reason = await turn.say(WEATHER)
    assert body.action is Action.REFUSE
    assert reason == "outside IT support (scope score 0.10; best similarity 0.120)" + BY_CLASSIFIER
    assert turn.classifier.texts == [WEATHER]


async def test_the_knowledge_base_is_searched_while_the_model_reads(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    turn = Turn(llm, classified(), [MONITOR])
    seen: dict[str, bool] = {}

    def respond(body: dict[str, Any]) -> Reply | str:
        if body.get("response_format"):
            # Blocks the fake server's own thread only; the search must start without waiting
            # for this reading, or it never comes in time.
            seen["search started before the reading"] = turn.retriever.searched.wait(5)
            return reading(kind="troubleshooting")
        return "Open the service portal and choose Hardware [1]."

    fake.responder = respond
    body, reason = await turn.say("How do I request a second monitor?")
    assert seen == {"search started before the reading": True}
    assert turn.retriever.queries == ["How do I request a second monitor?"]  # searched once
    assert body.action is Action.CHECKLIST  # the model's kind: troubleshooting
    assert reason == "troubleshooting, 3 steps; best similarity 0.820" + BY_LLM


async def test_the_answer_is_sent_as_writing_progress_while_the_model_writes(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(
        reading(),
        Reply(
            chunks=["Open the ", "service portal ", "[1], then ", "choose Hardware [1]."],
            chunk_delay_s=0.02,
        ),
    )
    turn = Turn(llm, classified(), [MONITOR])
    body, reason = await turn.say("How do I request a second monitor?")
    assert body.answer == "Open the service portal [1], then choose Hardware [1]."
    assert [c.url for c in body.citations] == [MONITOR.url]
    assert reason == "informational other; best similarity 0.820" + BY_LLM
    stages = [stage for stage, _ in turn.replies.progress_seen]
    assert stages[:2] == ["searching", "composing"]
    assert set(stages[2:]) == {"writing"}
    written = [detail for stage, detail in turn.replies.progress_seen if stage == "writing"]
    assert written[0] == "Open the"
    assert len(written) == 4
    assert all(detail and body.answer.startswith(detail) for detail in written)
    assert ("searching", None) in turn.replies.progress_seen


async def test_a_follow_up_is_read_with_its_topic_and_not_classified_again(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(reading(kind="troubleshooting"), "Open the service portal [1].")
    turn = Turn(llm, classified(), [MONITOR])
    turn.conversation.topic = "How do I request a second monitor?"
    body, reason = await turn.say("im on linux")
    assert (
        "<topic>\nHow do I request a second monitor?\n</topic>"
        in (fake.requests[0].messages[-1]["content"])
    )
    assert turn.classifier.texts == []  # neither the message nor the topic
    assert turn.retriever.queries == ["How do I request a second monitor? im on linux"]
    assert body.action is Action.CHECKLIST
    assert reason.endswith(BY_LLM)
