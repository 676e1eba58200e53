"""The deployment files are valid Compose and agree with the repository.

No container engine runs in CI, so the Compose files are checked against the Compose
Specification's JSON schema (kept in ``../shared``, never downloaded) and against the repository
itself: each built image has a Dockerfile, a service package and a pip extra of the same name.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMPOSE_SCHEMA = REPO.parent / "shared" / "schemas" / "compose-spec.json"
COMPOSE = REPO / "compose.yaml"
COMPOSE_FILES = [COMPOSE, REPO / "deploy" / "compose.scale.yaml"]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
BASE_IMAGE = "python:3.13-slim"

# The deployable services of this repository; each is a top-level package and a pip extra.
SERVICES = ("gateway", "redactor", "orchestrator", "indexer", "crawler")
PUBLISHED = {"gateway"}
# Workers compose.yaml itself runs several of, sharing their consumer group.
REPLICATED = ("crawler", "indexer")

# Any attempt to reach the network from the validator fails fast instead of succeeding.
_NO_NETWORK = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "NO_PROXY": "",
    "no_proxy": "",
}


@pytest.fixture(scope="session")
def compose_schema() -> Path:
    if not COMPOSE_SCHEMA.is_file():
        pytest.fail(
            f"Compose schema not found at {COMPOSE_SCHEMA}: the shared material must sit beside "
            "the repository as ../shared (see shared/README.md)",
            pytrace=False,
        )
    return COMPOSE_SCHEMA


def check_jsonschema(schema: Path, *documents: Path) -> subprocess.CompletedProcess[str]:
    """Validate documents against the local schema with the check-jsonschema CLI, offline.

    The schema declares draft-07 (by an address jsonschema does not recognise, which would fall
    back to the newest draft), so the validator is named explicitly. The base URI is the local
    file, so a relative ``$ref`` could only ever resolve to a local file.
    """
    command = [
        sys.executable,
        "-m",
        "check_jsonschema",
        "--schemafile",
        str(schema),
        "--base-uri",
        schema.as_uri(),
        "--validator-class",
        "jsonschema:Draft7Validator",
        "--disable-formats",
        "*",
        "--color",
        "never",
        *map(str, documents),
    ]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **_NO_NETWORK},
    )


def load_compose(path: Path = COMPOSE) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict), f"{path} is not a mapping"
    return document


def built_services() -> dict[str, dict[str, Any]]:
    services = load_compose()["services"]
    return {name: spec for name, spec in services.items() if "build" in spec}


def build_args(build: dict[str, Any] | str) -> dict[str, str]:
    if isinstance(build, str):
        return {}
    args = build.get("args") or {}
    if isinstance(args, list):  # the list form: ["SERVICE=gateway"]
        args = dict(item.split("=", 1) if "=" in item else (item, "") for item in args)
    return {key: str(value) for key, value in args.items()}


@pytest.mark.parametrize("document", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_compose_file_is_valid(compose_schema: Path, document: Path) -> None:
    assert document.is_file(), f"{document} is missing"
    result = check_jsonschema(compose_schema, document)
    assert result.returncode == 0, result.stdout + result.stderr


def test_validation_rejects_a_broken_compose_file(compose_schema: Path, tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text("services:\n  x:\n    image: 1\n    restart: sometimes\n", encoding="utf-8")
    result = check_jsonschema(compose_schema, broken)
    output = result.stdout + result.stderr
    assert result.returncode != 0, "the validator accepted a broken compose file"
    # Rejected by the schema, not by a crash or a failed download.
    assert "Schema validation errors" in output, output
    assert "$.services.x.image" in output, output


def test_every_service_is_in_compose() -> None:
    missing = set(SERVICES) - set(load_compose()["services"])
    assert not missing, f"services missing from compose.yaml: {sorted(missing)}"


def test_built_services_point_at_an_existing_dockerfile() -> None:
    assert built_services(), "no service in compose.yaml is built from this repository"
    for name, spec in built_services().items():
        build = spec["build"]
        if isinstance(build, str):  # the short form: the context alone
            build = {"context": build}
        context = REPO / build.get("context", ".")
        dockerfile = build.get("dockerfile", "Dockerfile")
        assert (context / dockerfile).is_file(), f"{name}: {context / dockerfile} does not exist"


def test_service_build_arg_names_a_service_package_and_extra() -> None:
    # __main__.py may not be written yet in every package; a package folder is enough here.
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    for name, spec in built_services().items():
        service = build_args(spec["build"]).get("SERVICE")
        assert service, f"{name}: build.args.SERVICE is not set"
        package = REPO / service
        assert package.is_dir(), f"{name}: SERVICE={service} is not a folder in the repository"
        assert (package / "__init__.py").is_file() or (package / "__main__.py").is_file(), (
            f"{name}: {service}/ is not a Python package"
        )
        # The Dockerfile installs .[SERVICE]; pip only warns about an unknown extra.
        assert service in extras, f"{name}: pyproject.toml has no extra named {service!r}"


def test_services_restart_and_report_health() -> None:
    services = load_compose()["services"]
    for name in (*SERVICES, "redis", "chroma"):
        spec = services[name]
        assert spec.get("restart") == "unless-stopped", f"{name}: restart policy"
        assert spec.get("healthcheck", {}).get("test"), f"{name}: no health check"
    for name in SERVICES:
        depends_on = services[name].get("depends_on")
        assert isinstance(depends_on, dict), f"{name}: depends_on must name conditions"
        assert depends_on.get("redis", {}).get("condition") == "service_healthy", name


def test_dockerfile_is_based_on_python_slim() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    stages: set[str] = set()
    bases = []
    for match in re.finditer(
        r"^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", text, re.IGNORECASE | re.MULTILINE
    ):
        image, stage = match.groups()
        if image not in stages:
            bases.append(image)
        if stage:
            stages.add(stage)
    assert bases, "deploy/Dockerfile has no FROM line"
    assert set(bases) == {BASE_IMAGE}, f"base images {bases}, expected only {BASE_IMAGE}"


@pytest.mark.parametrize("document", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_only_the_gateway_publishes_ports(document: Path) -> None:
    services = load_compose(document).get("services", {})
    publishing = {name for name, spec in services.items() if spec.get("ports")}
    assert publishing <= PUBLISHED, f"{document.name}: {sorted(publishing - PUBLISHED)} publish"
    if document == COMPOSE:
        assert publishing == PUBLISHED, "the gateway must publish its port"


def test_scale_override_only_names_services_of_compose() -> None:
    base = set(load_compose()["services"])
    override = load_compose(COMPOSE_FILES[1])["services"]
    assert set(override) <= base, f"unknown services: {sorted(set(override) - base)}"
    replicas = {name: spec.get("deploy", {}).get("replicas") for name, spec in override.items()}
    assert replicas.get("redactor", 0) > 1
    assert replicas.get("orchestrator", 0) > 1


def replicas(spec: dict[str, Any]) -> int:
    return int(spec.get("deploy", {}).get("replicas", 1))


def test_crawler_and_indexer_run_with_replicas() -> None:
    services = load_compose()["services"]
    for name in REPLICATED:
        assert replicas(services[name]) > 1, f"{name}: deploy.replicas"


@pytest.mark.parametrize("document", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_replicated_services_name_their_consumers_after_the_container(document: Path) -> None:
    # An empty DESKPILOT_NODE means the container's hostname, unique per replica; one fixed
    # value would give every replica the same consumer name and heartbeat key.
    base = load_compose()["services"]
    for name, spec in load_compose(document)["services"].items():
        if replicas(spec) > 1:
            environment = {**base[name].get("environment", {}), **spec.get("environment", {})}
            assert not environment.get("DESKPILOT_NODE"), f"{name}: DESKPILOT_NODE is fixed"


def test_worker_health_checks_ask_for_their_own_heartbeat() -> None:
    services = load_compose()["services"]
    for name in SERVICES:
        if name in PUBLISHED:
            continue
        test = services[name]["healthcheck"]["test"]
        assert test == ["CMD", "python", "-m", "contracts.heartbeat", "check", name], name


_SIZE = re.compile(r"^(\d+)\s*([kmg]?)b?$", re.IGNORECASE)


def test_crawler_has_room_for_chromium() -> None:
    crawler = load_compose()["services"]["crawler"]
    shm = str(crawler.get("shm_size", ""))
    match = _SIZE.match(shm)
    assert match, f"crawler: shm_size {shm!r} is missing or not a size"
    number, unit = int(match.group(1)), match.group(2).lower()
    size = number * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit]
    assert size >= 256 * 2**20, f"crawler: shm_size {shm} is below Chromium's needs"
    assert crawler["environment"].get("CHROMIUM_PATH") == "/usr/bin/chromium"
    # The crawler needs Redis only; Chroma is the indexer's.
    assert set(crawler["depends_on"]) == {"redis"}


def dockerfile_instructions() -> list[str]:
    """The Dockerfile's instructions with continuation lines joined and comments dropped."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [i.strip() for i in re.split(r"(?<!\\)\n", "\n".join(lines)) if i.strip()]


def test_only_the_crawler_image_installs_chromium() -> None:
    instructions = [" ".join(i.split()) for i in dockerfile_instructions()]
    installs = [i for i in instructions if "apt-get install" in i and "chromium" in i]
    assert len(installs) == 1, "deploy/Dockerfile must install chromium in one place"
    # Chosen by SERVICE in a shell case: only the crawler's branch names chromium.
    branches = dict(re.findall(r"(\S+)\) packages=\"([^\"]*)\"", installs[0]))
    assert "chromium" in branches.get("crawler", "").split(), branches
    others = {name: packages for name, packages in branches.items() if name != "crawler"}
    assert others, "no branch for the other services"
    assert not any("chromium" in packages for packages in others.values()), others
    assert "--no-install-recommends" in installs[0]


def test_no_browser_is_downloaded() -> None:
    for path in (DOCKERFILE, *COMPOSE_FILES):
        code = "\n".join(
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("#")
        )
        assert "playwright install" not in code, f"{path.name} downloads a browser"
