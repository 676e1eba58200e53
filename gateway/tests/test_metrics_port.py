"""The gateway's metrics: served on its own metrics port (DESKPILOT_METRICS_PORT), never on the
public app, whatever credential a caller shows there."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.tests.conftest import admin
from tests.support import free_port


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture
def metrics_client(
    make_settings: Callable[..., GatewaySettings], metrics_port: int
) -> Iterator[TestClient]:
    settings = make_settings(metrics_port=metrics_port)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_the_public_app_serves_no_metrics(metrics_client: TestClient) -> None:
    assert metrics_client.get("/metrics").status_code == 404
    assert metrics_client.get("/metrics", headers=admin()).status_code == 404


def test_the_metrics_port_serves_the_gateways_metrics(
    metrics_client: TestClient, metrics_port: int
) -> None:
    response = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
    assert response.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    # The gateway reads its own reply stream: its group's lag is reported, labelled gateway.
    lag = [s for s in families["deskpilot_stream_lag"].samples if s.labels["group"] == "gateway"]
    assert lag, "no lag of the gateway's groups"
    assert all(s.labels["service"] == "gateway" for s in lag)
