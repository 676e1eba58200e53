"""Every service of the embedded stack serves its Prometheus metrics on a port of its own, and a
turn shows on them the way the dashboard (deploy/grafana/deskpilot.json) reads it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from deploy.runner import Stack
from tests.support import wait_until_sync
from tests.support.stack import ask

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]

WORKERS = ("redactor", "ocr", "orchestrator", "indexer", "ticketing")


def scrape(url: str) -> dict[str, Any]:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, url
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def value(families: dict[str, Any], sample: str, **labels: str) -> float:
    """The sum of the samples named ``sample`` whose labels include ``labels``."""
    return sum(
        s.value
        for family in families.values()
        for s in family.samples
        if s.name == sample and labels.items() <= s.labels.items()
    )


def test_each_process_serves_its_metrics_on_a_loopback_port_of_its_own(stack: Stack) -> None:
    assert set(stack.metrics) >= {"gateway", *WORKERS}
    ports = [url.rsplit(":", 1)[1] for url in stack.metrics.values()]
    assert len(set(ports)) == len(ports), stack.metrics
    for child, url in stack.metrics.items():
        assert url.startswith("http://127.0.0.1:"), url
        service = child.split("-")[0]
        lag = scrape(url)["deskpilot_stream_lag"].samples
        assert lag, f"{child} reports no group"
        assert {s.labels["service"] for s in lag} == {service}, child


def test_a_turn_is_counted_where_the_dashboard_reads_it(stack: Stack) -> None:
    gateway, redactor, orchestrator = (
        stack.metrics[name] for name in ("gateway", "redactor", "orchestrator")
    )
    before = value(scrape(orchestrator), "deskpilot_events_handled_total", topic="query.received")

    response = ask(stack, "How do I connect to the office VPN?")
    assert response.status_code == 200, response.text

    published = value(scrape(gateway), "deskpilot_events_published_total", topic="message.received")
    assert published >= 1
    # A handler is counted once it returns, just before its entry is acknowledged: the answer
    # can reach the user a moment before that.
    wait_until_sync(
        lambda: (
            value(scrape(redactor), "deskpilot_events_handled_total", topic="message.received") >= 1
        ),
        30,
    )
    wait_until_sync(
        lambda: (
            value(scrape(orchestrator), "deskpilot_events_handled_total", topic="query.received")
            > before
        ),
        30,
    )
    timed = value(scrape(orchestrator), "deskpilot_handler_seconds_count", topic="query.received")
    assert timed > before
