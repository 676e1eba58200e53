"""The LLM plugin through the public API: the real stack, its model a local fake on loopback.

The fake (``tests/support/fake_openai.py``) speaks OpenAI's documented Chat Completions
protocol, streaming and error shapes included. :class:`ModelScript` plays the model: it reads
messages (JSON mode) and writes answers (streamed) from the passages the orchestrator sends, and
each test scripts where it deviates, so every assertion can tell the model's work from the
deterministic path's.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import websockets

from deploy.runner import Stack
from tests.support.fake_openai import FakeOpenAI, Reply, error_body, reading, server_error
from tests.support.stack import ask, log_records, logs, running_stack

pytestmark = pytest.mark.slow

KEY = "sk-stack-0123456789abcdef"
MODEL_MARK = "Written by the model:"
MONITOR = "How do I request a second monitor?"
MONITOR_ARTICLE = "/kb/request-second-monitor"
WEBCAM = "My webcam is not working in Teams meetings"
WEATHER = "What's the weather going to be like tomorrow?"
READ_TIMEOUT_S = 1.5
PASSAGE = re.compile(r"^\[(\d+)\] (.+)\nSource: (\S+)$", re.MULTILINE)


def passages_of(prompt: str) -> list[tuple[int, str, str]]:
    """(number, heading, url) of each passage in a grounded-answer prompt."""
    return [(int(n), heading, url) for n, heading, url in PASSAGE.findall(prompt)]


def model_answer(prompt: str, chunk_delay_s: float = 0.0) -> Reply:
    """A grounded answer citing passage 1, and a passage that was never sent."""
    passages = passages_of(prompt)
    heading = passages[0][1]
    text = (
        f"{MODEL_MARK} the steps are in the article “{heading}” [1]. Start with the first "
        f"step there [{len(passages) + 5}]."
    )
    words = text.split(" ")
    chunks = [word + " " for word in words[:-1]] + [words[-1]]
    return Reply(chunks=chunks, chunk_delay_s=chunk_delay_s)


class ModelScript:
    """The fake model's behaviour: a valid reading and a grounded answer unless told otherwise.

    ``readings`` and ``answers`` map a piece of the user's message (as the orchestrator sees it,
    redacted) to what the model does instead.
    """

    def __init__(self) -> None:
        self.readings: dict[str, Reply | str] = {}
        self.answers: dict[str, Callable[[str], Reply]] = {}

    def __call__(self, body: dict[str, Any]) -> Reply | str:
        prompt = str(body["messages"][-1]["content"])
        if body.get("response_format"):
            message = prompt.split("<message>\n", 1)[1].split("\n</message>", 1)[0]
            scripted = [reply for key, reply in self.readings.items() if key in message]
            return scripted[0] if scripted else reading()
        question = prompt.rsplit("Question: ", 1)[1]
        scripted_answers = [write for key, write in self.answers.items() if key in question]
        return (scripted_answers[0] if scripted_answers else model_answer)(prompt)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=KEY) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(model: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {
        "LLM_BASE_URL": model.base_url,
        "LLM_MODEL": "fake-model",
        "LLM_API_KEY": KEY,
        "ORCHESTRATOR_LLM_MAX_RETRIES": "1",
        "ORCHESTRATOR_LLM_READ_TIMEOUT_S": str(READ_TIMEOUT_S),
        "ORCHESTRATOR_LLM_RETRY_AFTER_MAX_S": "2",
    }
    with running_stack(tmp_path_factory.mktemp("llm"), env) as running:
        yield running


@pytest.fixture
def script(model: FakeOpenAI, stack: Stack) -> ModelScript:
    model.reset(api_key=KEY)
    current = ModelScript()
    model.responder = current
    return current


def say(stack: Stack, text: str) -> dict[str, Any]:
    """One message in a conversation of its own (the gateway issues its id), of a user of its
    own."""
    response = ask(stack, text)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def reason_of(stack: Stack, turn_id: str) -> str:
    [decided] = [
        record
        for record in log_records(stack, "orchestrator")
        if record.get("correlation_id") == turn_id and record.get("msg") == "decided"
    ]
    return str(decided["reason"])


def answer_requests(model: FakeOpenAI, question: str) -> list[dict[str, Any]]:
    return [
        r.body
        for r in model.requests
        if r.body.get("stream") and f"Question: {question}" in r.messages[-1]["content"]
    ]


def assert_extractive_monitor_answer(body: dict[str, Any]) -> None:
    """The deterministic answer: the article's steps verbatim, each line cited [1]."""
    assert body["action"] == "answer", body
    assert MODEL_MARK not in body["answer"]
    assert body["citations"][0]["url"].endswith(MONITOR_ARTICLE)
    numbered = [line for line in body["answer"].splitlines() if line[:2] in {"1.", "2.", "3."}]
    assert numbered
    assert all(line.endswith("[1]") for line in numbered)


def test_a_knowledge_base_question_gets_the_models_grounded_answer(
    stack: Stack, model: FakeOpenAI, script: ModelScript
) -> None:
    body = say(stack, MONITOR)
    assert body["action"] == "answer"
    assert body["answer"].startswith(MODEL_MARK)
    # The marker of a passage never sent is gone; every marker left resolves to a citation,
    # and the citation is the passage the model was given as [1].
    [request] = answer_requests(model, MONITOR)
    passages = passages_of(request["messages"][-1]["content"])
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", body["answer"])}
    assert markers == {1}
    assert [(c["n"], c["url"]) for c in body["citations"]] == [(1, passages[0][2])]
    assert passages[0][2].endswith(MONITOR_ARTICLE)
    assert body["citations"][0]["title"] in body["answer"]
    assert reason_of(stack, body["turn_id"]).endswith("; intent by the LLM")


def test_the_models_reading_decides_the_action(
    stack: Stack, model: FakeOpenAI, script: ModelScript
) -> None:
    # The classifier refuses weather questions (tests/shared/test_agent.py); the model reads this
    # one as an IT request, which the knowledge base does not cover: an honest no_answer instead.
    script.readings["weather"] = reading(category="connectivity")
    weather = say(stack, WEATHER)
    assert weather["action"] == "no_answer", weather
    assert reason_of(stack, weather["turn_id"]).endswith("; intent by the LLM")

    # The classifier makes a broken webcam a checklist; read as informational it is answered.
    script.readings["webcam"] = reading(category="peripheral_question")
    webcam = say(stack, WEBCAM)
    assert webcam["action"] == "answer", webcam
    assert webcam["answer"].startswith(MODEL_MARK)


@pytest.mark.parametrize(
    "failure",
    [
        "not JSON at all",
        reading(kind="urgent"),
        reading(category="weather"),
        server_error(500),
        Reply(status=429, error=error_body("Rate limit reached.", "requests")),
    ],
    ids=["not-json", "invalid-kind", "invalid-category", "http-500", "http-429"],
)
def test_without_a_valid_reading_the_classifier_decides(
    stack: Stack, model: FakeOpenAI, script: ModelScript, failure: Reply | str
) -> None:
    script.readings["webcam"] = failure
    body = say(stack, WEBCAM)
    assert body["action"] == "checklist", body
    assert body["citations"][0]["url"].endswith("/kb/fix-webcam-not-working")
    reason = reason_of(stack, body["turn_id"])
    assert reason.endswith("; intent by the classifier (no valid LLM reading)"), reason


ANSWER_FAILURES: dict[str, tuple[Callable[[str], Reply], str]] = {
    "http-500": (lambda _: server_error(500), "answered 500"),
    "http-429": (
        lambda _: Reply(
            status=429,
            headers={"retry-after": "0"},
            error=error_body(
                "Rate limit reached for requests.", "requests", code="rate_limit_exceeded"
            ),
        ),
        "answered 429",
    ),
    "timeout": (
        lambda prompt: Reply(model_answer(prompt).content, delay_s=READ_TIMEOUT_S + 2),
        "timed out",
    ),
    "citations-outside-the-context": (
        lambda _: Reply(f"{MODEL_MARK} restart the computer [17]. Then call IT [41, 52]."),
        "cites no retrieved passage",
    ),
    "stream-cut-off": (
        lambda prompt: Reply(f"{MODEL_MARK} open the portal [1]", cut_stream=True),
        "before [DONE]",
    ),
}


@pytest.mark.parametrize("failure", list(ANSWER_FAILURES))
def test_a_failing_model_falls_back_to_the_extractive_answer(
    stack: Stack, model: FakeOpenAI, script: ModelScript, failure: str
) -> None:
    make, logged = ANSWER_FAILURES[failure]
    script.answers[MONITOR] = make
    body = say(stack, MONITOR)
    assert_extractive_monitor_answer(body)
    assert answer_requests(model, MONITOR)  # the model was asked, and failed
    fallbacks = [
        record
        for record in log_records(stack, "orchestrator")
        if record.get("correlation_id") == body["turn_id"]
        and record.get("msg") == "LLM answer not used; sending the extractive answer"
    ]
    assert [logged in str(record["reason"]) for record in fallbacks] == [True], logs(stack)


def test_the_fallback_is_the_same_extractive_answer_whatever_failed(
    stack: Stack, model: FakeOpenAI, script: ModelScript
) -> None:
    script.answers[MONITOR] = lambda _: server_error(503)
    first = say(stack, MONITOR)
    script.answers[MONITOR] = lambda _: Reply("NOT_IN_PASSAGES")
    second = say(stack, MONITOR)
    assert_extractive_monitor_answer(first)
    assert (first["answer"], first["citations"]) == (second["answer"], second["citations"])


async def test_the_answer_streams_over_the_websocket_while_the_model_writes(
    stack: Stack, model: FakeOpenAI, script: ModelScript
) -> None:
    script.answers[MONITOR] = lambda prompt: model_answer(prompt, chunk_delay_s=0.15)
    url = stack.url.replace("http://", "ws://") + "/ws/chat"
    async with websockets.connect(url) as socket:

        async def frame() -> dict[str, Any]:
            received: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), 60))
            return received

        assert (await frame())["type"] == "ready"
        await socket.send(json.dumps({"type": "message", "text": MONITOR}))
        assert (await frame())["type"] == "accepted"
        progress = []
        while (received := await frame())["type"] == "progress":
            progress.append(received)
    answer = received
    assert answer["type"] == "answer", answer
    assert answer["answer"].startswith(MODEL_MARK)
    stages = [p["stage"] for p in progress]
    assert stages[:4] == ["redacting", "searching", "composing", "writing"], stages
    assert set(stages[3:]) == {"writing"}
    written = [p["detail"] for p in progress[3:]]
    # About 3 s of writing, at most one preview per 100 ms: several, each the text so far.
    assert len(written) >= 3, written
    assert all(answer["answer"].startswith(text) for text in written), written
    assert [len(text) for text in written] == sorted({len(text) for text in written})
    assert all("detail" not in p for p in progress[:3])
