"""Fixtures for the command line's tests: a real Redis, and the command parsers."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from deploy.cli import cases, ingest, reindex


@pytest.fixture
def fresh_redis(fresh_redis_url: str) -> str:
    """An empty database of the test's own (the commands' keys have fixed names)."""
    return fresh_redis_url


@pytest.fixture
def parse() -> Callable[[list[str]], argparse.Namespace]:
    """Parse a ``deskpilot`` command line made of the sub-commands under test."""
    parser = argparse.ArgumentParser(prog="deskpilot")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (cases, ingest, reindex):
        module.add_parser(commands)
    return parser.parse_args


@pytest.fixture(autouse=True)
def no_configured_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands must find Redis and Chroma from their arguments only, not the caller's env."""
    for name in ("REDIS_URL", "CHROMA_HOST", "DESKPILOT_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
