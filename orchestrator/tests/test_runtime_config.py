"""Runtime configuration: the model admins edit, the cached reader services use, and the
orchestrator taking a change from the next turn on, with real valkey, a real Chroma collection
and the real models. Each test keeps its configuration under a key of its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from contracts.events import Action, QueryReceived
from contracts.runtime_config import (
    CATEGORIES,
    FIELDS,
    ORCHESTRATOR,
    RuntimeConfigReader,
    RuntimeConfigStore,
    RuntimeOverrides,
    StoredConfig,
    defaults_of,
    field_service,
    publish_defaults,
    read_defaults,
)
from orchestrator.compose import CAP_TEXT
from orchestrator.config import OrchestratorSettings
from orchestrator.embedding import QueryEncoder
from orchestrator.intent import CATEGORIES as ORCHESTRATOR_CATEGORIES
from orchestrator.intent import CategoryExamples, IntentClassifier, IntentExamples, load_examples
from orchestrator.service import Orchestrator
from orchestrator.tests.crawl_turns import make_orchestrator
from orchestrator.tests.stand_ins import RecordingFleet, RecordingReplies

PRINTER_QUESTION = "How do I add a network printer?"
VAGUE = "it's not working"
MISSING = "How do I load a new ribbon into the Zephyr badge printer?"

# -- the model -----------------------------------------------------------------------------


def test_categories_are_the_orchestrators() -> None:
    assert CATEGORIES == ORCHESTRATOR_CATEGORIES


def test_every_orchestrator_field_is_a_setting_of_the_orchestrator() -> None:
    settings_fields = OrchestratorSettings.model_fields
    for name in FIELDS:
        if field_service(name) == ORCHESTRATOR and name != "category_queues":
            assert name in settings_fields, name


@pytest.mark.parametrize("bound", ["minimum", "maximum"])
def test_runtime_bounds_are_within_the_orchestrators_own(bound: str) -> None:
    """Overrides are applied without validating again: every value the runtime model accepts
    must be one OrchestratorSettings accepts."""
    schema = RuntimeOverrides.model_json_schema()["properties"]
    values: dict[str, Any] = {}
    for name in FIELDS:
        if field_service(name) != ORCHESTRATOR:
            continue
        number = next(
            (o for o in schema[name].get("anyOf", []) if o.get("type") in ("integer", "number")),
            None,
        )
        if number is None:
            continue
        exact = number.get(bound)
        if exact is None:
            strict = number.get("exclusiveMinimum" if bound == "minimum" else "exclusiveMaximum")
            assert strict is not None, f"{name} has no {bound}"
            exact = strict + (0.001 if bound == "minimum" else -0.001)
        values[name] = exact
    OrchestratorSettings.model_validate(values)  # raises when one is out of the service's range


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"relevance_threshold": 1.01}, "less than or equal to 1"),
        ({"top_k": 0}, "greater than or equal to 1"),
        ({"clarify_cap": 11}, "less than or equal to 10"),
        ({"crawl_max_pages": 0}, "greater than or equal to 1"),
        ({"crawl_seed_urls": ["javascript:alert(1)"]}, "not an http(s) URL"),
        ({"crawl_seed_urls": ["https://u:p@help.example.com"]}, "user name or password"),
        ({"crawl_allowed_domains": ["help example com"]}, "not a host name"),
        ({"category_queues": {"weather": "Met Office"}}, "unknown category weather"),
        ({"category_queues": {"account": "x" * 101}}, "queue of account"),
        ({"top_k": 5, "verbose": True}, "Extra inputs are not permitted"),
    ],
)
def test_invalid_overrides_say_what_is_wrong(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as error:
        RuntimeOverrides.model_validate(changes)
    assert message in str(error.value)


def test_values_are_normalised() -> None:
    overrides = RuntimeOverrides(
        crawl_seed_urls=[" https://Help.example.com/a ", "https://Help.example.com/a"],
        crawl_allowed_domains=["Help.Example.com.", "help.example.com", "127.0.0.1:8080"],
        category_queues={"account": "  IAM "},
    )
    assert overrides.crawl_seed_urls == ["https://Help.example.com/a"]
    assert overrides.crawl_allowed_domains == ["help.example.com", "127.0.0.1:8080"]
    assert overrides.category_queues == {"account": "IAM"}


def test_apply_overrides_only_what_is_set_and_known() -> None:
    base = OrchestratorSettings(top_k=5, relevance_threshold=0.45)
    overrides = RuntimeOverrides(relevance_threshold=0.8, domain_concurrency=2, crawl_seed_urls=[])
    applied = overrides.apply(base)
    assert applied.relevance_threshold == 0.8
    assert applied.top_k == 5
    assert applied.crawl_seed_urls == []
    assert not hasattr(applied, "domain_concurrency")  # the crawler's, not the orchestrator's
    assert base.relevance_threshold == 0.45  # the environment's settings stay as they were
    assert RuntimeOverrides().apply(base) is base


# -- the store and the reader --------------------------------------------------------------


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def key() -> str:
    return f"test:config:{uuid.uuid4().hex[:10]}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_reader_caches_for_its_ttl_then_sees_the_new_version(
    redis: aioredis.Redis, key: str
) -> None:
    clock = Clock()
    store = RuntimeConfigStore(redis, key)
    reader = RuntimeConfigReader(redis, key=key, ttl_s=2.0, clock=clock)
    first = await reader.current()
    assert first.version == 0
    assert first.overrides.values() == {}

    await store.save(0, RuntimeOverrides(top_k=9), "admin token")
    clock.now += 1.9
    assert await reader.current() is first  # still cached

    clock.now += 0.2
    second = await reader.current()
    assert second.version == 1
    assert second.overrides.top_k == 9
    assert second.updated_by == "admin token"
    clock.now += 5
    assert await reader.current() is second  # an unchanged document is the same object


async def test_reader_keeps_the_last_values_when_redis_fails_or_the_document_is_bad(
    redis: aioredis.Redis, key: str
) -> None:
    clock = Clock()
    await RuntimeConfigStore(redis, key).save(0, RuntimeOverrides(clarify_cap=4), "admin token")
    reader = RuntimeConfigReader(redis, key=key, ttl_s=1.0, clock=clock)
    assert (await reader.current()).overrides.clarify_cap == 4

    await redis.set(key, b'{"version": 2, "overrides": {"clarify_cap": 99}}')
    clock.now += 2
    assert (await reader.current()).overrides.clarify_cap == 4

    unreachable = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    broken = RuntimeConfigReader(unreachable, key=key, ttl_s=1.0, clock=clock)
    try:
        assert (await broken.current()) == StoredConfig()  # defaults, not an exception
    finally:
        await unreachable.aclose()


async def test_defaults_are_published_per_service(redis: aioredis.Redis, key: str) -> None:
    settings = OrchestratorSettings(top_k=7, clarify_cap=1)
    values = defaults_of(settings, ORCHESTRATOR, queues={"account": "Identity & Access"})
    assert values["top_k"] == 7
    assert values["category_queues"] == {"account": "Identity & Access"}
    assert "domain_concurrency" not in values
    prefix = f"{key}:defaults:"
    await publish_defaults(redis, ORCHESTRATOR, values, prefix=prefix)
    # The crawler's fields are read from the crawler's document only.
    await publish_defaults(redis, "crawler", {"domain_concurrency": 3, "top_k": 1}, prefix=prefix)
    defaults = await read_defaults(redis, prefix=prefix)
    assert defaults["top_k"] == 7
    assert defaults["clarify_cap"] == 1
    assert defaults["domain_concurrency"] == 3


# -- the orchestrator ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder() -> QueryEncoder:
    return QueryEncoder()


def few_examples(per_group: int = 4) -> IntentExamples:
    """The packaged examples, a few per group: the same decisions for these tests' plain
    messages, learned in seconds rather than the minute the whole file takes on a busy CI."""
    full = load_examples()
    return IntentExamples(
        queues=full.queues,
        categories={
            name: CategoryExamples(
                informational=group.informational[:per_group],
                troubleshooting=group.troubleshooting[:per_group],
            )
            for name, group in full.categories.items()
        },
        follow_ups=full.follow_ups[:per_group],
        request_human=full.request_human[:per_group],
        conversational={k: v[:per_group] for k, v in full.conversational.items()},
        out_of_scope={k: v[:per_group] for k, v in full.out_of_scope.items()},
    )


@pytest.fixture(scope="module")
def intents(encoder: QueryEncoder) -> IntentClassifier:
    return IntentClassifier(encoder, few_examples())


class Admin:
    """Changes the configuration as the admin API does, and moves the services' clock past
    the reader's cache."""

    def __init__(self, redis: aioredis.Redis, key: str, clock: Clock) -> None:
        self.store = RuntimeConfigStore(redis, key)
        self.clock = clock

    async def change(self, **changes: Any) -> None:
        current = await self.store.load()
        overrides = {**current.overrides.values(), **changes}
        overrides = {name: value for name, value in overrides.items() if value is not None}
        await self.store.save(current.version, RuntimeOverrides(**overrides), "admin token")
        self.clock.now += 10


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def orchestrator(
    encoder: QueryEncoder,
    intents: IntentClassifier,
    articles_collection: Any,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
    key: str,
    clock: Clock,
) -> Iterator[Orchestrator]:
    runtime = RuntimeConfigReader(redis, key=key, ttl_s=2.0, clock=clock)
    yield make_orchestrator(
        encoder,
        intents,
        articles_collection,
        redis,
        fleet,
        runtime=runtime,
        crawl_seed_urls=[],
        clarify_cap=2,
    )
    intents.route({})  # the classifier is shared by the module's tests


@pytest.fixture
def admin(redis: aioredis.Redis, key: str, clock: Clock) -> Admin:
    return Admin(redis, key, clock)


def query(text: str, conversation_id: str | None = None) -> QueryReceived:
    return QueryReceived(
        correlation_id=uuid.uuid4().hex,
        conversation_id=conversation_id or uuid.uuid4().hex,
        user_id="u1",
        text=text,
        reply_to="reply.test",
    )


async def ask(orchestrator: Orchestrator, text: str, conversation_id: str | None = None) -> Any:
    replies = RecordingReplies()
    await orchestrator.handle_query(query(text, conversation_id), replies)
    (answer,) = replies.answers
    return answer


async def test_a_higher_relevance_threshold_turns_the_next_answer_into_no_answer(
    orchestrator: Orchestrator, admin: Admin
) -> None:
    before = await ask(orchestrator, PRINTER_QUESTION)
    assert before.action in {Action.ANSWER, Action.CHECKLIST}
    assert before.citations[0].url == "https://kb.example/printer"

    await admin.change(relevance_threshold=0.99)
    after = await ask(orchestrator, PRINTER_QUESTION)
    assert after.action is Action.NO_ANSWER
    assert orchestrator.settings.relevance_threshold == 0.99
    assert orchestrator.base_settings.relevance_threshold == 0.45

    await admin.change(relevance_threshold=None)  # back to the default
    again = await ask(orchestrator, PRINTER_QUESTION)
    assert again.action in {Action.ANSWER, Action.CHECKLIST}


async def test_a_clarify_cap_of_zero_offers_a_ticket_at_once(
    orchestrator: Orchestrator, admin: Admin
) -> None:
    assert (await ask(orchestrator, VAGUE)).action is Action.CLARIFY

    await admin.change(clarify_cap=0)
    answer = await ask(orchestrator, VAGUE)
    assert answer.action is Action.NO_ANSWER
    assert answer.answer == CAP_TEXT


async def test_crawl_scope_and_budget_travel_with_the_next_crawl_request(
    orchestrator: Orchestrator, admin: Admin, fleet: RecordingFleet
) -> None:
    # No seeds in the environment: the question is simply not covered.
    assert (await ask(orchestrator, MISSING)).action is Action.NO_ANSWER
    assert fleet.requests == []

    await admin.change(
        crawl_seed_urls=["https://help.northwind.example/"],
        crawl_allowed_domains=["northwind.example"],
        crawl_max_pages=3,
        crawl_max_depth=1,
        crawl_deadline_s=12.5,
        crawl_concurrency=2,
    )
    replies = RecordingReplies()
    await orchestrator.handle_query(query(MISSING), replies)
    assert replies.answers == []  # waits on the crawl
    (request,) = fleet.requests
    assert request.seed_urls == ["https://help.northwind.example/"]
    assert request.allowed_domains == ["northwind.example"]
    assert request.budget.max_pages == 3
    assert request.budget.max_depth == 1
    assert request.budget.deadline_s == 12.5
    assert request.budget.concurrency == 2


async def test_queues_and_anger_threshold_follow_the_configuration(
    orchestrator: Orchestrator, admin: Admin, intents: IntentClassifier
) -> None:
    await orchestrator.use_current_config()
    assert orchestrator.checkpoint.policy.anger_threshold == 0.5
    default_queue = intents.queues["account"]

    await admin.change(category_queues={"account": "IAM"}, escalation_anger_threshold=0.9)
    await orchestrator.use_current_config()
    assert intents.queues["account"] == "IAM"
    assert intents.queues["connectivity"] == intents.file_queues["connectivity"]
    assert intents.classify("I forgot my password and I'm locked out").queue == "IAM"
    assert orchestrator.checkpoint.policy.anger_threshold == 0.9

    await admin.change(category_queues=None, escalation_anger_threshold=None)
    await orchestrator.use_current_config()
    assert intents.queues["account"] == default_queue
    assert orchestrator.checkpoint.policy.anger_threshold == 0.5
