"""The turn with an LLM configured: the model's reading decides, the classifier stands in.

The orchestrator runs with a stand-in retriever and classifier (no models, no Chroma) and the
real OpenAI-compatible provider against the local fake server, so what is checked is the turn's
logic: which reading is used, what runs concurrently, what the user sees while the model writes.
"""

from __future__ import annotations

from typing import Any

import pytest

from contracts.events import Action
from contracts.readers import ANONYMOUS, Principals
from orchestrator.llm import NoLLM, OpenAICompatible
from orchestrator.service import BY_CLASSIFIER, BY_LLM
from orchestrator.tests.stand_ins import MONITOR, UNRELATED, Turn, classified
from tests.support.fake_openai import FakeOpenAI, Reply, reading, server_error

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
