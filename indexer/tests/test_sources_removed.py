"""A whole source taken out of ``INDEXER_SOURCES``, against the local Confluence with real valkey,
Chroma and the embedder (:mod:`indexer.sources.removal`): hidden from readers at once, removed
after the grace period (chunks, sync state, catalogue entry; counted deleted once), put back
within it with nothing embedded, resumed after a stop midway, done by one replica of two; a
name nothing knows changes nothing, and a source whose name starts the same stays."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any, NamedTuple

import pytest
import redis
from chromadb.api.models.Collection import Collection

from contracts.bus import Bus, decode_entry
from contracts.events import AuditRecorded, SourceSyncCompleted, new_id
from contracts.live import EPOCH_KEY, LIVE_KEY, read_live, versioned_doc_ids, visible
from contracts.settings import ServiceSettings
from contracts.sources import CATALOGUE_KEY, SourceStatus
from contracts.topics import Topic
from indexer import handlers
from indexer.embedding import Embedder
from indexer.gaps import GapQuestion
from indexer.proposals import Drafter
from indexer.service import Ingestor
from indexer.sources.config import ConfluenceConfig
from indexer.sources.removal import REMOVALS_KEY, SourceRemovals
from indexer.sources.runner import SourceRemoving, SourceRunner
from indexer.sources.state import PREFIX, SyncState
from indexer.tests.counting import CountingEmbedder
from indexer.tests.synced_sources import chunks_of, confluence_config
from tests.support.fake_confluence import FakeConfluence

HOUR = 3600.0
PAGES = {
    "VPN": "<h1>VPN</h1><p>Connect with GlobalProtect to vpn.example.com first.</p>",
    "Printers": "<h1>Printers</h1><p>Add the floor printer from the print portal.</p>",
    "Wi-Fi": "<h1>Wi-Fi</h1><p>Join Corp-WiFi with your company account.</p>",
}
LEAVE = "<h1>Leave</h1><p>Request annual leave in the HR portal two weeks ahead.</p>"


def configs(fake: FakeConfluence) -> dict[str, ConfluenceConfig]:
    """``wiki`` (the IT space) and ``wiki-hr`` (the HR space: a name ``wiki`` starts)."""
    return {
        "wiki": confluence_config(fake, spaces=("IT",)),
        "wiki-hr": confluence_config(fake, name="wiki-hr", spaces=("HR",)),
    }


def runner(
    fake: FakeConfluence,
    ingestor: Ingestor,
    client: redis.Redis,
    *names: str,
    grace_s: float = HOUR,
) -> SourceRunner:
    """A replica configured with the sources ``names``."""
    chosen = [configs(fake)[name] for name in names]
    return SourceRunner(chosen, ingestor, client, removed_grace_s=grace_s)  # type: ignore[arg-type]


class World(NamedTuple):
    """The local Confluence, the indexer's ingestor, collection and Redis, and each synced
    source's page ids."""

    fake: FakeConfluence
    ingestor: Ingestor
    collection: Collection
    client: redis.Redis
    pages: dict[str, list[str]]


@pytest.fixture
def world(
    confluence: FakeConfluence,
    counted_ingestor: Ingestor,
    collection: Collection,
    client: redis.Redis,
) -> World:
    """Both sources synced (the IT pages once edited, so replaced chunks await their purge)."""
    it = [confluence.add_page("IT", title, body).id for title, body in PAGES.items()]
    hr = [confluence.add_page("HR", "Leave", LEAVE).id]
    both = runner(confluence, counted_ingestor, client, "wiki", "wiki-hr")
    both.announce()
    assert both.sync("wiki").summary.new == 3
    assert both.sync("wiki-hr").summary.new == 1
    confluence.edit_page(it[0], body=PAGES["VPN"] + "<p>Use the EU gateway abroad.</p>")
    assert both.sync("wiki").summary.changed == 1
    return World(confluence, counted_ingestor, collection, client, {"wiki": it, "wiki-hr": hr})


def shown(collection: Collection, client: redis.Redis, source: str, pages: list[str]) -> list[Any]:
    return [chunks_of(collection, page, client, source)["ids"] for page in pages]


def stored(collection: Collection, source: str) -> list[str]:
    return list(collection.get(where={"source": source})["ids"])


def state_keys(client: redis.Redis, source: str) -> list[bytes]:
    return list(client.scan_iter(match=f"{PREFIX}{source}:*"))


VPN_QUESTION = "How do I connect to the VPN with GlobalProtect?"


def answered_from(world: World, embedder: Embedder) -> list[str]:
    """The sources of the five chunks nearest a VPN question that a reader may see, by the
    rule every reader applies (:func:`contracts.live.visible`: a synced chunk counts only in
    its document's published generation; the orchestrator's retrieval applies the same)."""
    found = world.collection.query(
        query_embeddings=embedder.encode([VPN_QUESTION]), n_results=50, include=["metadatas"]
    )
    metadatas = found["metadatas"][0] if found["metadatas"] else []
    live = read_live(world.client, versioned_doc_ids(metadatas))
    seen = [meta for meta, shown in zip(metadatas, visible(metadatas, live), strict=True) if shown]
    return sorted({str(meta["source"]) for meta in seen[:5]})


def status(client: redis.Redis, name: str) -> SourceStatus | None:
    raw = client.hget(CATALOGUE_KEY, name)
    return SourceStatus.model_validate_json(raw) if raw else None


def test_a_source_taken_out_is_hidden_at_once_and_removed_after_the_grace_period(
    world: World, embedder: Embedder
) -> None:
    confluence, counted_ingestor, collection, client, synced = world
    assert "wiki" in answered_from(world, embedder)
    chunks_before = stored(collection, "wiki")
    assert all(shown(collection, client, "wiki", synced["wiki"]))
    replica = runner(confluence, counted_ingestor, client, "wiki-hr")
    replica.announce()
    # Answered no more, nothing deleted yet; the other source, whose name "wiki" starts, stays.
    assert shown(collection, client, "wiki", synced["wiki"]) == [[], [], []]
    assert stored(collection, "wiki") == chunks_before
    assert all(shown(collection, client, "wiki-hr", synced["wiki-hr"]))
    assert answered_from(world, embedder) == ["wiki-hr"]
    hidden = status(client, "wiki")
    assert hidden is not None
    assert hidden.state == "hidden"
    assert hidden.documents == 3
    assert hidden.removal_due_at is not None
    assert abs(hidden.removal_due_at.timestamp() - (time.time() + HOUR)) < 60
    with pytest.raises(SourceRemoving):
        runner(confluence, counted_ingestor, client, "wiki").sync("wiki")

    assert replica.remove_due() == []  # not due
    (result,) = replica.remove_due(now=time.time() + HOUR + 1)
    assert (result.name, result.summary.deleted, result.summary.total) == ("wiki", 3, 3)
    removing = status(client, "wiki")
    assert removing is not None
    assert removing.state == "removing"
    replica.removed(result)

    # Every chunk (the replaced generation's too), its sync state, record and entry are gone.
    assert stored(collection, "wiki") == []
    assert state_keys(client, "wiki") == []
    assert status(client, "wiki") is None
    assert not client.exists(REMOVALS_KEY)
    assert all(shown(collection, client, "wiki-hr", synced["wiki-hr"]))
    assert state_keys(client, "wiki-hr") != []
    assert replica.remove_due(now=time.time() + 2 * HOUR) == []  # done once

    # Put back after its removal, it is synced afresh.
    again = runner(confluence, counted_ingestor, client, "wiki", "wiki-hr")
    again.announce()
    assert again.sync("wiki").summary.new == 3
    assert all(shown(collection, client, "wiki", synced["wiki"]))


def test_put_back_within_the_grace_period_it_is_shown_again_with_nothing_embedded(
    world: World, counting: CountingEmbedder, embedder: Embedder
) -> None:
    confluence, counted_ingestor, collection, client, synced = world
    before = shown(collection, client, "wiki", synced["wiki"])
    runner(confluence, counted_ingestor, client, "wiki-hr").announce()
    assert shown(collection, client, "wiki", synced["wiki"]) == [[], [], []]
    assert "wiki" not in answered_from(world, embedder)
    embedded = counting.texts

    back = runner(confluence, counted_ingestor, client, "wiki", "wiki-hr")
    back.announce()
    assert shown(collection, client, "wiki", synced["wiki"]) == before
    assert "wiki" in answered_from(world, embedder)
    entry = status(client, "wiki")
    assert entry is not None
    assert (entry.state, entry.removal_due_at) == ("idle", None)
    assert back.remove_due(now=time.time() + 2 * HOUR) == []  # nothing left to remove
    summary = back.sync("wiki").summary
    assert (summary.unchanged, summary.new, summary.changed) == (3, 0, 0)
    assert counting.texts == embedded  # nothing embedded again


def test_a_removal_stopped_midway_is_resumed_and_counts_each_document_once(
    world: World,
) -> None:
    confluence, counted_ingestor, collection, client, synced = world
    replica = runner(confluence, counted_ingestor, client, "wiki-hr", grace_s=0)
    replica.announce()
    broken = SourceRemovals(client, _Breaking(counted_ingestor, after=1), 0, batch=1)
    with pytest.raises(RuntimeError, match="killed"):
        broken.purge_due(["wiki-hr"])
    removal = broken.get("wiki")
    assert removal is not None
    assert (removal.phase, removal.deleted) == ("purging", 1)
    assert shown(collection, client, "wiki", synced["wiki"]) == [[], [], []]  # none half-shown
    # Configured again now, it is not put back half-removed.
    assert not SourceRemovals(client, counted_ingestor, 0).restore("wiki")

    # Killed for real: its lock outlives it until it expires.
    SyncState(client, "wiki").acquire()
    assert replica.remove_due() == []
    client.delete(f"{PREFIX}wiki:lock")
    (result,) = replica.remove_due()
    assert result.summary.deleted == 3  # one before the stop, two after: each once
    replica.removed(result)
    assert stored(collection, "wiki") == []
    assert state_keys(client, "wiki") == []

    # A replica configured with it again lists it at its next check, and syncs it afresh.
    back = runner(confluence, counted_ingestor, client, "wiki", "wiki-hr")
    assert back.remove_due() == []
    entry = status(client, "wiki")
    assert entry is not None
    assert entry.state == "idle"
    assert back.sync("wiki").summary.new == 3


def test_hiding_stopped_midway_is_resumed_and_put_back_whole(
    world: World,
) -> None:
    confluence, counted_ingestor, collection, client, synced = world
    before = shown(collection, client, "wiki", synced["wiki"])
    stopping = _StopsHiding(client, counted_ingestor, HOUR, batch=1)
    with pytest.raises(RuntimeError, match="killed"):
        stopping.reconcile(["wiki-hr"], ["wiki", "wiki-hr"])
    removal = stopping.get("wiki")
    assert removal is not None
    assert removal.phase == "hiding"
    assert sum(1 for ids in shown(collection, client, "wiki", synced["wiki"]) if ids) == 2

    replica = runner(confluence, counted_ingestor, client, "wiki-hr")
    replica.announce()  # goes on hiding
    assert shown(collection, client, "wiki", synced["wiki"]) == [[], [], []]
    runner(confluence, counted_ingestor, client, "wiki", "wiki-hr").announce()
    assert shown(collection, client, "wiki", synced["wiki"]) == before


def test_two_replicas_remove_a_source_once(
    world: World,
) -> None:
    confluence, counted_ingestor, collection, client, _synced = world
    replicas = [
        runner(confluence, counted_ingestor, client, "wiki-hr", grace_s=0) for _ in range(2)
    ]
    results: list[Any] = []
    start = threading.Barrier(2)

    def tick(replica: SourceRunner) -> None:
        replica.announce()
        start.wait()
        results.extend((replica, result) for result in replica.remove_due())

    threads = [threading.Thread(target=tick, args=(replica,)) for replica in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [result.summary.deleted for _, result in results] == [3]
    owner, result = results[0]
    other = replicas[1] if owner is replicas[0] else replicas[0]
    assert other.remove_due() == []  # the owner holds it until its summary is published
    owner.removed(result)
    assert other.remove_due() == []
    assert owner.remove_due() == []
    assert stored(collection, "wiki") == []


def test_a_name_nothing_knows_changes_nothing(
    world: World,
) -> None:
    confluence, counted_ingestor, collection, client, synced = world
    live, epoch = client.hgetall(LIVE_KEY), client.get(EPOCH_KEY)
    removals = SourceRemovals(client, counted_ingestor, 0)
    removals.reconcile(["wiki", "wiki-hr"], ["wiki", "wiki-hr", "ghost", "wik"])  # typos
    assert removals.hide("never-synced") is None  # no sync state: nothing to hide
    removals.reconcile(["wiki", "wiki-hr", "never-synced"], [])
    runner(confluence, counted_ingestor, client, "wiki", "wiki-hr").announce()
    assert removals.pending() == {}
    assert (client.hgetall(LIVE_KEY), client.get(EPOCH_KEY)) == (live, epoch)
    assert removals.purge_due(["wiki", "wiki-hr"], now=time.time() + HOUR) == []
    assert all(shown(collection, client, "wiki", synced["wiki"]))


class _Breaking(Ingestor):
    """An ingestor that dies (raises) after ``after`` batched deletions."""

    def __init__(self, real: Ingestor, after: int) -> None:
        self.__dict__.update(real.__dict__)
        self.calls, self.after = 0, after

    def delete_documents(self, doc_ids: Any) -> None:
        if self.calls >= self.after:
            raise RuntimeError("killed")
        self.calls += 1
        super().delete_documents(doc_ids)


class _StopsHiding(SourceRemovals):
    """Dies (raises) before hiding its second batch."""

    batches = 0

    def _hide_batch(self, name: str, doc_ids: list[str]) -> None:
        self.batches += 1
        if self.batches > 1:
            raise RuntimeError("killed")
        super()._hide_batch(name, doc_ids)


def test_a_source_whose_sync_holds_it_is_hidden_at_the_next_check(world: World) -> None:
    confluence, counted_ingestor, collection, client, synced = world
    syncing = SyncState(client, "wiki")  # a replica still configured with it is syncing it
    assert syncing.acquire()
    replica = runner(confluence, counted_ingestor, client, "wiki-hr")
    replica.announce()
    assert all(shown(collection, client, "wiki", synced["wiki"]))  # not yet
    assert status(client, "wiki") is not None  # kept, to be tried again
    syncing.release()
    assert replica.remove_due() == []
    assert shown(collection, client, "wiki", synced["wiki"]) == [[], [], []]
    entry = status(client, "wiki")
    assert entry is not None
    assert entry.state == "hidden"


async def test_the_removal_summary_is_published_like_a_sync_run(
    world: World, fresh_redis_url: str
) -> None:
    confluence, counted_ingestor, _, client, _ = world
    replica = runner(confluence, counted_ingestor, client, "wiki-hr", grace_s=0)
    replica.announce()
    bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "indexer")
    await bus.start()
    try:
        await handlers.remove_sources(bus, replica)
        await handlers.remove_sources(bus, replica)  # nothing more: published once
    finally:
        await bus.stop()
    [completed] = [
        decode_entry(fields, SourceSyncCompleted)
        for _, fields in client.xrange(Topic.SOURCE_SYNC_COMPLETED)
    ]
    assert (completed.source, completed.removal, completed.error) == ("wiki", True, None)
    assert (completed.summary.deleted, completed.summary.total) == (3, 3)
    audits = [decode_entry(fields, AuditRecorded) for _, fields in client.xrange(Topic.AUDIT)]
    [audit] = [record for record in audits if record.details.get("removal")]
    assert (audit.action, audit.reason) == ("source_sync", "removed: no longer configured")
    assert audit.details["source"] == "wiki"
    assert audit.details["deleted"] == 3
    assert audit.details["run_id"] == completed.run_id
    assert status(client, "wiki") is None
    assert not client.exists(REMOVALS_KEY)


def test_a_hidden_source_is_no_source_of_a_proposal(world: World, embedder: Embedder) -> None:
    confluence, counted_ingestor, collection, client, _ = world
    wiki_urls = {meta["url"] for meta in collection.get(where={"source": "wiki"})["metadatas"]}
    centroid = [float(x) for x in embedder.encode([VPN_QUESTION])[0]]
    questions = [GapQuestion(new_id(), VPN_QUESTION, "no_answer", datetime.now(UTC))]

    def cited() -> set[str]:
        draft = Drafter(collection, None, 0.0, client).draft(questions, centroid, "VPN")
        return {str(draft.affected_url), *(source.ref for source in draft.sources)}

    assert cited() & wiki_urls  # the IT space's VPN page is the closest article
    runner(confluence, counted_ingestor, client, "wiki-hr").announce()
    assert not cited() & wiki_urls
