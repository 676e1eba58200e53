"""Vectors of texts that ship with Deskpilot, kept on disk so that a process starting again does
not embed them again.

The orchestrator trains its intent classifier on a thousand example questions and the indexer
seeds the demo knowledge base; each embeds the same texts with the same packaged model every time
it starts (about ten seconds of CPU each, on two cores). With ``DESKPILOT_EMBEDDING_CACHE_DIR``
set, their vectors are kept in one SQLite file per model in that directory, shared by every
process that points at it: a restarted service or a new replica reads them instead. ``deskpilot
up`` keeps the cache in its data directory.

Only texts that come with Deskpilot go through it (the callers decide): never what a user wrote,
an uploaded document or a crawled page, which must be gone when they are deleted or purged.

A vector read back is bit for bit the one the model gave (float32, as the model computes it), so
a cached start classifies and ranks exactly like an uncached one. Keys are SHA-256 digests of the
model's identity and the text. When the file cannot be read or written (a full disk, a read-only
volume), the texts are embedded as if there were no cache and a warning is logged once.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path

import numpy as np

log = logging.getLogger("deskpilot.vector_cache")

_QUERY_BATCH = 500  # SQLite's default limit on bound parameters is 999


def model_identity(distribution: str, *, normalised: bool = True) -> str:
    """The identity of a packaged embedding model for cache keys: its distribution and version
    (a new release of the weights is a new model), and whether vectors are unit length."""
    return f"{distribution}=={version(distribution)};normalised={normalised}"


class VectorCache:
    """``encode(texts, compute)``: the cached vectors of ``texts``, computing only the missing."""

    def __init__(self, directory: Path, model: str) -> None:
        self._model = model
        name = hashlib.sha256(model.encode()).hexdigest()[:16]
        self.path = directory / f"vectors-{name}.sqlite3"
        self._lock = threading.Lock()
        self._broken = False

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self._model}\0{text}".encode()).hexdigest()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )
        return connection

    def encode(
        self, texts: Sequence[str], compute: Callable[[list[str]], list[list[float]]]
    ) -> list[list[float]]:
        """One vector per text, in order: read from the cache where it has them, the rest from
        ``compute`` (called once, with each missing text once) and then kept."""
        if not texts:
            return []
        if self._broken:
            return compute(list(texts))
        keys = [self._key(text) for text in texts]
        try:
            with self._lock:
                return self._encode(list(texts), keys, compute)
        except (sqlite3.Error, OSError) as error:
            self._broken = True
            log.warning(
                "embedding cache unusable, embedding without it",
                extra={"path": str(self.path), "error": str(error)},
            )
            return compute(list(texts))

    def _encode(
        self,
        texts: list[str],
        keys: list[str],
        compute: Callable[[list[str]], list[list[float]]],
    ) -> list[list[float]]:
        connection = self._connect()
        try:
            found: dict[str, list[float]] = {}
            unique = list(dict.fromkeys(keys))
            for start in range(0, len(unique), _QUERY_BATCH):
                batch = unique[start : start + _QUERY_BATCH]
                marks = ",".join("?" * len(batch))
                # Only "?" placeholders are formatted into the statement; the keys are bound.
                query = f"SELECT key, vector FROM vectors WHERE key IN ({marks})"  # noqa: S608 # nosec B608
                rows = connection.execute(query, batch)
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
            missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
            if missing:
                vectors = compute(list(missing.values()))
                computed = dict(zip(missing, vectors, strict=True))
                with connection:
                    connection.executemany(
                        "INSERT OR IGNORE INTO vectors (key, vector) VALUES (?, ?)",
                        [
                            (key, np.asarray(vector, dtype=np.float32).tobytes())
                            for key, vector in computed.items()
                        ],
                    )
                found.update(computed)
            return [list(found[key]) for key in keys]
        finally:
            connection.close()
