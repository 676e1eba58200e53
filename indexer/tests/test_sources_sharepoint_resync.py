"""What a SharePoint source's complete listings sweep, against the Graph emulator with real
valkey, Chroma and the embedder: a library or list Graph asks to resync (HTTP 410) loses what was
deleted while its delta link was stale, and nothing of another library, list or the pages; a
resync stopped midway and resumed sweeps the same (and one of a library taken out of the
configuration meanwhile is dropped); the pages listing keeps a page being edited;
a file's permission change alone reaches its chunks at the next sync."""

from __future__ import annotations

import dataclasses
import json

import pytest
import redis
from chromadb.api.models.Collection import Collection

from contracts.readers import Principals, Readers
from indexer.extract import extract_bytes
from indexer.service import Ingestor, Versioned
from indexer.sources.base import Change, DocumentError
from indexer.sources.sharepoint import SharePointSource
from indexer.sources.sharepoint_pages import list_item_key, page_key
from indexer.sources.state import PREFIX, SyncState
from indexer.tests.counting import CountingEmbedder
from indexer.tests.synced_sources import (
    VPN_MD,
    Syncer,
    chunks_of,
    library_files,
    sharepoint_config,
    visible_ids,
)
from tests.support.fake_graph import FakeGraph

FAQ = {"list": "IT FAQ", "title": "Title", "body": ["Answer"], "groups": ["all-staff"]}
PAGE = [[["<h2>Badges</h2><p>Collect your badge at the front desk on your first day.</p>"]]]
POLICIES = "b!drive1"


def readable_by(
    collection: Collection, client: redis.Redis, key: str, reader: Principals
) -> list[str]:
    """The texts of a document's visible chunks ``reader`` may read, as retrieval filters them."""
    found = chunks_of(collection, key, client, source="intranet")
    return [
        text
        for text, meta in zip(found["documents"], found["metadatas"], strict=True)
        if reader.may_read(Readers.of(meta))
    ]


def test_what_was_deleted_while_a_delta_link_was_stale_is_swept_by_the_resync(
    graph: FakeGraph,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    graph.drives[POLICIES] = "Policies"
    documents = library_files(graph, "b!drive0", "printers.md", "wifi.md", "vpn.md")
    policies = library_files(graph, POLICIES, "travel.md", "laptops.md")
    page = graph.add_page("Badges", PAGE)
    faq = graph.add_list("IT FAQ", {"Title": "Title", "Answer": "Answer"})
    items = [
        graph.add_list_item(faq.id, {"Title": title, "Answer": f"{title}: ask the desk."}).id
        for title in ("Printer jam", "Lost badge")
    ]
    syncer = Syncer(graph, counted_ingestor, client, lists=[FAQ])
    try:
        assert syncer.run().summary.new == 8
        embedded, downloads = counting.texts, len(graph.downloads)

        # Graph forgets Documents' and the list's delta links; meanwhile a file and an item go.
        graph.expire_drive_delta_tokens("b!drive0")
        graph.expire_list_delta_tokens()
        graph.delete_file(documents[1])
        graph.delete_list_item(faq.id, items[0])
        resync = syncer.run()
    finally:
        syncer.close()

    assert resync.error is None
    summary = resync.summary
    assert (summary.deleted, summary.new, summary.changed, summary.failed) == (2, 0, 0, 0)
    assert summary.unchanged == 4  # the page, two files and an item, listed again, not read
    assert (counting.texts, len(graph.downloads)) == (embedded, downloads)
    state = SyncState(client, "intranet")
    gone = [f"b!drive0/{documents[1]}", list_item_key(faq.id, items[0])]
    for key in gone:
        assert visible_ids(collection, client, key) == []
        assert collection.get(where={"source_key": key})["ids"] == []  # no chunk left at all
        assert state.known(key) is None
    kept = [
        *(f"b!drive0/{i}" for i in (documents[0], documents[2])),
        *(f"{POLICIES}/{i}" for i in policies),  # another library, not resynced
        list_item_key(faq.id, items[1]),
        page_key(page.id),
    ]
    for key in kept:
        assert visible_ids(collection, client, key), key
        assert state.known(key) is not None
    assert not list(client.scan_iter(f"{PREFIX}intranet:seen*"))  # nothing left behind


def test_a_resync_stopped_midway_resumes_and_sweeps_the_same_indexing_nothing_twice(
    graph: FakeGraph,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    graph.page_size = 1
    names = ("a.md", "b.md", "c.md", "d.md")
    ids = library_files(graph, "b!drive0", *names)
    first = Syncer(graph, counted_ingestor, client, pages=False)
    try:
        assert first.run().summary.new == 4
    finally:
        first.close()
    embedded, downloads = counting.texts, list(graph.downloads)

    graph.expire_drive_delta_tokens()
    graph.delete_file(ids[1])  # while the link is stale
    (added,) = library_files(graph, "b!drive0", "e.md")
    # The stale link (410), the enumeration's first page (the root, a.md), then Graph goes down.
    graph.fail_deltas_after(2)
    stopped = Syncer(graph, counted_ingestor, client, pages=False, max_retries=0).run()
    assert stopped.error is not None
    assert "503" in stopped.error
    assert stopped.summary.deleted == 0  # not before the enumeration's end
    cursor = json.loads(SyncState(client, "intranet").cursor() or "{}")
    assert cursor["complete"] is True
    assert SyncState(client, "intranet").seen("b!drive0/") == {f"b!drive0/{ids[0]}"}

    graph.fail_deltas_after(None)
    resumed = Syncer(graph, counted_ingestor, client, pages=False).run()
    assert resumed.error is None
    assert resumed.resumed
    summary = resumed.summary  # the stopped run's counts and the resumed part's
    assert (summary.deleted, summary.new, summary.unchanged) == (1, 1, 3)
    assert visible_ids(collection, client, f"b!drive0/{ids[1]}") == []
    for kept in (ids[0], ids[2], ids[3], added):
        assert visible_ids(collection, client, f"b!drive0/{kept}")
    assert graph.downloads == [*downloads, added]  # the new file once, nothing else again
    assert counting.texts > embedded

    # And the delta link the resync ended with is honoured: nothing more to do.
    again = Syncer(graph, counted_ingestor, client, pages=False).run()
    assert (again.error, again.summary.total) == (None, 0)


def test_a_stopped_resync_whose_next_link_expired_starts_over_forgetting_what_it_listed(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    graph.page_size = 1
    ids = library_files(graph, "b!drive0", "a.md", "b.md", "c.md")
    assert Syncer(graph, ingestor, client, pages=False).run().summary.new == 3
    graph.expire_drive_delta_tokens()
    graph.fail_deltas_after(2)  # the stale link (410), the enumeration's first page (a.md)
    stopped = Syncer(graph, ingestor, client, pages=False, max_retries=0).run()
    assert stopped.error is not None
    state = SyncState(client, "intranet")
    assert state.seen("b!drive0/") == {f"b!drive0/{ids[0]}"}

    graph.fail_deltas_after(None)
    graph.delete_file(ids[0])  # listed by the stopped part of the resync, gone now
    graph.expire_drive_delta_tokens()  # a long pause: the resync's next link expires too
    resumed = Syncer(graph, ingestor, client, pages=False).run()
    assert resumed.error is None
    assert (resumed.summary.deleted, resumed.summary.new) == (1, 0)
    assert visible_ids(collection, client, f"b!drive0/{ids[0]}") == []
    assert state.known(f"b!drive0/{ids[0]}") is None
    for kept in ids[1:]:
        assert visible_ids(collection, client, f"b!drive0/{kept}")


def test_a_resync_of_a_library_no_longer_configured_is_dropped_and_the_library_removed(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    graph.page_size = 1
    graph.drives[POLICIES] = "Policies"
    policies = library_files(graph, POLICIES, "travel.md", "laptops.md", "phones.md")
    assert Syncer(graph, ingestor, client, pages=False).run().summary.new == 3
    graph.expire_drive_delta_tokens(POLICIES)
    graph.fail_deltas_after(3)  # Documents' delta, then Policies' 410 and first page
    stopped = Syncer(graph, ingestor, client, pages=False, max_retries=0).run()
    assert stopped.error is not None
    state = SyncState(client, "intranet")
    assert state.seen(f"{POLICIES}/") == {f"{POLICIES}/{policies[0]}"}

    graph.fail_deltas_after(None)
    resumed = Syncer(graph, ingestor, client, pages=False, libraries=["Documents"]).run()
    # The open listing is forgotten; the library, no longer configured, leaves the index whole.
    assert (resumed.error, resumed.summary.deleted) == (None, 3)
    assert not list(client.scan_iter(f"{PREFIX}intranet:seen*"))
    for gone in policies:
        assert visible_ids(collection, client, f"{POLICIES}/{gone}") == []
        assert state.known(f"{POLICIES}/{gone}") is None
    (later,) = library_files(
        graph, "b!drive0", "printers.md"
    )  # and the next run reads Documents again
    after = Syncer(graph, ingestor, client, pages=False, libraries=["Documents"]).run()
    assert (after.error, after.summary.new) == (None, 1)
    assert visible_ids(collection, client, f"b!drive0/{later}")


def test_the_pages_listing_sweeps_deleted_pages_and_keeps_one_being_edited(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    kept = graph.add_page("Badges", PAGE)
    edited = graph.add_page("Parking", [[["<p>Park on level 2 with your badge.</p>"]]])
    deleted = graph.add_page("Canteen", [[["<p>The canteen opens at noon.</p>"]]])
    (document,) = library_files(graph, "b!drive0", "printers.md")
    syncer = Syncer(graph, ingestor, client)
    try:
        assert syncer.run().summary.new == 4
        graph.pages[edited.id].published = False  # checked out for editing: listed, not indexed
        graph.delete_page(deleted.id)
        result = syncer.run()
    finally:
        syncer.close()
    assert result.error is None
    assert (result.summary.deleted, result.summary.unchanged) == (1, 1)
    assert visible_ids(collection, client, page_key(deleted.id)) == []
    for key in (page_key(kept.id), page_key(edited.id), f"b!drive0/{document}"):
        assert visible_ids(collection, client, key)
    cursor = SyncState(client, "intranet").cursor() or ""
    assert kept.id not in cursor  # the cursor no longer grows with the site's pages


def test_a_file_permission_change_alone_reaches_its_readers_at_the_next_sync(
    graph: FakeGraph,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    syncer = Syncer(graph, counted_ingestor, client, pages=False)
    vpn = graph.add_file("vpn.md", VPN_MD, groups=["it-staff"], organization_link=False).id
    other = graph.add_file("wifi.md", b"# Wi-Fi\n\nJoin Corp-WiFi with your account.\n").id
    key = f"b!drive0/{vpn}"
    it_staff = Principals(user_id="u-1", groups=frozenset({"it-staff"}))
    hr_staff = Principals(user_id="u-2", groups=frozenset({"hr-staff"}))
    try:
        assert syncer.run().summary.new == 2
        assert readable_by(collection, client, key, it_staff)
        assert readable_by(collection, client, key, hr_staff) == []
        embedded, downloads = counting.texts, len(graph.downloads)

        graph.share_file(vpn, users=[], groups=["hr-staff"], organization_link=False)
        shared = syncer.run()
        assert (shared.error, shared.summary.changed, shared.summary.total) == (None, 1, 1)
        assert readable_by(collection, client, key, it_staff) == []
        now_readable = readable_by(collection, client, key, hr_staff)
        assert any("GlobalProtect" in text for text in now_readable)
        assert counting.texts == embedded  # same content: its vectors are kept, not embedded
        assert len(graph.downloads) == downloads + 1  # read again to compare its content
        assert visible_ids(collection, client, f"b!drive0/{other}")

        again = syncer.run()
        assert (again.error, again.summary.total) == (None, 0)
    finally:
        syncer.close()


SHARING = "deltashowsharingchanges"


def test_a_delta_refused_with_sharing_changes_is_read_without_them(
    graph: FakeGraph,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An app Graph refuses the sharing changes' preference (403) still syncs its libraries:
    each run asks once, then reads the delta without it and says why in the log."""
    graph.refuse_sharing_changes()
    syncer = Syncer(graph, counted_ingestor, client, pages=False)
    vpn = graph.add_file("vpn.md", VPN_MD, groups=["it-staff"], organization_link=False).id
    try:
        with caplog.at_level("WARNING", logger="indexer.sources.sharepoint"):
            first = syncer.run()
        assert (first.error, first.summary.new) == (None, 1)
        assert visible_ids(collection, client, f"b!drive0/{vpn}")
        assert any("Sites.FullControl.All" in r.getMessage() for r in caplog.records)
        asked = [SHARING in prefer for prefer in graph.delta_prefers]
        assert asked[0]
        assert not any(asked[1:])  # asked once, then not again this run

        graph.edit_file(vpn, VPN_MD + b"\nUse the new gateway vpn2.\n")
        again = syncer.run()
        assert (again.error, again.summary.changed) == (None, 1)
        assert SHARING in graph.delta_prefers[len(asked)]  # a new run asks again
    finally:
        syncer.close()


def test_without_sharing_changes_the_delta_never_asks_for_them(
    graph: FakeGraph, counted_ingestor: Ingestor, client: redis.Redis
) -> None:
    syncer = Syncer(graph, counted_ingestor, client, pages=False, sharing_changes=False)
    graph.add_file("vpn.md", VPN_MD)
    try:
        assert syncer.run().summary.new == 1
        assert graph.delta_prefers
        assert not any(SHARING in prefer for prefer in graph.delta_prefers)
    finally:
        syncer.close()


def test_restamping_reuses_vectors_and_refuses_what_it_cannot_copy_whole(
    counting: CountingEmbedder, counted_ingestor: Ingestor, collection: Collection
) -> None:
    document = dataclasses.replace(
        extract_bytes(VPN_MD * 20, "vpn.md", "https://contoso.example/vpn.md"), explicit_id="d1"
    )
    before = Versioned("g1", Readers(public=False, groups=("it-staff",)).metadata())
    counted_ingestor.ingest_documents([document], {"d1": before})
    embedded = counting.texts
    after = Versioned("g2", Readers(public=False, groups=("hr-staff",)).metadata())

    assert counted_ingestor.restamp("d1", "g1", after)
    assert counting.texts == embedded
    stored = collection.get(where={"doc_id": "d1"}, include=["metadatas", "embeddings"])
    by_generation: dict[str, list[tuple[int, list[float]]]] = {}
    for meta, vector in zip(stored["metadatas"] or [], stored["embeddings"], strict=True):
        by_generation.setdefault(str(meta["generation"]), []).append(
            (int(str(meta["chunk_index"])), list(vector))
        )
        if meta["generation"] == "g2":
            assert meta["readers_groups"] == "|hr-staff|"
    g1, g2 = sorted(by_generation["g1"]), sorted(by_generation["g2"])
    assert [index for index, _ in g1] == [index for index, _ in g2] == list(range(len(g1)))
    for (_, old), (_, new) in zip(g1, g2, strict=True):
        # The same vectors (Chroma normalises what it stores: float32 rounding at most).
        assert max(abs(x - y) for x, y in zip(old, new, strict=True)) < 1e-6
    count = len(stored["ids"])

    assert not counted_ingestor.restamp("d1", "g1", after)  # written already: nothing twice
    assert not counted_ingestor.restamp("d1", "no-such", Versioned("g3"))  # nothing to copy
    collection.delete(ids=sorted(collection.get(where={"generation": "g2"})["ids"])[:1])
    assert not counted_ingestor.restamp("d1", "g2", Versioned("g4"))  # g2 is incomplete now
    assert len(collection.get(where={"doc_id": "d1"})["ids"]) == count - 1


def test_odd_sharing_marks_are_handled_without_a_request_elsewhere(graph: FakeGraph) -> None:
    source = SharePointSource(sharepoint_config(graph))
    mark = {"@microsoft.graph.sharedChanged": "True"}
    try:
        folder = {"id": "01F", "name": "Team", "folder": {}, **mark}
        assert source._file_change("b!drive0", folder) is None
        gone = source._file_change("b!drive0", {"id": "01G", "deleted": {}, **mark})
        assert gone == Change("b!drive0/01G", "", deleted=True)
        forged = {"id": "../../sites", "name": "x.md", "file": {}, "cTag": "c1", **mark}
        odd = source._file_change("b!drive0", forged)
        assert odd == Change("b!drive0/../../sites", "c1#shared")  # readers: read (and fail) later
        with pytest.raises(DocumentError):
            source.permissions(odd)
        plain = {"id": "01H", "name": "y.md", "file": {}, "cTag": "c2"}
        unmarked = {**plain, "@microsoft.graph.sharedChanged": "False"}
        assert source._file_change("b!drive0", unmarked) == Change("b!drive0/01H", "c2")
    finally:
        source.close()
