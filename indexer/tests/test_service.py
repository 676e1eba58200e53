"""Ingestion against a real embedded Chroma: metadata, idempotence, no orphans, search."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chromadb.api.models.Collection import Collection

from indexer.chunking import ChunkingConfig, SemanticChunker, chunk_document
from indexer.config import IndexerSettings
from indexer.embedding import Embedder, seed_embedder
from indexer.extract import extract_document
from indexer.service import Ingestor, chunk_id, demo_kb_path
from indexer.store import open_collection

VPN_MD = """---
title: Reset your VPN password
url: https://it.example.com/kb/vpn-password
category: connectivity
os: any
---

Your VPN password is separate from your laptop password. It expires every 180 days, and an expired
password makes the VPN client answer every attempt with "Authentication failed".

## Reset it yourself

1. Open the self-service portal in a browser; it works without the VPN.
2. Sign in with your username and normal account password.
3. Approve the MFA request on your phone.
4. Choose Change VPN password and type a new password of at least 14 characters.

## When to contact the service desk

Call extension 4357 if the portal says your VPN access is disabled.
"""

PRINTER_HTML = """<html><head><title>Printers</title>
<link rel="canonical" href="https://it.example.com/kb/add-printer"></head>
<body><nav>Home | KB</nav><main>
<h1>Add a network printer</h1>
<p>Every floor has a shared laser printer named after the floor, such as FLOOR3-PRINT.</p>
<h2>On Windows</h2>
<ol><li>Open Settings and choose Printers and scanners.</li>
<li>Click Add device and pick the printer for your floor.</li>
<li>Print a test page to check that the driver was installed.</li></ol>
</main><footer>Copyright</footer></body></html>
"""

WIFI_TXT = """Guest Wi-Fi for visitors

Visitors connect to the NW-Guest network. Reception prints a voucher code that is valid for one day.

1. Ask reception for a voucher.
2. Join NW-Guest and enter the voucher code in the page that opens.
"""

WEBCAM_MD = """# Fix a webcam that shows a black image

Close every other app that might use the camera, such as Teams or Zoom, then try again.
If the image is still black, check the privacy shutter on the laptop lid and slide it open.
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    """A small knowledge base: three formats, a subfolder, an unsupported and a hidden file."""
    root = tmp_path / "kb"
    _write(root / "vpn-password.md", VPN_MD)
    _write(root / "hardware" / "add-printer.html", PRINTER_HTML)
    _write(root / "hardware" / "webcam.md", WEBCAM_MD)
    _write(root / "guest-wifi.txt", WIFI_TXT)
    _write(root / "scan.png", "\x89PNG not really")
    _write(root / ".git" / "config", "[core]")
    _write(root / ".DS_Store", "junk")
    return root


def _all(collection: Collection) -> dict[str, dict[str, object]]:
    result = collection.get(include=["metadatas", "documents"])
    metadatas = result["metadatas"] or []
    documents = result["documents"] or []
    return {
        id_: {**dict(meta), "document": doc}
        for id_, meta, doc in zip(result["ids"], metadatas, documents, strict=True)
    }


def _expected_ids(path: Path, settings: IndexerSettings) -> set[str]:
    doc = extract_document(path)
    chunks = chunk_document(
        doc, SemanticChunker(Embedder(), ChunkingConfig.from_settings(settings))
    )
    return {chunk_id(doc.doc_id, chunk) for chunk in chunks}


def test_ingesting_a_folder_indexes_supported_files_and_reports_the_rest(
    ingestor: Ingestor, collection: Collection, kb: Path
) -> None:
    report = ingestor.ingest_path(kb)

    assert report.files_seen == 5  # hidden files and folders are not even looked at
    assert report.files_indexed == 4
    assert report.files_unchanged == 0
    assert report.files_skipped == 1
    assert [skipped.path for skipped in report.skipped] == [kb / "scan.png"]
    assert "unsupported" in report.skipped[0].reason
    assert report.chunks_written == collection.count() > 4
    assert report.chunks_deleted == 0
    assert report.seconds > 0
    assert {outcome.status for outcome in report.documents} == {"indexed"}


def test_ingesting_one_file(ingestor: Ingestor, collection: Collection, kb: Path) -> None:
    report = ingestor.ingest_path(kb / "vpn-password.md")

    assert (report.files_seen, report.files_indexed) == (1, 1)
    assert report.documents[0].url == "https://it.example.com/kb/vpn-password"
    assert collection.count() == report.chunks_written


def test_every_chunk_carries_its_metadata(
    ingestor: Ingestor, collection: Collection, kb: Path, settings: IndexerSettings
) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    ingestor.ingest_path(kb)
    vpn = extract_document(kb / "vpn-password.md")
    records = _all(collection)

    vpn_records = [r for r in records.values() if r["doc_id"] == vpn.doc_id]
    assert vpn.doc_id == hashlib.sha256(b"https://it.example.com/kb/vpn-password").hexdigest()
    assert sorted(int(str(r["chunk_index"])) for r in vpn_records) == list(range(len(vpn_records)))
    sections = {r["section"] for r in vpn_records}
    assert "Reset your VPN password > Reset it yourself" in sections
    for record in vpn_records:
        assert record["url"] == "https://it.example.com/kb/vpn-password"
        assert record["title"] == "Reset your VPN password"
        assert record["category"] == "connectivity"
        assert record["os"] == "any"
        assert record["content_hash"] == vpn.content_hash
        indexed_at = datetime.fromisoformat(str(record["indexed_at"]))
        assert indexed_at.utcoffset() is not None
        assert indexed_at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
        assert indexed_at >= before
        # The stored document is the display body, without the section heading line.
        assert not str(record["document"]).startswith("Reset your VPN password")
    assert set(records) >= _expected_ids(kb / "vpn-password.md", settings)
    steps = next(r for r in vpn_records if "1. Open the self-service portal" in str(r["document"]))
    assert "4. Choose Change VPN password" in str(steps["document"])  # steps stay together

    webcam = [r for r in records.values() if r["title"] == "Fix a webcam that shows a black image"]
    assert webcam
    assert all(r["category"] == "" and r["os"] == "" for r in webcam)  # no front matter
    assert all(str(r["url"]).startswith("file://") for r in webcam)


def test_reingesting_unchanged_files_writes_nothing(
    ingestor: Ingestor, collection: Collection, kb: Path
) -> None:
    ingestor.ingest_path(kb)
    before = _all(collection)

    again = ingestor.ingest_path(kb)

    assert again.chunks_written == 0
    assert again.chunks_deleted == 0
    assert again.files_indexed == 0
    assert again.files_unchanged == 4
    assert {outcome.status for outcome in again.documents} == {"unchanged"}
    assert _all(collection) == before  # same ids, same indexed_at: nothing was rewritten


def test_editing_a_file_replaces_its_chunks_and_leaves_no_orphans(
    ingestor: Ingestor, collection: Collection, kb: Path, settings: IndexerSettings
) -> None:
    ingestor.ingest_path(kb)
    vpn_path = kb / "vpn-password.md"
    doc_id = extract_document(vpn_path).doc_id
    old_ids = set(collection.get(where={"doc_id": doc_id})["ids"])
    others_before = {
        id_: record for id_, record in _all(collection).items() if record["doc_id"] != doc_id
    }

    edited = VPN_MD.replace("every 180 days", "every 90 days").split("## When to contact")[0]
    _write(vpn_path, edited)
    report = ingestor.ingest_path(kb)

    new_ids = set(collection.get(where={"doc_id": doc_id})["ids"])
    assert report.files_indexed == 1
    assert report.files_unchanged == 3
    assert new_ids == _expected_ids(vpn_path, settings)
    assert report.chunks_written == len(new_ids)
    assert report.chunks_deleted == len(old_ids - new_ids) > 0
    stored_texts = " ".join(str(r["document"]) for r in _all(collection).values())
    assert "every 90 days" in stored_texts
    assert "every 180 days" not in stored_texts
    assert "extension 4357" not in stored_texts  # the removed section left no orphan chunk
    others_after = {
        id_: record for id_, record in _all(collection).items() if record["doc_id"] != doc_id
    }
    assert others_after == others_before


def test_a_half_written_document_is_repaired_on_the_next_ingest(
    ingestor: Ingestor, collection: Collection, kb: Path
) -> None:
    ingestor.ingest_path(kb)
    doc_id = extract_document(kb / "vpn-password.md").doc_id
    ids = sorted(collection.get(where={"doc_id": doc_id})["ids"])
    collection.delete(ids=ids[:1])  # as if the process died half-way through a write

    report = ingestor.ingest_path(kb / "vpn-password.md")

    assert report.files_indexed == 1
    assert sorted(collection.get(where={"doc_id": doc_id})["ids"]) == ids


def test_emptied_file_loses_its_chunks(
    ingestor: Ingestor, collection: Collection, kb: Path
) -> None:
    path = kb / "hardware" / "webcam.md"
    ingestor.ingest_path(path)
    doc_id = extract_document(path).doc_id
    stored = len(collection.get(where={"doc_id": doc_id})["ids"])

    _write(path, "")
    report = ingestor.ingest_path(path)

    assert report.files_skipped == 1
    assert report.skipped[0].reason == "no text to index"
    assert report.chunks_deleted == stored > 0
    assert collection.get(where={"doc_id": doc_id})["ids"] == []


def test_chunk_ids_are_deterministic(
    embedder: Embedder, settings: IndexerSettings, kb: Path, tmp_path: Path
) -> None:
    other_settings = settings.model_copy(update={"data_dir": tmp_path / "other-data"})
    first, second = open_collection(settings), open_collection(other_settings)

    Ingestor(embedder, first, settings).ingest_path(kb)
    Ingestor(embedder, second, other_settings).ingest_path(kb)

    assert set(first.get()["ids"]) == set(second.get()["ids"])
    doc = extract_document(kb / "vpn-password.md")
    chunks = chunk_document(doc, SemanticChunker(embedder, ChunkingConfig.from_settings(settings)))
    assert chunk_id(doc.doc_id, chunks[0]) == chunk_id(doc.doc_id, chunks[0])
    assert chunk_id(doc.doc_id, chunks[0]) != chunk_id(doc.doc_id, chunks[1])
    assert chunk_id(doc.doc_id, chunks[0]) != chunk_id("0" * 64, chunks[0])


def test_missing_path_is_an_error(ingestor: Ingestor, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ingestor.ingest_path(tmp_path / "nope")


@pytest.fixture(scope="module")
def searchable_kb(embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Collection:
    """The fixture knowledge base ingested once for all query tests."""
    root = tmp_path_factory.mktemp("searchable")
    for name, text in {
        "vpn-password.md": VPN_MD,
        "add-printer.html": PRINTER_HTML,
        "guest-wifi.txt": WIFI_TXT,
        "webcam.md": WEBCAM_MD,
    }.items():
        _write(root / "kb" / name, text)
    settings = IndexerSettings(
        data_dir=root / "data", chroma_host=None, chroma_collection="searchable-kb"
    )
    collection = open_collection(settings)
    Ingestor(embedder, collection, settings).ingest_path(root / "kb")
    return collection


@pytest.mark.parametrize(
    ("query", "expected_title"),
    [
        ("VPN says authentication failed, how do I change my password", "Reset your VPN password"),
        ("how do I install the printer on my floor", "Add a network printer"),
        ("a visitor needs internet access", "guest-wifi"),  # plain text: titled by file name
        ("camera picture is all black in Teams", "Fix a webcam that shows a black image"),
    ],
)
def test_a_query_finds_the_right_document(
    searchable_kb: Collection, embedder: Embedder, query: str, expected_title: str
) -> None:
    result = searchable_kb.query(query_embeddings=embedder.encode([query]), n_results=1)

    assert result["metadatas"] is not None
    assert result["metadatas"][0][0]["title"] == expected_title


def test_demo_knowledge_base_is_packaged_with_front_matter(
    embedder: Embedder, collection: Collection, settings: IndexerSettings, run_vector_cache: Path
) -> None:
    """Seeded as the service seeds it (indexer.app): its chunking, its vectors through the vector
    cache (the test run's, where a stack may have embedded the articles already)."""
    folder = demo_kb_path()
    articles = sorted(folder.glob("*.md"))
    assert folder.name == "demo_kb"
    assert articles, f"no demo articles in {folder}"
    seeding = IndexerSettings(
        data_dir=settings.data_dir, chroma_host=None, chroma_collection=settings.chroma_collection
    )
    seeder = Ingestor(seed_embedder(embedder, run_vector_cache), collection, seeding)

    report = seeder.ingest_path(folder)

    assert report.files_skipped == 0
    assert report.files_indexed == len(articles)
    for outcome in report.documents:
        assert outcome.url.startswith("https://"), f"{outcome.path} lacks a front-matter url"
    metadatas = collection.get(include=["metadatas"])["metadatas"] or []
    assert all(meta["category"] for meta in metadatas)
