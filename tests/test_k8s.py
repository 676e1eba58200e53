"""The Kubernetes manifests in deploy/k8s/ are well-formed and agree with the repository.

No cluster runs in CI and nothing is downloaded, so the built-in kinds are checked against the
object models of the ``kubernetes`` Python client (installed with chromadb): every field must be
one the API knows, of the right type, and required fields must be present. KEDA's kinds are
checked structurally against the fields KEDA documents. Then the manifests are held against the
code: each Deployment runs a service package of this repository, names its consumers after the
pod, probes with the heartbeat check and outlives the graceful timeout; each ScaledObject scales
an existing Deployment on every stream its consumer group reads (``contracts.topics``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from contracts import heartbeat
from contracts.settings import ServiceSettings
from contracts.topics import SUBSCRIPTIONS, Group
from deploy import redis_acl
from deploy.envdoc import table
from ocr.config import OcrSettings
from tests.support.manifests import (
    K8S,
    OUTSIDERS,
    PUBLIC_V4,
    PUBLIC_V6,
    STORES,
    Endpoint,
    config_data,
    connects,
    deskpilot_pods,
    kustomization,
    load_documents,
    network_policies,
    of_kind,
    only_container,
    resources,
    selects,
    workloads,
)
from ticketing.config import TicketingSettings

REPO = Path(__file__).resolve().parents[1]

API_VERSIONS = {
    "ConfigMap": "v1",
    "Secret": "v1",
    "Service": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "ScaledObject": "keda.sh/v1alpha1",
    "TriggerAuthentication": "keda.sh/v1alpha1",
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
    "NetworkPolicy": "networking.k8s.io/v1",
}
BUILT_IN = {
    "ConfigMap",
    "Secret",
    "Service",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "NetworkPolicy",
}
SCALED_SERVICES = {"crawler", "indexer", "ocr"}
HEARTBEAT_CHECK = ["python", "-m", "contracts.heartbeat", "check"]

# The redis-streams trigger's metadata as KEDA documents it (keda.sh/docs/*/scalers/redis-streams).
REDIS_STREAMS_METADATA = {
    "address",
    "addressFromEnv",
    "host",
    "hostFromEnv",
    "port",
    "portFromEnv",
    "usernameFromEnv",
    "passwordFromEnv",
    "stream",
    "consumerGroup",
    "pendingEntriesCount",
    "streamLength",
    "lagCount",
    "activationLagCount",
    "enableTLS",
    "unsafeSsl",
    "databaseIndex",
}
SCALED_OBJECT_SPEC = {
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "initialCooldownPeriod",
    "idleReplicaCount",
    "minReplicaCount",
    "maxReplicaCount",
    "fallback",
    "advanced",
    "triggers",
}
TRIGGER_FIELDS = {"type", "name", "metadata", "authenticationRef", "metricType", "useCachedMetrics"}
# Read only by KEDA's scaler (from the scaled pods' environment), not by any Deskpilot service.
KEDA_ONLY_VARIABLES = {"REDIS_ADDRESS", "REDIS_PASSWORD"}


# -- loading -----------------------------------------------------------------------------------


def manifest_files(folder: Path = K8S) -> list[Path]:
    return sorted(p for p in folder.rglob("*.yaml") if p.name != "kustomization.yaml")


def service_packages() -> set[str]:
    """Top-level packages that run as a service (``python -m NAME``)."""
    return {p.parent.name for p in REPO.glob("*/__main__.py")}


def secret_data(name: str = "deskpilot-secrets") -> dict[str, str]:
    data: dict[str, str] = of_kind("Secret")[name]["stringData"]
    return data


def container_env(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The container's own ``env`` entries by name (``envFrom`` not included)."""
    return {e["name"]: e for e in only_container(workload).get("env", [])}


def pod_environment(workload: dict[str, Any]) -> dict[str, str]:
    """What the container's settings read: the shared ConfigMap and Secret, then literal ``env``
    values (which win, as in Kubernetes), then values taken from other Secrets by key."""
    environment = {**config_data(), **secret_data()}
    for name, entry in container_env(workload).items():
        if "value" in entry:
            environment[name] = str(entry["value"])
        reference = entry.get("valueFrom", {}).get("secretKeyRef")
        if reference:
            environment[name] = secret_data(reference["name"])[reference["key"]]
    return environment


# -- structural validation of built-in kinds against the kubernetes client's models -------------

_CONTAINER_TYPE = re.compile(r"^(list|dict)\[(?:str, )?(.+)\]$", re.IGNORECASE)
_PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "float": (float, int),
    "object": (object,),
    "datetime": (str,),
    "date": (str,),
}


def model_errors(data: Any, type_name: str, where: str) -> list[str]:
    """Differences between ``data`` and the Kubernetes API type ``type_name`` (e.g. V1Deployment).

    Unknown fields, wrong types and missing required fields are reported; the models' own
    client-side validation finds the last (their constructors refuse a required field of None).
    """
    from kubernetes import client

    match = _CONTAINER_TYPE.match(type_name)
    if match:
        kind, inner = match.group(1).lower(), match.group(2)
        if kind == "list":
            if not isinstance(data, list):
                return [f"{where}: expected a list"]
            return [e for i, v in enumerate(data) for e in model_errors(v, inner, f"{where}[{i}]")]
        if not isinstance(data, dict):
            return [f"{where}: expected a mapping"]
        return [e for k, v in data.items() for e in model_errors(v, inner, f"{where}.{k}")]
    if type_name in _PRIMITIVES:
        expected = _PRIMITIVES[type_name]
        if type_name == "int" and isinstance(data, bool):
            return [f"{where}: expected int, got bool"]
        return [] if isinstance(data, expected) else [f"{where}: expected {type_name}"]
    model = getattr(client, type_name)
    if not isinstance(data, dict):
        return [f"{where}: expected a {type_name} mapping"]
    by_key = {key: attribute for attribute, key in model.attribute_map.items()}
    errors = []
    for key, value in data.items():
        if key not in by_key:
            errors.append(f"{where}.{key}: not a field of {type_name}")
            continue
        errors.extend(model_errors(value, model.openapi_types[by_key[key]], f"{where}.{key}"))
    if not errors:
        present = {by_key[key]: value for key, value in data.items()}
        # Nested models stay plain here; only this level's required fields are checked.
        try:
            model(**present)
        except ValueError as exc:
            errors.append(f"{where}: {exc}")
    return errors


def built_in_type(document: dict[str, Any]) -> str:
    return f"V1{document['kind']}"


# -- parsing and kinds -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def all_documents() -> list[tuple[Path, dict[str, Any]]]:
    files = manifest_files()
    assert files, "deploy/k8s/ holds no manifests"
    return [(path, document) for path in files for document in load_documents(path)]


def test_every_manifest_parses_with_a_known_kind_and_api_version(
    all_documents: list[tuple[Path, dict[str, Any]]],
) -> None:
    for path, document in all_documents:
        kind = document.get("kind")
        assert kind in API_VERSIONS, f"{path.name}: unexpected kind {kind!r}"
        assert document.get("apiVersion") == API_VERSIONS[kind], f"{path.name}: {kind}"
        assert document.get("metadata", {}).get("name"), f"{path.name}: {kind} without a name"
        assert "namespace" not in document["metadata"], (
            f"{path.name}: manifests stay namespace-free"
        )


@pytest.mark.parametrize("folder", [K8S, STORES], ids=["k8s", "stores"])
def test_kustomization_lists_exactly_the_manifests_beside_it(folder: Path) -> None:
    document = kustomization(folder)
    assert document["apiVersion"] == API_VERSIONS["Kustomization"]
    assert document["kind"] == "Kustomization"
    listed = document["resources"]
    assert len(listed) == len(set(listed)), "a resource is listed twice"
    beside = {p.name for p in folder.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(listed) == beside, f"listed {sorted(listed)}, present {sorted(beside)}"


def test_built_in_kinds_match_the_kubernetes_api(
    all_documents: list[tuple[Path, dict[str, Any]]],
) -> None:
    pytest.importorskip("kubernetes", reason="the kubernetes client comes with chromadb")
    checked = 0
    for path, document in all_documents:
        if document["kind"] in BUILT_IN:
            errors = model_errors(document, built_in_type(document), path.name)
            assert not errors, "\n".join(errors)
            checked += 1
    assert checked >= len(service_packages()), "fewer built-in objects than services"


def test_the_structural_check_rejects_broken_manifests() -> None:
    pytest.importorskip("kubernetes", reason="the kubernetes client comes with chromadb")
    deployment = of_kind("Deployment")["crawler"]
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")  # a typo
    del container["name"]  # required
    broken["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "45"  # not an int
    errors = "\n".join(model_errors(broken, "V1Deployment", "broken"))
    assert "readinesProbe: not a field of V1Container" in errors, errors
    assert "terminationGracePeriodSeconds: expected int" in errors, errors
    without_selector = yaml.safe_load(yaml.safe_dump(deployment))
    del without_selector["spec"]["selector"]
    errors = "\n".join(model_errors(without_selector, "V1Deployment", "no-selector"))
    assert "selector" in errors, errors


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("folder", [K8S, STORES], ids=["k8s", "stores"])
def test_kustomize_builds_the_folder(folder: Path) -> None:
    result = subprocess.run(
        ["kubectl", "kustomize", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    expected = [
        d for name in kustomization(folder)["resources"] for d in load_documents(folder / name)
    ]
    generated = {g["name"] for g in kustomization(folder).get("configMapGenerator", [])}
    expected += [{"kind": "ConfigMap", "metadata": {"name": name}} for name in generated]

    def name_of(document: dict[str, Any]) -> str:
        # A generated ConfigMap's name carries a hash of its content.
        name: str = document["metadata"]["name"]
        base = name.rsplit("-", 1)[0]
        return base if document["kind"] == "ConfigMap" and base in generated else name

    assert sorted((d["kind"], name_of(d)) for d in built) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in expected
    )


# -- Deployments against the repository --------------------------------------------------------


def test_every_service_package_has_a_deployment_and_nothing_else_does() -> None:
    assert set(of_kind("Deployment")) == service_packages()


def test_deployments_run_their_service_package_from_its_image() -> None:
    images = {entry["name"] for entry in kustomization(K8S).get("images", [])}
    for name, deployment in of_kind("Deployment").items():
        container = only_container(deployment)
        command = container.get("command", [])
        assert command[:2] == ["python", "-m"], f"{name}: {command}"
        assert len(command) == 3, f"{name}: {command}"
        package = command[2]
        assert (REPO / package / "__main__.py").is_file(), f"{name}: no package {package!r}"
        assert package == name, f"Deployment {name} runs {package}"
        image = container["image"].rsplit(":", 1)[0]
        assert image == f"deskpilot-{package}", f"{name}: image {container['image']}"
        assert image in images, f"{name}: {image} missing from kustomization.yaml images"


def test_node_name_comes_from_the_pod_name() -> None:
    assert "DESKPILOT_NODE" not in config_data(), "one node name for all pods would collide"
    assert "DESKPILOT_NODE" not in secret_data()
    for name, deployment in of_kind("Deployment").items():
        env = {e["name"]: e for e in only_container(deployment).get("env", [])}
        assert "DESKPILOT_NODE" in env, f"{name}: DESKPILOT_NODE is not set"
        field = env["DESKPILOT_NODE"].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        assert field == "metadata.name", f"{name}: DESKPILOT_NODE comes from {field!r}"


def test_every_pod_reads_the_shared_config_and_secret() -> None:
    for name, deployment in of_kind("Deployment").items():
        sources = only_container(deployment).get("envFrom", [])
        maps = {s["configMapRef"]["name"] for s in sources if "configMapRef" in s}
        secrets = {s["secretRef"]["name"] for s in sources if "secretRef" in s}
        assert maps == {"deskpilot-config"}, f"{name}: {maps}"
        assert secrets == {"deskpilot-secrets"}, f"{name}: {secrets}"


def test_probes_run_the_heartbeat_check_of_their_own_service() -> None:
    for name, deployment in of_kind("Deployment").items():
        container = only_container(deployment)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert probe in container, f"{name}: no {probe}"
            command = container[probe].get("exec", {}).get("command")
            assert command == [*HEARTBEAT_CHECK, name], f"{name}.{probe}: {command}"
        liveness = container["livenessProbe"]
        patience = liveness["periodSeconds"] * liveness["failureThreshold"]
        assert patience >= 60, f"{name}: liveness restarts after {patience} s of failures"


def test_the_probe_command_is_one_the_heartbeat_module_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A closed port: the check gets past argument parsing and fails on Redis (2), which a
    # malformed command (64, usage) would not.
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:9/0")
    monkeypatch.setenv("DESKPILOT_ENV", "development")
    assert heartbeat.main(["check", "crawler"]) == 2
    assert heartbeat.main(["status", "crawler"]) == 64


def test_grace_period_outlasts_the_graceful_timeout() -> None:
    default = ServiceSettings.model_fields["graceful_timeout_s"].default
    graceful = float(config_data().get("DESKPILOT_GRACEFUL_TIMEOUT", default))
    for name, deployment in of_kind("Deployment").items():
        grace = deployment["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        assert grace > graceful + 5, f"{name}: {grace} s grace for a {graceful} s shutdown"


def test_service_links_are_off() -> None:
    # The Service `gateway` would otherwise inject GATEWAY_PORT=tcp://..., which the gateway
    # reads as its own port setting.
    for workload in workloads():
        spec = workload["spec"]["template"]["spec"]
        assert spec.get("enableServiceLinks") is False, workload["metadata"]["name"]


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti)?$")
_FACTORS = {None: 1.0, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(value: str) -> float:
    match = _QUANTITY.match(value)
    assert match, f"unexpected quantity {value!r}"
    return float(match.group(1)) * _FACTORS[match.group(2)]


def test_every_container_has_resource_requests_and_limits() -> None:
    for workload in workloads():
        for container in workload["spec"]["template"]["spec"]["containers"]:
            name = f"{workload['metadata']['name']}.{container['name']}"
            resources_ = container.get("resources", {})
            requests, limits = resources_.get("requests", {}), resources_.get("limits", {})
            assert {"cpu", "memory"} <= set(requests), f"{name}: requests {requests}"
            assert "memory" in limits, f"{name}: no memory limit"
            for resource, limit in limits.items():
                assert quantity(limit) >= quantity(requests[resource]), f"{name}: {resource}"


def test_pods_run_as_the_images_non_root_user() -> None:
    for name, deployment in of_kind("Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == 10001, name  # deploy/Dockerfile's USER
        container = only_container(deployment)["securityContext"]
        assert container["allowPrivilegeEscalation"] is False, name
        assert container["capabilities"]["drop"] == ["ALL"], name


def test_selectors_match_their_pod_labels() -> None:
    for workload in workloads():
        selector = workload["spec"]["selector"]["matchLabels"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), workload["metadata"]["name"]


def test_gateway_service_reaches_the_gateway_port() -> None:
    service = of_kind("Service")["gateway"]
    gateway = of_kind("Deployment")["gateway"]
    labels = gateway["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    container = only_container(gateway)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    for port in service["spec"]["ports"]:
        assert port["targetPort"] in ports, port
        assert str(ports[port["targetPort"]]) == env["GATEWAY_PORT"]
    assert env["GATEWAY_HOST"] == "0.0.0.0"


def test_crawler_has_a_memory_backed_dev_shm() -> None:
    crawler = of_kind("Deployment")["crawler"]
    volumes = {v["name"]: v for v in crawler["spec"]["template"]["spec"].get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in only_container(crawler).get("volumeMounts", [])}
    assert "/dev/shm" in mounts, "the crawler has no /dev/shm volume"
    volume = volumes[mounts["/dev/shm"]]
    assert volume["emptyDir"]["medium"] == "Memory"
    assert quantity(volume["emptyDir"]["sizeLimit"]) >= 256 * 2**20
    limit = only_container(crawler)["resources"]["limits"]["memory"]
    assert quantity(limit) > quantity(volume["emptyDir"]["sizeLimit"]), "shm counts against it"


def pod_volumes(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}


def claimed(workload: dict[str, Any]) -> set[str]:
    """Names of the PersistentVolumeClaims the workload's pods mount."""
    return {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod_volumes(workload).values()
        if "persistentVolumeClaim" in v
    }


def test_mounts_name_declared_volumes_and_claims_exist() -> None:
    claims = of_kind("PersistentVolumeClaim")
    users: dict[str, list[str]] = {name: [] for name in claims}
    for name, deployment in of_kind("Deployment").items():
        volumes = pod_volumes(deployment)
        for mount in only_container(deployment).get("volumeMounts", []):
            assert mount["name"] in volumes, f"{name}: mounts an undeclared volume {mount['name']}"
        for claim in claimed(deployment):
            assert claim in claims, f"{name}: no PersistentVolumeClaim {claim!r}"
            users[claim].append(name)
    for claim, deployments in users.items():
        assert len(deployments) == 1, f"{claim} is mounted by {deployments or 'nothing'}"


def test_a_deployment_with_a_read_write_once_volume_runs_one_pod_at_a_time() -> None:
    # A second pod (a replica, or the surge pod of a rolling update) could not attach the volume
    # on another node, and would open the same SQLite file on the same one.
    claims = of_kind("PersistentVolumeClaim")
    scaled = {s["spec"]["scaleTargetRef"]["name"] for s in of_kind("ScaledObject").values()}
    with_claims = {n: d for n, d in of_kind("Deployment").items() if claimed(d)}
    assert "ticketing" in with_claims, "the ticketing store has no volume"
    for name, deployment in with_claims.items():
        for claim in claimed(deployment):
            assert claims[claim]["spec"]["accessModes"] == ["ReadWriteOnce"], claim
        spec = deployment["spec"]
        assert spec.get("replicas") == 1, f"{name}: replicas {spec.get('replicas')}"
        assert spec.get("strategy", {}).get("type") == "Recreate", f"{name}: strategy"
        assert name not in scaled, f"{name}: KEDA would add replicas"
        # A new volume's root belongs to root; the pod's group must be able to write it.
        pod = spec["template"]["spec"]["securityContext"]
        assert pod.get("fsGroup") == pod["runAsGroup"], f"{name}: fsGroup"


# -- configuration -----------------------------------------------------------------------------


def documented_variables() -> set[str]:
    return {row.split("`")[1] for row in table().splitlines()[2:]}


def test_config_and_secret_set_only_known_variables() -> None:
    known = documented_variables() | KEDA_ONLY_VARIABLES
    # Secrets every pod reads whole (envFrom); the others are read key by key (secretKeyRef,
    # checked below) or mounted as files.
    secrets = [key for key in secret_data()]
    assert secrets, "no Secret holds anything"
    for key in (*config_data(), *secrets):
        assert key in known, f"{key} is not a setting of any service"
    for name, deployment in of_kind("Deployment").items():
        for variable in container_env(deployment):
            assert variable in known, f"{name}: {variable} is not a setting of any service"


def test_config_values_are_valid_settings() -> None:
    values = {**config_data(), **secret_data(), "DESKPILOT_ADMIN_TOKEN": "a-real-secret"}
    settings = ServiceSettings.model_validate(
        {k: v for k, v in values.items() if k not in KEDA_ONLY_VARIABLES and v != ""}
    )
    assert settings.environment == "production"
    assert settings.chroma_host, "CHROMA_HOST must be set: pods have no persistent data dir"


def test_placeholder_admin_token_is_refused_in_production() -> None:
    token = secret_data()["DESKPILOT_ADMIN_TOKEN"]
    assert config_data()["DESKPILOT_ENV"] == "production"
    with pytest.raises(ValueError, match="DESKPILOT_ADMIN_TOKEN"):
        ServiceSettings(environment="production", admin_token=token)


def settings_of(
    cls: type[ServiceSettings], environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> ServiceSettings:
    """``cls`` read from ``environment`` alone, as the pod's process reads it."""
    for variable in documented_variables() | {"DESKPILOT_NODE"}:
        monkeypatch.delenv(variable, raising=False)
    for variable, value in environment.items():
        if variable not in KEDA_ONLY_VARIABLES:
            monkeypatch.setenv(variable, value)
    return cls()


def test_references_to_secrets_and_config_maps_resolve() -> None:
    maps, secrets = of_kind("ConfigMap"), of_kind("Secret")
    for name, deployment in of_kind("Deployment").items():
        for variable, entry in container_env(deployment).items():
            source = entry.get("valueFrom", {})
            if "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                assert ref["name"] in secrets, f"{name}.{variable}: no Secret {ref['name']!r}"
                assert ref["key"] in secret_data(ref["name"]), f"{name}.{variable}: {ref}"
            if "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                assert ref["key"] in maps[ref["name"]]["data"], f"{name}.{variable}: {ref}"


def test_the_jira_token_reaches_the_ticketing_pod_only() -> None:
    assert "JIRA_API_TOKEN" not in config_data()
    assert "JIRA_API_TOKEN" not in secret_data(), "every pod reads deskpilot-secrets"
    readers = {
        name
        for name, deployment in of_kind("Deployment").items()
        for entry in container_env(deployment).values()
        if entry.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "deskpilot-jira"
    }
    assert readers == {"ticketing"}, readers
    env = container_env(of_kind("Deployment")["ticketing"])
    assert env["JIRA_API_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "JIRA_API_TOKEN"


def test_ticketing_keeps_its_local_store_on_its_volume(monkeypatch: pytest.MonkeyPatch) -> None:
    ticketing = of_kind("Deployment")["ticketing"]
    environment = {**pod_environment(ticketing), "DESKPILOT_ADMIN_TOKEN": "a-real-secret"}
    settings = settings_of(TicketingSettings, environment, monkeypatch)
    assert isinstance(settings, TicketingSettings)
    assert settings.environment == "production"
    assert settings.backend == "local"
    store = settings.local_config().path
    volumes = pod_volumes(ticketing)
    persistent = [
        Path(m["mountPath"])
        for m in only_container(ticketing)["volumeMounts"]
        if "persistentVolumeClaim" in volumes[m["name"]]
    ]
    assert any(store.is_relative_to(mount) for mount in persistent), f"{store} is not on a volume"


def test_the_placeholder_jira_token_is_refused_in_production(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticketing = of_kind("Deployment")["ticketing"]
    environment = {
        **pod_environment(ticketing),
        "DESKPILOT_ADMIN_TOKEN": "a-real-secret",
        "TICKETING_BACKEND": "jira",
        "JIRA_BASE_URL": "https://jira.invalid",
        "JIRA_EMAIL": "bot@example.com",
    }
    assert environment["JIRA_API_TOKEN"] == secret_data("deskpilot-jira")["JIRA_API_TOKEN"]
    with pytest.raises(ValueError, match="JIRA_API_TOKEN"):
        settings_of(TicketingSettings, environment, monkeypatch)
    environment["JIRA_API_TOKEN"] = "a-real-jira-token"
    settings = settings_of(TicketingSettings, environment, monkeypatch)
    assert isinstance(settings, TicketingSettings)
    assert settings.jira_config().project_key == config_data()["JIRA_PROJECT_KEY"]


# Resident memory of one ocr process reading a 1920x1080 screenshot (EasyOCR on the CPU, default
# settings), measured with ocr.images.ScreenReader: 2.5 GiB at the peak, 0.87 GiB idle.
OCR_READ_PEAK = 2.5 * 2**30


def test_ocr_pods_have_the_cores_and_memory_of_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    ocr = of_kind("Deployment")["ocr"]
    environment = {**pod_environment(ocr), "DESKPILOT_ADMIN_TOKEN": "a-real-secret"}
    settings = settings_of(OcrSettings, environment, monkeypatch)
    assert isinstance(settings, OcrSettings)
    assert not settings.gpu, "the image's torch is a CPU build"
    limits = only_container(ocr)["resources"]["limits"]
    threads = settings.concurrency * settings.torch_threads
    # More torch threads than cores would be throttled by the CPU limit.
    assert threads <= quantity(limits["cpu"]), f"{threads} threads, cpu limit {limits['cpu']}"
    assert quantity(limits["memory"]) >= OCR_READ_PEAK, f"memory limit {limits['memory']}"


# -- KEDA --------------------------------------------------------------------------------------


def scaled_objects() -> dict[str, dict[str, Any]]:
    return of_kind("ScaledObject")


def test_scaled_objects_are_well_formed() -> None:
    assert set(scaled_objects()) == SCALED_SERVICES
    for name, scaled in scaled_objects().items():
        spec = scaled["spec"]
        assert set(spec) <= SCALED_OBJECT_SPEC, f"{name}: {set(spec) - SCALED_OBJECT_SPEC}"
        assert spec["scaleTargetRef"].get("name"), name
        low, high = spec["minReplicaCount"], spec["maxReplicaCount"]
        assert isinstance(low, int), name
        assert isinstance(high, int), name
        assert 1 <= low < high, f"{name}: replicas {low}..{high}"
        assert isinstance(spec["cooldownPeriod"], int), name
        assert spec["cooldownPeriod"] > 0, name
        assert spec["triggers"], f"{name}: no triggers"
        for trigger in spec["triggers"]:
            assert set(trigger) <= TRIGGER_FIELDS, f"{name}: {set(trigger) - TRIGGER_FIELDS}"
            assert trigger["type"] == "redis-streams", name
            metadata = trigger["metadata"]
            unknown = set(metadata) - REDIS_STREAMS_METADATA
            assert not unknown, f"{name}: not redis-streams metadata: {unknown}"
            # The CRD declares metadata as map[string]string: a bare number is refused.
            for key, value in metadata.items():
                assert isinstance(value, str), f"{name}: {key} must be a string, got {value!r}"
            assert int(metadata["lagCount"]) > 0, name
            assert "activationLagCount" in metadata, f"{name}: lagCount wants its activation"
            # Those would scale on pending entries or stream length instead of the lag.
            assert "pendingEntriesCount" not in metadata, name
            assert "streamLength" not in metadata, name


def test_scaled_objects_target_deployments_that_leave_the_count_to_them() -> None:
    deployments = of_kind("Deployment")
    for name, scaled in scaled_objects().items():
        target = scaled["spec"]["scaleTargetRef"]
        assert target.get("kind", "Deployment") == "Deployment", name
        assert target.get("apiVersion", "apps/v1") == "apps/v1", name
        assert target["name"] in deployments, f"{name}: no Deployment {target['name']!r}"
        # A replicas field would reset KEDA's count to itself on every apply.
        assert "replicas" not in deployments[target["name"]]["spec"], target["name"]


def test_triggers_cover_every_stream_the_group_reads() -> None:
    deployments = of_kind("Deployment")
    for name, scaled in scaled_objects().items():
        target = deployments[scaled["spec"]["scaleTargetRef"]["name"]]
        package = only_container(target)["command"][2]
        group = Group(package)  # each service reads through the group named after it
        expected = {str(topic) for topic, groups in SUBSCRIPTIONS.items() if group in groups}
        assert expected, f"{group} reads no stream"
        triggers = scaled["spec"]["triggers"]
        streams = [t["metadata"]["stream"] for t in triggers]
        assert len(streams) == len(set(streams)), f"{name}: a stream has two triggers"
        assert set(streams) == expected, f"{name}: triggers {sorted(streams)}, reads {expected}"
        for trigger in triggers:
            assert trigger["metadata"]["consumerGroup"] == group.value, trigger["name"]


def test_triggers_reach_the_redis_the_services_use() -> None:
    deployments = of_kind("Deployment")
    for name, scaled in scaled_objects().items():
        pod_env = pod_environment(deployments[scaled["spec"]["scaleTargetRef"]["name"]])
        url = urlsplit(pod_env["REDIS_URL"])
        database = url.path.strip("/") or "0"
        for trigger in scaled["spec"]["triggers"]:
            metadata = trigger["metadata"]
            if "addressFromEnv" in metadata:
                address = pod_env.get(metadata["addressFromEnv"])
                assert address, f"{name}: pods have no {metadata['addressFromEnv']}"
            else:
                address = metadata["address"]
            assert address == f"{url.hostname}:{url.port or 6379}", f"{name}: {address} vs URL"
            assert metadata.get("databaseIndex", "0") == database, name
            assert (metadata.get("enableTLS", "false") == "true") == (url.scheme == "rediss")


def test_trigger_authentication_reads_an_existing_secret_key() -> None:
    authentications = of_kind("TriggerAuthentication")
    secrets = {
        name: {**s.get("stringData", {}), **s.get("data", {})}
        for name, s in of_kind("Secret").items()
    }
    for name, scaled in scaled_objects().items():
        for trigger in scaled["spec"]["triggers"]:
            reference = trigger.get("authenticationRef", {}).get("name")
            assert reference in authentications, f"{name}: TriggerAuthentication {reference!r}"
    for name, authentication in authentications.items():
        targets = authentication["spec"]["secretTargetRef"]
        assert {t["parameter"] for t in targets} <= {"username", "password"}, name
        for target in targets:
            assert target["key"] in secrets.get(target["name"], {}), f"{name}: {target}"


# -- Redis ACL users ---------------------------------------------------------------------------


def test_each_service_connects_to_redis_as_its_own_user() -> None:
    assert "REDIS_URL" not in config_data(), "one Redis user for every pod"
    assert "REDIS_URL" not in secret_data(), "one Redis user for every pod"
    assert "REDIS_PASSWORD" not in secret_data()
    users = secret_data("deskpilot-redis-users")
    for name, deployment in of_kind("Deployment").items():
        reference = container_env(deployment)["REDIS_URL"]["valueFrom"]["secretKeyRef"]
        assert reference == {"name": "deskpilot-redis-users", "key": name}, name
        url = urlsplit(pod_environment(deployment)["REDIS_URL"])
        assert url.username == name, f"{name} logs in as {url.username}"
        assert url.password, f"{name}: no password"
        others = {users[other] for other in service_packages() - {name}}
        assert users[name] not in others


def generated_secrets() -> dict[str, dict[str, str]]:
    text = redis_acl.render_secrets(redis_acl.placeholder_passwords())
    return {d["metadata"]["name"]: d["stringData"] for d in yaml.safe_load_all(text)}


def test_the_redis_users_and_the_acl_file_are_what_the_generator_makes() -> None:
    # deploy/redis_acl.py derives the rules from the code (tests/test_redis_acl.py); the
    # manifests must carry its current output, on both sides of the connection.
    generated = generated_secrets()
    acl = of_kind("Secret", resources(STORES))["deskpilot-redis-acl"]["stringData"]
    assert acl == generated["deskpilot-redis-acl"], (
        "stores/redis.yaml's ACL is stale: `python -m deploy.redis_acl --placeholders secrets`"
    )
    assert secret_data("deskpilot-redis-users") == generated["deskpilot-redis-users"], (
        "secret.yaml's Redis users are stale: `python -m deploy.redis_acl --placeholders secrets`"
    )


def test_redis_loads_the_acl_file_from_its_secret() -> None:
    redis = of_kind("StatefulSet", resources(STORES))["redis"]
    container = only_container(redis)
    args = container["args"]
    acl_path = Path(args[args.index("--aclfile") + 1])
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = pod_volumes(redis)
    (name,) = [n for n, m in mounts.items() if acl_path.parent == Path(m["mountPath"])]
    assert mounts[name].get("readOnly") is True
    assert volumes[name]["secret"]["secretName"] == "deskpilot-redis-acl"
    acl_secret = of_kind("Secret", resources(STORES))["deskpilot-redis-acl"]["stringData"]
    assert acl_path.name in acl_secret
    assert "requirepass" not in " ".join(args), "the ACL file is the only credential"
    # The readiness probe PINGs without a password, which the default user may do and no more.
    assert container["readinessProbe"]["exec"]["command"] == ["valkey-cli", "ping"]
    assert f"user default on {redis_acl.DEFAULT_RULES}" in acl_secret[acl_path.name]


def test_keda_logs_in_as_its_own_user() -> None:
    (authentication,) = of_kind("TriggerAuthentication").values()
    targets = {t["parameter"]: t for t in authentication["spec"]["secretTargetRef"]}
    assert set(targets) == {"username", "password"}
    users = secret_data("deskpilot-redis-users")
    username = secret_data(targets["username"]["name"])[targets["username"]["key"]]
    password = secret_data(targets["password"]["name"])[targets["password"]["key"]]
    assert username == redis_acl.KEDA_USER
    assert password == redis_acl.placeholder_passwords()[redis_acl.KEDA_USER]
    assert users is not None


# -- Chroma's token ----------------------------------------------------------------------------


def test_only_the_orchestrator_and_the_indexer_hold_the_chroma_token() -> None:
    holders = {
        name
        for name, deployment in of_kind("Deployment").items()
        if "CHROMA_AUTH_TOKEN" in container_env(deployment)
    }
    assert holders == {"orchestrator", "indexer"}
    assert "CHROMA_AUTH_TOKEN" not in config_data()
    assert "CHROMA_AUTH_TOKEN" not in secret_data()
    for name in holders:
        reference = container_env(of_kind("Deployment")[name])["CHROMA_AUTH_TOKEN"]
        assert reference["valueFrom"]["secretKeyRef"] == {
            "name": "deskpilot-chroma",
            "key": "token",
        }


def test_chroma_is_reachable_only_through_its_token_check() -> None:
    chroma = of_kind("StatefulSet", resources(STORES))["chroma"]
    containers = {c["name"]: c for c in chroma["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {"chroma", "auth"}
    args = containers["chroma"]["args"]
    assert args[args.index("--host") + 1] == "127.0.0.1", "Chroma must not listen on the pod IP"
    upstream_port = args[args.index("--port") + 1]
    assert "ports" not in containers["chroma"]
    auth = containers["auth"]
    token = {e["name"]: e for e in auth["env"]}["CHROMA_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert token == {"name": "deskpilot-chroma", "key": "token"}
    service = of_kind("Service", resources(STORES))["chroma"]
    (port,) = service["spec"]["ports"]
    auth_ports = {p["name"]: p["containerPort"] for p in auth["ports"]}
    assert port["targetPort"] in auth_ports
    assert str(auth_ports[port["targetPort"]]) == config_data()["CHROMA_PORT"]
    # The template the auth container loads: listens where the Service points, forwards to the
    # loopback Chroma, refuses a missing or wrong token.
    (generator,) = kustomization(STORES)["configMapGenerator"]
    mount = {m["name"]: m["mountPath"] for m in auth["volumeMounts"]}
    volume = pod_volumes(chroma)
    (config_volume,) = [n for n, v in volume.items() if "configMap" in v]
    assert volume[config_volume]["configMap"]["name"] == generator["name"]
    assert mount[config_volume] == "/etc/nginx/templates"
    (entry,) = generator["files"]
    target, source = entry.split("=")
    assert target.endswith(".conf.template")
    template = (STORES / source).read_text(encoding="utf-8")
    assert f"listen {auth_ports[port['targetPort']]};" in template
    assert template.count(f"proxy_pass http://127.0.0.1:{upstream_port};") == 2
    assert '"${CHROMA_AUTH_TOKEN}" 1;' in template
    assert 'if ($http_x_chroma_token = "")' in template


def test_the_chroma_token_check_is_the_compose_one() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))
    (entry,) = kustomization(STORES)["configMapGenerator"][0]["files"]
    source = entry.split("=")[1]
    mounted = [
        volume
        for volume in compose["services"]["chroma-auth"].get("volumes", [])
        if volume.endswith(":/etc/nginx/templates/default.conf.template:ro")
    ]
    assert mounted == [
        f"./deploy/k8s/stores/{source}:/etc/nginx/templates/default.conf.template:ro"
    ]


# -- NetworkPolicies ---------------------------------------------------------------------------

PRIVATE_ADDRESSES = (
    "10.1.2.3",
    "172.20.0.5",
    "192.168.1.10",
    "169.254.169.254",
    "100.64.0.1",
    "127.0.0.1",
    "fd00::1",
    "fe80::1",
    "::1",
    "::ffff:10.0.0.1",
    "64:ff9b::a9fe:a9fe",
    "2002:7f00:1::",
)


KUBE_DNS = Endpoint("kube-dns", "10.96.0.10", "kube-system", (("k8s-app", "kube-dns"),))
KEDA = Endpoint("keda", "10.244.9.3", "keda", (("app", "keda-operator"),))


def listening_ports(pod: Endpoint) -> set[int]:
    return {port for _, port in pod.ports} | {6379, 8000, 8001}


def test_network_policies_are_namespace_free_and_select_deskpilot_pods() -> None:
    policies = network_policies()
    assert policies, "no NetworkPolicy"
    pods = deskpilot_pods()
    assert set(pods) == service_packages() | {"redis", "chroma"}
    for policy in policies:
        chosen = [
            p for p in pods.values() if selects(policy["spec"]["podSelector"], dict(p.labels))
        ]
        assert chosen, f"{policy['metadata']['name']} selects no pod"


def test_everything_is_denied_unless_a_policy_opens_it() -> None:
    pods = deskpilot_pods()
    (deny,) = [p for p in network_policies() if p["metadata"]["name"] == "deskpilot-default-deny"]
    assert set(deny["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert not deny["spec"].get("ingress")
    assert not deny["spec"].get("egress")
    assert all(selects(deny["spec"]["podSelector"], dict(p.labels)) for p in pods.values())


def test_only_the_gateway_takes_traffic_from_outside() -> None:
    policies, pods = network_policies(), deskpilot_pods()
    for outsider in (*OUTSIDERS.values(), KEDA):
        for pod in pods.values():
            for port in listening_ports(pod):
                allowed = connects(policies, outsider, pod, port)
                expected = (pod.name == "gateway" and port == 8000) or (
                    outsider is KEDA and pod.name == "redis" and port == 6379
                )
                assert allowed == expected, f"{outsider.name} -> {pod.name}:{port}: {allowed}"


def test_every_service_reaches_redis_and_only_two_reach_chroma() -> None:
    policies, pods = network_policies(), deskpilot_pods()
    for name in service_packages():
        assert connects(policies, pods[name], pods["redis"], 6379), f"{name} -> redis"
        reaches_chroma = connects(policies, pods[name], pods["chroma"], 8000)
        assert reaches_chroma == (name in {"orchestrator", "indexer"}), f"{name} -> chroma"
        assert not connects(policies, pods[name], pods["chroma"], 8001), "Chroma's own port"


def test_no_service_talks_to_another_service_directly() -> None:
    policies, pods = network_policies(), deskpilot_pods()
    services = [pods[name] for name in service_packages()]
    for source in services:
        for target in services:
            for port in listening_ports(target):
                if source is not target:
                    assert not connects(policies, source, target, port), (
                        f"{source.name} -> {target.name}:{port}"
                    )
    # Nor do the stores reach out (a compromised store cannot call home).
    for store in ("redis", "chroma"):
        for target in (*pods.values(), *OUTSIDERS.values()):
            assert not connects(policies, pods[store], target, 443), f"{store} -> {target.name}"


def test_only_the_crawler_and_ticketing_go_out_and_never_to_private_ranges() -> None:
    policies, pods = network_policies(), deskpilot_pods()
    for name, pod in pods.items():
        for address in (PUBLIC_V4, PUBLIC_V6):
            public = Endpoint("public", address)
            https = connects(policies, pod, public, 443)
            http = connects(policies, pod, public, 80)
            assert https == (name in {"crawler", "ticketing"}), f"{name} -> {address}:443"
            assert http == (name == "crawler"), f"{name} -> {address}:80"
            assert not connects(policies, pod, public, 6379), f"{name} -> {address}:6379"
        for address in PRIVATE_ADDRESSES:
            for port in (80, 443, 6379, 8000):
                assert not connects(policies, pod, Endpoint("private", address), port), (
                    f"{name} -> {address}:{port}"
                )


def test_every_pod_resolves_names() -> None:
    policies, pods = network_policies(), deskpilot_pods()
    for name, pod in pods.items():
        assert connects(policies, pod, KUBE_DNS, 53, "UDP"), name
        assert connects(policies, pod, KUBE_DNS, 53, "TCP"), name
        assert not connects(policies, pod, KUBE_DNS, 443), name


def test_the_policy_checker_sees_an_opened_hole() -> None:
    # The checks above would pass on a checker that denied everything: open one more path and
    # the checker must see it.
    policies, pods = network_policies(), deskpilot_pods()
    assert not connects(policies, pods["ocr"], OUTSIDERS["internet"], 443)
    hole = {
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ocr"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}],
        }
    }
    assert connects([*policies, hole], pods["ocr"], OUTSIDERS["internet"], 443)
    assert not connects([*policies, hole], pods["ocr"], pods["chroma"], 8000), "ingress still"
