"""The bus's Prometheus metrics on a real valkey: handling an event counts it and times it, a
failing handler counts failures and redeliveries, dead letters count, the lag and pending entries
of a group show as XINFO GROUPS reports them, and a process serves all of it over HTTP in
Prometheus's text format on its metrics port (and nowhere when the port is 0).

Every test uses a service name of its own, so the process-wide counters start at nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from contracts import metrics
from contracts.bus import Bus, Delivery
from contracts.events import Event, new_id
from contracts.metrics import REGISTRY, serve_metrics
from contracts.runtime import Worker, no_resources
from contracts.settings import ServiceSettings
from contracts.topics import dead_letter_stream
from tests.support import free_port, unique_name, wait_until

TIMEOUT_S = 20.0


class Probe(Event):
    payload: str


class Strict(Event):
    """A model a :class:`Probe` does not validate as (no ``required`` field)."""

    required: int


def probe(payload: str = "x") -> Probe:
    return Probe(correlation_id=new_id(), conversation_id=new_id(), payload=payload)


def sample(name: str, **labels: str) -> float:
    """The current value of one sample; 0 when it has none yet."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def settings(redis_url: str) -> ServiceSettings:
    return ServiceSettings(
        redis_url=redis_url, reclaim_idle_ms=300, max_deliveries=3, graceful_timeout_s=5
    )


@pytest.fixture
async def buses(settings: ServiceSettings) -> AsyncIterator[Callable[..., Bus]]:
    made: list[Bus] = []

    def make(service: str, **overrides: Any) -> Bus:
        bus = Bus(settings.model_copy(update=overrides), service)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        await bus.stop()


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    async with aioredis.from_url(redis_url) as connection:
        yield connection


# -- what the bus counts -----------------------------------------------------------------------


async def test_handled_events_are_counted_and_timed(buses: Callable[..., Bus]) -> None:
    service, topic = unique_name("svc"), unique_name("topic")
    labels = {"service": service, "topic": topic, "group": service}
    bus = buses(service)

    async def handle(event: Probe, delivery: Delivery) -> None:
        await asyncio.sleep(0.06)

    bus.subscribe(topic, Probe, handle)
    await bus.start()
    for n in range(2):
        await bus.publish(topic, probe(str(n)))

    await wait_until(lambda: sample("deskpilot_events_handled_total", **labels) == 2, TIMEOUT_S)
    assert sample("deskpilot_events_published_total", service=service, topic=topic) == 2
    assert sample("deskpilot_handler_seconds_count", **labels) == 2
    assert sample("deskpilot_handler_seconds_sum", **labels) >= 0.12
    # Each call took longer than 50 ms and (on any machine these tests run on) less than 10 s.
    assert sample("deskpilot_handler_seconds_bucket", le="0.05", **labels) == 0
    assert sample("deskpilot_handler_seconds_bucket", le="10.0", **labels) == 2
    assert sample("deskpilot_handler_failures_total", **labels) == 0
    assert sample("deskpilot_redeliveries_total", **labels) == 0
    assert sample("deskpilot_dead_letters_total", **labels) == 0


async def test_a_failing_handler_counts_failures_redeliveries_and_its_dead_letter(
    buses: Callable[..., Bus], client: aioredis.Redis
) -> None:
    service, topic = unique_name("svc"), unique_name("topic")
    labels = {"service": service, "topic": topic, "group": service}
    bus = buses(service)

    async def fail(event: Probe, delivery: Delivery) -> None:
        raise RuntimeError("the backend is down")

    bus.subscribe(topic, Probe, fail)
    await bus.start()
    await bus.publish(topic, probe())

    # max_deliveries=3: the first delivery and two redeliveries fail, the third goes to the dlq.
    await wait_until(lambda: sample("deskpilot_dead_letters_total", **labels) == 1, TIMEOUT_S)
    assert await client.xlen(dead_letter_stream(topic)) == 1
    assert sample("deskpilot_handler_failures_total", **labels) == 3
    assert sample("deskpilot_redeliveries_total", **labels) == 2
    assert sample("deskpilot_handler_seconds_count", **labels) == 3
    assert sample("deskpilot_events_handled_total", **labels) == 0


async def test_an_event_that_is_not_valid_is_dead_lettered_and_counted(
    buses: Callable[..., Bus], client: aioredis.Redis
) -> None:
    service, topic = unique_name("svc"), unique_name("topic")
    labels = {"service": service, "topic": topic, "group": service}
    called: list[Strict] = []

    async def handle(event: Strict, delivery: Delivery) -> None:
        called.append(event)

    bus = buses(service)
    bus.subscribe(topic, Strict, handle)
    await bus.start()
    await bus.publish(topic, probe())

    await wait_until(lambda: sample("deskpilot_dead_letters_total", **labels) == 1, TIMEOUT_S)
    assert await client.xlen(dead_letter_stream(topic)) == 1
    assert called == []
    assert sample("deskpilot_handler_seconds_count", **labels) == 0


# -- consumer-group lag --------------------------------------------------------------------------


def lag_and_pending(labels: dict[str, str]) -> tuple[float | None, float | None]:
    """The group's lag and pending entries as a scrape reads them (None: not reported)."""
    return (
        REGISTRY.get_sample_value("deskpilot_stream_lag", labels),
        REGISTRY.get_sample_value("deskpilot_stream_pending", labels),
    )


async def test_lag_and_pending_of_a_group_show_what_xinfo_groups_reports(
    settings: ServiceSettings, buses: Callable[..., Bus], client: aioredis.Redis
) -> None:
    service, topic = unique_name("svc"), unique_name("topic")
    labels = {"service": service, "topic": topic, "group": service}
    release, started = asyncio.Event(), asyncio.Event()

    async def hold(event: Probe, delivery: Delivery) -> None:
        started.set()
        await release.wait()

    bus = Bus(settings, service)
    bus.subscribe(topic, Probe, hold, concurrency=1)
    await bus.start()
    try:
        producer = buses(unique_name("producer"))
        await producer.start()
        for n in range(4):
            await producer.publish(topic, probe(str(n)))
        await asyncio.wait_for(started.wait(), TIMEOUT_S)

        # One entry is with the handler (pending), three wait for a free consumer (lag).
        await wait_until(
            lambda: lag_and_pending(labels) == (3, 1),
            TIMEOUT_S,
            message=lambda: f"lag, pending: {lag_and_pending(labels)}",
        )
        (info,) = [g for g in await client.xinfo_groups(topic) if g["name"] == service.encode()]
        assert (info["lag"], info["pending"]) == (3, 1)

        release.set()
        await wait_until(
            lambda: lag_and_pending(labels) == (0, 0),
            TIMEOUT_S,
            message=lambda: f"lag, pending: {lag_and_pending(labels)}",
        )
    finally:
        release.set()
        await bus.stop()
    assert lag_and_pending(labels) == (None, None), "a stopped bus reports no lag"


@pytest.fixture
def user_without_xinfo(valkey_server: Any, redis_url: str) -> Iterator[str]:
    """The URL of a Redis user that may do anything but XINFO (as a service's ACL user today)."""
    name, password = unique_name("user"), new_id()
    admin = redis.Redis.from_url(redis_url)
    admin.acl_setuser(
        name, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all", "-xinfo"]
    )
    try:
        yield redis_url.replace("redis://", f"redis://{name}:{password}@", 1)
    finally:
        admin.acl_deluser(name)
        admin.close()


async def test_a_user_refused_xinfo_reports_no_lag_and_the_rest_is_still_served(
    settings: ServiceSettings, user_without_xinfo: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="deskpilot.metrics")
    service, topic = unique_name("svc"), unique_name("topic")
    bus = Bus(settings.model_copy(update={"redis_url": user_without_xinfo}), service)

    async def handle(event: Probe, delivery: Delivery) -> None:
        return None

    bus.subscribe(topic, Probe, handle)
    await bus.start()
    try:
        await bus.publish(topic, probe())
        labels = {"service": service, "topic": topic, "group": service}
        await wait_until(lambda: sample("deskpilot_events_handled_total", **labels) == 1)
        scraped = generate_latest(REGISTRY).decode()
        assert f'service="{service}"' in scraped  # its counters are served
        assert REGISTRY.get_sample_value("deskpilot_stream_lag", labels) is None
        assert "may not run XINFO GROUPS" in caplog.text
    finally:
        await bus.stop()


# -- serving -------------------------------------------------------------------------------------


def test_the_metrics_port_serves_the_text_format(settings: ServiceSettings) -> None:
    port = free_port()
    server = serve_metrics(settings.model_copy(update={"metrics_port": port}), "svc")
    assert server is not None
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        families = {f.name: f.type for f in text_string_to_metric_families(response.text)}
        assert families["deskpilot_events_handled"] == "counter"
        assert families["deskpilot_handler_seconds"] == "histogram"
        assert families["deskpilot_stream_lag"] == "gauge"
        assert "process_cpu_seconds" in families
    finally:
        server.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_port_zero_serves_nothing(settings: ServiceSettings) -> None:
    assert settings.metrics_port == 0, "metrics are off unless a port is set"
    assert serve_metrics(settings, "svc") is None


def test_a_port_in_use_is_logged_and_the_service_runs_on(
    settings: ServiceSettings, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.ERROR, logger="deskpilot.metrics"):
            server = serve_metrics(settings.model_copy(update={"metrics_port": port}), "svc")
    assert server is None
    assert "metrics not served" in caplog.text


async def test_a_worker_serves_its_metrics_while_it_runs(settings: ServiceSettings) -> None:
    port = free_port()
    service = unique_name("svc")
    worker = Worker(Bus(settings.model_copy(update={"metrics_port": port}), service), no_resources)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.serve(stop))
    url = f"http://127.0.0.1:{port}/metrics"

    async def scrape() -> httpx.Response | None:
        with contextlib.suppress(httpx.TransportError):
            async with httpx.AsyncClient() as http:
                return await http.get(url, timeout=5)
        return None

    try:
        response = await wait_until(scrape, TIMEOUT_S)
        assert response.status_code == 200
        families = {f.name for f in text_string_to_metric_families(response.text)}
        assert {"deskpilot_events_handled", "deskpilot_stream_lag"} <= families
    finally:
        stop.set()
        assert await asyncio.wait_for(running, TIMEOUT_S) == 0
    assert await scrape() is None, "the listener closes with the worker"


def test_every_metric_the_bus_records_is_exported() -> None:
    names = metrics.exported_names()
    for name in (
        "deskpilot_events_handled_total",
        "deskpilot_handler_failures_total",
        "deskpilot_handler_seconds_bucket",
        "deskpilot_redeliveries_total",
        "deskpilot_dead_letters_total",
        "deskpilot_events_published_total",
        "deskpilot_stream_lag",
        "deskpilot_stream_pending",
    ):
        assert name in names
    assert "deskpilot_events_handled" not in names  # a counter's samples end in _total
