"""Retrieval: nearest knowledge-base chunks for a question, from Chroma."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from contracts.settings import ServiceSettings


class Encoder(Protocol):
    def encode(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with what a citation needs."""

    chunk_id: str
    text: str
    url: str
    title: str
    section: str
    score: float
    """Cosine similarity in [-1, 1]; higher is closer."""
    chunk_index: int = 0


@dataclass(frozen=True)
class Retrieval:
    """The nearest chunks overall, and every chunk of the best document, both best first."""

    hits: list[Hit]
    best_document: list[Hit]


def open_collection(settings: ServiceSettings) -> Any:
    """The knowledge-base collection on the configured Chroma (server, or local directory).

    Same creation arguments as the indexer's: cosine space given as ``configuration`` and no
    embedding function, because Chroma's default function (also attached by the legacy
    ``hnsw:space`` metadata form) downloads a model. Queries always pass embeddings.
    """
    import chromadb
    from chromadb.config import Settings

    chroma_settings = Settings(anonymized_telemetry=False)
    if settings.chroma_host:
        client = chromadb.HttpClient(
            host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
        )
    else:
        client = chromadb.PersistentClient(
            path=str(settings.data_dir / "chroma"), settings=chroma_settings
        )
    return client.get_or_create_collection(
        settings.chroma_collection,
        configuration={"hnsw": {"space": "cosine"}},
        embedding_function=None,
    )


class Retriever:
    def __init__(self, encoder: Encoder, collection: Any) -> None:
        self.encoder = encoder
        self.collection = collection

    def retrieve(self, question: str, k: int, document_chunks: int = 12) -> Retrieval:
        """The ``k`` chunks closest to ``question``, and the best document's own chunks.

        The best document's chunks let the answer quote its steps even when another of its
        sections (say, "when to contact the service desk") happened to match the words best.
        """
        if self.collection.count() == 0:
            return Retrieval([], [])
        vector = self.encoder.encode([question])[0]
        hits = self._query(vector, k)
        if not hits:
            return Retrieval([], [])
        best_document = self._query(vector, document_chunks, where={"url": hits[0].url})
        return Retrieval(hits, best_document)

    def search(self, question: str, k: int) -> list[Hit]:
        """The ``k`` chunks closest to ``question``, best first."""
        return self.retrieve(question, k, document_chunks=0).hits if k else []

    def _query(self, vector: list[float], k: int, where: dict[str, str] | None = None) -> list[Hit]:
        if k <= 0:
            return []
        result = self.collection.query(
            query_embeddings=[vector],
            n_results=k,
            where=where,
            include=["documents", "metadatas", "distances"],
        )
        hits = []
        for chunk_id, text, meta, distance in zip(
            result["ids"][0],
            result["documents"][0],
            result["metadatas"][0],
            result["distances"][0],
            strict=True,
        ):
            meta = meta or {}
            hits.append(
                Hit(
                    chunk_id=chunk_id,
                    text=text or "",
                    url=str(meta.get("url", "")),
                    title=str(meta.get("title", "")),
                    section=str(meta.get("section", "")),
                    score=1.0 - float(distance),
                    chunk_index=int(meta.get("chunk_index", 0) or 0),
                )
            )
        return hits

    def ping(self) -> bool:
        self.collection.count()
        return True
