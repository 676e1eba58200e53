"""The LLM plugin against a real local HTTP server speaking the Chat Completions protocol."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from typing import Literal

import pytest
from pydantic import BaseModel, SecretStr

from contracts.events import Action, AnswerBody
from orchestrator.compose import NO_ANSWER_TEXT, citation, snippet
from orchestrator.config import OrchestratorSettings
from orchestrator.llm import (
    ChatMessage,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    MessageReading,
    NoLLM,
    OpenAICompatible,
    build_provider,
    decide_json,
    generate_answer,
    ground_citations,
    preview_text,
    read_message,
)
from orchestrator.retrieval import Hit
from orchestrator.tests.stand_ins import llm_config
from tests.support.fake_openai import (
    TEST_KEY,
    FakeOpenAI,
    Reply,
    invalid_request,
    rate_limited,
    reading,
    server_error,
)

KEY = TEST_KEY
QUESTION = "How do I reset my VPN password?"
HELLO = [ChatMessage(role="user", content="Say hello.")]


def make_hit(slug: str, text: str, index: int = 0, score: float = 0.8) -> Hit:
    title = slug.replace("-", " ").capitalize()
    return Hit(
        chunk_id=f"{slug}#{index}",
        text=text,
        url=f"https://it.northwind.example/kb/{slug}",
        title=title,
        section=title,
        score=score,
        chunk_index=index,
    )


VPN = make_hit("vpn-password-reset", "1. Open https://portal.northwind.example.\n2. Choose Reset.")
WIFI = make_hit("office-wifi", "Connect to NW-Corp and sign in with your account.")
PRINTER = make_hit("add-printer", "Run:\n```\nlpadmin -p nw-floor2 -E\n```")
VPN_MORE = make_hit("vpn-password-reset", "3. Reconnect the VPN client with the new password.", 1)
EXTRACTIVE = AnswerBody(
    answer="From “Vpn password reset” [1]:\n\n1. Open the portal. [1]",
    action=Action.ANSWER,
    citations=[citation(1, VPN)],
)


class Decision(BaseModel):
    action: Literal["answer", "clarify", "refuse"]
    reason: str


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[OpenAICompatible]:
    provider = OpenAICompatible(llm_config(fake))
    yield provider
    await provider.aclose()


async def collect(provider: OpenAICompatible, messages: list[ChatMessage]) -> list[str]:
    return [delta async for delta in provider.stream(messages)]


# --- the protocol ------------------------------------------------------------------------------


async def test_chat_round_trip_sends_the_documented_request(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue("Hello there.")
    assert await llm.chat(HELLO) == "Hello there."
    [request] = fake.requests
    assert request.body == {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Say hello."}],
        "temperature": 0.0,
        "stream": False,
    }
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"


async def test_no_authorization_header_without_a_key(fake: FakeOpenAI) -> None:
    fake.reset(api_key=None)  # like Ollama or llama.cpp
    provider = OpenAICompatible(llm_config(fake, api_key=None))
    try:
        fake.enqueue("Hi.")
        assert await provider.chat(HELLO) == "Hi."
    finally:
        await provider.aclose()
    assert "authorization" not in fake.requests[0].headers


async def test_streaming_yields_the_deltas_in_order(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(Reply(chunks=["Open ", "the ", "portal", " [1]."]))
    deltas = await collect(llm, HELLO)
    assert deltas == ["Open ", "the ", "portal", " [1]."]
    assert fake.requests[0].body["stream"] is True
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_streaming_multiline_content_survives(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    text = "Steps:\n\n1. Open the portal. [1]\n2. Choose Reset. [1]"
    fake.enqueue(Reply(chunks=[text[:9], text[9:30], text[30:]]))
    assert "".join(await collect(llm, HELLO)) == text


async def test_stream_cut_before_done_is_an_error(fake: FakeOpenAI, llm: OpenAICompatible) -> None:
    fake.enqueue(Reply("Open the portal", cut_stream=True))
    with pytest.raises(LLMError, match=r"before \[DONE\]"):
        await collect(llm, HELLO)


async def test_stream_retries_a_rate_limit_before_it_starts(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(rate_limited(retry_after=None, retry_after_ms="50"), Reply("Hello there."))
    assert "".join(await collect(llm, HELLO)) == "Hello there."
    assert len(fake.requests) == 2


# --- retries and errors ------------------------------------------------------------------------


async def test_429_waits_for_retry_after_then_succeeds(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(rate_limited(retry_after="1"), Reply("Hello."))
    started = time.monotonic()
    assert await llm.chat(HELLO) == "Hello."
    assert time.monotonic() - started >= 0.95  # backoff alone would be ~10 ms
    assert len(fake.requests) == 2


async def test_a_retry_after_too_long_to_wait_fails_at_once(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(rate_limited(retry_after="120"), Reply("never sent"))
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        await llm.chat(HELLO)
    assert caught.value.status == 429
    assert time.monotonic() - started < 60  # not the 120 s asked for (a margin for a loaded CI)
    assert len(fake.requests) == 1


async def test_5xx_is_retried_with_backoff(fake: FakeOpenAI, llm: OpenAICompatible) -> None:
    fake.enqueue(server_error(500), server_error(503), Reply("Recovered."))
    assert await llm.chat(HELLO) == "Recovered."
    assert len(fake.requests) == 3


async def test_retries_are_bounded(fake: FakeOpenAI, llm: OpenAICompatible) -> None:
    fake.enqueue(*(server_error(500) for _ in range(5)))
    with pytest.raises(LLMError) as caught:
        await llm.chat(HELLO)
    assert caught.value.status == 500
    assert caught.value.message.startswith("The server had an error")
    assert len(fake.requests) == 3  # the first try and max_retries=2


async def test_401_is_not_retried_and_carries_the_servers_message(fake: FakeOpenAI) -> None:
    wrong_key = "sk-wrong-key-that-is-long"
    provider = OpenAICompatible(llm_config(fake, api_key=SecretStr(wrong_key)))
    try:
        with pytest.raises(LLMError) as caught:
            await provider.chat(HELLO)
    finally:
        await provider.aclose()
    assert caught.value.status == 401
    assert caught.value.code == "invalid_api_key"
    assert caught.value.message.startswith("Incorrect API key provided: sk-***ng.")
    assert wrong_key not in str(caught.value)
    assert len(fake.requests) == 1


async def test_400_is_not_retried(fake: FakeOpenAI, llm: OpenAICompatible) -> None:
    # JSON mode without the word "json" in the messages is a documented 400.
    with pytest.raises(LLMError) as caught:
        await llm.chat(HELLO, json_mode=True)
    assert caught.value.status == 400
    assert "must contain the word 'json'" in caught.value.message
    assert fake.requests[0].body["response_format"] == {"type": "json_object"}
    assert len(fake.requests) == 1


async def test_unknown_model_is_a_404_not_retried(fake: FakeOpenAI) -> None:
    provider = OpenAICompatible(llm_config(fake, model="gpt-nonexistent"))
    try:
        with pytest.raises(LLMError) as caught:
            await provider.chat(HELLO)
    finally:
        await provider.aclose()
    assert (caught.value.status, caught.value.code) == (404, "model_not_found")
    assert len(fake.requests) == 1


async def test_read_timeout_is_an_llm_timeout(fake: FakeOpenAI) -> None:
    provider = OpenAICompatible(llm_config(fake, read_timeout_s=0.2, max_retries=1))
    fake.enqueue(Reply("late", delay_s=1.0), Reply("late", delay_s=1.0))
    try:
        with pytest.raises(LLMTimeout):
            await provider.chat(HELLO)
    finally:
        await provider.aclose()
    assert len(fake.requests) == 2


async def test_the_deadline_bounds_a_call_with_its_retries(fake: FakeOpenAI) -> None:
    provider = OpenAICompatible(llm_config(fake, deadline_s=0.3))
    fake.enqueue(Reply("late", delay_s=30.0))
    started = time.monotonic()
    try:
        with pytest.raises(LLMTimeout, match="deadline"):
            await provider.chat(HELLO)
    finally:
        await provider.aclose()
    assert time.monotonic() - started < 20  # not the reply's 30 s (a margin for a loaded CI)


async def test_an_unreachable_endpoint_is_retried_then_fails(fake: FakeOpenAI) -> None:
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAICompatible(llm_config(fake, base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        with pytest.raises(LLMError, match="cannot reach"):
            await provider.chat(HELLO)
    finally:
        await provider.aclose()


async def test_a_response_that_is_not_a_completion_is_an_error(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(Reply(raw_body='{"unexpected": true}'))
    with pytest.raises(LLMError, match="not a chat completion"):
        await llm.chat(HELLO)


# --- grounded answers --------------------------------------------------------------------------


async def test_the_prompt_numbers_the_passages_and_asks_for_grounding(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue("Open the portal [1].")
    await generate_answer(llm, QUESTION, [VPN, WIFI], EXTRACTIVE)
    system, user = fake.requests[0].messages
    assert system["role"] == "system"
    assert "ONLY from the numbered passages" in system["content"]
    assert "verbatim" in system["content"]
    assert "[1] Vpn password reset" in user["content"]
    assert "[2] Office wifi" in user["content"]
    assert VPN.text in user["content"]
    assert user["content"].rstrip().endswith(f"Question: {QUESTION}")


async def test_answer_keeps_valid_citations_renumbered(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(
        "Connect to the office network first [2].\n\n"
        "1. Add the printer:\n```\nlpadmin -p nw-floor2 -E\n```\n[3]\n"
        "2. Sign in with your account [2]."
    )
    body = await generate_answer(llm, QUESTION, [VPN, WIFI, PRINTER], EXTRACTIVE)
    assert body.action is Action.ANSWER
    assert body.answer == (
        "Connect to the office network first [1].\n\n"
        "1. Add the printer:\n```\nlpadmin -p nw-floor2 -E\n```\n[2]\n"
        "2. Sign in with your account [1]."
    )
    assert [(c.n, c.url, c.title, c.snippet) for c in body.citations] == [
        (1, WIFI.url, WIFI.title, snippet(WIFI.text)),
        (2, PRINTER.url, PRINTER.title, snippet(PRINTER.text)),
    ]


async def test_citations_outside_the_retrieved_set_are_removed(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue("Open the portal [1][7]. Then choose Reset [9].\nReconnect [1, 8].")
    body = await generate_answer(llm, QUESTION, [VPN, WIFI], EXTRACTIVE)
    assert body.answer == "Open the portal [1]. Then choose Reset.\nReconnect [1]."
    assert [c.url for c in body.citations] == [VPN.url]


def test_passages_of_one_article_share_a_citation_and_code_is_untouched() -> None:
    text = "Reset it [1][3]. Wi-Fi [2].\n```\necho ${servers[5]}\n```\nAlso `arr[4]` [3]."
    answer, cited = ground_citations(text, [VPN, WIFI, VPN_MORE])
    assert answer == "Reset it [1]. Wi-Fi [2].\n```\necho ${servers[5]}\n```\nAlso `arr[4]` [1]."
    assert [(c.n, c.url) for c in cited] == [(1, VPN.url), (2, WIFI.url)]


async def test_no_valid_citation_left_falls_back_to_extractive(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue("Just restart your computer [4].")
    assert await generate_answer(llm, QUESTION, [VPN, WIFI], EXTRACTIVE) == EXTRACTIVE


async def test_the_model_saying_not_covered_falls_back(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue("NOT_IN_PASSAGES")
    assert await generate_answer(llm, QUESTION, [VPN], EXTRACTIVE) == EXTRACTIVE


async def test_an_llm_error_falls_back_and_logs_the_reason_only(
    fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    secret_question = "Reset VPN for <PERSON_1>, passphrase PURPLE-ELEPHANT-42"
    provider = OpenAICompatible(llm_config(fake, api_key=SecretStr("sk-wrong-key-that-is-long")))
    caplog.set_level(logging.DEBUG)
    try:
        body = await generate_answer(provider, secret_question, [VPN], EXTRACTIVE)
    finally:
        await provider.aclose()
    assert body == EXTRACTIVE
    fallback = [r for r in caplog.records if "extractive" in r.getMessage()]
    assert fallback
    assert "401" in fallback[0].reason  # type: ignore[attr-defined]
    assert "PURPLE-ELEPHANT" not in caplog.text
    assert "sk-wrong-key-that-is-long" not in caplog.text
    assert VPN.text not in caplog.text


async def test_server_errors_after_retries_fall_back(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(*(server_error(502) for _ in range(3)))
    assert await generate_answer(llm, QUESTION, [VPN], EXTRACTIVE) == EXTRACTIVE
    assert len(fake.requests) == 3


async def test_a_timeout_falls_back_quickly(fake: FakeOpenAI) -> None:
    provider = OpenAICompatible(llm_config(fake, read_timeout_s=0.2, max_retries=0))
    fake.enqueue(Reply("Open the portal [1].", delay_s=30.0))
    started = time.monotonic()
    try:
        body = await generate_answer(provider, QUESTION, [VPN], EXTRACTIVE)
    finally:
        await provider.aclose()
    assert body == EXTRACTIVE
    assert time.monotonic() - started < 20  # not the reply's 30 s (a margin for a loaded CI)


@pytest.mark.parametrize(
    "extractive",
    [
        AnswerBody(answer=NO_ANSWER_TEXT, action=Action.NO_ANSWER),
        AnswerBody(answer="Which OS?", action=Action.CLARIFY, questions=["Which OS?"]),
    ],
)
async def test_only_answers_are_rewritten(
    fake: FakeOpenAI, llm: OpenAICompatible, extractive: AnswerBody
) -> None:
    fake.enqueue("Open the portal [1].")
    assert await generate_answer(llm, QUESTION, [VPN], extractive) == extractive
    assert fake.requests == []  # the model is not even asked


async def test_other_fields_of_the_extractive_answer_are_kept(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    extractive = EXTRACTIVE.model_copy(update={"questions": ["kept"]})
    fake.enqueue("Open the portal [1].")
    body = await generate_answer(llm, QUESTION, [VPN], extractive)
    assert body.answer == "Open the portal [1]."
    assert body.questions == ["kept"]


# --- streaming the answer ----------------------------------------------------------------------


class Sink:
    """Records what an answer's preview sink receives, and when."""

    def __init__(self, fail: bool = False) -> None:
        self.texts: list[str] = []
        self.times: list[float] = []
        self.fail = fail

    async def __call__(self, text: str) -> None:
        self.texts.append(text)
        self.times.append(time.monotonic())
        if self.fail:
            raise RuntimeError("the reply stream is gone")


async def test_the_answer_is_streamed_and_previewed_as_it_is_cited(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    # [2] arrives split over two deltas; [7] is outside the passages.
    chunks = ["Connect to ", "NW-Corp [", "2]. Then ", "open the portal [1][7", "]."]
    fake.enqueue(Reply(chunks=chunks, chunk_delay_s=0.02))
    sink = Sink()
    body = await generate_answer(llm, QUESTION, [VPN, WIFI], EXTRACTIVE, on_text=sink, interval_s=0)
    assert fake.requests[0].body["stream"] is True
    assert body.answer == "Connect to NW-Corp [1]. Then open the portal [2]."
    assert [c.url for c in body.citations] == [WIFI.url, VPN.url]
    # The whole text so far, numbered as in the answer; half-written markers held back.
    assert sink.texts == [
        "Connect to",
        "Connect to NW-Corp",
        "Connect to NW-Corp [1]. Then",
        "Connect to NW-Corp [1]. Then open the portal [2]",
        "Connect to NW-Corp [1]. Then open the portal [2].",
    ]


async def test_previews_come_at_most_once_per_interval(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    words = [f"word{i} " for i in range(12)]
    fake.enqueue(Reply(chunks=[*words, "[1]."], chunk_delay_s=0.04))
    sink = Sink()
    body = await generate_answer(llm, QUESTION, [VPN], EXTRACTIVE, on_text=sink, interval_s=0.15)
    assert body.answer.endswith("word11 [1].")
    assert 1 <= len(sink.texts) < len(words)
    gaps = [later - earlier for earlier, later in zip(sink.times, sink.times[1:], strict=False)]
    assert all(gap >= 0.15 for gap in gaps), gaps
    assert all(body.answer.startswith(text) for text in sink.texts)


async def test_the_not_covered_signal_is_never_previewed(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(Reply(chunks=["NOT", "_IN_", "PASS", "AGES"]))
    sink = Sink()
    body = await generate_answer(llm, QUESTION, [VPN], EXTRACTIVE, on_text=sink, interval_s=0)
    assert body == EXTRACTIVE
    assert sink.texts == []


def test_a_preview_shows_nothing_that_the_answer_would_not() -> None:
    assert preview_text("  NOT_IN", [VPN]) == ""
    assert preview_text("Open it [1] and [9", [VPN]) == "Open it [1] and"
    assert preview_text("Open it [3]. Then [", [VPN]) == "Open it. Then"


async def test_a_failing_preview_sink_does_not_cost_the_answer(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(Reply(chunks=["Open ", "the ", "portal ", "[1]."]))
    sink = Sink(fail=True)
    body = await generate_answer(llm, QUESTION, [VPN], EXTRACTIVE, on_text=sink, interval_s=0)
    assert body.answer == "Open the portal [1]."
    assert sink.texts == ["Open"]  # dropped after its first failure


async def test_a_stream_broken_after_previews_falls_back(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(Reply("Open the portal [1] and then", cut_stream=True))
    sink = Sink()
    body = await generate_answer(llm, QUESTION, [VPN], EXTRACTIVE, on_text=sink, interval_s=0)
    assert sink.texts  # the user saw it being written...
    assert body == EXTRACTIVE  # ...and gets the extractive answer in its place


# --- structured decisions ----------------------------------------------------------------------

DECIDE = [
    ChatMessage(role="system", content="Decide how to handle the user's request."),
    ChatMessage(role="user", content="it's not working"),
]


async def test_decide_json_returns_the_validated_model(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue('{"action": "clarify", "reason": "too vague"}')
    assert await decide_json(llm, DECIDE, Decision) == Decision(
        action="clarify", reason="too vague"
    )
    [request] = fake.requests
    assert request.body["response_format"] == {"type": "json_object"}
    system = request.messages[0]
    assert system["role"] == "system"  # merged into the caller's system message, not a second one
    assert system["content"].startswith("Decide how to handle")
    assert '"action"' in system["content"]  # the schema
    assert [m["role"] for m in request.messages] == ["system", "user"]


async def test_decide_json_retries_once_on_invalid_json(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(
        "Sure! I think clarify.", '```json\n{"action": "refuse", "reason": "off topic"}\n```'
    )
    assert await decide_json(llm, DECIDE, Decision) == Decision(action="refuse", reason="off topic")
    retry = fake.requests[1].messages
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "user"]
    assert retry[2]["content"] == "Sure! I think clarify."
    assert "not valid" in retry[3]["content"]


@pytest.mark.parametrize(
    "replies",
    [
        ["not json", "still not json"],
        ['{"action": "dance", "reason": "x"}', '{"action": "answer"}'],
    ],
)
async def test_decide_json_gives_up_with_none(
    fake: FakeOpenAI, llm: OpenAICompatible, replies: list[str]
) -> None:
    fake.enqueue(*replies, '{"action": "answer", "reason": "third time"}')
    assert await decide_json(llm, DECIDE, Decision) is None
    assert len(fake.requests) == 2


async def test_decide_json_returns_none_on_llm_error(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(invalid_request("Invalid 'messages[1].content': string too long.", "messages"))
    assert await decide_json(llm, DECIDE, Decision) is None
    assert len(fake.requests) == 1


async def test_decide_json_with_one_attempt_asks_once(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue("not json", '{"action": "answer", "reason": "second time"}')
    assert await decide_json(llm, DECIDE, Decision, attempts=1) is None
    assert len(fake.requests) == 1


# --- reading a message -------------------------------------------------------------------------

QUEUES = {"connectivity": "Network", "account": "Identity & Access", "other": "Service Desk"}
READING = {
    "in_scope": True,
    "conversational": False,
    "kind": "troubleshooting",
    "category": "connectivity",
    "wants_human": False,
}


def reading_json(**changes: object) -> str:
    return reading(**{**READING, **changes})


async def test_read_message_asks_once_with_the_message_topic_and_categories(
    fake: FakeOpenAI, llm: OpenAICompatible
) -> None:
    fake.enqueue(reading_json(kind="informational"))
    reading = await read_message(
        llm, "im on <LOCATION_1> wifi", list(QUEUES), topic="How do I connect to the VPN?"
    )
    assert reading == MessageReading.model_validate({**READING, "kind": "informational"})
    [request] = fake.requests
    assert request.body["response_format"] == {"type": "json_object"}
    system, user = request.messages
    assert "- connectivity: network, Wi-Fi, VPN" in system["content"]
    assert "- account:" in system["content"]
    assert "courses" not in system["content"].split("JSON Schema")[0]  # not configured
    assert '"wants_human"' in system["content"]  # the schema
    assert "<topic>\nHow do I connect to the VPN?\n</topic>" in user["content"]
    assert user["content"].endswith("<message>\nim on <LOCATION_1> wifi\n</message>")


@pytest.mark.parametrize(
    "reply",
    [
        Reply("Sure, that is a VPN question."),
        Reply(reading_json(category="courses")),  # not a configured category
        Reply(json.dumps({k: v for k, v in READING.items() if k != "kind"})),
        Reply(reading_json(kind="urgent")),
        invalid_request("Invalid 'messages[1].content': string too long.", "messages"),
    ],
)
async def test_an_invalid_reading_is_none_after_one_call(
    fake: FakeOpenAI, llm: OpenAICompatible, reply: Reply
) -> None:
    fake.enqueue(reply, reading_json())
    assert await read_message(llm, "vpn drops", list(QUEUES)) is None
    assert len(fake.requests) == 1


def test_a_reading_becomes_an_intent_with_certain_scores() -> None:
    reading = MessageReading.model_validate({**READING, "wants_human": True})
    intent = reading.as_intent(QUEUES)
    assert (intent.kind, intent.category, intent.queue) == (
        "troubleshooting",
        "connectivity",
        "Network",
    )
    assert (intent.in_scope, intent.scope_score, intent.conversational) == (True, 1.0, False)
    assert (intent.request_human, intent.request_human_score) == (True, 1.0)
    # Like the classifier's: only in-scope messages are conversation or ask for a person.
    off = MessageReading.model_validate(
        {**READING, "in_scope": False, "conversational": True, "wants_human": True}
    ).as_intent(QUEUES)
    assert (off.in_scope, off.scope_score, off.conversational, off.request_human) == (
        False,
        0.0,
        False,
        False,
    )


# --- no LLM and configuration ------------------------------------------------------------------


async def test_no_llm_is_explicit() -> None:
    provider = NoLLM()
    assert provider.enabled is False
    with pytest.raises(LLMUnavailable, match="LLM_BASE_URL"):
        await provider.chat(HELLO)
    with pytest.raises(LLMUnavailable):
        _ = [delta async for delta in provider.stream(HELLO)]
    assert await generate_answer(provider, QUESTION, [VPN], EXTRACTIVE) == EXTRACTIVE
    assert await decide_json(provider, DECIDE, Decision) is None
    assert await read_message(provider, QUESTION, list(QUEUES)) is None


def test_without_a_base_url_there_is_no_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LLM_BASE_URL", "LLM_MODEL", "LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(build_provider(OrchestratorSettings()), NoLLM)
    monkeypatch.setenv("LLM_BASE_URL", "")  # empty counts as unset
    assert isinstance(build_provider(OrchestratorSettings()), NoLLM)


def test_a_base_url_without_a_model_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.delenv("LLM_MODEL", raising=False)
    with pytest.raises(ValueError, match="LLM_MODEL"):
        build_provider(OrchestratorSettings())


async def test_environment_selects_the_openai_compatible_provider(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", fake.base_url + "/")
    monkeypatch.setenv("LLM_MODEL", "fake-model")
    monkeypatch.setenv("LLM_API_KEY", KEY)
    monkeypatch.setenv("ORCHESTRATOR_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("ORCHESTRATOR_LLM_READ_TIMEOUT_S", "3")
    settings = OrchestratorSettings()
    assert KEY not in repr(settings)
    provider = build_provider(settings)
    try:
        assert isinstance(provider, OpenAICompatible)
        assert provider.config.max_retries == 0
        assert provider.config.read_timeout_s == 3
        fake.enqueue("Configured.")
        assert await provider.chat(HELLO) == "Configured."
    finally:
        await provider.aclose()
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
