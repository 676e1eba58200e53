"""The help sites' words: kept when NER calls them a person or a place, learnt from the pages the
crawler reads and from the seeds, and never a way for personal data to go through."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import (
    CrawlFinished,
    CrawlPageSummary,
    MessageReceived,
    QueryReceived,
    SitemapPage,
    SiteMapped,
)
from contracts.runtime_config import CONFIG_KEY, DEFAULTS_PREFIX
from contracts.topics import Topic
from redactor.names import given_names
from redactor.service import Redactor
from redactor.site_terms import KEY, SiteTerms, page_words, site_words, url_words
from tests.support import wait_until

SEED = "http://127.0.0.1:8123/dispatch/"
OPSGENIE_PAGE = (
    "http://127.0.0.1:8123/dispatch/docs/administration/settings/plugins/configuring-opsgenie"
)
NAMES = frozenset({"jane", "priya"})


def page(url: str, title: str, status: int = 200) -> CrawlPageSummary:
    return CrawlPageSummary(url=url, status=status, depth=1, title=title, bytes=100, ms=5)


def test_a_pages_title_and_address_give_its_words() -> None:
    words = page_words(OPSGENIE_PAGE, "Configuring Opsgenie | Dispatch", NAMES)
    assert {"opsgenie", "dispatch", "configuring", "plugins", "administration"} <= set(words)
    assert not {"http", "com", "www", "html"} & set(words)
    assert url_words("https://docs.pagerduty.example:8443/en/v2/index.html") == [
        "docs",
        "pagerduty",
        "example",
        "en",
        "v",
        "index",
        "html",
    ]


def test_given_names_and_the_words_beside_them_are_never_site_words() -> None:
    words = page_words("https://help.example/team/jane-okafor", "Meet Jane Okafor", NAMES)
    assert "jane" not in words
    assert "okafor" not in words  # beside a given name: a family name, most likely
    assert words == ["help", "example"]  # "meet" and "team" stood beside "jane" too
    assert site_words([["priya", "sharma"], ["sharma"]], NAMES) == []  # once beside, never kept
    assert site_words([["ab", "x" * 41, "ok123"]], NAMES) == []  # too short, too long


def dispatch_words(*, learnt: bool = True) -> frozenset[str]:
    words = url_words(SEED)
    if learnt:
        words += page_words(OPSGENIE_PAGE, "Configuring Opsgenie", given_names()[0])
    return frozenset(words)


@pytest.mark.parametrize(
    ("question", "kept"),
    [
        ("We use Opsgenie for on-call rotas, what does Dispatch need to read them?", "Opsgenie"),
        ("How much memory does the server need to run Dispatch?", "Dispatch"),
        ("I think I found a security hole in Dispatch, how do I report it?", "Dispatch"),
    ],
)
def test_a_sites_product_names_are_kept(redactor: Redactor, question: str, kept: str) -> None:
    before = redactor.redact(question).text
    assert kept not in before  # what the small model does without the site's words
    after = redactor.replace(question, redactor.find(question, dispatch_words())).text
    assert after == question


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Jane from Dispatch called me about Opsgenie", "Jane"),
        ("Ask Okafor about Dispatch", "Okafor"),
        ("mail jane.okafor@dispatch.example about it", "jane.okafor@dispatch.example"),
        ("call +44 20 7946 0958 for Opsgenie", "7946 0958"),
        ("my password is Opsgenie2024!", "Opsgenie2024!"),
        ("my password is dispatch, can you reset it?", "is dispatch"),
        ("DB_PASSWORD=Opsgenie in the .env file", "=Opsgenie"),
        ("I work from Manchester on Dispatch", "Manchester"),
    ],
)
def test_site_words_never_let_personal_data_through(
    redactor: Redactor, text: str, gone: str
) -> None:
    words = dispatch_words() | frozenset(
        page_words("https://help.example/team/jane-okafor", "Meet Jane Okafor", NAMES)
    )
    redacted = redactor.replace(text, redactor.find(text, words)).text
    assert gone not in redacted
    assert "<" in redacted


@pytest.fixture
async def client(fresh_redis_url: str) -> AsyncIterator[aioredis.Redis]:
    connection = aioredis.from_url(fresh_redis_url)
    yield connection
    await connection.aclose()


async def test_words_come_from_the_seeds_and_the_pages_read(client: aioredis.Redis) -> None:
    clock = [0.0]
    terms = SiteTerms(client, given_names()[0], cache_s=10, clock=lambda: clock[0])
    assert await terms.words() == frozenset()

    # The orchestrator publishes the seeds it runs with; an admin's override wins over them.
    await client.set(DEFAULTS_PREFIX + "orchestrator", json.dumps({"crawl_seed_urls": [SEED]}))
    clock[0] += 11
    assert "dispatch" in await terms.words()

    added = await terms.learn([(OPSGENIE_PAGE, "Configuring Opsgenie")])
    assert added >= 2
    words = await terms.words()  # learning refreshes this replica at once
    assert {"dispatch", "opsgenie", "configuring"} <= words
    assert await client.ttl(KEY) > 0

    other = SiteTerms(client, given_names()[0])  # another replica sees them from Redis
    assert "opsgenie" in await other.words()

    override = {"version": 1, "overrides": {"crawl_seed_urls": ["https://help.acme.example/"]}}
    await client.set(CONFIG_KEY, json.dumps(override))
    clock[0] += 11
    words = await terms.words()
    assert {"acme", "opsgenie"} <= words
    assert "dispatch" in words  # learnt from a page, not only from the seed


async def test_words_are_cached_between_reads(client: aioredis.Redis) -> None:
    clock = [0.0]
    terms = SiteTerms(client, frozenset(), cache_s=10, clock=lambda: clock[0])
    assert await terms.words() == frozenset()
    await client.hset(KEY, "opsgenie", 1)  # another replica learnt it
    assert await terms.words() == frozenset()
    clock[0] += 11
    assert await terms.words() == frozenset({"opsgenie"})


async def test_a_crawl_teaches_every_message_after_it_the_sites_words(
    running_with_sites: tuple[Bus, aioredis.Redis],
) -> None:
    bus, client = running_with_sites
    question = "We use Opsgenie for on-call rotas, what does it need to read them?"

    async def ask(turn: str) -> str:
        await bus.publish(
            Topic.MESSAGE_RECEIVED,
            MessageReceived(
                correlation_id=turn,
                conversation_id=turn,
                user_id="emp-1",
                text=question,
                reply_to="reply.test",
            ),
        )

        async def answered() -> str | None:
            for _, fields in await client.xrange(Topic.QUERY_RECEIVED):
                query = decode_entry(fields, QueryReceived)
                if query.correlation_id == turn:
                    return query.text
            return None

        return await wait_until(answered, timeout_s=30)

    assert "Opsgenie" not in await ask("turn-before")
    await bus.publish(
        Topic.CRAWL_FINISHED,
        CrawlFinished(
            correlation_id="crawl-1",
            conversation_id="crawl-1",
            job_id="job-1",
            reason="frontier_empty",
            pages=[
                page(OPSGENIE_PAGE, "Configuring Opsgenie | Dispatch"),
                page("http://127.0.0.1:8123/dispatch/gone", "Zendesk", status=404),
            ],
        ),
    )
    await wait_until(lambda: client.hexists(KEY, "opsgenie"), timeout_s=30)
    assert await ask("turn-after") == question
    assert not await client.hexists(KEY, "zendesk")  # a page not read names nothing

    # A sitemap's pages teach their words before any of them is read.
    await bus.publish(
        Topic.SITE_MAPPED,
        SiteMapped(
            correlation_id="crawl-2",
            conversation_id="crawl-2",
            site="http://127.0.0.1:8123",
            pages=[SitemapPage(url=OPSGENIE_PAGE.replace("opsgenie", "victorops"))],
        ),
    )
    await wait_until(lambda: client.hexists(KEY, "victorops"), timeout_s=30)
