"""Prometheus metrics of every Deskpilot process, measured in the bus so services need no code of
their own.

:class:`contracts.bus.Bus` counts what it does for a handler, labelled ``service`` (the process's
service), ``topic`` (the stream) and ``group`` (the consumer group that read it):

* ``deskpilot_events_handled_total``: handler calls that returned (the entry was then acked);
* ``deskpilot_handler_failures_total``: handler calls that raised (retried after
  ``reclaim_idle_ms``, dead-lettered after ``max_deliveries``);
* ``deskpilot_handler_seconds``: how long handler calls took, returned or raised (a histogram);
* ``deskpilot_redeliveries_total``: deliveries of an entry delivered before (its consumer died, or
  its handler failed, and a reclaimer claimed it);
* ``deskpilot_dead_letters_total``: entries moved to ``<topic>.dlq``;
* ``deskpilot_events_published_total`` (``service``, ``topic``): events appended to a stream.

What the services measure follows from these: crawled pages are the crawler's events published
on ``pages.crawled``, OCR time is the handler time of the ``ocr`` group.

Each process also reports, at the moment it is scraped, ``deskpilot_stream_lag`` and
``deskpilot_stream_pending`` of the groups it reads: the ``lag`` and ``pending`` that
``XINFO GROUPS`` returns, the numbers KEDA's ``redis-streams`` scaler compares with ``lagCount``
and ``pendingEntriesCount`` (deploy/k8s/keda.yaml). Every replica of a service reports the same
value for its group: read them with ``max by (topic, group)``.

A process serves all of this on ``DESKPILOT_METRICS_PORT`` (:func:`serve_metrics`; 0, the
default, serves none), never on the gateway's public port.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

import redis
from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import NoPermissionError, RedisError, ResponseError

from contracts.settings import ServiceSettings

log = logging.getLogger("deskpilot.metrics")

REGISTRY = CollectorRegistry()
"""Everything a Deskpilot process exports: the bus's metrics, stream lag, and the process's own
(CPU, memory, open files, garbage collection) from prometheus-client's collectors."""
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

HANDLER_LABELS = ("service", "topic", "group")

HANDLER_SECONDS_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
"""From a redis write (milliseconds) to a screenshot read by OCR or a crawl request (seconds to
minutes): the buckets a p50 and p95 are interpolated between."""

EVENTS_HANDLED = Counter(
    "deskpilot_events_handled",
    "Handler calls that returned; the stream entry was then acknowledged.",
    HANDLER_LABELS,
    registry=REGISTRY,
)
HANDLER_FAILURES = Counter(
    "deskpilot_handler_failures",
    "Handler calls that raised; the entry is delivered again after the reclaim idle time, or "
    "dead-lettered after the maximum number of deliveries.",
    HANDLER_LABELS,
    registry=REGISTRY,
)
HANDLER_SECONDS = Histogram(
    "deskpilot_handler_seconds",
    "How long handler calls took, whether they returned or raised.",
    HANDLER_LABELS,
    buckets=HANDLER_SECONDS_BUCKETS,
    registry=REGISTRY,
)
REDELIVERIES = Counter(
    "deskpilot_redeliveries",
    "Deliveries of a stream entry that was delivered before (claimed after its consumer died "
    "or its handler failed).",
    HANDLER_LABELS,
    registry=REGISTRY,
)
DEAD_LETTERS = Counter(
    "deskpilot_dead_letters",
    "Stream entries moved to <topic>.dlq (failed too often, invalid, or not openable).",
    HANDLER_LABELS,
    registry=REGISTRY,
)
EVENTS_PUBLISHED = Counter(
    "deskpilot_events_published",
    "Events appended to a stream.",
    ("service", "topic"),
    registry=REGISTRY,
)

STREAM_LAG = "deskpilot_stream_lag"
STREAM_PENDING = "deskpilot_stream_pending"


@contextlib.contextmanager
def handling(service: str, topic: str, group: str) -> Iterator[None]:
    """Time one handler call and count it as handled or failed (an exception passes through)."""
    started = time.perf_counter()
    try:
        yield
    except Exception:
        HANDLER_SECONDS.labels(service, topic, group).observe(time.perf_counter() - started)
        HANDLER_FAILURES.labels(service, topic, group).inc()
        raise
    HANDLER_SECONDS.labels(service, topic, group).observe(time.perf_counter() - started)
    EVENTS_HANDLED.labels(service, topic, group).inc()


# -- consumer-group lag, read when scraped -----------------------------------------------------


@dataclass(frozen=True)
class GroupState:
    """One consumer group on one stream, as ``XINFO GROUPS`` reports it."""

    topic: str
    group: str
    lag: int | None
    """Entries no consumer of the group has read yet; None when Redis cannot tell (entries were
    deleted between the group's last read and the stream's end)."""
    pending: int
    """Entries read and not acknowledged (the group's pending entries list)."""


def read_groups(client: redis.Redis, pairs: Sequence[tuple[str, str]]) -> list[GroupState]:
    """The state of each ``(topic, group)`` in one round trip; a stream or group that does not
    exist yet is left out. Raises :class:`NoPermissionError` when the Redis user may not run
    ``XINFO GROUPS`` on one of the streams, :class:`RedisError` when Redis cannot be reached."""
    topics = sorted({topic for topic, _ in pairs})
    pipe = client.pipeline(transaction=False)
    for topic in topics:
        pipe.xinfo_groups(topic)
    replies = dict(zip(topics, pipe.execute(raise_on_error=False), strict=True))
    states = []
    for topic, group in pairs:
        reply = replies[topic]
        if isinstance(reply, NoPermissionError):
            raise reply
        if isinstance(reply, ResponseError):
            continue  # no such stream yet: nothing to report
        for info in reply:
            name = info["name"]
            if (name.decode() if isinstance(name, bytes) else name) != group:
                continue
            lag = info.get("lag")
            pending = int(info["pending"])
            states.append(GroupState(topic, group, None if lag is None else int(lag), pending))
    return states


@dataclass
class _Watched:
    service: str
    client: redis.Redis
    pairs: tuple[tuple[str, str], ...]
    refused: bool = False


class StreamLagCollector(Collector):
    """``deskpilot_stream_lag`` and ``deskpilot_stream_pending`` of the groups each started bus of
    this process reads, read from Redis when Prometheus scrapes (on the scrape's thread, with a
    client of its own, so a busy event loop does not delay it)."""

    def __init__(self) -> None:
        self._watched: dict[int, _Watched] = {}
        self._lock = threading.Lock()
        self._handles = itertools.count(1)

    def watch(self, service: str, redis_url: str, pairs: Iterable[tuple[str, str]]) -> int:
        """Report ``pairs`` (topic, group) for ``service`` from now on; returns a handle for
        :meth:`unwatch`."""
        client = redis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        watched = _Watched(service, client, tuple(sorted(set(pairs))))
        with self._lock:
            handle = next(self._handles)
            self._watched[handle] = watched
        return handle

    def unwatch(self, handle: int) -> None:
        with self._lock:
            watched = self._watched.pop(handle, None)
        if watched is not None:
            watched.client.close()

    def collect(self) -> Iterator[Metric]:
        labels = list(HANDLER_LABELS)
        lag = GaugeMetricFamily(
            STREAM_LAG,
            "Entries of the stream no consumer of the group has read yet (XINFO GROUPS lag, "
            "what KEDA's lagCount is compared with).",
            labels=labels,
        )
        pending = GaugeMetricFamily(
            STREAM_PENDING,
            "Entries the group's consumers read and have not acknowledged yet (XINFO GROUPS "
            "pending, what KEDA's pendingEntriesCount is compared with).",
            labels=labels,
        )
        with self._lock:
            watched = list(self._watched.values())
        for each in watched:
            for state in self._read(each):
                values = [each.service, state.topic, state.group]
                if state.lag is not None:
                    lag.add_metric(values, state.lag)
                pending.add_metric(values, state.pending)
        yield lag
        yield pending

    @staticmethod
    def _read(watched: _Watched) -> list[GroupState]:
        # A scrape that fails on Redis would lose every other metric with it: report no lag.
        try:
            return read_groups(watched.client, watched.pairs)
        except NoPermissionError:
            if not watched.refused:
                watched.refused = True
                log.warning(
                    "stream lag not reported: this service's Redis user may not run XINFO GROUPS",
                    extra={"service": watched.service},
                )
        except RedisError as exc:
            log.warning("stream lag not read", extra={"error": type(exc).__name__})
        return []


LAG = StreamLagCollector()
REGISTRY.register(LAG)


# -- serving ---------------------------------------------------------------------------------


@dataclass
class MetricsServer:
    """The HTTP listener that serves :data:`REGISTRY` (any path, Prometheus's text format)."""

    host: str
    port: int
    _server: WSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving (blocks up to half a second: the listener's poll interval)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve_metrics(settings: ServiceSettings, service: str) -> MetricsServer | None:
    """Serve this process's metrics on ``DESKPILOT_METRICS_PORT`` (None when it is 0).

    A port that cannot be bound is logged as an error and the service runs on without metrics:
    Prometheus then shows the target down, and no event waits for a metrics listener.
    """
    if not settings.metrics_port:
        return None
    host, port = settings.metrics_host, settings.metrics_port
    try:
        server, thread = start_http_server(port, host, registry=REGISTRY)
    except OSError as exc:
        log.error(
            "metrics not served: cannot listen",
            extra={"service": service, "address": f"{host}:{port}", "error": str(exc)},
        )
        return None
    served = MetricsServer(host, port, server, thread)
    log.info("metrics served", extra={"service": service, "url": served.url})
    return served


def exported_names(registry: CollectorRegistry = REGISTRY) -> frozenset[str]:
    """Every sample name ``registry`` can export (a counter's ``_total``, a histogram's
    ``_bucket``, ``_sum`` and ``_count``, ...), whether or not it has a sample yet: what a
    dashboard's queries may name."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    return frozenset(
        f"{metric.name}{suffix}"
        for metric in registry.collect()
        for suffix in suffixes.get(metric.type, ("",))
    )
