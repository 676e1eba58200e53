"""Re-indexing rebuilds the collection from the document store, on real Chroma and Redis."""

from __future__ import annotations

import base64
from pathlib import Path
from uuid import uuid4

import pytest
from chromadb.api.models.Collection import Collection

from indexer.config import IndexerSettings
from indexer.documents import DocumentStore, ingest_and_record
from indexer.embedding import Embedder
from indexer.reindex import EmptyStore, indexed_doc_ids, reindex
from indexer.service import Ingestor
from indexer.uploads import UploadService

ARTICLE = """# {title}

{title} is explained here in a few sentences so that the chunker has something to cut. The
first paragraph says what it is for and who may use it at Northwind Labs.

1. Open the {title} page on the intranet.
2. Sign in with your Northwind account and confirm with your authenticator app.
3. Follow the wizard until it says the request was sent.

If the wizard stops with an error, write down the error text and contact the service desk, who
will check your account and the {title} configuration for you.
"""


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    folder.mkdir()
    for name in ("Printer access", "Guest Wi-Fi"):
        (folder / f"{name.lower().replace(' ', '-')}.md").write_text(ARTICLE.format(title=name))
    return folder


def snapshot(collection: Collection) -> dict[str, str]:
    """Chunk id -> content hash of everything in the collection."""
    result = collection.get(include=["metadatas"])
    metas = result["metadatas"] or []
    return {id_: str(meta["content_hash"]) for id_, meta in zip(result["ids"], metas, strict=True)}


def wipe(collection: Collection) -> None:
    ids = collection.get()["ids"]
    if ids:
        collection.delete(ids=ids)


def test_a_lost_collection_is_rebuilt_as_it_was(
    ingestor: Ingestor, collection: Collection, store: DocumentStore, kb: Path
) -> None:
    ingest_and_record(ingestor, kb, store)
    upload_id = uuid4().hex
    UploadService(ingestor, collection, store).submit(
        upload_id, "dock.md", base64.b64encode(ARTICLE.format(title="Docking").encode()).decode()
    )
    before = snapshot(collection)
    wipe(collection)

    report = reindex(ingestor, collection, store)

    assert snapshot(collection) == before
    assert report.documents == report.indexed == 3
    assert report.chunks_written == len(before)
    assert report.orphans_removed == 0
    assert upload_id in indexed_doc_ids(collection)


def test_unchanged_documents_are_not_embedded_again_unless_forced(
    ingestor: Ingestor, collection: Collection, store: DocumentStore, kb: Path
) -> None:
    ingest_and_record(ingestor, kb, store)
    before = snapshot(collection)

    quiet = reindex(ingestor, collection, store)
    assert (quiet.unchanged, quiet.indexed, quiet.chunks_written) == (2, 0, 0)

    forced = reindex(ingestor, collection, store, force=True)
    assert forced.indexed == 2
    assert forced.chunks_written == forced.chunks_deleted == len(before)
    assert snapshot(collection) == before


def test_new_chunking_settings_rechunk_everything_without_orphans(
    embedder: Embedder,
    collection: Collection,
    settings: IndexerSettings,
    store: DocumentStore,
    kb: Path,
) -> None:
    ingest_and_record(Ingestor(embedder, collection, settings), kb, store)
    before = set(snapshot(collection))
    smaller = settings.model_copy(update={"chunk_max_tokens": 40, "chunk_min_tokens": 8})

    report = reindex(Ingestor(embedder, collection, smaller), collection, store)

    after = set(snapshot(collection))
    assert report.indexed == 2
    assert after.isdisjoint(before)  # every old chunk was replaced, none left behind
    assert len(after) > len(before)


def test_documents_no_longer_stored_lose_their_chunks(
    ingestor: Ingestor, collection: Collection, store: DocumentStore, kb: Path, tmp_path: Path
) -> None:
    ingest_and_record(ingestor, kb, store)
    unrecorded = tmp_path / "unrecorded"
    unrecorded.mkdir()
    (unrecorded / "old.md").write_text(ARTICLE.format(title="Old article"))
    orphan = ingestor.ingest_path(unrecorded).documents[0].doc_id
    assert orphan in indexed_doc_ids(collection)

    kept = reindex(ingestor, collection, store, remove_orphans=False)
    assert kept.orphans_kept == 1
    assert orphan in indexed_doc_ids(collection)

    removed = reindex(ingestor, collection, store)
    assert removed.orphans_removed == 1
    assert indexed_doc_ids(collection) == store.doc_ids()


def test_an_empty_store_does_not_empty_the_collection(
    ingestor: Ingestor, collection: Collection, store: DocumentStore, kb: Path
) -> None:
    ingestor.ingest_path(kb)  # indexed, never recorded
    count = collection.count()
    with pytest.raises(EmptyStore):
        reindex(ingestor, collection, store)
    assert collection.count() == count
    assert reindex(ingestor, collection, store, remove_orphans=False).orphans_kept == 2
