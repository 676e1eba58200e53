"""An embedder that counts what it embeds, for the source tests and the sync benchmark: an
unchanged document must cost no embedding at all, and this is how they see it."""

from __future__ import annotations

from collections.abc import Sequence

from indexer.embedding import Embedder


class CountingEmbedder(Embedder):
    """Another embedder's loaded model (shared, not loaded again), counting the texts it embeds."""

    def __init__(self, embedder: Embedder) -> None:
        self.__dict__.update(embedder.__dict__)
        self.texts = 0

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return super().encode(texts)
