"""The sources as the tests configure them against the local Confluence and Microsoft Graph
(``tests/support/fake_confluence.py``, ``fake_graph.py``), and what a reader sees of a synced
document: for the source tests and the SharePoint benchmark."""

from __future__ import annotations

from typing import Any

import redis
from chromadb.api.models.Collection import Collection

from contracts.live import read_live, visible
from indexer.service import Ingestor
from indexer.sources.config import ConfluenceConfig, SharePointConfig
from indexer.sources.sharepoint import SharePointSource
from indexer.sources.state import SyncState
from indexer.sources.sync import SourceSync, SyncResult, source_doc_id
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, HOST, SITE_PATH, TENANT, FakeGraph


def confluence_config(fake: FakeConfluence, **overrides: Any) -> ConfluenceConfig:
    """The ``wiki`` source on the local Confluence's IT and HR spaces, two pages a request and
    two retries; ``overrides`` replace any field."""
    values: dict[str, Any] = {
        "name": "wiki",
        "base_url": fake.base_url,
        "spaces": ("IT", "HR"),
        "email": EMAIL,
        "api_token": TOKEN,
        "page_size": 2,
        "max_retries": 2,
        **overrides,
    }
    return ConfluenceConfig.model_validate(values)


def chunks_of(
    collection: Collection,
    page_id: str,
    client: redis.Redis | None = None,
    source: str = "wiki",
) -> dict[str, list[Any]]:
    """The document's chunks a reader sees (the published generation only), or with ``client``
    None, every chunk stored."""
    doc_id = source_doc_id(source, page_id)
    live = read_live(client, [doc_id]) if client is not None else None
    stored = collection.get(where={"doc_id": doc_id}, include=["metadatas", "documents"])
    rows = zip(stored["ids"], stored["documents"] or [], stored["metadatas"] or [], strict=True)
    kept = [row for row in rows if live is None or visible([row[2]], live)[0]]
    return {
        "ids": [row[0] for row in kept],
        "documents": [row[1] for row in kept],
        "metadatas": [row[2] for row in kept],
    }


def sharepoint_config(graph: FakeGraph, **overrides: Any) -> SharePointConfig:
    """The ``intranet`` source on the local Graph's site, two retries; ``overrides`` replace any
    field."""
    values: dict[str, Any] = {
        "name": "intranet",
        "tenant_id": TENANT,
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "site": f"{HOST}:{SITE_PATH}",
        "graph_url": graph.graph_url,
        "authority_host": graph.origin,
        "ca_bundle": graph.ca_bundle,
        "max_retries": 2,
        **overrides,
    }
    return SharePointConfig.model_validate(values)


VPN_MD = b"# VPN\n\nConnect with GlobalProtect to vpn.example.com before internal sites.\n"


class Syncer:
    """One source object across runs (its msal token cache lives as long as it does)."""

    def __init__(self, graph: FakeGraph, ingestor: Ingestor, client: redis.Redis, **kw: Any):
        self.source = SharePointSource(sharepoint_config(graph, **kw))
        self.ingestor, self.client = ingestor, client

    def close(self) -> None:
        self.source.close()

    def run(self) -> SyncResult:
        return SourceSync(self.source, self.ingestor, SyncState(self.client, "intranet")).run()


def library_files(graph: FakeGraph, drive: str, *names: str) -> list[str]:
    """Markdown files added to the local Graph's library ``drive``: their item ids."""
    return [
        graph.add_file(name, f"# {name}\n\nHow to use {name} at the office.\n".encode(), drive).id
        for name in names
    ]


def visible_ids(collection: Collection, client: redis.Redis, key: str) -> list[str]:
    """Ids of the chunks a reader sees of a document of the ``intranet`` source."""
    return chunks_of(collection, key, client, source="intranet")["ids"]
