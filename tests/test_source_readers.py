"""A synced page that changes is never shown twice, nor missing, by the orchestrator's retrieval.

The indexer's source sync (the Confluence emulator, real Chroma, the real embedder) replaces a
page while the orchestrator's :class:`~orchestrator.retrieval.Retriever`, reading the published
generations from valkey (``contracts.live``), answers the page's question. Every answer holds
chunks of exactly one version of the page.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import redis
from chromadb.api.models.Collection import Collection

from contracts.live import LiveReader
from indexer.config import IndexerSettings
from indexer.embedding import Embedder
from indexer.service import Ingestor
from indexer.sources.config import ConfluenceConfig
from indexer.sources.confluence import ConfluenceSource
from indexer.sources.state import SyncState
from indexer.sources.sync import SourceSync, source_doc_id
from indexer.store import open_collection
from orchestrator.retrieval import Retrieval, Retriever
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence

QUESTION = "how do I reset the GlobalProtect VPN client"


def page(version: int) -> str:
    return (
        f"<h1>VPN</h1><p>Connect to the company VPN with the GlobalProtect client (revision "
        f"{version}) before you open internal sites.</p><h2>Reset</h2><p>If GlobalProtect says "
        f"your credentials expired, reset your password in portal {version} first.</p>"
    )


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(batch_size=8)


@pytest.fixture
def collection(tmp_path: Path) -> Collection:
    return open_collection(
        IndexerSettings(
            data_dir=tmp_path / "data",
            chroma_host=None,
            chroma_collection=f"test-{uuid.uuid4().hex[:12]}",
        )
    )


@pytest.fixture
def client(fresh_redis: redis.Redis) -> redis.Redis:
    return fresh_redis


class Wiki:
    """The emulator with one page, and a sync of it into ``collection``."""

    def __init__(
        self, fake: FakeConfluence, embedder: Embedder, collection: Collection, client: redis.Redis
    ) -> None:
        self.fake = fake
        self.page = fake.add_page("IT", "VPN", page(0)).id
        self.doc_id = source_doc_id("wiki", self.page)
        settings = IndexerSettings(chroma_host=None)
        self.ingestor = Ingestor(embedder, collection, settings)
        self.client = client
        self.collection = collection
        self.config = ConfluenceConfig(
            name="wiki",
            base_url=fake.base_url,  # type: ignore[arg-type]
            spaces=("IT",),
            email=EMAIL,
            api_token=TOKEN,  # type: ignore[arg-type]
        )

    def sync(self) -> None:
        source = ConfluenceSource(self.config)
        try:
            result = SourceSync(source, self.ingestor, SyncState(self.client, "wiki")).run()
        finally:
            source.close()
        assert result.error is None

    def edit(self, version: int) -> None:
        self.fake.edit_page(self.page, body=page(version))

    def generations(self, retrieval: Retrieval) -> set[str]:
        """The generations of this page's chunks among the retrieval's hits and best document."""
        ids = list(dict.fromkeys(h.chunk_id for h in [*retrieval.hits, *retrieval.best_document]))
        stored = self.collection.get(ids=ids, include=["metadatas"])
        return {
            str(meta["generation"])
            for meta in stored["metadatas"] or []
            if meta.get("doc_id") == self.doc_id
        }


@pytest.fixture
def wiki(embedder: Embedder, collection: Collection, client: redis.Redis) -> Iterator[Wiki]:
    with FakeConfluence({"IT": "Information Technology"}) as fake:
        yield Wiki(fake, embedder, collection, client)


def test_answers_never_mix_two_versions_of_a_page_being_replaced(
    wiki: Wiki, embedder: Embedder, client: redis.Redis
) -> None:
    wiki.sync()
    retriever = Retriever(embedder, wiki.collection, live=LiveReader(client))
    seen: list[set[str]] = []
    done = threading.Event()

    def ask() -> None:
        while not done.is_set():
            seen.append(wiki.generations(retriever.retrieve(QUESTION, 4)))

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        for version in range(1, 4):
            wiki.edit(version)
            wiki.sync()
    finally:
        done.set()
        asker.join()
    assert len(seen) > 3
    assert all(len(generations) == 1 for generations in seen), seen
    # Without the generation check the replaced versions (kept for their grace period) show.
    unchecked = wiki.generations(Retriever(embedder, wiki.collection).retrieve(QUESTION, 8))
    assert len(unchecked) > 1


class SwitchDuringRead(LiveReader):
    """A live reader under which the page is replaced right after the retrieval's search, before
    it reads the generations: the worst moment."""

    def __init__(self, client: redis.Redis, wiki: Wiki) -> None:
        super().__init__(client)
        self.wiki = wiki
        self.reads = 0

    def read(self, doc_ids: Sequence[str]) -> tuple[int, dict[str, str | None]]:
        self.reads += 1
        if self.reads == 1:
            self.wiki.edit(9)
            self.wiki.sync()
        return super().read(doc_ids)


def test_a_switch_during_a_retrieval_makes_it_search_again(
    wiki: Wiki, embedder: Embedder, client: redis.Redis
) -> None:
    wiki.sync()
    live = SwitchDuringRead(client, wiki)
    retrieval = Retriever(embedder, wiki.collection, live=live).retrieve(QUESTION, 4)
    assert live.reads >= 2
    published = client.hget("deskpilot:sources:live", wiki.doc_id)
    assert published is not None
    assert wiki.generations(retrieval) == {published.decode()}
    assert any("portal 9" in hit.text for hit in retrieval.hits + retrieval.best_document)
