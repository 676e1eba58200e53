"""The SharePoint source against the Graph emulator (HTTPS, a real msal client), with real
valkey, real Chroma and the real embedder: delta sync, token refresh, permissions, throttling."""

from __future__ import annotations

import io
import time
from typing import Any

import redis
from chromadb.api.models.Collection import Collection

from indexer.service import Ingestor
from indexer.sources.state import SyncState
from indexer.sources.sync import source_doc_id
from indexer.tests.counting import CountingEmbedder
from indexer.tests.synced_sources import VPN_MD, Syncer, chunks_of
from tests.support.fake_graph import CLIENT_SECRET, FakeGraph


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Printers", 1)
    document.add_paragraph("Add the floor printer from Settings before you print badges.")
    document.add_heading("Steps", 2)
    document.add_paragraph("Open Printers and scanners", style="List Number")
    document.add_paragraph("Pick the queue named after your floor", style="List Number")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


WIFI_HTML = (
    b"<html><head><title>Wi-Fi</title></head><body><h1>Wi-Fi</h1><p>Join Corp-WiFi with your "
    b"company account.</p><script>steal()</script></body></html>"
)


def seed(graph: FakeGraph) -> list[str]:
    return [
        graph.add_file("printers.docx", docx_bytes()).id,
        graph.add_file("vpn.md", VPN_MD, groups=["it-staff"], organization_link=False).id,
        graph.add_file("wifi.html", WIFI_HTML).id,
        graph.add_file("logo.png", b"\x89PNG...").id,  # not a document type: not listed
    ]


def chunks(collection: Collection, client: redis.Redis, drive_item: str) -> dict[str, list[Any]]:
    return chunks_of(collection, f"b!drive0/{drive_item}", client, source="intranet")


def test_delta_sync_new_unchanged_changed_deleted(
    graph: FakeGraph, embedder: Any, collection: Collection, settings: Any, client: redis.Redis
) -> None:
    counting = CountingEmbedder(embedder)
    syncer = Syncer(graph, Ingestor(counting, collection, settings), client)
    printers, vpn, wifi, _ = seed(graph)

    first = syncer.run()
    assert first.error is None
    assert (first.summary.new, first.summary.total) == (3, 3)
    docx_chunks = chunks(collection, client, printers)
    assert {m["section"] for m in docx_chunks["metadatas"]} >= {"Printers > Steps"}
    assert "1. Open Printers and scanners" in "\n".join(docx_chunks["documents"])
    vpn_meta = chunks(collection, client, vpn)["metadatas"]
    assert vpn_meta
    assert all(
        m["readers_public"] is False and m["readers_groups"] == "|it-staff|" for m in vpn_meta
    )
    assert "steal()" not in "\n".join(chunks(collection, client, wifi)["documents"])
    cursor = SyncState(client, "intranet").cursor()
    assert cursor is not None
    assert "deltaLink" not in cursor
    assert "token=" in cursor

    embedded, downloads = counting.texts, len(graph.downloads)
    again = syncer.run()
    assert again.summary.total == 0  # the delta link reports nothing new
    assert (counting.texts, len(graph.downloads)) == (embedded, downloads)

    graph.edit_file(vpn, VPN_MD.replace(b"GlobalProtect", b"WireGuard"))
    graph.delete_file(wifi)
    third = syncer.run()
    assert (third.summary.changed, third.summary.deleted, third.summary.total) == (1, 1, 2)
    assert "WireGuard" in "\n".join(chunks(collection, client, vpn)["documents"])
    assert chunks(collection, client, wifi)["ids"] == []


def test_an_expired_token_is_refreshed_once(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    seed(graph)
    syncer = Syncer(graph, ingestor, client)
    assert syncer.run().error is None
    assert graph.token_requests == 1  # msal's cache served every later request
    graph.edit_file(next(iter(graph.items)), docx_bytes() + b"")
    graph.expire_tokens()
    result = syncer.run()
    assert result.error is None
    assert result.summary.total == 1
    assert graph.token_requests == 2


def test_a_wrong_secret_and_a_missing_permission_say_what_to_fix(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    seed(graph)
    wrong = Syncer(graph, ingestor, client, client_secret="not-the-secret").run()
    assert wrong.error is not None
    assert "invalid_client" in wrong.error
    assert "not-the-secret" not in wrong.error
    assert CLIENT_SECRET not in wrong.error
    graph.deny("/root/delta")
    denied = Syncer(graph, ingestor, client).run()
    assert denied.error is not None
    assert "403" in denied.error
    assert "Files.Read.All" in denied.error
    # The site's pages were listed before the drive was refused; no drive's delta link is kept.
    assert "b!drive0" not in (SyncState(client, "intranet").cursor() or "")


def test_throttling_waits_retry_after(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    seed(graph)
    syncer = Syncer(graph, ingestor, client)
    syncer.source._access_token()  # the token first: the throttle is Graph's, not Entra's
    graph.throttle_next(1)
    started = time.monotonic()
    result = syncer.run()
    assert result.error is None
    assert result.summary.new == 3
    assert time.monotonic() - started >= 1.0


def test_a_run_stopped_midway_resumes_from_the_last_committed_page(
    graph: FakeGraph, embedder: Any, collection: Collection, settings: Any, client: redis.Redis
) -> None:
    counting = CountingEmbedder(embedder)
    ingestor = Ingestor(counting, collection, settings)
    seed(graph)
    graph.add_file("extra.txt", b"Restart the router when the light is red.")
    graph.fail_deltas_after(1)  # the first page of two, then Graph goes down
    stopped = Syncer(graph, ingestor, client, max_retries=0).run()
    assert stopped.error is not None
    assert "503" in stopped.error
    assert stopped.summary.new == 2  # the first page: the root folder, printers.docx, vpn.md
    graph.fail_deltas_after(None)
    resumed = Syncer(graph, ingestor, client).run()
    assert resumed.error is None
    assert resumed.resumed
    assert resumed.summary.new == 4
    assert len(graph.downloads) == len(set(graph.downloads)) == 4


def test_the_doc_id_is_per_source_and_item(graph: FakeGraph) -> None:
    assert source_doc_id("intranet", "b!drive0/01ITEM0001") != source_doc_id(
        "other", "b!drive0/01ITEM0001"
    )


def test_a_corrupt_docx_and_a_huge_file_fail_alone(
    graph: FakeGraph, ingestor: Ingestor, collection: Collection, client: redis.Redis
) -> None:
    good = graph.add_file("vpn.md", VPN_MD).id
    graph.add_file("broken.docx", b"PK\x03\x04 not really a zip")
    graph.add_file("huge.txt", b"word " * 300_000)
    syncer = Syncer(graph, ingestor, client, max_document_bytes=1_000_000)
    try:
        result = syncer.run()
    finally:
        syncer.close()
    assert result.error is None
    assert (result.summary.new, result.summary.failed) == (1, 2)
    reasons = " ".join(result.failures)
    assert "not a readable .docx" in reasons
    assert "max_document_bytes" in reasons
    assert chunks(collection, client, good)["ids"]


def test_a_failed_file_deleted_at_the_source_is_not_retried_for_ever(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    broken = graph.add_file("broken.docx", b"not a zip").id
    syncer = Syncer(graph, ingestor, client)
    try:
        assert syncer.run().summary.failed == 1
        graph.delete_file(broken)
        again = syncer.run()
        assert (again.summary.failed, again.summary.deleted) == (0, 0)
        assert SyncState(client, "intranet").failed() == {}
    finally:
        syncer.close()


def test_an_unknown_tenant_stops_the_run_with_a_clear_error(
    graph: FakeGraph, ingestor: Ingestor, client: redis.Redis
) -> None:
    syncer = Syncer(graph, ingestor, client, tenant_id="no-such-tenant")
    try:
        result = syncer.run()
    finally:
        syncer.close()
    assert result.error is not None
    assert "tenant" in result.error
    assert graph.token_requests == 0
