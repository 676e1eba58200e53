"""A SharePoint source whose configuration shrinks, against the Graph emulator with real valkey,
Chroma and the embedder: a library or list taken out of it, or the pages switched off, leaves
the index at the next complete sync (counted deleted, nothing else read or embedded); put back,
it is indexed afresh; a run that cannot resolve the site, its libraries or lists, or that stops
midway, removes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
from chromadb.api.models.Collection import Collection

from indexer.service import Ingestor
from indexer.sources.sharepoint import SharePointSource
from indexer.sources.sharepoint_pages import list_item_key, page_key
from indexer.sources.state import SyncState
from indexer.tests.counting import CountingEmbedder
from indexer.tests.synced_sources import (
    Syncer,
    library_files,
    sharepoint_config,
    visible_ids,
)
from tests.support.fake_graph import HOST, SITE_ID, SITE_PATH, FakeGraph

POLICIES = "b!drive1"
BOTH = ["Documents", "Policies"]
FAQ = {"list": "IT FAQ", "title": "Title", "body": ["Answer"], "groups": ["all-staff"]}
PAGE = [[["<h2>Badges</h2><p>Collect your badge at the front desk on your first day.</p>"]]]


def run(graph: FakeGraph, ingestor: Ingestor, client: redis.Redis, **config: Any) -> Any:
    syncer = Syncer(graph, ingestor, client, **config)
    try:
        return syncer.run()
    finally:
        syncer.close()


def two_libraries(graph: FakeGraph) -> tuple[list[str], list[str]]:
    """Documents with two files, Policies with two."""
    graph.drives[POLICIES] = "Policies"
    documents = library_files(graph, "b!drive0", "printers.md", "wifi.md")
    policies = library_files(graph, POLICIES, "travel.md", "laptops.md")
    return [f"b!drive0/{i}" for i in documents], [f"{POLICIES}/{i}" for i in policies]


def assert_removed(collection: Collection, client: redis.Redis, keys: list[str]) -> None:
    state = SyncState(client, "intranet")
    for key in keys:
        assert visible_ids(collection, client, key) == [], key
        assert collection.get(where={"source_key": key})["ids"] == [], key  # no chunk left
        assert state.known(key) is None, key


def assert_kept(collection: Collection, client: redis.Redis, keys: list[str]) -> None:
    state = SyncState(client, "intranet")
    for key in keys:
        assert visible_ids(collection, client, key), key
        assert state.known(key) is not None, key


def test_a_library_taken_out_leaves_the_index_and_put_back_is_indexed_again(
    graph: FakeGraph,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    documents, policies = two_libraries(graph)
    page = page_key(graph.add_page("Badges", PAGE).id)
    assert run(graph, counted_ingestor, client, libraries=BOTH).summary.new == 5
    embedded, downloads, reads = counting.texts, len(graph.downloads), len(graph.page_reads)

    removed = run(graph, counted_ingestor, client, libraries=["Documents"])
    summary = removed.summary
    assert removed.error is None
    assert (summary.deleted, summary.new, summary.changed, summary.failed) == (2, 0, 0, 0)
    assert summary.unchanged == 1  # the page, listed as every run
    assert summary.total == 3
    assert_removed(collection, client, policies)
    assert_kept(collection, client, [*documents, page])
    assert (counting.texts, len(graph.downloads), len(graph.page_reads)) == (
        embedded,
        downloads,
        reads,
    )
    cursor = json.loads(SyncState(client, "intranet").cursor() or "{}")
    assert set(cursor["deltas"]) == {"b!drive0"}  # Policies' delta link is not kept

    again = run(graph, counted_ingestor, client, libraries=["Documents"])
    assert (again.error, again.summary.deleted, again.summary.total) == (None, 0, 1)

    back = run(graph, counted_ingestor, client, libraries=BOTH)
    assert (back.error, back.summary.new, back.summary.deleted) == (None, 2, 0)
    assert_kept(collection, client, [*documents, *policies, page])
    assert len(graph.downloads) == downloads + 2  # read afresh, from the library's start
    assert counting.texts > embedded


def test_a_list_taken_out_and_the_pages_switched_off_leave_the_index(
    graph: FakeGraph,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    (document,) = library_files(graph, "b!drive0", "printers.md")
    file_key = f"b!drive0/{document}"
    page = page_key(graph.add_page("Badges", PAGE).id)
    faq = graph.add_list("IT FAQ", {"Title": "Title", "Answer": "Answer"})
    items = [
        list_item_key(faq.id, graph.add_list_item(faq.id, {"Title": t, "Answer": a}).id)
        for t, a in (("Printer jam", "Open tray B."), ("Lost badge", "Ask the front desk."))
    ]
    assert run(graph, counted_ingestor, client, lists=[FAQ]).summary.new == 4
    embedded = counting.texts

    without_list = run(graph, counted_ingestor, client)
    assert (without_list.error, without_list.summary.deleted) == (None, 2)
    assert_removed(collection, client, items)
    assert_kept(collection, client, [file_key, page])
    assert "list:" not in (SyncState(client, "intranet").cursor() or "")

    without_pages = run(graph, counted_ingestor, client, pages=False)
    assert (without_pages.error, without_pages.summary.deleted) == (None, 1)
    assert without_pages.summary.total == 1
    assert_removed(collection, client, [page])
    assert_kept(collection, client, [file_key])
    assert counting.texts == embedded  # removing embeds nothing

    both_back = run(graph, counted_ingestor, client, lists=[FAQ])
    assert (both_back.error, both_back.summary.new) == (None, 3)
    assert_kept(collection, client, [file_key, page, *items])


@pytest.mark.parametrize(
    ("fragment", "status"),
    [
        (f"{HOST}:{SITE_PATH}", 503),  # the site by its path
        (f"{HOST}:{SITE_PATH}", 401),
        (f"{SITE_ID}/drives", 503),  # the site's libraries
        (f"{SITE_ID}/drives", 401),
        (f"{SITE_ID}/lists", 503),  # the site's lists, resolved before the libraries
    ],
)
def test_a_run_that_cannot_resolve_the_configuration_removes_nothing(
    graph: FakeGraph,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
    fragment: str,
    status: int,
) -> None:
    documents, policies = two_libraries(graph)
    faq = graph.add_list("IT FAQ", {"Title": "Title", "Answer": "Answer"})
    item = graph.add_list_item(faq.id, {"Title": "Printer jam", "Answer": "Open tray B."}).id
    kept = [*documents, list_item_key(faq.id, item), page_key(graph.add_page("Badges", PAGE).id)]
    assert run(graph, ingestor, client, libraries=BOTH, lists=[FAQ]).summary.new == 6
    cursor = SyncState(client, "intranet").cursor()

    graph.fail_path(fragment, status)
    failed = run(graph, ingestor, client, libraries=["Documents"], lists=[FAQ], max_retries=0)
    assert failed.error is not None
    assert str(status) in failed.error
    assert failed.summary.deleted == 0
    assert_kept(collection, client, [*kept, *policies])
    assert SyncState(client, "intranet").cursor() == cursor  # Policies' delta link kept too

    graph.fail_path(fragment, None)
    healed = run(graph, ingestor, client, libraries=["Documents"], lists=[FAQ])
    assert (healed.error, healed.summary.deleted) == (None, 2)
    assert_removed(collection, client, policies)
    assert_kept(collection, client, kept)


def test_a_library_not_found_by_name_stops_the_run_and_removes_nothing(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    documents, policies = two_libraries(graph)
    assert run(graph, ingestor, client, libraries=BOTH).summary.new == 4
    del graph.drives[POLICIES]  # renamed, say, at the site: Documents alone is found
    missing = run(graph, ingestor, client, libraries=["Documents", "Polices"])
    assert missing.error is not None
    assert "no document library named ['Polices']" in missing.error
    assert missing.summary.deleted == 0
    assert_kept(collection, client, [*documents, *policies])


@pytest.mark.parametrize("put_back", [False, True])
def test_a_run_stopped_midway_removes_nothing_until_it_completes(
    graph: FakeGraph,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
    put_back: bool,
) -> None:
    documents, policies = two_libraries(graph)
    assert run(graph, ingestor, client, libraries=BOTH, pages=False).summary.new == 4
    added = [f"b!drive0/{i}" for i in library_files(graph, "b!drive0", "a.md", "b.md", "c.md")]
    graph.fail_deltas_after(1)  # Documents' first delta page of two, then Graph goes down

    stopped = run(graph, ingestor, client, libraries=["Documents"], pages=False, max_retries=0)
    assert stopped.error is not None
    assert "503" in stopped.error
    assert (stopped.summary.new, stopped.summary.deleted) == (2, 0)
    assert_kept(collection, client, [*documents, *policies])
    downloads = len(graph.downloads)

    # Resumed with Policies still out, or put back meanwhile: its delta link went with the
    # stopped run's first page, so it is enumerated again and what it names is indexed already.
    libraries = BOTH if put_back else ["Documents"]
    graph.fail_deltas_after(None)
    resumed = run(graph, ingestor, client, libraries=libraries, pages=False)
    assert resumed.error is None
    assert resumed.resumed
    summary = resumed.summary  # the stopped part's counts too: a.md and b.md were new then
    assert (summary.new, summary.deleted) == (3, 0 if put_back else 2)
    assert len(graph.downloads) == downloads + 1  # c.md, nothing of Policies again
    (assert_kept if put_back else assert_removed)(collection, client, policies)
    assert_kept(collection, client, [*documents, *added])
    again = run(graph, ingestor, client, libraries=libraries, pages=False)
    assert (again.error, again.summary.total) == (None, 0)


def test_a_failed_file_of_a_library_taken_out_is_not_read_again_and_is_forgotten(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    documents, _ = two_libraries(graph)
    huge = graph.add_file("huge.txt", b"word " * 300_000, POLICIES).id
    limit = {"max_document_bytes": 1_000_000}
    first = run(graph, ingestor, client, libraries=BOTH, **limit)
    assert (first.summary.new, first.summary.failed) == (4, 1)
    graph.edit_file(huge, b"Small enough now to be indexed.")  # but no longer configured
    downloads = list(graph.downloads)

    removed = run(graph, ingestor, client, libraries=["Documents"], **limit)
    assert removed.error is None
    assert (removed.summary.new, removed.summary.deleted) == (0, 2)
    assert graph.downloads == downloads  # the failed file was not read to be retried
    state = SyncState(client, "intranet")
    assert state.failed() == {}  # and is not retried by later runs
    assert_removed(collection, client, [f"{POLICIES}/{huge}"])
    assert_kept(collection, client, documents)


def test_drives_graph_lists_with_odd_ids_are_ignored(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    graph.drives["../sites"] = "Odd"
    graph.drives["page"] = "Pages lookalike"  # would pass for the pages' key prefix
    (document,) = library_files(graph, "b!drive0", "printers.md")
    result = run(graph, ingestor, client)
    assert (result.error, result.summary.new) == (None, 1)
    source = SharePointSource(sharepoint_config(graph))
    try:
        assert source._drives() == [("b!drive0", "Documents")]
    finally:
        source.close()
    odd = run(graph, ingestor, client, libraries=["Documents", "Odd"])
    assert odd.error is not None
    assert "no document library named ['Odd']" in odd.error
    assert_kept(collection, client, [f"b!drive0/{document}"])
