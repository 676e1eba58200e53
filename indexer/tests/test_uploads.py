"""Uploads and deletions as the indexer's handlers run them, on real Chroma and Redis."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from uuid import uuid4

import pytest
from chromadb.api.models.Collection import Collection

from contracts.events import DocumentSubmitted
from contracts.readers import PUBLIC, Readers
from indexer.documents import DocumentStore, ingest_and_record
from indexer.handlers import upload_readers
from indexer.service import Ingestor
from indexer.uploads import UploadService, upload_url
from tests.support.pdf import build_pdf

DOCK_MD = b"""# Set up a docking station

Connect the docking station to the laptop with the USB-C cable; the monitors wake up by
themselves. If they stay dark, press the dock's power button once.

1. Plug the dock's power supply into the wall.
2. Connect the USB-C cable to the laptop's left port.
3. Open Display settings and choose Extend these displays.
"""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def uploads(ingestor: Ingestor, collection: Collection, store: DocumentStore) -> UploadService:
    return UploadService(ingestor, collection, store)


def doc_ids(collection: Collection) -> set[str]:
    return {
        str(meta["doc_id"]) for meta in collection.get(include=["metadatas"])["metadatas"] or []
    }


def test_an_upload_is_indexed_under_its_id_and_upload_url(
    uploads: UploadService, collection: Collection, store: DocumentStore
) -> None:
    document_id = uuid4().hex
    result = uploads.submit(document_id, "dock setup.md", b64(DOCK_MD))

    assert result.status == "indexed"
    assert result.chunks == result.chunks_written == collection.count() >= 1
    assert (
        result.url
        == f"upload://{document_id}/dock%20setup.md"
        == upload_url(document_id, "dock setup.md")
    )
    metadatas = collection.get(include=["metadatas"])["metadatas"] or []
    assert {meta["doc_id"] for meta in metadatas} == {document_id}
    assert {meta["url"] for meta in metadatas} == {result.url}
    assert {meta["title"] for meta in metadatas} == {"Set up a docking station"}
    stored = store.get(document_id)
    assert stored is not None
    assert stored.doc_id == document_id
    assert "Extend these displays" in stored.text


def test_a_redelivered_upload_writes_nothing_and_reports_the_same(
    uploads: UploadService, collection: Collection
) -> None:
    document_id = uuid4().hex
    first = uploads.submit(document_id, "dock.md", b64(DOCK_MD))
    ids = set(collection.get()["ids"])
    again = uploads.submit(document_id, "dock.md", b64(DOCK_MD))
    assert again.status == "indexed"
    assert again.chunks == first.chunks
    assert again.chunks_written == 0
    assert set(collection.get()["ids"]) == ids


def test_the_same_file_uploaded_twice_is_two_documents(
    uploads: UploadService, collection: Collection
) -> None:
    first, second = uuid4().hex, uuid4().hex
    uploads.submit(first, "dock.md", b64(DOCK_MD))
    uploads.submit(second, "dock.md", b64(DOCK_MD))
    assert doc_ids(collection) == {first, second}
    uploads.delete(first)
    assert doc_ids(collection) == {second}


def test_delete_removes_every_chunk_and_the_stored_form_and_can_repeat(
    uploads: UploadService, collection: Collection, store: DocumentStore
) -> None:
    document_id = uuid4().hex
    indexed = uploads.submit(document_id, "dock.md", b64(DOCK_MD))
    deleted = uploads.delete(document_id)
    assert deleted.status == "deleted"
    assert deleted.detail == f"{indexed.chunks} chunks removed"
    assert collection.count() == 0
    assert store.get(document_id) is None
    assert uploads.delete(document_id).detail == "0 chunks removed"


def test_an_upload_redelivered_after_its_deletion_stays_deleted(
    uploads: UploadService, collection: Collection
) -> None:
    document_id = uuid4().hex
    uploads.submit(document_id, "dock.md", b64(DOCK_MD))
    uploads.delete(document_id)
    late = uploads.submit(document_id, "dock.md", b64(DOCK_MD))
    assert late.status == "deleted"
    assert collection.count() == 0


def test_a_pdf_upload_is_indexed_from_its_text_layer(
    uploads: UploadService, collection: Collection
) -> None:
    pdf = build_pdf(
        [[(18, "Docking station"), (11, "Connect the USB-C cable and press the power button.")]],
        title="Dock guide",
    )
    result = uploads.submit(uuid4().hex, "dock.pdf", b64(pdf))
    assert result.status == "indexed"
    metadatas = collection.get(include=["metadatas", "documents"])
    assert {meta["title"] for meta in metadatas["metadatas"] or []} == {"Dock guide"}
    assert any("USB-C cable" in text for text in metadatas["documents"] or [])


@pytest.mark.parametrize(
    ("filename", "content", "detail"),
    [
        ("locked.pdf", b64(b"%PDF-1.4 SECRET-CONTENT-1234 %%EOF"), "not a readable PDF"),
        ("scan.pdf", b64(build_pdf([[]], title="Scan")), "no text layer"),
        ("slides.pptx", b64(b"SECRET-CONTENT-1234"), "unsupported file type '.pptx'"),
        ("empty.md", b64(b"   \n\n"), "no text found"),
        ("note.md", "not base64!!", "not valid base64"),
        ("notes.txt", b64(b"\x89PNG\r\n\x1a\n\x00SECRET-CONTENT-1234\x00\x01" * 40), "binary data"),
    ],
)
def test_bad_files_fail_with_a_reason_that_quotes_nothing(
    uploads: UploadService,
    collection: Collection,
    store: DocumentStore,
    filename: str,
    content: str,
    detail: str,
) -> None:
    document_id = uuid4().hex
    result = uploads.submit(document_id, filename, content)
    assert result.status == "failed"
    assert result.chunks == 0
    assert result.detail is not None
    assert detail in result.detail
    assert "SECRET" not in result.detail
    assert collection.count() == 0
    assert store.get(document_id) is None


def test_folder_ingestion_records_what_it_indexed(
    ingestor: Ingestor, store: DocumentStore, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "dock.md").write_bytes(DOCK_MD)
    (kb / "manual.pdf").write_bytes(build_pdf([[(11, "Hold the reset key.")]]))
    (kb / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (kb / "photo.png").write_bytes(b"\x89PNG")

    report = ingest_and_record(ingestor, kb, store)

    assert report.files_indexed == 2
    assert sorted(skipped.path.name for skipped in report.skipped if skipped.path) == [
        "broken.pdf",
        "photo.png",
    ]
    assert {doc.doc_id for doc in report.documents} == store.doc_ids()
    raw = store.client.get(f"deskpilot:indexer:document:{report.documents[0].doc_id}")
    assert raw is not None
    assert store.client.ttl(f"deskpilot:indexer:document:{report.documents[0].doc_id}") == -1
    assert json.loads(raw)["version"] == 1


def test_a_restricted_upload_files_its_readers_and_keeps_them(
    uploads: UploadService, collection: Collection, store: DocumentStore
) -> None:
    document_id = uuid4().hex
    readers = Readers(public=False, users=("emp-1042",), groups=("hr-team", "it-staff"))
    result = uploads.submit(document_id, "dock.md", b64(DOCK_MD), readers)
    assert result.status == "indexed"
    metadatas = collection.get(include=["metadatas"])["metadatas"] or []
    assert {Readers.of(meta) for meta in metadatas} == {readers}
    assert {meta["readers_groups"] for meta in metadatas} == {"|hr-team|it-staff|"}
    # The stored form keeps them, so a re-index (from the store) files them again.
    stored = store.get(document_id)
    assert stored is not None
    assert stored.readers == readers
    # Redelivered: nothing written; the same file with other readers: rewritten with them.
    assert uploads.submit(document_id, "dock.md", b64(DOCK_MD), readers).chunks_written == 0
    assert uploads.submit(document_id, "dock.md", b64(DOCK_MD)).chunks_written == result.chunks
    metadatas = collection.get(include=["metadatas"])["metadatas"] or []
    assert {Readers.of(meta) for meta in metadatas} == {PUBLIC}
    assert store.get(document_id).readers is None  # type: ignore[union-attr]


def test_an_upload_event_with_unusable_readers_is_refused_not_widened() -> None:
    event = DocumentSubmitted(
        correlation_id="c",
        conversation_id="d",
        document_id="d",
        filename="dock.md",
        content_type="text/markdown",
        content_b64=b64(DOCK_MD),
        uploaded_by="admin",
        read_groups=["hr-team|it-staff"],
    )
    with pytest.raises(ValueError, match="not usable"):
        upload_readers(event)
    assert upload_readers(event.model_copy(update={"read_groups": []})) is None
