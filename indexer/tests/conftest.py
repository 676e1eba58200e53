"""Fixtures for the indexer's tests.

The embedding model takes seconds to load, so one :class:`Embedder` serves the whole session, as
one serves the whole process in the service. The demo articles, which ship with Deskpilot, are
embedded through the test run's vector cache (``run_vector_cache``), as the service seeds them.
Every test gets its own data directory and a fresh collection name in a real persistent Chroma
client, so tests never see each other's chunks.
Tests of the document store get a database of their own on the session's ``valkey-server``.
The source tests get a local Confluence and Microsoft Graph (``confluence``, ``graph``) and a
database of their own for the sync state (``client``); their helpers are in ``synced_sources.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from chromadb.api.models.Collection import Collection

from indexer.config import IndexerSettings
from indexer.documents import DocumentStore
from indexer.embedding import Embedder
from indexer.service import Ingestor
from indexer.store import open_collection
from indexer.tests.counting import CountingEmbedder
from tests.support import vector_cache_dir
from tests.support.fake_confluence import FakeConfluence
from tests.support.fake_graph import FakeGraph


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return Embedder(batch_size=8)


@pytest.fixture(scope="session")
def run_vector_cache() -> Path:
    """The vector cache every stack of this test run uses, so the demo articles are embedded once
    a run (:func:`tests.support.vector_cache_dir`)."""
    return vector_cache_dir()


@pytest.fixture
def settings(tmp_path: Path) -> IndexerSettings:
    """Settings pinned to an embedded Chroma in ``tmp_path``, whatever the environment says."""
    return IndexerSettings(
        data_dir=tmp_path / "data",
        chroma_host=None,
        chroma_collection=f"test-{uuid.uuid4().hex[:12]}",
        chunk_max_tokens=128,
        chunk_min_tokens=32,
        chunk_overlap_tokens=16,
    )


@pytest.fixture
def collection(settings: IndexerSettings) -> Collection:
    return open_collection(settings)


@pytest.fixture
def ingestor(embedder: Embedder, collection: Collection, settings: IndexerSettings) -> Ingestor:
    return Ingestor(embedder, collection, settings)


@pytest.fixture
def counting(embedder: Embedder) -> CountingEmbedder:
    """The session's embedder, counting what it embeds: what is unchanged costs nothing."""
    return CountingEmbedder(embedder)


@pytest.fixture
def counted_ingestor(
    counting: CountingEmbedder, collection: Collection, settings: IndexerSettings
) -> Ingestor:
    """An ingestor embedding through :func:`counting`."""
    return Ingestor(counting, collection, settings)


# -- Redis, for the document store ------------------------------------------------------------


@pytest.fixture
def store(fresh_redis_url: str) -> Iterator[DocumentStore]:
    """An empty document store, in a database of the test's own (its keys have fixed names)."""
    document_store = DocumentStore.from_url(fresh_redis_url)
    try:
        yield document_store
    finally:
        document_store.close()


# -- the sources' outside systems and sync state -------------------------------------------------


@pytest.fixture
def confluence() -> Iterator[FakeConfluence]:
    """A local Confluence with an IT and an HR space (``tests/support/fake_confluence.py``)."""
    with FakeConfluence({"IT": "Information Technology", "HR": "People"}) as fake:
        yield fake


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[FakeGraph]:
    """A local Microsoft Graph and identity platform (``tests/support/fake_graph.py``)."""
    with FakeGraph(tmp_path) as fake:
        yield fake


@pytest.fixture
def client(fresh_redis: redis.Redis) -> redis.Redis:
    """A synchronous client of the test's own database, where a source keeps its sync state (a
    module that needs an asynchronous one defines its own ``client``)."""
    return fresh_redis
