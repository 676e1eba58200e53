"""Stand-ins for what an orchestrator's turn talks to (classifier, retriever, replies, crawl fleet,
audit, the model's configuration), and ways to build a turn with them, for the turn tests.

None of them loads a model or needs Chroma (:func:`make` needs Redis for the turn's state), so a
test that uses them checks the turn's logic."""

from __future__ import annotations

import threading
import uuid
from typing import Any, cast

import redis.asyncio as aioredis
from pydantic import SecretStr

from contracts.events import AnswerBody, ContextInsufficient, QueryReceived
from contracts.readers import ANONYMOUS, Principals
from orchestrator.config import OrchestratorSettings
from orchestrator.intent import Intent, IntentClassifier
from orchestrator.llm import LLMProvider, OpenAICompatibleConfig
from orchestrator.memory import Conversation, ConversationStore
from orchestrator.retrieval import Hit, Retrieval, Retriever
from orchestrator.service import Orchestrator
from orchestrator.state import TurnState, TurnStatus, TurnStore
from orchestrator.turn import AuditNote, TurnDeps
from tests.support.fake_openai import TEST_KEY, FakeOpenAI

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
    """A confident, in-scope request for hardware; ``changes`` replace any field."""
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


Event = tuple[str, Any]


class RecordingAudit:
    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def record(self, turn: TurnState, *notes: AuditNote) -> None:
        self.events.append(("audit", [note.action for note in notes]))

    async def publish(self, record: Any) -> None:
        self.events.append(("audit", [record.action]))


class CountingTurns(TurnStore):
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        super().__init__(client, ttl_s)
        self.saved: list[TurnStatus] = []

    async def save(self, state: TurnState) -> None:
        self.saved.append(state.status)
        await super().save(state)


def make(
    redis: aioredis.Redis, events: list[Event], retriever: Any, **deps: Any
) -> tuple[Orchestrator, CountingTurns]:
    """An orchestrator on ``redis`` with ``retriever``, the stand-in classifier and an audit that
    records into ``events`` (``deps`` add or replace dependencies), and its turn store, which
    counts the saves."""
    turns = CountingTurns(redis, 600)
    built = TurnDeps(
        retriever=cast(Retriever, retriever),
        intents=cast(IntentClassifier, StubClassifier(classified())),
        turns=turns,
        conversations=ConversationStore(redis, 600),
        audit=RecordingAudit(events),
        **deps,
    )
    settings = OrchestratorSettings(cases_max=0, crawl_seed_urls=["https://help.example/"])
    return Orchestrator(built, settings), turns


def query(text: str = "How do I request a second monitor?") -> QueryReceived:
    """A new turn's question, as the redactor hands it on."""
    return QueryReceived(
        correlation_id=uuid.uuid4().hex,
        conversation_id=uuid.uuid4().hex,
        user_id="u1",
        text=text,
        reply_to="reply.test",
    )


class RecordingFleet:
    """The crawler fleet's place: the crawls asked for and the jobs stopped."""

    def __init__(self) -> None:
        self.requests: list[ContextInsufficient] = []
        self.stops: list[str] = []

    async def request(self, request: ContextInsufficient) -> None:
        self.requests.append(request)

    async def stop(self, turn: TurnState, job_id: str) -> None:
        self.stops.append(job_id)


class RecordingReplies:
    """The gateway's place: the progress and the answers sent."""

    def __init__(self) -> None:
        self.progress_seen: list[tuple[str, str | None]] = []
        self.answers: list[AnswerBody] = []

    async def progress(self, turn: TurnState, stage: str, detail: str | None = None) -> None:
        self.progress_seen.append((stage, detail))

    async def answer(self, turn: TurnState, body: AnswerBody) -> None:
        self.answers.append(body)


def llm_config(fake: FakeOpenAI, **overrides: object) -> OpenAICompatibleConfig:
    """The provider's configuration against the local server, quick to retry and give up;
    ``overrides`` replace any field."""
    values: dict[str, object] = {
        "base_url": fake.base_url,
        "model": "fake-model",
        "api_key": SecretStr(TEST_KEY),
        "connect_timeout_s": 2.0,
        "read_timeout_s": 5.0,
        "max_retries": 2,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "retry_after_max_s": 2.0,
        "deadline_s": 10.0,
    }
    values.update(overrides)
    return OpenAICompatibleConfig.model_validate(values)
