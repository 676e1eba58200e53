"""The deployment files as the tests read them: the Kubernetes manifests rendered as kustomize
would render them, what their NetworkPolicies let through, and compose.yaml."""

from __future__ import annotations

import copy
import functools
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support import REPO_ROOT

K8S = REPO_ROOT / "deploy" / "k8s"
STORES = K8S / "stores"
APP_NAMESPACE = "deskpilot"
"""The namespace the manifests deploy Deskpilot into."""
PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"
"""Addresses on the internet, outside every private range."""
COMPOSE = REPO_ROOT / "compose.yaml"
SERVICES = ("gateway", "redactor", "ocr", "orchestrator", "indexer", "crawler", "ticketing")
"""The deployable services of this repository; each is a top-level package and a pip extra."""


def load_documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of ``path``, a copy the caller may change: the file is parsed once for
    each version of it (the manifest tests read the same files hundreds of times)."""
    return copy.deepcopy(_parsed(path, path.stat().st_mtime_ns))


@functools.cache
def _parsed(path: Path, _version: int) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    documents = [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None]
    for document in documents:
        assert isinstance(document, dict), f"{path}: a document is not a mapping"
    return documents


def kustomization(folder: Path) -> dict[str, Any]:
    (document,) = load_documents(folder / "kustomization.yaml")
    return document


def resources(folder: Path = K8S) -> list[dict[str, Any]]:
    """Every object the kustomization in ``folder`` applies (sub-kustomizations excluded)."""
    objects = []
    for name in kustomization(folder)["resources"]:
        objects.extend(load_documents(folder / name))
    return objects


def of_kind(kind: str, objects: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """The objects of ``kind`` (of the main kustomization by default) by name."""
    found = [o for o in (resources() if objects is None else objects) if o["kind"] == kind]
    by_name = {o["metadata"]["name"]: o for o in found}
    assert len(by_name) == len(found), f"two {kind}s share a name"
    return by_name


def only_container(workload: dict[str, Any]) -> dict[str, Any]:
    """The workload's container; it must have just one."""
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: one container expected"
    container: dict[str, Any] = containers[0]
    return container


def config_data() -> dict[str, str]:
    """The settings every service reads from the ``deskpilot-config`` ConfigMap."""
    data: dict[str, str] = of_kind("ConfigMap")["deskpilot-config"]["data"]
    return data


def workloads() -> Iterator[dict[str, Any]]:
    yield from of_kind("Deployment").values()
    yield from of_kind("StatefulSet", resources(STORES)).values()


@dataclass(frozen=True)
class Endpoint:
    """A pod (labels, namespace, named ports) or an address outside the cluster."""

    name: str
    ip: str
    namespace: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    ports: tuple[tuple[str, int], ...] = ()

    @property
    def is_pod(self) -> bool:
        return self.namespace is not None


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels and matchExpressions) matches ``labels``."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        ok = {
            "In": present and labels.get(key) in (values or []),
            "NotIn": not present or labels.get(key) not in (values or []),
            "Exists": present,
            "DoesNotExist": not present,
        }[operator]
        if not ok:
            return False
    return True


def peer_matches(peer: dict[str, Any], other: Endpoint) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        address = ipaddress.ip_address(other.ip)
        network = ipaddress.ip_network(block["cidr"])
        if address.version != network.version or address not in network:
            return False
        return not any(
            address in ipaddress.ip_network(cidr)
            for cidr in block.get("except", [])
            if ipaddress.ip_network(cidr).version == address.version
        )
    if not other.is_pod:
        return False
    if "namespaceSelector" in peer:
        namespace_labels = {"kubernetes.io/metadata.name": str(other.namespace)}
        if not selects(peer["namespaceSelector"], namespace_labels):
            return False
    elif other.namespace != APP_NAMESPACE:
        return False
    return selects(peer.get("podSelector", {}), dict(other.labels))


def port_matches(rule: dict[str, Any], port: int, protocol: str, target: Endpoint) -> bool:
    if not rule.get("ports"):
        return True
    for entry in rule["ports"]:
        if entry.get("protocol", "TCP") != protocol:
            continue
        wanted = entry.get("port")
        if wanted is None or wanted == port or dict(target.ports).get(str(wanted)) == port:
            return True
    return False


def allowed_by(
    policies: list[dict[str, Any]],
    direction: str,
    pod: Endpoint,
    other: Endpoint,
    port: int,
    protocol: str,
    target: Endpoint,
) -> bool:
    """Kubernetes' rule: a pod no policy of this direction selects is open; otherwise a
    connection needs one rule of one selecting policy that matches the peer and the port."""
    if not pod.is_pod or pod.namespace != APP_NAMESPACE:
        return True  # outside the namespace these policies live in
    kind, peers = ("Ingress", "from") if direction == "ingress" else ("Egress", "to")
    selecting = [
        p
        for p in policies
        if kind in p["spec"].get("policyTypes", ["Ingress"])
        and selects(p["spec"]["podSelector"], dict(pod.labels))
    ]
    if not selecting:
        return True
    return any(
        port_matches(rule, port, protocol, target)
        and (not rule.get(peers) or any(peer_matches(peer, other) for peer in rule[peers]))
        for policy in selecting
        for rule in policy["spec"].get(direction, [])
    )


def connects(
    policies: list[dict[str, Any]],
    source: Endpoint,
    target: Endpoint,
    port: int,
    protocol: str = "TCP",
) -> bool:
    """Whether the policies let ``source`` open a connection to ``target`` on ``port``."""
    return allowed_by(policies, "egress", source, target, port, protocol, target) and allowed_by(
        policies, "ingress", target, source, port, protocol, target
    )


def network_policies() -> list[dict[str, Any]]:
    """Every NetworkPolicy, the stores' included."""
    return list(of_kind("NetworkPolicy").values()) + list(
        of_kind("NetworkPolicy", resources(STORES)).values()
    )


def deskpilot_pods() -> dict[str, Endpoint]:
    """A pod of each workload, by name, with its labels and named ports."""
    pods = {}
    for n, workload in enumerate(workloads(), start=10):
        template = workload["spec"]["template"]
        ports = tuple(
            (p["name"], p["containerPort"])
            for c in template["spec"]["containers"]
            for p in c.get("ports", [])
            if "name" in p
        )
        name = workload["metadata"]["name"]
        labels = tuple(sorted(template["metadata"]["labels"].items()))
        pods[name] = Endpoint(name, f"10.244.0.{n}", APP_NAMESPACE, labels, ports)
    return pods


OUTSIDERS = {
    "internet": Endpoint("internet", PUBLIC_V4),
    "internet-v6": Endpoint("internet-v6", PUBLIC_V6),
    "ingress-controller": Endpoint(
        "ingress-controller", "10.244.9.1", "ingress-nginx", (("app", "ingress-nginx"),)
    ),
    "neighbour": Endpoint("neighbour", "10.244.9.2", APP_NAMESPACE, (("app", "other"),)),
}
"""Who is not Deskpilot: the internet, the ingress controller, another app in its namespace."""


def load_compose(path: Path = COMPOSE) -> dict[str, Any]:
    """A compose file (``compose.yaml`` by default) as a mapping."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict), f"{path} is not a mapping"
    return document
