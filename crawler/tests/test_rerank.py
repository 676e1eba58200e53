"""The LLM's second opinion on a page's best links, against a local Chat Completions server that
speaks OpenAI's documented API (``tests/support/fake_openai.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from crawler.config import CrawlerSettings
from crawler.planner import Candidate, LinkPlanner, PlannedLink
from crawler.rerank import LLMReranker, NoReranker, build_reranker
from tests.support.fake_openai import TEST_KEY, FakeOpenAI, Reply, server_error

QUESTION = "How do I configure incident priorities?"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fresh_llm(llm: FakeOpenAI) -> FakeOpenAI:
    llm.reset()
    return llm


def plan() -> list[PlannedLink]:
    """Five links as the planner (keywords only) ranks them for the question."""
    links = [
        ("/docs/user-guide/incidents", "Incidents"),
        ("/docs/user-guide/incidents/commander", "Incident commander"),
        ("/docs/administration/settings/incident/incident-priority", "Priority"),
        ("/docs/support", "Support"),
        ("/blog", "Blog"),
    ]
    candidates = [
        Candidate(f"https://docs.example.com{path}", anchor, "", 1, path) for path, anchor in links
    ]
    return LinkPlanner(None).plan(QUESTION, candidates, [0] * len(candidates))


def reranker(server: FakeOpenAI, top: int = 4, timeout_s: float = 5.0) -> LLMReranker:
    return LLMReranker(
        server.base_url, "fake-model", api_key=TEST_KEY, top=top, timeout_s=timeout_s
    )


async def test_the_model_reorders_the_best_links_among_themselves(fresh_llm: FakeOpenAI) -> None:
    planned = plan()
    head = planned[:4]
    priority = next(i for i, p in enumerate(head) if p.candidate.url.endswith("incident-priority"))
    # The model puts the priority page first and names one link twice and one that does not exist.
    fresh_llm.enqueue(Reply(json.dumps({"order": [priority + 1, priority + 1, 9]})))
    ranker = reranker(fresh_llm)
    try:
        ranked = await ranker.rerank(QUESTION, planned)
    finally:
        await ranker.aclose()

    assert ranked[0].candidate.url.endswith("incident-priority")
    assert ranked[0].llm_rank == 1
    assert "LLM rank 1" in ranked[0].reason
    # The rest of the group keeps the planner's order behind it; the same scores, handed out anew.
    rest = [p.candidate.url for p in head if not p.candidate.url.endswith("incident-priority")]
    assert [p.candidate.url for p in ranked[1:4]] == rest
    assert [p.score for p in ranked[:4]] == sorted((p.score for p in head), reverse=True)
    assert ranked[4:] == planned[4:]  # beyond the group: untouched, never re-ranked
    request = fresh_llm.requests[-1]
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.headers["authorization"] == f"Bearer {TEST_KEY}"
    prompt = request.messages[-1]["content"]
    assert QUESTION in prompt
    assert "incident priority" in prompt
    assert "blog" not in prompt


@pytest.mark.parametrize(
    "reply",
    [
        server_error(500),
        Reply("not json at all"),
        Reply(json.dumps({"ranking": [1, 2]})),
        Reply(json.dumps({"order": [7, 8]})),
        Reply(json.dumps({"order": [1]}), delay_s=2.0),
    ],
    ids=["server error", "not json", "wrong shape", "no such links", "too slow"],
)
async def test_any_failure_keeps_the_planners_order(fresh_llm: FakeOpenAI, reply: Reply) -> None:
    fresh_llm.enqueue(reply)
    planned = plan()
    ranker = reranker(fresh_llm, timeout_s=1.0)
    try:
        assert await ranker.rerank(QUESTION, planned) == planned
    finally:
        await ranker.aclose()


async def test_no_question_or_a_single_link_asks_nothing(fresh_llm: FakeOpenAI) -> None:
    ranker = reranker(fresh_llm)
    try:
        assert await ranker.rerank("", plan()) == plan()
        assert await ranker.rerank(QUESTION, plan()[:1]) == plan()[:1]
    finally:
        await ranker.aclose()
    assert fresh_llm.requests == []


def test_built_from_the_shared_llm_settings() -> None:
    assert isinstance(build_reranker(CrawlerSettings()), NoReranker)
    off = CrawlerSettings(llm_base_url="http://127.0.0.1:1/v1", llm_model="m", llm_rerank_top=0)
    assert isinstance(build_reranker(off), NoReranker)
    with pytest.raises(ValueError, match="LLM_MODEL"):
        build_reranker(CrawlerSettings(llm_base_url="http://127.0.0.1:1/v1"))
    ranker = build_reranker(CrawlerSettings(llm_base_url="http://127.0.0.1:1/v1", llm_model="m"))
    assert isinstance(ranker, LLMReranker)
    assert ranker.top == 8
