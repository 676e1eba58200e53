"""Approved proposals written as drafts into the Confluence and Graph emulators: a draft (never
published) with the article and its sources, the link to it, and the errors an operator must act
on (a missing permission) apart from those worth retrying (5xx, throttling)."""

from __future__ import annotations

from typing import Any, cast

import httpx
import pytest
import redis
import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import ProposalSource, SourceDraftCompleted, SourceDraftRequested, new_id
from contracts.settings import ServiceSettings
from contracts.topics import Topic
from indexer import handlers
from indexer.sources.base import Draft, DraftCitation, DraftError
from indexer.sources.confluence import ConfluenceSource
from indexer.sources.runner import SourceRunner, UnknownSource
from indexer.sources.sharepoint import SharePointSource
from indexer.tests.synced_sources import confluence_config, sharepoint_config
from tests.support import wait_until
from tests.support.fake_confluence import FakeConfluence
from tests.support.fake_graph import FakeGraph

ARTICLE = (
    "# Configure SAP GUI shortcuts\n\n"
    "Open **Customize Local Layout** (Alt+F12) and pick *Options*.\n\n"
    "<script>alert('x')</script> [click](javascript:alert(1))\n\n"
    "1. Choose Keyboard\n2. Save\n"
)
DRAFT = Draft(
    key="3f1d2c4b5a6978877665544332211000",
    title="Configure SAP GUI shortcuts",
    markdown=ARTICLE,
    citations=(
        DraftCitation("SAP GUI help", "https://help.example.com/sap/shortcuts?a=1&b=2"),
        DraftCitation("ME21N shortcuts lost", "IT-1042"),
    ),
)


def assert_inert_with_sources(html: str) -> None:
    assert "<script>" not in html
    assert 'href="javascript' not in html
    assert "&lt;script&gt;" in html
    assert "<strong>Customize Local Layout</strong>" in html
    assert '<a href="https://help.example.com/sap/shortcuts?a=1&amp;b=2">SAP GUI help</a>' in html
    assert "ME21N shortcuts lost (IT-1042)" in html
    assert "<h1>" not in html  # the page's own title is the heading


def test_confluence_draft_is_a_draft_page_in_the_first_space(confluence: FakeConfluence) -> None:
    source = ConfluenceSource(confluence_config(confluence))
    link = source.write_draft(DRAFT)
    [(page_id, sent)] = confluence.drafts.items()
    assert link.draft_id == page_id
    assert link.url == f"{confluence.base_url}/pages/resumedraft.action?draftId={page_id}"
    assert sent["status"] == "draft"
    assert sent["title"] == DRAFT.title
    assert sent["spaceId"] == "1000"  # IT, the first configured space
    assert sent["body"]["representation"] == "storage"
    assert_inert_with_sources(sent["body"]["value"])
    assert confluence.published == []
    assert page_id not in confluence.pages  # a draft is not among the space's current pages


def test_confluence_without_add_page_says_which_permission(confluence: FakeConfluence) -> None:
    confluence.deny_drafts("IT")
    source = ConfluenceSource(confluence_config(confluence))
    with pytest.raises(DraftError) as raised:
        source.write_draft(DRAFT)
    assert raised.value.missing_permission == "Add page (IT)"
    assert not raised.value.retry
    assert "403" in str(raised.value)
    assert confluence.drafts == {}
    assert confluence.published == []


def test_confluence_throttling_is_waited_out_and_5xx_is_retryable(
    confluence: FakeConfluence,
) -> None:
    source = ConfluenceSource(confluence_config(confluence))
    confluence.throttle_next(2, retry_after="0")
    assert source.write_draft(DRAFT).draft_id
    confluence.fail_creates(1, 502)
    with pytest.raises(DraftError) as raised:
        source.write_draft(DRAFT)
    assert raised.value.retry
    assert str(raised.value).endswith("HTTP 502 when writing the draft: Bad Gateway")
    assert len(confluence.drafts) == 1
    confluence.fail_creates(1, 504)
    with pytest.raises(DraftError) as raised:
        source.write_draft(DRAFT)
    assert str(raised.value).endswith("HTTP 504 when writing the draft: Gateway Timeout")


def test_the_confluence_emulator_updates_no_page(confluence: FakeConfluence) -> None:
    # Deskpilot only writes drafts; a code path that updated or published a page would fail.
    link = ConfluenceSource(confluence_config(confluence)).write_draft(DRAFT)
    answer = httpx.put(
        f"{confluence.base_url}/api/v2/pages/{link.draft_id}",
        json={"id": link.draft_id, "status": "current", "title": DRAFT.title},
    )
    assert answer.status_code == 405
    assert confluence.published == []


def test_confluence_wrong_token_is_no_retry_and_quotes_no_secret(
    confluence: FakeConfluence,
) -> None:
    source = ConfluenceSource(confluence_config(confluence, api_token="wrong-secret-123"))
    with pytest.raises(DraftError) as raised:
        source.write_draft(DRAFT)
    assert "401" in str(raised.value)
    assert "wrong-secret-123" not in str(raised.value)
    assert not raised.value.retry


def test_confluence_unreachable_is_retryable(confluence: FakeConfluence) -> None:
    config = confluence_config(confluence)
    confluence.stop()
    with pytest.raises(DraftError) as raised:
        ConfluenceSource(config).write_draft(DRAFT)
    assert raised.value.retry


def test_sharepoint_draft_is_an_unpublished_site_page(graph: FakeGraph) -> None:
    source = SharePointSource(sharepoint_config(graph))
    try:
        link = source.write_draft(DRAFT)
    finally:
        source.close()
    [(page_id, sent)] = graph.site_pages.items()
    assert link.draft_id == page_id
    assert link.url == (
        "https://contoso.sharepoint.com/sites/it/SitePages/"
        "configure-sap-gui-shortcuts-3f1d2c4b.aspx"
    )
    assert sent["@odata.type"] == "#microsoft.graph.sitePage"
    assert sent["title"] == DRAFT.title
    [section] = sent["canvasLayout"]["horizontalSections"]
    [web_part] = section["columns"][0]["webparts"]
    assert web_part["@odata.type"] == "#microsoft.graph.textWebPart"
    assert_inert_with_sources(web_part["innerHtml"])
    assert graph.published == []


def test_sharepoint_without_write_permission_says_which(graph: FakeGraph) -> None:
    graph.deny("/pages")
    source = SharePointSource(sharepoint_config(graph))
    with pytest.raises(DraftError) as raised:
        source.write_draft(DRAFT)
    source.close()
    assert raised.value.missing_permission == "Sites.ReadWrite.All"
    assert not raised.value.retry
    assert graph.site_pages == {}


def test_sharepoint_503_with_retry_after_is_retried_then_500_is_retryable(
    graph: FakeGraph,
) -> None:
    source = SharePointSource(sharepoint_config(graph))
    graph.fail_page_creates(1, 503)
    assert source.write_draft(DRAFT).url
    graph.fail_page_creates(1, 500)
    with pytest.raises(DraftError) as raised:
        source.write_draft(Draft("another-proposal", "Other", "Text"))
    source.close()
    assert raised.value.retry
    assert "500" in str(raised.value)
    assert len(graph.site_pages) == 1


def test_sharepoint_expired_token_is_refreshed_once(graph: FakeGraph) -> None:
    source = SharePointSource(sharepoint_config(graph))
    source.write_draft(DRAFT)
    graph.expire_tokens()
    source.write_draft(Draft("second-proposal", "Second", "Body"))
    source.close()
    assert len(graph.site_pages) == 2
    assert graph.token_requests == 2


def test_a_draft_is_written_once_per_proposal_and_source(
    confluence: FakeConfluence, fresh_redis: redis.Redis
) -> None:
    runner = SourceRunner(
        [confluence_config(confluence, name="wiki")], cast(Any, None), fresh_redis
    )
    first = runner.draft("wiki", DRAFT)
    again = runner.draft("wiki", DRAFT)  # a redelivered request
    assert again == first
    assert len(confluence.drafts) == 1
    with pytest.raises(UnknownSource):
        runner.draft("../wiki", DRAFT)


async def completed(client: aioredis.Redis, count: int) -> list[SourceDraftCompleted] | None:
    """The draft outcomes reported, once there are ``count``."""
    found: Any = await client.xrange(Topic.SOURCE_DRAFT_COMPLETED)
    events = [decode_entry(fields, SourceDraftCompleted) for _, fields in found]
    return events if len(events) >= count else None


def requested(source: str = "wiki", proposal_id: str | None = None) -> SourceDraftRequested:
    return SourceDraftRequested(
        correlation_id=new_id(),
        conversation_id="knowledge-proposals",
        proposal_id=proposal_id or new_id(),
        source=source,
        title=DRAFT.title,
        article_markdown=ARTICLE,
        sources=[ProposalSource(kind="ticket", ref="IT-1042", title="ME21N shortcuts lost")],
        requested_by="alice",
    )


async def test_over_the_bus_a_source_that_is_down_is_retried_then_reported(
    confluence: FakeConfluence, fresh_redis_url: str, fresh_redis: redis.Redis
) -> None:
    """The indexer's handler: a 5xx goes back to the bus, which delivers the request again
    (here after 300 ms); the last attempt reports the failure. A request that works reports
    the draft's link; an unknown source is reported at once."""
    settings = ServiceSettings(redis_url=fresh_redis_url, reclaim_idle_ms=300, max_deliveries=2)
    bus = Bus(settings, "indexer")
    runner = SourceRunner(
        [confluence_config(confluence, name="wiki")], cast(Any, None), fresh_redis
    )
    handlers.register_drafts(bus, runner)
    await bus.start()
    client = aioredis.from_url(fresh_redis_url)
    try:
        confluence.fail_creates(2, 502)
        down = requested()
        await bus.publish(Topic.SOURCE_DRAFT_REQUESTED, down)
        [failed] = await wait_until(lambda: completed(client, 1), 30)
        assert (failed.proposal_id, failed.status, failed.correlation_id) == (
            down.proposal_id,
            "failed",
            down.correlation_id,
        )
        assert failed.error is not None
        assert "502" in failed.error
        assert "after 2 attempts" in failed.error

        await bus.publish(Topic.SOURCE_DRAFT_REQUESTED, requested())
        await bus.publish(Topic.SOURCE_DRAFT_REQUESTED, requested(source="gone"))
        done = await wait_until(lambda: completed(client, 3), 30)
        created, unknown = done[1], done[2]
        assert (created.status, created.draft_id) == ("created", next(iter(confluence.drafts)))
        assert created.url is not None
        assert created.url.startswith(confluence.base_url)
        assert (unknown.status, unknown.error) == ("failed", "no source named 'gone' is configured")
        assert confluence.published == []
    finally:
        await bus.stop()
        await client.aclose()
