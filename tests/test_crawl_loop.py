"""The agentic crawl loop through the public API, on the real stack with a real crawler.

A question whose answer is on the company's help site (served here on loopback from
``tests/sites/help``) but not in the knowledge base: the orchestrator asks the crawler fleet, the
crawler reads the site with the system Chromium, the indexer indexes the pages, and the turn is
answered with a citation to the crawled page, while the user watches the progress.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
import redis
import websockets

from contracts.bus import decode_entry
from contracts.events import ContextInsufficient, CrawlFinished, Event
from contracts.topics import Topic
from crawler.tests.siteserver import SiteServer
from deploy.runner import Stack
from orchestrator.sites import read_nothing_new, settled_key
from tests.support.stack import HELP_SITE, ask, help_site_env, running_stack

pytestmark = pytest.mark.slow

QUESTION = "How do I calibrate the Wacom drawing tablet pen?"
ANSWER_PAGE = "/help/tablets/wacom-calibrate.html"
SEED_PAGE = "/help/index.html"
UNANSWERED = "How do I pair the Logitech presenter remote with my laptop?"
"""A question neither the knowledge base nor the help site answers: its crawl reaches the whole
site (eight pages, the crawl's budget) and finds nothing."""

E = TypeVar("E", bound=Event)


@pytest.fixture(scope="module")
def site() -> Iterator[SiteServer]:
    with SiteServer(HELP_SITE) as server:
        yield server


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, site: SiteServer) -> Iterator[Stack]:
    env = help_site_env(site.url(SEED_PAGE))
    with running_stack(tmp_path_factory.mktemp("crawl"), env, crawler="on") as running:
        yield running


def turn_events(stack: Stack, topic: Topic, model: type[E], turn_id: str) -> list[E]:
    """The events of the turn ``turn_id`` on ``topic``, oldest first."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        entries = client.xrange(topic)
    finally:
        client.close()
    events = [decode_entry(fields, model) for _, fields in entries]
    return [event for event in events if event.correlation_id == turn_id]


def crawl_requests(stack: Stack, turn_id: str) -> list[ContextInsufficient]:
    """The crawls the orchestrator asked the fleet for during the turn ``turn_id``."""
    return turn_events(stack, Topic.CONTEXT_INSUFFICIENT, ContextInsufficient, turn_id)


async def chat(stack: Stack, text: str) -> list[dict[str, Any]]:
    """Every frame of one turn over the WebSocket, up to and including the answer."""
    url = stack.url.replace("http://", "ws://") + "/ws/chat"
    frames: list[dict[str, Any]] = []
    async with websockets.connect(url) as ws:
        assert json.loads(await ws.recv())["type"] == "ready"
        await ws.send(json.dumps({"type": "message", "text": text}))
        async with asyncio.timeout(90):
            while True:
                frame = json.loads(await ws.recv())
                frames.append(frame)
                if frame["type"] in ("answer", "error"):
                    return frames


def test_a_question_only_the_help_site_answers_is_answered_from_the_crawled_page(
    stack: Stack, site: SiteServer
) -> None:
    frames = asyncio.run(chat(stack, QUESTION))

    answer = frames[-1]
    assert answer["type"] == "answer", frames
    assert len(crawl_requests(stack, answer["turn_id"])) == 1
    body = answer  # the answer frame carries the answer's fields
    assert body["action"] in ("answer", "checklist"), body
    urls = [citation["url"] for citation in body["citations"]]
    assert urls[0].endswith(ANSWER_PAGE), urls
    assert "crosshair" in body["answer"]
    assert body["crawled"] is True  # the answer says the help sites were read for it

    # Progress, in order: the search, the crawl starting, pages fetched, pages indexed.
    stages = [f.get("stage") for f in frames if f["type"] == "progress"]
    assert "crawling" in stages
    assert "indexed" in stages
    assert stages.index("searching") < stages.index("crawling") < stages.index("indexed")
    # The crawler's own frames: pages fetched out of the budget, counting up.
    fetched = [
        int(match.group(1))
        for f in frames
        if f.get("stage") == "crawling"
        and (match := re.fullmatch(r"(\d+)/8 pages", f.get("detail") or ""))
    ]
    assert fetched, [f.get("detail") for f in frames]
    assert fetched == sorted(set(fetched))  # only forwards: none repeated, none going back
    counted = [f["count"] for f in frames if f.get("stage") == "crawling" and "count" in f]
    assert counted == fetched  # for a progress bar: the same count, and the budget
    assert {f["total"] for f in frames if "count" in f} == {8}
    # The crawler really fetched the page it cites, and no page twice.
    paths = site.paths()
    assert ANSWER_PAGE in paths
    pages = [path for path in paths if path.endswith(".html")]
    assert len(pages) == len(set(pages))


def test_a_follow_up_reuses_the_crawled_pages_without_crawling_again(stack: Stack) -> None:
    response = ask(stack, "The cursor lands beside the tip of my Wacom pen, what do I do?")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["action"] in ("answer", "checklist"), body
    assert body["citations"][0]["url"].endswith(ANSWER_PAGE)
    assert body["crawled"] is False
    # Answered from the index: the turn, now over, asked the fleet for no crawl (a crawl is
    # requested before the answer it serves, so none can come later).
    assert crawl_requests(stack, body["turn_id"]) == []


def test_a_question_whose_crawl_read_nothing_new_is_answered_again_without_a_crawl(
    stack: Stack, site: SiteServer
) -> None:
    """The orchestrator's ``crawl.finished`` handler settles a question whose crawl read no new
    page (all its plan reached was read within the crawler's freshness window): asked again, it
    is answered from the index at once instead of waiting on a crawl that would read nothing."""
    client = redis.Redis.from_url(stack.redis_url)
    key = settled_key([site.url(SEED_PAGE)], UNANSWERED)
    try:
        assert not client.exists(key)
        crawls: list[CrawlFinished] = []
        # After the Wacom question's crawl (which read the whole site) the first crawl reads
        # nothing new; run alone, the first reads the site and the second nothing new.
        for _ in range(2):
            body = asked(stack, UNANSWERED)
            assert body["action"] not in ("answer", "checklist"), body  # nothing answers it
            turn_id = body["turn_id"]
            assert len(crawl_requests(stack, turn_id)) == 1
            (finished,) = turn_events(stack, Topic.CRAWL_FINISHED, CrawlFinished, turn_id)
            crawls.append(finished)
            if read_nothing_new(finished):
                break
            assert finished.pages
            assert not client.exists(key), "a crawl that read pages settles nothing"
        summary = [(c.reason, [p.url for p in c.pages], c.skipped) for c in crawls]
        assert read_nothing_new(crawls[-1]), summary
        assert client.exists(key), f"the crawl that read nothing settled its question: {summary}"
        assert 0 < client.pttl(key) <= 300_000  # ORCHESTRATOR_CRAWL_SETTLED_S, its default

        again = asked(stack, UNANSWERED)
        assert again["crawled"] is False
        assert crawl_requests(stack, again["turn_id"]) == []
    finally:
        client.close()


def asked(stack: Stack, text: str) -> dict[str, Any]:
    """The answer to ``text`` asked in a conversation of its own."""
    response = ask(stack, text)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
