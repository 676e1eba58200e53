"""Source sync against the Confluence emulator: real valkey, real Chroma, the real embedder.

Each test syncs pages of :class:`tests.support.fake_confluence.FakeConfluence` into a fresh
collection and checks what the index and the sync state hold afterwards, and how much was
embedded (an unchanged page must cost no embedding at all). What the sync removes when a
source's configuration shrinks is also checked on a source held in memory
(:class:`HeldSource`), which says what it covers as the test tells it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from chromadb.api.models.Collection import Collection

from contracts.live import read_live, versioned_doc_ids, visible
from indexer.config import IndexerSettings
from indexer.extract import ExtractedDocument, extract_bytes
from indexer.service import Ingestor
from indexer.sources.base import Change, ChangePage, Readers, Source
from indexer.sources.confluence import ConfluenceSource
from indexer.sources.state import SyncState
from indexer.sources.sync import SourceSync, SyncBusy, source_doc_id
from indexer.tests.counting import CountingEmbedder
from indexer.tests.synced_sources import chunks_of, confluence_config
from tests.support.fake_confluence import FakeConfluence

VPN = (
    "<h1>VPN</h1><p>Connect to the company VPN with the GlobalProtect client before you open "
    "internal sites. The portal address is vpn.example.com.</p><h2>Reset</h2><p>If the client "
    "says your credentials expired, reset your password in the self-service portal first.</p>"
    '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">bash</ac:parameter>'
    "<ac:plain-text-body><![CDATA[globalprotect reset --portal vpn.example.com]]>"
    "</ac:plain-text-body></ac:structured-macro>"
)
PRINTER = (
    "<h1>Printers</h1><p>Add the floor printer from Settings, Printers and scanners, and pick "
    "the queue named after your floor.</p>"
    '<ac:structured-macro ac:name="note"><ac:rich-text-body><p>Colour printing needs a cost '
    "centre.</p></ac:rich-text-body></ac:structured-macro>"
)
SALARY = "<h1>Salary bands</h1><p>HR only: the salary bands for 2026 are reviewed in March.</p>"


def sync(
    fake: FakeConfluence,
    ingestor: Ingestor,
    client: redis.Redis,
    grace_s: float = 60.0,
    **overrides: Any,
) -> Any:
    source = ConfluenceSource(confluence_config(fake, **overrides))
    try:
        return SourceSync(source, ingestor, SyncState(client, "wiki"), grace_s).run()
    finally:
        source.close()


def seed(fake: FakeConfluence) -> list[str]:
    return [
        fake.add_page("IT", "VPN", VPN).id,
        fake.add_page("IT", "Printers", PRINTER).id,
        fake.add_page(
            "IT",
            "Wi-Fi",
            "<h1>Wi-Fi</h1><p>Join the network Corp-WiFi with your "
            "company account; guests use Corp-Guest with the daily code.</p>",
        ).id,
        fake.add_page("HR", "Salary bands", SALARY, read_groups=["hr-team"]).id,
    ]


def test_new_pages_are_indexed_with_sections_code_and_readers(
    confluence: FakeConfluence,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    vpn, printer, _, salary = seed(confluence)
    result = sync(confluence, counted_ingestor, client)
    assert result.error is None
    summary = result.summary
    assert (summary.total, summary.new, summary.changed, summary.failed) == (4, 4, 0, 0)
    stored = chunks_of(collection, vpn)
    text = "\n".join(stored["documents"])
    assert "globalprotect reset --portal vpn.example.com" in text
    assert "```bash" in text  # the code macro is a code block, not loose text
    assert {meta["section"] for meta in stored["metadatas"]} >= {"VPN > Reset"}
    assert all(meta["readers_public"] is True for meta in stored["metadatas"])
    assert "Note" in "\n".join(chunks_of(collection, printer)["documents"])
    restricted = chunks_of(collection, salary)["metadatas"]
    assert restricted
    assert all(
        meta["readers_public"] is False and meta["readers_groups"] == "|hr-team|"
        for meta in restricted
    )
    # Every chunk is visible to readers: its generation is the published one.
    everything = collection.get(include=["metadatas"])["metadatas"]
    live = read_live(client, versioned_doc_ids(everything))
    assert all(visible(everything, live))


def test_unchanged_pages_embed_nothing_and_are_not_even_fetched(
    confluence: FakeConfluence,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    client: redis.Redis,
) -> None:
    seed(confluence)
    sync(confluence, counted_ingestor, client)
    embedded, reads = counting.texts, len(confluence.body_reads)
    assert embedded > 0
    result = sync(confluence, counted_ingestor, client)
    assert (result.summary.total, result.summary.unchanged) == (4, 4)
    assert counting.texts == embedded
    assert len(confluence.body_reads) == reads


def test_changed_page_is_replaced_and_deleted_page_removed(
    confluence: FakeConfluence,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    vpn, printer, wifi, _ = seed(confluence)
    sync(confluence, counted_ingestor, client)
    old_ids = set(chunks_of(collection, vpn, client)["ids"])
    confluence.edit_page(vpn, body=VPN.replace("GlobalProtect", "WireGuard"))
    confluence.delete_page(wifi)
    result = sync(confluence, counted_ingestor, client)
    summary = result.summary
    assert (summary.new, summary.changed, summary.unchanged, summary.deleted) == (0, 1, 2, 1)
    replaced = chunks_of(collection, vpn, client)
    assert replaced["ids"]
    assert not old_ids & set(replaced["ids"])
    assert "WireGuard" in "\n".join(replaced["documents"])
    assert "GlobalProtect" not in "\n".join(replaced["documents"])
    assert chunks_of(collection, wifi)["ids"] == []
    assert read_live(client, [source_doc_id("wiki", wifi)]) == {source_doc_id("wiki", wifi): None}
    assert SyncState(client, "wiki").known(wifi) is None
    assert chunks_of(collection, printer)["ids"]
    # The replaced generation is kept for the grace period (readers may be using it) ...
    assert old_ids <= set(chunks_of(collection, vpn)["ids"])
    # ... and deleted by the first run after it.
    sync(confluence, counted_ingestor, client, grace_s=0)
    assert set(chunks_of(collection, vpn)["ids"]) == set(replaced["ids"])


def test_a_new_version_with_the_same_content_embeds_nothing(
    confluence: FakeConfluence,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    client: redis.Redis,
) -> None:
    vpn, *_ = seed(confluence)
    sync(confluence, counted_ingestor, client)
    embedded = counting.texts
    confluence.edit_page(vpn)  # a new version number, same body (a metadata-only edit)
    result = sync(confluence, counted_ingestor, client)
    assert result.summary.unchanged == 4
    assert counting.texts == embedded


def test_new_chunk_settings_chunk_synced_pages_again_once(
    confluence: FakeConfluence,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
    settings: IndexerSettings,
) -> None:
    """A page unchanged at the source is still chunked again when the chunk settings changed
    (an operator's new boundaries or sizes reach what was synced before), then left alone."""
    vpn, *_ = seed(confluence)
    sync(confluence, counted_ingestor, client)
    before = counted_ingestor.chunking
    reads, embedded = len(confluence.body_reads), counting.texts
    rechunking = Ingestor(
        counting, collection, settings.model_copy(update={"chunk_boundaries": "static"})
    )
    assert rechunking.chunking != before

    result = sync(confluence, rechunking, client, grace_s=0.0)

    assert (result.summary.changed, result.summary.unchanged, result.summary.failed) == (4, 0, 0)
    assert len(confluence.body_reads) == reads + 4
    assert counting.texts > embedded
    again = sync(confluence, rechunking, client, grace_s=0.0)
    assert again.summary.unchanged == 4
    assert len(confluence.body_reads) == reads + 4
    everything = collection.get(include=["metadatas"])["metadatas"]
    live = read_live(client, versioned_doc_ids(everything))
    shown = [meta for meta, seen in zip(everything, visible(everything, live), strict=True) if seen]
    assert {meta["chunking"] for meta in shown} == {rechunking.chunking}
    assert chunks_of(collection, vpn)["documents"]


def test_a_permission_change_is_a_change(
    confluence: FakeConfluence,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    *_, salary = seed(confluence)
    sync(confluence, counted_ingestor, client)
    confluence.edit_page(salary, read_groups=["hr-team", "executives"])
    result = sync(confluence, counted_ingestor, client)
    assert result.summary.changed == 1
    metas = chunks_of(collection, salary, client)["metadatas"]
    assert metas
    assert all(m["readers_groups"] == "|executives|hr-team|" for m in metas)


def test_readers_changed_and_changed_back_keep_the_page_after_the_grace_period(
    confluence: FakeConfluence,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    """Readers A, then B, then A again within the grace period: the first generation's chunks,
    retired by the first change, are live again and survive that retirement's purge."""
    *_, salary = seed(confluence)
    sync(confluence, counted_ingestor, client)
    before = chunks_of(collection, salary, client)["ids"]
    confluence.edit_page(salary, read_groups=["executives"])
    sync(confluence, counted_ingestor, client)
    confluence.edit_page(salary, read_groups=["hr-team"])
    sync(confluence, counted_ingestor, client)
    assert chunks_of(collection, salary, client)["ids"] == before  # the same generation again

    time.sleep(0.05)
    sync(confluence, counted_ingestor, client, grace_s=0.01)  # purges what is retired

    after = chunks_of(collection, salary, client)
    assert after["ids"] == before
    assert all(m["readers_groups"] == "|hr-team|" for m in after["metadatas"])
    key = "deskpilot:indexer:source:wiki:retired"
    stored = set(collection.get(where={"doc_id": source_doc_id("wiki", salary)})["ids"])
    assert stored == set(before)  # the other readers' generation is gone
    assert client.zcard(key) == 0


def test_one_failing_page_is_counted_and_the_run_goes_on_then_retried(
    confluence: FakeConfluence,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    vpn, printer, wifi, salary = seed(confluence)
    confluence.fail_page(printer)
    result = sync(confluence, counted_ingestor, client)
    assert result.error is None
    assert (result.summary.new, result.summary.failed) == (3, 1)
    assert result.failures
    assert result.failures[0].startswith(f"{printer}: ")
    assert all(chunks_of(collection, page)["ids"] for page in (vpn, wifi, salary))
    assert chunks_of(collection, printer)["ids"] == []
    confluence._failing_pages.clear()
    again = sync(confluence, counted_ingestor, client)
    assert (again.summary.new, again.summary.unchanged, again.summary.failed) == (1, 3, 0)
    assert chunks_of(collection, printer)["ids"]


def test_a_run_stopped_midway_resumes_and_writes_nothing_twice(
    confluence: FakeConfluence,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    client: redis.Redis,
) -> None:
    pages = seed(confluence)
    confluence.fail_after(2)  # the service goes down after two page bodies
    stopped = sync(confluence, counted_ingestor, client, max_retries=0)
    assert stopped.error is not None
    assert "503" in stopped.error
    assert stopped.summary.new == 2
    state = SyncState(client, "wiki")
    assert state.cursor() is not None  # past the committed first page, not past the failure
    confluence.fail_after(None)
    resumed = sync(confluence, counted_ingestor, client)
    assert resumed.error is None
    assert resumed.resumed
    assert resumed.run_id == stopped.run_id
    assert (resumed.summary.new, resumed.summary.total) == (4, 4)
    assert len(confluence.body_reads) == len(set(confluence.body_reads)) == 4
    assert {key for key in pages if state.known(key)} == set(pages)
    # A fresh run from scratch would have embedded exactly as much.
    assert state.cursor() is None


class Killed(BaseException):
    """The process dies: nothing after it runs (not even except Exception handlers)."""


def test_killed_after_writing_before_recording_embeds_nothing_again(
    confluence: FakeConfluence,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed(confluence)
    calls = {"n": 0}
    original = SyncState.remember

    def remember(self: SyncState, key: str, known: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise Killed
        original(self, key, known)

    monkeypatch.setattr(SyncState, "remember", remember)
    with pytest.raises(Killed):
        sync(confluence, counted_ingestor, client)
    monkeypatch.setattr(SyncState, "remember", original)
    embedded = counting.texts
    resumed = sync(confluence, counted_ingestor, client)
    assert resumed.error is None
    # The page written before the kill is found current: only the fourth page is embedded.
    fourth_only = counting.texts - embedded
    assert resumed.summary.total == 4
    assert 0 < fourth_only < embedded


def test_readers_never_see_two_versions_or_none(
    confluence: FakeConfluence,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    vpn = confluence.add_page("IT", "VPN", VPN).id
    sync(confluence, ingestor, client)
    doc_id = source_doc_id("wiki", vpn)
    observations: list[set[str]] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            live = read_live(client, [doc_id])  # the published generation first, then chunks
            metas = collection.get(where={"doc_id": doc_id}, include=["metadatas"])["metadatas"]
            shown = [m for m, ok in zip(metas, visible(metas, live), strict=True) if ok]
            observations.append({str(m["generation"]) for m in shown})

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(4):
            confluence.edit_page(
                vpn, body=VPN.replace("vpn.example.com", f"vpn{round_}.example.com")
            )
            sync(confluence, ingestor, client)
    finally:
        done.set()
        reader.join()
    assert len(observations) > 10
    assert all(len(generations) == 1 for generations in observations), [
        g for g in observations if len(g) != 1
    ]
    assert len(set().union(*observations)) >= 2  # the reader saw the switches happen


def test_throttling_waits_retry_after(
    confluence: FakeConfluence, ingestor: Ingestor, client: redis.Redis
) -> None:
    seed(confluence)
    confluence.throttle_next(1, retry_after="1")
    started = time.monotonic()
    result = sync(confluence, ingestor, client)
    assert result.error is None
    assert result.summary.new == 4
    assert time.monotonic() - started >= 1.0
    assert confluence.requests[0] == confluence.requests[1]  # the throttled request, again


def test_wrong_token_stops_the_run_with_a_clear_error_and_no_secret(
    confluence: FakeConfluence,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    seed(confluence)
    result = sync(confluence, ingestor, client, api_token="wrong-token-value")
    assert result.error is not None
    assert "401" in result.error
    assert "api_token" in result.error
    assert "wrong-token-value" not in result.error
    assert collection.count() == 0
    assert SyncState(client, "wiki").cursor() is None


def test_unknown_space_says_so(
    confluence: FakeConfluence, ingestor: Ingestor, client: redis.Redis
) -> None:
    result = sync(confluence, ingestor, client, spaces=("NOPE",))
    assert result.error is not None
    assert "'NOPE'" in result.error


def test_a_space_taken_out_leaves_the_index_and_put_back_is_indexed_again(
    confluence: FakeConfluence,
    counting: CountingEmbedder,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    *it_pages, salary = seed(confluence)
    assert sync(confluence, counted_ingestor, client).summary.new == 4
    embedded, reads = counting.texts, len(confluence.body_reads)

    confluence.throttle_next(1)  # IT's listing cannot be had: the run stops, removing nothing
    stopped = sync(confluence, counted_ingestor, client, spaces=("IT",), max_retries=0)
    assert stopped.error is not None
    assert stopped.summary.deleted == 0
    assert chunks_of(collection, salary, client)["ids"]

    removed = sync(confluence, counted_ingestor, client, spaces=("IT",))
    assert removed.error is None
    assert (removed.summary.deleted, removed.summary.unchanged, removed.summary.new) == (1, 3, 0)
    assert chunks_of(collection, salary, client)["ids"] == []
    assert chunks_of(collection, salary)["ids"] == []  # no chunk left at all
    assert SyncState(client, "wiki").known(salary) is None
    assert all(chunks_of(collection, page, client)["ids"] for page in it_pages)
    assert (counting.texts, len(confluence.body_reads)) == (embedded, reads)

    back = sync(confluence, counted_ingestor, client)
    assert (back.error, back.summary.new, back.summary.unchanged) == (None, 1, 3)
    assert chunks_of(collection, salary, client)["ids"]


class HeldSource(Source):
    """A delta source over Markdown held in memory (keys ``<part>/<id>``): its first run lists
    every document, later ones nothing; it covers what it is told to (None: it cannot tell)."""

    kind = "held"

    def __init__(self, documents: dict[str, str], covers: tuple[str, ...] | None) -> None:
        super().__init__("held")
        self.documents, self.covers = documents, covers

    def changes(self, cursor: str | None) -> Iterator[ChangePage]:
        listed = () if cursor else tuple(Change(key, "1") for key in sorted(self.documents))
        yield ChangePage(listed, "listed", last=True)

    def covered(self) -> tuple[str, ...] | None:
        return self.covers

    def fetch(self, change: Change) -> ExtractedDocument:
        text = self.documents[change.key].encode()
        return extract_bytes(text, f"{change.key}.md", f"https://kb.example/{change.key}")

    def permissions(self, change: Change) -> Readers:
        return Readers(public=True)


def test_only_what_a_source_says_it_no_longer_covers_is_removed(
    ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    documents = {
        "docs/1": "# VPN\n\nConnect with GlobalProtect before you open internal sites.\n",
        "docs/2": "# Printers\n\nAdd the floor printer from Settings.\n",
        "policies/1": "# Travel\n\nBook trains through the travel portal.\n",
    }
    state = SyncState(client, "held")

    def run(covers: tuple[str, ...] | None) -> Any:
        return SourceSync(HeldSource(documents, covers), ingestor, state).run()

    assert run(None).summary.new == 3
    assert run(None).summary.deleted == 0  # cannot tell: nothing removed
    assert run(("docs/", "policies/")).summary.deleted == 0
    narrowed = run(("docs/",))
    assert (narrowed.error, narrowed.summary.deleted, narrowed.summary.total) == (None, 1, 1)
    assert state.known("policies/1") is None
    assert chunks_of(collection, "policies/1", source="held")["ids"] == []
    assert all(
        chunks_of(collection, key, client, source="held")["ids"]
        for key in documents
        if key.startswith("docs/")
    )
    assert run(()).summary.deleted == 2  # covering nothing: nothing kept
    assert state.document_count() == 0
    assert collection.get(where={"source": "held"})["ids"] == []


@pytest.mark.parametrize(
    ("spaces", "deleted"),
    [
        (("HR", "IT"), 0),  # the same spaces in another order: none is skipped
        (("HR",), 3),  # IT taken out: its pages go, though the stopped part listed some
    ],
)
def test_a_run_stopped_midway_and_resumed_with_other_spaces_lists_them_anew(
    confluence: FakeConfluence,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
    spaces: tuple[str, ...],
    deleted: int,
) -> None:
    *it_pages, salary = seed(confluence)
    assert sync(confluence, ingestor, client).summary.new == 4
    for page in it_pages:
        confluence.edit_page(page, body=f"<p>Edited {page}: ask the service desk.</p>")
    # VPN and Printers (IT's first listing page) are read and committed; Wi-Fi is not.
    confluence.fail_after(len(confluence.body_reads) + 2)
    stopped = sync(confluence, ingestor, client, max_retries=0)
    assert stopped.error is not None
    assert stopped.summary.changed == 2
    state = SyncState(client, "wiki")
    assert state.cursor() is not None

    confluence.fail_after(None)
    resumed = sync(confluence, ingestor, client, spaces=spaces)
    assert resumed.error is None
    assert resumed.resumed
    assert resumed.summary.deleted == deleted
    assert chunks_of(collection, salary, client)["ids"]  # HR is configured either way
    for page in it_pages:
        assert bool(chunks_of(collection, page, client)["ids"]) is (deleted == 0)
    assert state.cursor() is None


@pytest.mark.parametrize(
    "cursor",
    [
        {"space": 1, "next": None},  # an older release's: HR, by position
        {"spaces": ["IT", "HR"], "space": 7, "next": None},  # no such position
        {"spaces": ["IT", "HR"], "space": "1", "next": None},
    ],
)
def test_a_cursor_that_names_no_configured_space_lists_everything_anew(
    confluence: FakeConfluence,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
    cursor: dict[str, Any],
) -> None:
    pages = seed(confluence)
    assert sync(confluence, ingestor, client).summary.new == 4
    state = SyncState(client, "wiki")
    state.begin()  # a run stopped midway at that cursor
    state.commit_page(json.dumps(cursor), {}, pages[:1])
    resumed = sync(confluence, ingestor, client)
    assert resumed.resumed
    assert (resumed.error, resumed.summary.unchanged, resumed.summary.deleted) == (None, 4, 0)
    assert all(chunks_of(collection, page, client)["ids"] for page in pages)
    assert state.cursor() is None


def test_markup_and_script_in_a_page_body_stay_inert(
    confluence: FakeConfluence,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    page = confluence.add_page(
        "IT",
        "Hostile",
        "<h1>Hostile</h1><p>Install the agent <script>fetch('https://evil.example')</script>"
        '<img src=x onerror="alert(1)"> from the portal, then restart the laptop.</p>'
        '<ac:structured-macro ac:name="html"><ac:plain-text-body><![CDATA[<iframe '
        'src="https://evil.example"></iframe>]]></ac:plain-text-body></ac:structured-macro>',
    ).id
    result = sync(confluence, ingestor, client, spaces=("IT",))
    assert result.summary.new == 1
    text = "\n".join(chunks_of(collection, page)["documents"])
    assert "Install the agent" in text
    for forbidden in ("<script", "evil.example", "onerror", "<iframe", "alert("):
        assert forbidden not in text


def test_a_huge_page_fails_alone(
    confluence: FakeConfluence,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> None:
    small = confluence.add_page("IT", "Small", "<h1>Small</h1><p>Restart the router.</p>").id
    huge = confluence.add_page("IT", "Huge", "<p>" + "word " * 400_000 + "</p>").id
    result = sync(confluence, ingestor, client, spaces=("IT",), max_document_bytes=1_000_000)
    assert (result.summary.new, result.summary.failed) == (1, 1)
    assert "max_document_bytes" in result.failures[0]
    assert result.failures[0].startswith(huge)
    assert chunks_of(collection, small)["ids"]
    assert not chunks_of(collection, huge)["ids"]


def test_one_run_per_source_at_a_time(
    confluence: FakeConfluence, ingestor: Ingestor, client: redis.Redis
) -> None:
    holder = SyncState(client, "wiki")
    assert holder.acquire()
    with pytest.raises(SyncBusy):
        sync(confluence, ingestor, client)
    holder.release()
    assert sync(confluence, ingestor, client).error is None


def test_reindex_leaves_synced_pages_to_their_sync(
    confluence: FakeConfluence,
    ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
    store: Any,
    tmp_path: Path,
) -> None:
    from indexer.documents import ingest_and_record
    from indexer.reindex import reindex

    vpn, *_ = seed(confluence)
    sync(confluence, ingestor, client)
    article = tmp_path / "kb" / "badge.md"
    article.parent.mkdir()
    article.write_text("# Badge printer\n\nHold the reset key for ten seconds to clear a jam.\n")
    ingest_and_record(ingestor, article.parent, store)
    before = set(chunks_of(collection, vpn)["ids"])

    report = reindex(ingestor, collection, store)

    assert report.orphans_removed == 0
    assert set(chunks_of(collection, vpn)["ids"]) == before


def test_a_due_schedule_is_claimed_by_one_replica_per_interval(
    confluence: FakeConfluence, ingestor: Ingestor, client: redis.Redis
) -> None:
    from indexer.sources.runner import SourceRunner

    scheduled = confluence_config(confluence, interval_s=3600)
    on_demand = confluence_config(confluence, name="manual")
    replicas = [SourceRunner([scheduled, on_demand], ingestor, client) for _ in range(3)]
    claims = [runner.due() for runner in replicas]
    assert sorted(claims) == [[], [], ["wiki"]]
    assert replicas[0].due() == []  # not again within the interval


def test_a_busy_source_keeps_its_catalogue_entry(
    confluence: FakeConfluence, ingestor: Ingestor, client: redis.Redis
) -> None:
    from indexer.sources.runner import SourceRunner, UnknownSource

    runner = SourceRunner([confluence_config(confluence)], ingestor, client)
    runner.announce()
    holder = SyncState(client, "wiki")
    assert holder.acquire()
    with pytest.raises(SyncBusy):
        runner.sync("wiki")
    status = runner.status("wiki")
    assert status is not None
    assert status.state == "idle"
    assert status.last_started_at is None
    holder.release()
    with pytest.raises(UnknownSource):
        runner.sync("../wiki")


def test_a_failed_page_deleted_at_the_source_is_not_retried_for_ever(
    confluence: FakeConfluence, ingestor: Ingestor, client: redis.Redis
) -> None:
    _, printer, *_ = seed(confluence)
    confluence.fail_page(printer)
    assert sync(confluence, ingestor, client).summary.failed == 1
    confluence.delete_page(printer)
    again = sync(confluence, ingestor, client)  # its retry fails (404), then it is dropped
    assert again.summary.failed == 0
    assert SyncState(client, "wiki").failed() == {}
    assert sync(confluence, ingestor, client).failures == []
