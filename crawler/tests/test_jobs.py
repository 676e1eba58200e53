"""The job state machine in Redis (real valkey): what makes N workers safe on one job."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from uuid import uuid4

import pytest
import redis.asyncio as aioredis

from contracts.events import (
    ContextInsufficient,
    CrawlBudget,
    CrawledPage,
    CrawlPageSummary,
    PagesCrawled,
    new_id,
)
from crawler.jobs import JobStore, Queued
from crawler.urls import url_pattern


@pytest.fixture
async def jobs(redis_url: str) -> AsyncIterator[JobStore]:
    client = aioredis.from_url(redis_url)
    try:
        yield JobStore(client, prefix=f"t{uuid4().hex[:8]}:", ttl_s=600)
    finally:
        await client.aclose()


def request(**budget: float) -> ContextInsufficient:
    return ContextInsufficient(
        correlation_id=new_id(),
        conversation_id=new_id(),
        question="",
        seed_urls=["http://h.example/"],
        budget=CrawlBudget(**budget),  # type: ignore[arg-type]
    )


def queued(path: str, score: float = 0.0, depth: int = 1) -> Queued:
    url = f"http://h.example{path}"
    return Queued(url, score, depth, url_pattern(url))


def summary(url: str) -> CrawlPageSummary:
    return CrawlPageSummary(url=url, status=200, depth=0, title="t", bytes=1, ms=1)


async def test_create_is_idempotent_and_replays_its_dispatch(jobs: JobStore) -> None:
    spec = request(concurrency=2, max_pages=10)
    seeds = [queued(f"/{i}", score=-i, depth=0) for i in range(5)]
    created, batch = await jobs.create(spec, seeds, "create:1")
    assert created
    assert [d.url for d in batch] == ["http://h.example/0", "http://h.example/1"]  # best first
    again, replay = await jobs.create(spec, seeds, "create:1")
    assert not again
    assert replay == batch
    assert (await jobs.meta(spec.job_id))["outstanding"] == "2"


async def test_one_claim_per_url_and_one_completion(jobs: JobStore) -> None:
    spec = request(concurrency=1, max_pages=10)
    _, [first] = await jobs.create(spec, [queued("/", depth=0)], "c")
    assert await jobs.begin(spec.job_id, first.url, "1-0") == "go"
    assert await jobs.begin(spec.job_id, first.url, "2-0") == "duplicate"  # another entry
    assert await jobs.begin(spec.job_id, first.url, "1-0") == "go"  # its own redelivery
    links = [queued("/a", 0.5), queued("/b", 0.9), queued("/a", 0.5)]
    done = await jobs.complete(
        spec.job_id, first.url, "1-0", "page", summary=summary(first.url), links=links
    )
    assert done.state == "ok"
    assert [d.url for d in done.dispatched] == ["http://h.example/b"]
    assert done.dispatched[0].parent is None
    assert done.published == 1
    # A redelivery after completion: nothing moves, the same dispatch is replayed.
    assert await jobs.begin(spec.job_id, first.url, "1-0") == "done"
    replay = await jobs.complete(spec.job_id, first.url, "1-0", "page", links=links)
    assert replay.state == "again"
    assert replay.dispatched == done.dispatched
    meta = await jobs.meta(spec.job_id)
    assert (meta["published"], meta["outstanding"]) == ("1", "1")
    assert len(await jobs.pages(spec.job_id)) == 1


def page_event(spec: ContextInsufficient, url: str) -> PagesCrawled:
    page = CrawledPage(url=url, requested_url=url, title="t", content_hash="h", markdown="m")
    return PagesCrawled(
        correlation_id=spec.correlation_id,
        conversation_id=spec.conversation_id,
        job_id=spec.job_id,
        pages=[page],
    )


async def test_a_page_event_waits_in_the_outbox_until_sent(jobs: JobStore) -> None:
    spec = request(concurrency=1, max_pages=10)
    _, [first] = await jobs.create(spec, [queued("/", depth=0)], "c")
    assert await jobs.begin(spec.job_id, first.url, "1-0") == "go"
    event = page_event(spec, first.url)
    done = await jobs.complete(
        spec.job_id, first.url, "1-0", "page", summary=summary(first.url), event=event
    )
    assert (done.state, done.unsent) == ("ok", None)  # the caller publishes its own event
    assert await jobs.unsent(spec.job_id) == {first.url: event}
    ttl = await jobs.redis.pttl(jobs.key(spec.job_id, "outbox"))
    assert 0 < ttl <= 600_000  # expires with the job
    # Its worker died before sending it: the redelivered entry gets it back, until it is sent.
    assert await jobs.begin(spec.job_id, first.url, "1-0") == "done"
    replay = await jobs.complete(spec.job_id, first.url, "1-0", "page")
    assert (replay.state, replay.unsent) == ("again", event)
    await jobs.sent(spec.job_id, first.url)
    assert await jobs.unsent(spec.job_id) == {}
    again = await jobs.complete(spec.job_id, first.url, "1-0", "page")
    assert (again.state, again.unsent) == ("again", None)
    assert (await jobs.meta(spec.job_id))["published"] == "1"


async def test_a_page_recorded_by_no_one_is_never_in_the_outbox(jobs: JobStore) -> None:
    """Two calls on one entry (the bus handed it over while the first was slow): the other
    outcome was recorded first, so the page is not the job's; nor is a page of a job gone."""
    spec = request(concurrency=1, max_pages=10)
    _, [first] = await jobs.create(spec, [queued("/", depth=0)], "c")
    assert await jobs.begin(spec.job_id, first.url, "1-0", "slow", lease_ms=1) == "go"
    await asyncio.sleep(0.02)  # its lease ran out: it was only slow, not dead
    assert await jobs.begin(spec.job_id, first.url, "1-0", "successor") == "go"
    assert (await jobs.complete(spec.job_id, first.url, "1-0", "error")).state == "ok"
    late = await jobs.complete(
        spec.job_id, first.url, "1-0", "page", summary=summary(first.url),
        event=page_event(spec, first.url),
    )  # fmt: skip
    assert (late.state, late.unsent) == ("again", None)
    assert await jobs.unsent(spec.job_id) == {}
    meta = await jobs.meta(spec.job_id)
    assert (meta["published"], meta["skip:error"]) == ("0", "1")
    gone = request()
    stale = await jobs.complete(
        gone.job_id, first.url, "1-0", "page", event=page_event(gone, first.url)
    )
    assert (stale.state, stale.unsent) == ("stale", None)
    assert await jobs.unsent(gone.job_id) == {}


async def test_links_are_queued_once_and_traps_are_capped(jobs: JobStore) -> None:
    spec = request(concurrency=1, max_pages=100)
    _, [seed] = await jobs.create(spec, [queued("/", depth=0)], "c")
    await jobs.begin(spec.job_id, seed.url, "1-0")
    days = [
        dataclasses.replace(queued(f"/calendar/2031/{d}", 0.1), chained=True) for d in range(1, 20)
    ]
    listed = [queued(f"/article/{n}", 0.1) for n in range(1, 20)]  # an index, not a chain
    await jobs.complete(spec.job_id, seed.url, "1-0", "page", links=days + listed, pattern_cap=5)
    meta = await jobs.meta(spec.job_id)
    assert meta["skip:trap"] == "14"
    assert await jobs.pattern_counts(spec.job_id, [url_pattern(listed[0].url)]) == [19]
    assert await jobs.unseen(spec.job_id, [days[0].url, "http://h.example/new"]) == [False, True]


async def test_the_job_ends_once_when_the_frontier_is_empty(jobs: JobStore) -> None:
    spec = request(concurrency=2, max_pages=10)
    _, batch = await jobs.create(spec, [queued("/a", 1, 0), queued("/b", 0, 0)], "c")
    for entry, item in zip(("1-0", "2-0"), batch, strict=True):
        assert await jobs.begin(spec.job_id, item.url, entry) == "go"
    first = await jobs.complete(spec.job_id, batch[0].url, "1-0", "error")
    last = await jobs.complete(spec.job_id, batch[1].url, "2-0", "robots")
    assert (first.finished, last.finished) == (False, True)
    meta = await jobs.meta(spec.job_id)
    assert (meta["status"], meta["reason"]) == ("finished", "frontier_empty")
    assert (meta["skip:error"], meta["skip:robots"]) == ("1", "1")
    assert await jobs.finish(spec.job_id, "deadline", "sweep") is False


async def test_max_pages_bounds_dispatch_and_ends_the_job(jobs: JobStore) -> None:
    spec = request(concurrency=5, max_pages=2)
    seeds = [queued(f"/{i}", -i, 0) for i in range(4)]
    _, batch = await jobs.create(spec, seeds, "c")
    assert len(batch) == 2  # never more in flight than pages left in the budget
    await jobs.begin(spec.job_id, batch[0].url, "1-0")
    await jobs.begin(spec.job_id, batch[1].url, "2-0")
    skipped = await jobs.complete(spec.job_id, batch[0].url, "1-0", "duplicate")
    assert len(skipped.dispatched) == 1  # a skipped URL frees its budget for the next one
    page = await jobs.complete(spec.job_id, batch[1].url, "2-0", "page", summary=summary("x"))
    assert not page.finished
    third = skipped.dispatched[0]
    await jobs.begin(spec.job_id, third.url, "3-0")
    end = await jobs.complete(spec.job_id, third.url, "3-0", "page", summary=summary("y"))
    assert end.finished
    assert (await jobs.meta(spec.job_id))["reason"] == "max_pages"


async def test_a_stop_cancels_what_has_not_started(jobs: JobStore) -> None:
    spec = request(concurrency=2, max_pages=10)
    _, batch = await jobs.create(spec, [queued("/a", 1, 0), queued("/b", 0, 0)], "c")
    await jobs.request_stop(spec.job_id)
    assert await jobs.finish(spec.job_id, "stopped", "w") is True
    assert await jobs.begin(spec.job_id, batch[0].url, "1-0") == "cancel"
    after = await jobs.complete(spec.job_id, batch[0].url, "1-0", "cancelled")
    assert after.dispatched == []
    assert not after.finished


async def test_content_hash_has_one_owner(jobs: JobStore) -> None:
    spec = request()
    await jobs.create(spec, [queued("/", depth=0)], "c")
    assert await jobs.claim_content(spec.job_id, "h1", "http://h.example/a") == "http://h.example/a"
    assert await jobs.claim_content(spec.job_id, "h1", "http://h.example/b") == "http://h.example/a"
    assert await jobs.claim_content(spec.job_id, "h1", "http://h.example/a") == "http://h.example/a"


async def test_while_the_sitemaps_are_read_only_the_seeds_go_and_the_job_waits(
    jobs: JobStore,
) -> None:
    """A job created ``awaiting`` its sitemaps dispatches its seed, holds the seed's links back
    and does not end on an empty frontier; the sitemaps' URLs are planned with those links and
    dispatched once (a redelivered request replays the same batch)."""
    spec = request(concurrency=2, max_pages=10)
    _, [seed] = await jobs.create(spec, [queued("/", depth=0)], "c", awaiting=True)
    assert await jobs.begin(spec.job_id, seed.url, "1-0") == "go"
    done = await jobs.complete(
        spec.job_id, seed.url, "1-0", "page", summary=summary(seed.url), links=[queued("/a", 0.1)]
    )
    assert (done.state, done.dispatched, done.finished) == ("ok", [], False)
    found = [queued("/a", 0.1), queued("/from-sitemap", 0.8), queued("/other", 0.05)]
    batch, ended = await jobs.add_found(spec.job_id, found, "sitemaps:c")
    assert [d.url for d in batch] == ["http://h.example/from-sitemap", "http://h.example/a"]
    assert not ended
    assert await jobs.add_found(spec.job_id, found, "sitemaps:c") == (batch, False)
    assert (await jobs.meta(spec.job_id))["awaiting"] == "0"

    empty = request(concurrency=2, max_pages=10)
    _, [only] = await jobs.create(empty, [queued("/", depth=0)], "c", awaiting=True)
    await jobs.begin(empty.job_id, only.url, "2-0")
    lone = await jobs.complete(empty.job_id, only.url, "2-0", "page", summary=summary(only.url))
    assert not lone.finished  # the sitemaps may still bring pages
    assert await jobs.add_found(empty.job_id, [], "sitemaps:c") == ([], True)
    meta = await jobs.meta(empty.job_id)
    assert (meta["status"], meta["reason"]) == ("finished", "frontier_empty")
