"""A configured help site's own subjects are in scope: its profile (seed URLs, titles and URL
words of the pages read) lifts a question the scope model doubts, and nothing else.

The profile of the Dispatch documentation is built from the site's files, read in place from
the shared data folder; turns run with real Redis, a real Chroma collection and the real models
(the fleet is a recorder, as in ``test_crawl_turns``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from contracts.events import (
    Action,
    AuditRecorded,
    CrawlFinished,
    CrawlPageSummary,
    SitemapPage,
)
from orchestrator.embedding import QueryEncoder
from orchestrator.handlers import _audit_record
from orchestrator.intent import IntentClassifier
from orchestrator.service import Orchestrator
from orchestrator.sites import (
    KEY_PREFIX,
    MAX_PAGES,
    SiteProfile,
    SiteProfiles,
    read_nothing_new,
    settled_key,
    url_words,
)
from orchestrator.state import TurnState
from orchestrator.tests.crawl_turns import make_orchestrator
from orchestrator.tests.dispatch_site import SEED, dispatch_pages
from orchestrator.tests.stand_ins import RecordingFleet, RecordingReplies, query
from orchestrator.turn.deps import AuditNote, AuditTrail

# Questions about the Dispatch documentation that the scope model puts just under its threshold
# (0.35-0.44 at the default 0.44), each with the words of it that name the site's subjects.
DOUBTED_SITE_QUESTIONS = [
    ("How do I run the tests for a plugin I wrote?", {"plugin", "test"}),
    ("How often does Dispatch recalculate what an incident has cost us?", {"dispatch", "cost"}),
    ("How do I run Dispatch locally to hack on it?", {"dispatch"}),
    ("Can Dispatch predict how many incidents we are likely to have next month?", {"dispatch"}),
]
OFF_TOPIC = [
    "will it rain in Lisbon tomorrow afternoon?",
    "what is a good recipe for banana bread",
    "who won the football world cup in 1966",
]


@pytest.fixture
def collection(articles_collection: Any) -> Any:
    return articles_collection


def test_url_words_keep_the_subject_and_drop_the_noise() -> None:
    assert url_words("https://docs.example.com/en/latest/contributing/plugins/testing.html") == (
        "contributing plugins testing"
    )
    assert url_words("https://www.acme-widgets.com/help/", host=True) == "acme widgets"
    assert url_words("http://127.0.0.1:8000/dispatch/", host=True) == "dispatch"


def test_the_seeds_alone_name_the_product() -> None:
    profile = SiteProfile.build([SEED], [])
    assert profile.pages == 0
    assert profile.subjects_named("How do I run Dispatch locally to hack on it?") == ["dispatch"]
    assert profile.subjects_named("How do I run the tests for a plugin I wrote?") == []


def test_asking_words_never_name_a_subject() -> None:
    profile = SiteProfile.build([], [("http://x.example/help/get-started", "Get help")])
    assert profile.subjects_named("can you help me get started please") == ["started"]
    assert profile.subjects_named("how do I get help") == []


@pytest.mark.parametrize(("question", "named"), DOUBTED_SITE_QUESTIONS)
def test_the_dispatch_profile_names_the_subjects_of_questions_about_it(
    question: str, named: set[str]
) -> None:
    profile = SiteProfile.build([SEED], dispatch_pages())
    assert named <= set(profile.subjects_named(question))


@pytest.mark.parametrize("question", OFF_TOPIC)
def test_the_dispatch_profile_names_nothing_of_everyday_questions(question: str) -> None:
    assert SiteProfile.build([SEED], dispatch_pages()).subjects_named(question) == []


def summary(url: str, title: str, status: int = 200) -> CrawlPageSummary:
    return CrawlPageSummary(url=url, status=status, depth=1, title=title, bytes=1, ms=1)


async def test_pages_read_are_kept_per_site_and_failures_are_not(
    redis: aioredis.Redis,
) -> None:
    sites = SiteProfiles(redis)
    noted = await sites.record(
        [
            summary(f"{SEED}docs/contributing/plugins/testing", "Testing | Dispatch"),
            summary(f"{SEED}docs/missing", "Page Not Found", status=404),
            summary("http://other.example/recipes/bread", "Banana bread"),
        ]
    )
    assert noted == 2
    profile = await sites.profile([SEED])
    assert profile.pages == 1
    assert set(profile.subjects_named("How do I run the tests for a plugin I wrote?")) == {
        "test",
        "plugin",
    }
    assert profile.subjects_named("what is a good recipe for banana bread") == []
    assert 0 < await redis.ttl(KEY_PREFIX + "http://127.0.0.1:8000") <= 7 * 24 * 3600


async def test_a_settled_question_is_kept_by_digest_for_its_time(redis: aioredis.Redis) -> None:
    sites = SiteProfiles(redis)
    question = "How do I run the tests for a plugin I wrote?"
    await sites.settle([SEED], question, ttl_s=0)  # 0: never settled
    assert not await sites.settled([SEED], question)
    await sites.settle([SEED, "http://other.example/"], question, ttl_s=30)
    assert await sites.settled(
        ["http://other.example/", SEED], "how do I run the TESTS  for a plugin I wrote?"
    )
    assert not await sites.settled([SEED], question)  # other sites: another crawl
    assert not await sites.settled([SEED, "http://other.example/"], "How do I run a plugin?")
    key = settled_key([SEED, "http://other.example/"], question)
    assert "plugin" not in key  # the question is not kept in clear
    assert 0 < await redis.pttl(key) <= 30_000


@pytest.mark.parametrize(
    ("reason", "pages", "skipped", "settles"),
    [
        ("frontier_empty", 0, {"fresh": 76, "error": 1}, True),  # read whole, one broken link
        ("frontier_empty", 0, {"fresh": 0, "error": 5}, False),  # the site is down
        ("frontier_empty", 0, {"fresh": 2, "error": 2}, False),
        ("frontier_empty", 1, {"fresh": 40}, False),  # it read a page
        ("deadline", 0, {"fresh": 40}, False),  # cut short: more may be there
        ("frontier_empty", 0, {"off_domain": 3}, False),  # nothing reached at all
    ],
)
def test_a_crawl_reads_nothing_new_when_what_it_reached_was_read_lately(
    reason: str, pages: int, skipped: dict[str, int], settles: bool
) -> None:
    page = CrawlPageSummary(url=SEED, status=200, depth=0, title="t", bytes=1, ms=1)
    finished = CrawlFinished(
        correlation_id="c",
        conversation_id="v",
        job_id="j",
        reason=reason,
        pages=[page] * pages,
        skipped=skipped,
    )
    assert read_nothing_new(finished) is settles


async def test_pages_a_sitemap_lists_name_subjects_before_they_are_read(
    redis: aioredis.Redis,
) -> None:
    sites = SiteProfiles(redis)
    await sites.record([summary(f"{SEED}docs/contributing/plugins/testing", "Testing | Dispatch")])
    profile = await sites.profile([SEED])
    assert profile.subjects_named("We use Opsgenie for on-call rotas, what does it need?") == []

    listed = await sites.record_listed(
        [
            SitemapPage(url=f"{SEED}docs/administration/settings/plugins/configuring-opsgenie"),
            SitemapPage(url=f"{SEED}docs/contributing/plugins/testing"),  # read, titled
        ]
    )
    assert listed == 2
    profile = await sites.profile([SEED])  # its own note refreshes this replica at once
    assert profile.pages == 2
    assert profile.subjects_named("We use Opsgenie for on-call rotas, what does it need?") == [
        "opsgenie"
    ]
    key = KEY_PREFIX + "http://127.0.0.1:8000"
    # A title read from the page stays; the sitemap had none to give.
    assert (
        await redis.hget(key, f"{SEED}docs/contributing/plugins/testing") == b"Testing | Dispatch"
    )


async def test_a_full_profile_takes_no_new_pages(redis: aioredis.Redis) -> None:
    key = KEY_PREFIX + "http://big.example"
    await redis.hset(key, mapping={f"http://big.example/p{i}": "x" for i in range(MAX_PAGES)})
    sites = SiteProfiles(redis)
    await sites.record(
        [summary("http://big.example/p1", "Renamed"), summary("http://big.example/new", "New")]
    )
    assert await redis.hlen(key) == MAX_PAGES
    assert await redis.hget(key, "http://big.example/p1") == b"Renamed"


async def test_a_replica_rebuilds_its_profile_after_its_cache_or_its_own_crawl(
    redis: aioredis.Redis,
) -> None:
    """A doubted question does not read and stem every page read each time: a replica keeps the
    profile it built for ``cache_s``, or until it records pages itself."""
    page = f"{SEED}docs/contributing/plugins/testing"
    here, there = SiteProfiles(redis, cache_s=3600), SiteProfiles(redis)
    assert (await here.profile([SEED])).pages == 0

    await there.record([summary(page, "Testing | Dispatch")])

    assert (await here.profile([SEED])).pages == 0  # built a moment ago: kept
    assert (await SiteProfiles(redis, cache_s=0).profile([SEED])).pages == 1
    await here.record([summary(f"{SEED}docs/faq", "FAQ")])
    assert (await here.profile([SEED])).pages == 2


Build = Callable[..., Orchestrator]


@pytest.fixture
def build(
    encoder: QueryEncoder,
    intents: IntentClassifier,
    collection: Any,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
) -> Build:
    """An orchestrator over the test's Redis and collection with these site profiles, whose
    only help site is the Dispatch seed unless settings say otherwise."""

    def made(sites: SiteProfiles, audit: AuditTrail | None = None, **settings: Any) -> Orchestrator:
        settings = {"crawl_seed_urls": [SEED], **settings}
        return make_orchestrator(
            encoder, intents, collection, redis, fleet, sites, audit, **settings
        )

    return made


async def actions_of(orchestrator: Orchestrator, text: str) -> list[str]:
    replies = RecordingReplies()
    await orchestrator.handle_query(query(text), replies)
    return [a.action for a in replies.answers]


@pytest.fixture
async def dispatch_sites(redis: aioredis.Redis) -> SiteProfiles:
    sites = SiteProfiles(redis)
    await sites.record([summary(url, title) for url, title in dispatch_pages()])
    return sites


class ContractAudit:
    """The audit records a turn would publish, each validated by the contract's model."""

    def __init__(self) -> None:
        self.records: list[AuditRecorded] = []

    async def record(self, turn: TurnState, *notes: AuditNote) -> None:
        self.records += [_audit_record(turn, note, None) for note in notes]

    async def publish(self, record: AuditRecorded) -> None:
        self.records.append(record)


async def test_a_doubted_question_naming_the_site_is_read_from_it_not_refused(
    build: Build,
    intents: IntentClassifier,
    fleet: RecordingFleet,
    dispatch_sites: SiteProfiles,
) -> None:
    question = "How do I run the tests for a plugin I wrote?"
    assert not intents.classify(question).in_scope  # the scope model alone refuses it
    audit = ContractAudit()

    actions = await actions_of(build(dispatch_sites, audit), question)

    assert actions == []  # waiting on the crawl
    (request,) = fleet.requests
    assert request.seed_urls == [SEED]
    assert "plugin" in request.question
    (retrieval,) = [record for record in audit.records if record.action == "retrieval"]
    assert str(retrieval.details["in_scope_by"]).startswith("names the help site's")


@pytest.mark.parametrize("question", OFF_TOPIC)
async def test_everyday_questions_stay_refused_beside_a_help_site(
    build: Build,
    fleet: RecordingFleet,
    dispatch_sites: SiteProfiles,
    question: str,
) -> None:
    assert await actions_of(build(dispatch_sites), question) == [Action.REFUSE]
    assert fleet.requests == []


@pytest.mark.parametrize(
    ("settings", "page"),
    [
        ({"scope_site_margin": 0.0}, f"{SEED}docs/contributing/plugins/testing"),  # turned off
        ({"crawl_enabled": False}, f"{SEED}docs/contributing/plugins/testing"),  # no site to read
        ({}, "http://old.example/plugins/testing"),  # read from a site no longer configured
    ],
)
async def test_without_a_margin_or_a_configured_site_named_the_scope_model_decides(
    build: Build,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
    settings: dict[str, Any],
    page: str,
) -> None:
    sites = SiteProfiles(redis)
    # The configured site has been read (a page that names nothing of the question).
    await sites.record([summary(page, "Testing plugins"), summary(f"{SEED}docs/faq", "FAQ")])
    question = "How do I run the tests for a plugin I wrote?"
    assert await actions_of(build(sites, **settings), question) == [Action.REFUSE]
    assert fleet.requests == []


async def test_an_unread_help_site_is_read_before_a_doubted_question_is_refused(
    build: Build,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
) -> None:
    """No page of the site read yet, its seeds naming nothing ("help", "index"): a question the
    scope model doubts crawls first; one it puts far out of scope is refused at once."""
    orchestrator = build(SiteProfiles(redis), crawl_seed_urls=["http://help.example/index.html"])

    assert await actions_of(orchestrator, "How do I run the tests for a plugin I wrote?") == []
    assert len(fleet.requests) == 1
    for question in OFF_TOPIC:
        assert await actions_of(orchestrator, question) == [Action.REFUSE]
    assert len(fleet.requests) == 1
