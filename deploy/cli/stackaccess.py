"""Where the data of the stack a command works on lives: its Chroma and its Redis.

Commands that change the knowledge base from outside the services (``ingest``, ``reindex``,
``cases import``) must write where the services read: when a stack runs on the data directory
(``deskpilot up`` publishes its addresses in ``runtime.json``), its Chroma server and its Redis;
otherwise the configured ones (``CHROMA_HOST``, ``REDIS_URL``) or the persistent Chroma directory
in the data directory.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from indexer.config import IndexerSettings


def add_data_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where Redis's AOF, Chroma and logs live "
        "(default: $DESKPILOT_DATA_DIR or ~/.deskpilot)",
    )


def add_redis_url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--redis-url",
        default=None,
        help="Redis holding the document store (default: the running stack's, else $REDIS_URL)",
    )


@dataclass(frozen=True)
class Target:
    settings: IndexerSettings
    """Indexer settings pointing at the running stack's Chroma server, when one runs."""
    redis_url: str | None
    """None when no stack runs on the data dir and no Redis was configured."""
    running: bool


def locate(data_dir: Path | None, redis_url: str | None = None) -> Target:
    """The Chroma and Redis to use for ``data_dir`` (see the module docstring)."""
    from deploy.runner import RunnerSettings, read_runtime
    from indexer.config import IndexerSettings

    overrides: dict[str, Any] = {"data_dir": data_dir} if data_dir else {}
    settings = IndexerSettings(**overrides)
    runtime = read_runtime(RunnerSettings(**overrides).data_dir.expanduser().resolve())
    if not settings.chroma_host and runtime:
        # A stack runs on this data dir: write through its Chroma server, never beside it.
        settings = settings.model_copy(
            update={"chroma_host": runtime["chroma_host"], "chroma_port": runtime["chroma_port"]}
        )
    if redis_url is None and runtime:
        redis_url = str(runtime["redis_url"])
    if redis_url is None and "redis_url" in settings.model_fields_set:
        redis_url = settings.redis_url
    return Target(settings=settings, redis_url=redis_url, running=runtime is not None)
