"""The Grafana dashboard (deploy/grafana/deskpilot.json) cannot drift from the code: each panel's
PromQL parses, names only metrics :mod:`contracts.metrics` exports, and every Deskpilot metric has
a panel. The deployments expose what it reads: every pod serves its metrics port, says so to
Prometheus, and admits Prometheus (only) to it; every compose container serves it on the internal
network.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from contracts import metrics
from tests.support.manifests import (
    COMPOSE,
    OUTSIDERS,
    SERVICES,
    Endpoint,
    config_data,
    connects,
    deskpilot_pods,
    load_compose,
    network_policies,
    of_kind,
    only_container,
)

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "deploy" / "grafana" / "deskpilot.json"
METRICS_PORT = 9464
PROMETHEUS = Endpoint(
    "prometheus", "10.244.9.4", "monitoring", (("app.kubernetes.io/name", "prometheus"),)
)

GRAFANA_RANGES = re.compile(r"\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval)\}")
"""Grafana's interval variables, which stand where PromQL wants a duration."""


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    """Every panel that draws something (rows hold none)."""
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in panels() for target in panel["targets"]]


def metric_names(expr: str) -> set[str]:
    """The metric each selector of ``expr`` reads; a selector without a name is an error."""
    parsed = promql_parser.parse(GRAFANA_RANGES.sub("5m", expr))
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr!r}"
            names.add(node.name)

    promql_parser.walk(parsed, pre_visit=visit)
    return names


def unknown_metrics(expr: str) -> set[str]:
    return metric_names(expr) - metrics.exported_names()


# -- the dashboard -----------------------------------------------------------------------------


def test_the_dashboard_is_a_grafana_dashboard_on_a_prometheus_variable() -> None:
    board = dashboard()
    assert board["uid"]
    assert board["title"]
    assert isinstance(board["schemaVersion"], int)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_query_parses_and_names_only_exported_metrics() -> None:
    assert queries(), "the dashboard has no queries"
    for title, expr in queries():
        assert not unknown_metrics(expr), f"{title}: {sorted(unknown_metrics(expr))} not exported"


def test_every_deskpilot_metric_has_a_panel() -> None:
    read = set().union(*(metric_names(expr) for _, expr in queries()))
    families = {
        name
        for name in metrics.exported_names()
        if name.startswith("deskpilot_") and not name.endswith("_created")
    }
    # A histogram needs only its buckets (quantiles) to be shown; the rest may be read too.
    shown = {
        name
        for name in families
        if name in read or re.sub(r"_(sum|count)$", "_bucket", name) in read
    }
    assert shown == families, f"no panel reads {sorted(families - shown)}"


def test_the_panels_the_operators_asked_for_are_there() -> None:
    by_title = {panel["title"]: " ".join(t["expr"] for t in panel["targets"]) for panel in panels()}
    assert "deskpilot_events_handled_total" in by_title["Events handled per second"]
    assert "histogram_quantile(0.5," in by_title["Handler latency p50"]
    assert "histogram_quantile(0.95," in by_title["Handler latency p95"]
    assert "deskpilot_handler_failures_total" in by_title["Handler failures per second"]
    assert "deskpilot_redeliveries_total" in by_title["Redeliveries per second"]
    assert "deskpilot_dead_letters_total" in by_title["Dead letters per minute"]
    assert "deskpilot_stream_lag" in by_title["Consumer-group lag"]
    assert "pages\\\\.crawled" in by_title["Crawled pages per second"]
    assert 'group="ocr"' in by_title["OCR time per attachment"]


def test_the_check_sees_a_metric_the_code_does_not_export() -> None:
    assert unknown_metrics("sum(rate(deskpilot_events_handled_total[$__rate_interval]))") == set()
    assert unknown_metrics("rate(deskpilot_pages_crawled_total[5m])") == {
        "deskpilot_pages_crawled_total"
    }
    assert unknown_metrics("deskpilot_events_handled") == {"deskpilot_events_handled"}
    with pytest.raises(AssertionError, match="without a metric name"):
        metric_names('{__name__="deskpilot_stream_lag"}')
    with pytest.raises(ValueError, match="parenthesis"):
        metric_names("sum(rate(deskpilot_events_handled_total[5m])")


# -- what serves it ----------------------------------------------------------------------------


def test_every_pod_serves_and_announces_its_metrics_port() -> None:
    assert config_data()["DESKPILOT_METRICS_PORT"] == str(METRICS_PORT)
    assert config_data()["DESKPILOT_METRICS_HOST"] == "0.0.0.0"
    deployments = of_kind("Deployment")
    assert set(deployments) == set(SERVICES)
    for name, workload in deployments.items():
        template = workload["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", name
        assert annotations["prometheus.io/port"] == str(METRICS_PORT), name
        assert annotations["prometheus.io/path"] == "/metrics", name
        ports = {p["name"]: p["containerPort"] for p in only_container(workload)["ports"]}
        assert ports["metrics"] == METRICS_PORT, name


def test_only_prometheus_reaches_the_metrics_ports() -> None:
    policies, pods = network_policies(), deskpilot_pods()
    services = {name: pod for name, pod in pods.items() if name not in {"redis", "chroma"}}
    assert len(services) == len(SERVICES)
    for name, pod in services.items():
        assert connects(policies, PROMETHEUS, pod, METRICS_PORT), name
        assert not connects(policies, PROMETHEUS, pod, 8000) or name == "gateway", name
        for outsider in OUTSIDERS.values():
            assert not connects(policies, outsider, pod, METRICS_PORT), (outsider.name, name)
        for other in services.values():
            if other is not pod:
                assert not connects(policies, other, pod, METRICS_PORT), (other.name, name)


def test_every_compose_service_serves_its_metrics_inside_the_host() -> None:
    services = load_compose(COMPOSE)["services"]
    for name in SERVICES:
        environment = services[name]["environment"]
        assert environment["DESKPILOT_METRICS_PORT"] == str(METRICS_PORT), name
        assert environment["DESKPILOT_METRICS_HOST"] == "0.0.0.0", name
        published = [str(port) for port in services[name].get("ports", [])]
        assert not any(str(METRICS_PORT) in port for port in published), name
