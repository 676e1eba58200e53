"""The Chroma collection that holds knowledge-base chunks.

Two deployments, one code path: a Chroma server when ``CHROMA_HOST`` is set (production, several
indexer replicas), else a persistent client in ``<data dir>/chroma`` (the embedded default).

The collection never has an embedding function. Chroma's default one downloads an ONNX model on
first use, which would break the offline guarantee, so every write and every query must pass
embeddings computed with :class:`indexer.embedding.Embedder`.
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING

import chromadb
from chromadb.api.collection_configuration import CreateCollectionConfiguration
from chromadb.config import Settings as ChromaSettings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from contracts.settings import ServiceSettings

logger = logging.getLogger(__name__)


def open_client(settings: ServiceSettings) -> ClientAPI:
    """A Chroma client for the configured deployment, with telemetry off (no outbound calls)."""
    chroma_settings = ChromaSettings(
        anonymized_telemetry=False, **settings.chroma_client_settings()
    )
    if settings.chroma_host:
        return chromadb.HttpClient(
            host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
        )
    path = settings.data_dir / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


def open_collection(settings: ServiceSettings) -> Collection:
    """Get or create the knowledge-base collection with cosine distance and no embedding function.

    The space is passed as ``configuration={"hnsw": {"space": "cosine"}}``, not as the legacy
    ``metadata={"hnsw:space": "cosine"}``: in chromadb 1.x the legacy form makes Chroma persist its
    *default* embedding function in the collection's schema, and any later ``query_texts`` or
    ``add(documents=...)`` without embeddings (from any process) would then try to download a model.
    With the configuration form and ``embedding_function=None`` such calls fail fast instead.
    """
    configuration: CreateCollectionConfiguration = {"hnsw": {"space": "cosine"}}
    collection = open_client(settings).get_or_create_collection(
        settings.chroma_collection,
        configuration=configuration,
        embedding_function=None,
    )
    # An existing collection keeps the configuration it was created with; say so if another
    # process created it differently, because distances then are not cosine distances.
    with warnings.catch_warnings():
        # Chroma calls a collection without an embedding function a "legacy embedding function
        # config" and warns on every read; having none is exactly what we want.
        warnings.filterwarnings("ignore", "legacy embedding function config", DeprecationWarning)
        hnsw = collection.configuration.get("hnsw") or {}
    space = hnsw.get("space")
    if space is not None and space != "cosine":
        logger.warning(
            "Chroma collection %r uses the %r space, not cosine; recreate it to fix distances",
            settings.chroma_collection,
            space,
        )
    return collection
