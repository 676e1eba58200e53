"""A job publishes identical content once, under the first URL that claims its content hash; a
URL whose fetch fails after its claim lets the claim go, so the same content under another URL is
still read. One process, real valkey, loopback site, a fake LLM endpoint for the link re-ranker."""

from __future__ import annotations

import json
from uuid import uuid4

import redis.asyncio as aioredis
from pydantic import SecretStr

from contracts.events import ContextInsufficient, new_id
from crawler.jobs import JobStore
from crawler.tests.conftest import CrawlClient, RunCrawler, needs_chromium
from crawler.tests.siteserver import SiteServer
from tests.support.fake_openai import TEST_KEY, FakeOpenAI
from tests.support.fake_openai import Reply as LLMReply

WORDS = " ".join(["Restart the docking station and reconnect the monitor cable."] * 10)
"""Enough words that the served HTML is read as is (no rendering)."""


def page(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"


def links(*paths: str) -> str:
    return "<ul>" + "".join(f'<li><a href="{p}">Docking help {p}</a></li>' for p in paths) + "</ul>"


async def test_only_the_owner_of_a_content_claim_releases_it(redis_url: str) -> None:
    async with aioredis.from_url(redis_url) as client:
        jobs = JobStore(client, prefix=f"t{uuid4().hex[:8]}:", ttl_s=600)
        job = ContextInsufficient(
            correlation_id=new_id(), conversation_id=new_id(), question="", seed_urls=[]
        ).job_id
        first, second = "http://h.example/a", "http://h.example/b"
        assert await jobs.claim_content(job, "h1", first) == first

        assert await jobs.release_content(job, "h1", second) is False  # not its claim
        assert await jobs.claim_content(job, "h1", second) == first
        assert await jobs.release_content(job, "h1", first) is True
        assert await jobs.claim_content(job, "h1", second) == second


@needs_chromium
async def test_a_page_that_fails_after_its_content_claim_lets_a_twin_url_publish_it(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    # /dock and /dock-copy serve the same page. The first of them read claims its content, then
    # the LLM takes longer to rank its links than the page may take: that URL fails (page time
    # limit). Its twin must then be read, not skipped as a duplicate of a page never published.
    twin = page("Docking station", f"<p>{WORDS}</p>" + links("/monitor", "/cable"))
    with SiteServer() as site, FakeOpenAI() as llm:
        site.page("/", page("Help", f"<p>{WORDS}</p>" + links("/dock", "/dock-copy")))
        site.page("/dock", twin)
        site.page("/dock-copy", twin)
        site.page("/monitor", page("Monitor", f"<p>{WORDS} Monitor.</p>"))
        site.page("/cable", page("Cable", f"<p>{WORDS} Cable.</p>"))
        llm.enqueue(
            LLMReply(json.dumps({"order": [1, 2]})),  # the seed's links
            LLMReply(json.dumps({"order": [1, 2]}), delay_s=6.0),  # the first twin's links
        )
        async with run_crawler(
            llm_base_url=llm.base_url,
            llm_model="fake-model",
            llm_api_key=SecretStr(TEST_KEY),
            page_timeout_s=3.0,
        ):
            request = await client.start(
                [site.url("/")], max_pages=10, max_depth=2, concurrency=1, question="docking"
            )
            finished = await client.finished(request)
            pages = await client.pages(request)

    assert finished.skipped.get("error") == 1, finished
    twins = {site.url("/dock"), site.url("/dock-copy")}
    published = twins & set(pages)
    assert len(published) == 1, (finished, sorted(pages))
    [url] = published
    assert site.count(url.removeprefix(site.url(""))) == 1
    assert finished.skipped.get("duplicate", 0) == 0
