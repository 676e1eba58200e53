"""SharePoint site pages and configured lists against the Graph emulator, with real valkey,
Chroma and the embedder: first sync, changed, unchanged, deleted, throttling, bad list config."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from chromadb.api.models.Collection import Collection
from pydantic import ValidationError

from indexer.config import IndexerSettings
from indexer.service import Ingestor
from indexer.sources.base import Change, DocumentError
from indexer.sources.sharepoint import SharePointSource
from indexer.sources.sharepoint_pages import list_item_key, page_change, page_key
from indexer.tests.counting import CountingEmbedder
from indexer.tests.synced_sources import VPN_MD, Syncer, chunks_of, sharepoint_config
from tests.support.fake_graph import FakeGraph

FAQ = {"list": "IT FAQ", "title": "Title", "body": ["Answer", "Details"], "groups": ["all-staff"]}
VPN_PAGE = [
    [
        [
            "<h2>Before you start</h2><p>Install GlobalProtect from the Company Portal.</p>",
            "image:diagram",
            "links:Company Portal downloads|Badge office opening hours",
        ],
        ["<h2>Connect</h2><p>Sign in at vpn.example.com with your badge account.</p>"],
    ]
]


def faq(graph: FakeGraph) -> tuple[str, str]:
    made = graph.add_list("IT FAQ", {"Title": "Title", "Answer": "Answer", "Details0": "Details"})
    item = graph.add_list_item(
        made.id,
        {
            "Title": "How do I reset my password?",
            "Answer": "Use the self-service portal at passwords.example.com.",
            "Details0": "<div class='ExternalClass1'><p>It takes <b>five</b> minutes.</p></div>",
        },
    )
    return made.id, item.id


def page_chunks(collection: Collection, client: redis.Redis, page_id: str) -> dict[str, Any]:
    return chunks_of(collection, page_key(page_id), client, source="intranet")


def item_chunks(collection: Collection, client: redis.Redis, list_id: str, item: str) -> Any:
    return chunks_of(collection, list_item_key(list_id, item), client, source="intranet")


def test_pages_and_list_items_new_unchanged_changed_deleted(
    graph: FakeGraph, embedder: Any, collection: Collection, settings: Any, client: redis.Redis
) -> None:
    counting = CountingEmbedder(embedder)
    syncer = Syncer(graph, Ingestor(counting, collection, settings), client, lists=[FAQ])
    page = graph.add_page("VPN setup", VPN_PAGE, groups=["it-staff"], organization_link=False)
    draft = graph.add_page("Unfinished", [[["<p>Not ready for anyone</p>"]]], published=False)
    list_id, item = faq(graph)
    try:
        first = syncer.run()
        assert first.error is None
        assert (first.summary.new, first.summary.failed) == (2, 0)
        assert draft.id not in graph.page_reads  # a draft is nobody's knowledge yet
        chunks = page_chunks(collection, client, page.id)
        assert {m["section"] for m in chunks["metadatas"]} >= {
            "VPN setup > Before you start",
            "VPN setup > Connect",
        }
        assert all(m["title"] == "VPN setup" for m in chunks["metadatas"])
        assert "GlobalProtect" in "\n".join(chunks["documents"])
        assert "Badge office opening hours" in "\n".join(chunks["documents"])  # quick links
        assert all(
            m["readers_public"] is False and m["readers_groups"] == "|it-staff|"
            for m in chunks["metadatas"]
        )
        answer = item_chunks(collection, client, list_id, item)
        text = "\n".join(answer["documents"])
        assert "passwords.example.com" in text
        assert "five minutes" in text
        assert {m["title"] for m in answer["metadatas"]} == {"How do I reset my password?"}
        assert "How do I reset my password? > Details" in {
            m["section"] for m in answer["metadatas"]
        }
        assert all(m["readers_groups"] == "|all-staff|" for m in answer["metadatas"])

        embedded, reads = counting.texts, len(graph.page_reads)
        again = syncer.run()
        assert again.error is None
        assert (again.summary.unchanged, again.summary.new, again.summary.changed) == (1, 0, 0)
        assert (counting.texts, len(graph.page_reads)) == (embedded, reads)

        graph.edit_page(page.id, [[["<h2>Connect</h2><p>Use WireGuard now.</p>"]]])
        graph.edit_list_item(list_id, item, {"Answer": "Call the service desk on 4444."})
        third = syncer.run()
        assert (third.summary.changed, third.summary.unchanged) == (2, 0)
        page_text = "\n".join(page_chunks(collection, client, page.id)["documents"])
        assert "WireGuard" in page_text
        assert "GlobalProtect" not in page_text
        item_text = "\n".join(item_chunks(collection, client, list_id, item)["documents"])
        assert "4444" in item_text
        assert "passwords.example.com" not in item_text

        graph.delete_page(page.id)
        graph.delete_list_item(list_id, item)
        fourth = syncer.run()
        assert (fourth.summary.deleted, fourth.error) == (2, None)
        assert page_chunks(collection, client, page.id)["ids"] == []
        assert item_chunks(collection, client, list_id, item)["ids"] == []
    finally:
        syncer.close()


def test_a_throttled_pages_listing_is_retried_after_retry_after(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    graph.add_page("VPN setup", VPN_PAGE)
    graph.page_size = 1
    graph.add_page("Printers", [[["<h2>Badges</h2><p>Badge printers are on floor two.</p>"]]])
    syncer = Syncer(graph, ingestor, client)
    try:
        syncer.source._access_token()
        graph.throttle_page_listing(1)
        started = time.monotonic()
        result = syncer.run()
        assert result.error is None
        assert result.summary.new == 2  # both listing pages, by @odata.nextLink
        assert time.monotonic() - started >= 1.0
    finally:
        syncer.close()


def test_a_denied_pages_listing_names_the_permission(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    graph.add_page("VPN setup", VPN_PAGE)
    graph.deny("/pages/")
    syncer = Syncer(graph, ingestor, client)
    try:
        result = syncer.run()
    finally:
        syncer.close()
    assert result.error is not None
    assert "403" in result.error
    assert "Sites.Read.All" in result.error


@pytest.mark.parametrize(
    ("lists", "message"),
    [
        ([{**FAQ, "groups": []}], "say who may read it"),
        ([{**FAQ, "body": ["Title"]}], "same column twice"),
        ([{**FAQ, "body": []}], "at least 1 item"),
        ([{**FAQ, "body": ["  "]}], "a column name is blank"),
        ([{**FAQ, "list": ""}], "at least 1 character"),
        ([FAQ, FAQ], "configured more than once"),
        ([{**FAQ, "columns": ["x"]}], "Extra inputs are not permitted"),
        ([{**FAQ, "groups": ["a|b"]}], "not usable"),
    ],
)
def test_bad_list_config_is_refused_with_a_clear_message(
    graph: FakeGraph, lists: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        sharepoint_config(graph, lists=lists)


def test_a_list_or_column_the_site_lacks_stops_the_run_naming_it(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    faq(graph)
    missing_list = Syncer(graph, ingestor, client, lists=[{**FAQ, "list": "HR FAQ"}])
    missing_column = Syncer(graph, ingestor, client, lists=[{**FAQ, "body": ["Answr"]}])
    try:
        assert "no list named 'HR FAQ'" in (missing_list.run().error or "")
        error = missing_column.run().error or ""
    finally:
        missing_list.close()
        missing_column.close()
    assert "no column named ['Answr']" in error
    assert "Answer" in error  # the columns it has


def test_page_html_cannot_move_the_citation_or_inject_script(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    hostile = (
        '<link rel="canonical" href="https://evil.example/phish"><h2>Wi-Fi</h2>'
        "<p>Join Corp-WiFi.</p><script>steal()</script>"
    )
    page = graph.add_page("Wi-Fi", [[[hostile]]])
    syncer = Syncer(graph, ingestor, client)
    try:
        assert syncer.run().summary.new == 1
    finally:
        syncer.close()
    chunks = page_chunks(collection, client, page.id)
    assert "steal()" not in "\n".join(chunks["documents"])
    assert {m["url"] for m in chunks["metadatas"]} == {
        f"https://contoso.sharepoint.com/sites/it/SitePages/{page.name}"
    }


def test_forged_keys_and_odd_listings_are_refused(graph: FakeGraph) -> None:
    faq(graph)
    source = SharePointSource(sharepoint_config(graph, lists=[FAQ]))
    try:
        for key in ("page/../../drives/x", "page/", "list/../x/1", "list/nope/1"):
            with pytest.raises(DocumentError):
                source.fetch(Change(key, "1"))
    finally:
        source.close()
    assert page_change({"id": "x", "eTag": "1", "publishingState": {"level": "checkout"}}) is None
    assert page_change({"id": "x", "eTag": "1"}) is None
    with pytest.raises(DocumentError):
        page_change({"id": "x", "publishingState": {"level": "published"}})


def test_a_run_stopped_in_a_list_resumes_there_without_reading_anything_twice(
    graph: FakeGraph, embedder: Any, collection: Collection, settings: Any, client: redis.Redis
) -> None:
    counting = CountingEmbedder(embedder)
    ingestor = Ingestor(counting, collection, settings)
    graph.page_size = 1
    page = graph.add_page("VPN setup", VPN_PAGE)
    list_id, first_item = faq(graph)
    second = graph.add_list_item(list_id, {"Title": "Printer jam", "Answer": "Open tray B."})
    graph.add_file("vpn.md", VPN_MD)
    graph.fail_list_deltas_after(1)  # the list's first delta page, then Graph goes down
    stopped = Syncer(graph, ingestor, client, lists=[FAQ], max_retries=0).run()
    assert stopped.error is not None
    assert "503" in stopped.error
    assert stopped.summary.new == 2  # the page, the list's first item
    embedded = counting.texts

    graph.fail_list_deltas_after(None)
    resumed = Syncer(graph, ingestor, client, lists=[FAQ]).run()
    assert resumed.error is None
    assert resumed.resumed
    assert (resumed.summary.new, resumed.summary.unchanged) == (4, 0)
    assert graph.page_reads == [page.id]  # the pages were finished: not listed again
    assert graph.downloads == [next(iter(graph.items))]
    assert counting.texts > embedded
    for item in (first_item, second.id):
        assert item_chunks(collection, client, list_id, item)["ids"]


def test_a_list_delta_token_graph_no_longer_honours_means_a_full_resync(
    graph: FakeGraph, embedder: Any, collection: Collection, settings: Any, client: redis.Redis
) -> None:
    counting = CountingEmbedder(embedder)
    syncer = Syncer(graph, Ingestor(counting, collection, settings), client, lists=[FAQ])
    list_id, item = faq(graph)
    try:
        assert syncer.run().summary.new == 1
        embedded = counting.texts
        graph.expire_list_delta_tokens()
        graph.edit_list_item(list_id, item, {"Answer": "Call the service desk on 4444."})
        resync = syncer.run()
        assert resync.error is None
        assert resync.summary.changed == 1
        assert "4444" in "\n".join(item_chunks(collection, client, list_id, item)["documents"])
        assert counting.texts > embedded
        graph.expire_list_delta_tokens()
        embedded = counting.texts
        again = syncer.run()  # everything re-listed, nothing changed: nothing embedded
        assert (again.error, again.summary.unchanged, counting.texts) == (None, 1, embedded)
    finally:
        syncer.close()


def test_the_indexer_refuses_to_start_with_a_list_nobody_is_said_to_read(
    graph: FakeGraph, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = sharepoint_config(graph).model_dump(mode="json") | {
        "client_secret": "graph-test-secret-value",
        "lists": [{"list": "IT FAQ", "body": ["Answer"]}],
    }
    monkeypatch.setenv("INDEXER_SOURCES", json.dumps([source]))
    with pytest.raises(ValidationError) as refused:
        IndexerSettings(data_dir=tmp_path)
    message = str(refused.value)
    assert "the SharePoint list 'IT FAQ': say who may read it" in message
    assert "graph-test-secret-value" not in message


def test_other_readers_or_columns_for_a_list_take_effect_at_the_next_sync(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    list_id, item = faq(graph)
    runs = [
        FAQ,
        {**FAQ, "groups": ["hr-staff"]},  # the readers change, the item does not
        {**FAQ, "groups": ["hr-staff"], "body": ["Answer"]},  # one column less
    ]
    results, metadatas, texts = [], [], []
    for settings_now in runs:
        syncer = Syncer(graph, ingestor, client, lists=[settings_now])
        try:
            results.append(syncer.run())
        finally:
            syncer.close()
        chunks = item_chunks(collection, client, list_id, item)
        metadatas.append({m["readers_groups"] for m in chunks["metadatas"]})
        texts.append("\n".join(chunks["documents"]))
    assert [(r.error, r.summary.new, r.summary.changed) for r in results] == [
        (None, 1, 0),
        (None, 0, 1),
        (None, 0, 1),
    ]
    assert metadatas == [{"|all-staff|"}, {"|hr-staff|"}, {"|hr-staff|"}]
    assert "five minutes" in texts[1]
    assert "five minutes" not in texts[2]


def test_a_page_permission_change_alone_takes_effect_at_the_next_sync(
    graph: FakeGraph, embedder: Any, collection: Collection, settings: Any, client: redis.Redis
) -> None:
    counting = CountingEmbedder(embedder)
    syncer = Syncer(graph, Ingestor(counting, collection, settings), client)
    page = graph.add_page("VPN setup", VPN_PAGE)  # organisation-wide
    try:
        assert syncer.run().summary.new == 1
        assert {
            m["readers_public"] for m in page_chunks(collection, client, page.id)["metadatas"]
        } == {True}
        graph.share_page(page.id, groups=["it-staff"], organization_link=False)
        restricted = syncer.run()
        assert (restricted.error, restricted.summary.changed) == (None, 1)
        metadatas = page_chunks(collection, client, page.id)["metadatas"]
        assert {(m["readers_public"], m["readers_groups"]) for m in metadatas} == {
            (False, "|it-staff|")
        }
        embedded, reads = counting.texts, len(graph.page_reads)
        again = syncer.run()
        assert again.summary.unchanged == 1
        assert (counting.texts, len(graph.page_reads)) == (embedded, reads)
    finally:
        syncer.close()
