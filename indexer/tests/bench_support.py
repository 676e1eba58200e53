"""What the indexer's benchmarks share: a fresh valkey-server and embedded Chroma collection in
a temporary directory, and the machine's load, printed with the figures (figures on a shared
machine are upper bounds)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis
from chromadb.api.models.Collection import Collection

from conftest import start_valkey
from indexer.config import IndexerSettings
from indexer.store import open_collection


@contextlib.contextmanager
def bench_store(name: str) -> Iterator[tuple[redis.Redis, Collection, IndexerSettings]]:
    """A client of a fresh ``valkey-server`` (AOF on, as the tests start it), the embedded Chroma
    collection ``name`` and the indexer settings pinned to it, all removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"deskpilot-{name}-") as data:
        (Path(data) / "valkey").mkdir()
        server = start_valkey(Path(data) / "valkey")
        client = redis.Redis.from_url(f"{server.connection_url}/0")
        try:
            settings = IndexerSettings(
                data_dir=Path(data) / "indexer", chroma_host=None, chroma_collection=name
            )
            yield client, open_collection(settings), settings
        finally:
            client.close()
            server.stop()


def load_average() -> list[float]:
    """The machine's load averages over 1, 5 and 15 minutes."""
    return [round(load, 2) for load in os.getloadavg()]


def reported(
    figures: dict[str, Any],
    report: Callable[[dict[str, Any]], None],
    problems: Callable[[dict[str, Any]], list[str]],
) -> dict[str, Any]:
    """``figures`` printed by ``report``; exits with status 1, saying why, when ``problems``
    finds the counts wrong."""
    report(figures)
    if found := problems(figures):
        print("\n".join(f"WRONG: {problem}" for problem in found), file=sys.stderr)
        raise SystemExit(1)
    return figures
