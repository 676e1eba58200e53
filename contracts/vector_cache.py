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

Processes starting together share the work instead of each embedding everything (an indexer and
its new replica, or every stack a test run starts at once): a process claims the missing texts a
batch at a time (:data:`CLAIM_BATCH`, a row per text in the file's ``claims`` table), embeds and
keeps its batch, and claims the next; texts another process has claimed it waits for and reads.
A claim whose owner died (its pid is gone on this host) or that is older than
:data:`CLAIM_STALE_S` is taken over, so a process killed while embedding holds nobody up.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path

import numpy as np

log = logging.getLogger("deskpilot.vector_cache")

_QUERY_BATCH = 500  # SQLite's default limit on bound parameters is 999

CLAIM_BATCH = 32
"""Missing texts a process claims and embeds at a time: small enough that processes starting
together share the work, large enough that the model embeds in efficient batches."""

CLAIM_STALE_S = 120.0
"""A claim this old is taken over: its owner hung, or died on another host."""

_WAIT_S = 0.05
"""How often a process whose texts others are embedding looks for their vectors."""


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
        self._host = socket.gethostname()
        self._owner = f"{self._host}:{os.getpid()}"

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self._model}\0{text}".encode()).hexdigest()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )
        connection.execute(
            "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL,"
            " since REAL NOT NULL)"
        )
        return connection

    def encode(
        self, texts: Sequence[str], compute: Callable[[list[str]], list[list[float]]]
    ) -> list[list[float]]:
        """One vector per text, in order: read from the cache where it has them, the rest from
        ``compute`` and then kept. ``compute`` is called once per claimed batch (at most
        :data:`CLAIM_BATCH` texts), each missing text once across every process sharing the
        cache, unless a claim goes stale."""
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
            found = _read(connection, list(dict.fromkeys(keys)))
            pending = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
            while pending:
                mine = self._claim(connection, pending)
                if mine:
                    try:
                        vectors = compute([pending[key] for key in mine])
                    except BaseException:
                        self._release(connection, mine)
                        raise
                    computed = dict(zip(mine, vectors, strict=True))
                    self._keep(connection, computed)
                    found.update(computed)
                    for key in mine:
                        del pending[key]
                else:  # every text left is being embedded by another process
                    time.sleep(_WAIT_S)
                kept = _read(connection, list(pending))
                found.update(kept)
                for key in kept:
                    del pending[key]
            return [list(found[key]) for key in keys]
        finally:
            connection.close()

    def _claim(self, connection: sqlite3.Connection, pending: dict[str, str]) -> list[str]:
        """Claim up to :data:`CLAIM_BATCH` of ``pending``'s keys that have no vector and no live
        claim (in one write transaction, so two processes never claim the same key)."""
        now = time.time()
        with connection:
            connection.execute("BEGIN IMMEDIATE")
            held: set[str] = set()
            keys = list(pending)
            for start in range(0, len(keys), _QUERY_BATCH):
                batch = keys[start : start + _QUERY_BATCH]
                marks = ",".join("?" * len(batch))
                # Only "?" placeholders are formatted into the statements; the keys are bound.
                claims = f"SELECT key, owner, since FROM claims WHERE key IN ({marks})"  # noqa: S608 # nosec B608
                for key, owner, since in connection.execute(claims, batch):
                    if self._live(owner, since, now):
                        held.add(key)
                done = f"SELECT key FROM vectors WHERE key IN ({marks})"  # noqa: S608 # nosec B608
                held.update(key for (key,) in connection.execute(done, batch))
            mine = [key for key in keys if key not in held][:CLAIM_BATCH]
            connection.executemany(
                "INSERT OR REPLACE INTO claims (key, owner, since) VALUES (?, ?, ?)",
                [(key, self._owner, now) for key in mine],
            )
        return mine

    def _live(self, owner: str, since: float, now: float) -> bool:
        """Whether a claim still stands: its owner's own, or another's that is recent and whose
        process (on this host) is still running."""
        if owner == self._owner:
            return False  # left by this process's earlier call that failed: take it again
        if now - since > CLAIM_STALE_S:
            return False
        host, _, pid = owner.rpartition(":")
        if host == self._host and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
        return True

    def _release(self, connection: sqlite3.Connection, keys: list[str]) -> None:
        """Drop this process's claims on ``keys`` (its model failed), so others need not wait."""
        with connection:
            connection.executemany(
                "DELETE FROM claims WHERE key = ? AND owner = ?",
                [(key, self._owner) for key in keys],
            )

    def _keep(self, connection: sqlite3.Connection, computed: dict[str, list[float]]) -> None:
        """Store ``computed`` and drop this process's claims on those keys, together."""
        with connection:
            connection.executemany(
                "INSERT OR IGNORE INTO vectors (key, vector) VALUES (?, ?)",
                [
                    (key, np.asarray(vector, dtype=np.float32).tobytes())
                    for key, vector in computed.items()
                ],
            )
            connection.executemany(
                "DELETE FROM claims WHERE key = ? AND owner = ?",
                [(key, self._owner) for key in computed],
            )


def _read(connection: sqlite3.Connection, keys: list[str]) -> dict[str, list[float]]:
    """The stored vectors of ``keys`` (those it has)."""
    found: dict[str, list[float]] = {}
    for start in range(0, len(keys), _QUERY_BATCH):
        batch = keys[start : start + _QUERY_BATCH]
        marks = ",".join("?" * len(batch))
        # Only "?" placeholders are formatted into the statement; the keys are bound.
        query = f"SELECT key, vector FROM vectors WHERE key IN ({marks})"  # noqa: S608 # nosec B608
        for key, blob in connection.execute(query, batch):
            found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
    return found
