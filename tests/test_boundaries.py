"""Services share only `contracts`: no service imports another service's package, nor `deploy`
(the runner, the command line, the evaluations and benchmarks, which import the services); a
service's tests count as its package (they take shared test helpers from `tests.support`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("gateway", "redactor", "ocr", "orchestrator", "crawler", "indexer", "ticketing")
DEPLOY = "deploy"


def imported_packages(source: str) -> set[str]:
    """Top-level packages a module imports, including imports inside functions."""
    packages = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            packages.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            packages.add(node.module.split(".")[0])
    return packages


def violations(package: str, files: dict[Path, str]) -> list[str]:
    forbidden = (set(SERVICES) - {package}) | {DEPLOY}
    return [
        f"{path.relative_to(ROOT)} imports {other}"
        for path, source in files.items()
        for other in sorted(imported_packages(source) & forbidden)
    ]


def package_sources(package: str) -> dict[Path, str]:
    return {path: path.read_text() for path in (ROOT / package).rglob("*.py")}


@pytest.mark.parametrize("package", [p for p in SERVICES if (ROOT / p).is_dir()])
def test_service_imports_no_other_service(package: str) -> None:
    assert violations(package, package_sources(package)) == []


def test_contracts_import_no_service() -> None:
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path, source in package_sources("contracts").items()
        for name in imported_packages(source) & set(SERVICES)
    ]
    assert found == []


def test_the_check_catches_a_cross_service_import() -> None:
    fake = {
        ROOT / "gateway" / "x.py": "import json\nfrom orchestrator.compose import compose_answer\n",
        ROOT / "gateway" / "y.py": "def f():\n    import indexer.store\n",
    }
    assert violations("gateway", fake) == [
        "gateway/x.py imports orchestrator",
        "gateway/y.py imports indexer",
    ]


def test_the_check_catches_an_import_of_deploy_in_a_service_or_its_tests() -> None:
    in_tests = {ROOT / "ocr" / "tests" / "test_x.py": "from deploy.evals.ocr import score\n"}
    in_code = {ROOT / "gateway" / "y.py": "def f():\n    import deploy.runner\n"}

    assert violations("ocr", in_tests) == ["ocr/tests/test_x.py imports deploy"]
    assert violations("gateway", in_code) == ["gateway/y.py imports deploy"]


def test_at_least_the_platform_services_exist() -> None:
    for package in ("gateway", "redactor", "orchestrator", "indexer", "contracts"):
        assert (ROOT / package / "__init__.py").is_file(), package
    for package in ("gateway", "redactor", "orchestrator", "indexer"):
        assert (ROOT / package / "__main__.py").is_file(), package


IMPORT_STATEMENT = re.compile(r"^[ \t]*(?:from|import)[ \t][^\n(]*(?:\([^)]*\))?", re.MULTILINE)


def imported_test_modules(source: str) -> list[str]:
    """The test modules (``test_*``) a module imports, whichever way it names them."""
    if not any("test_" in statement for statement in IMPORT_STATEMENT.findall(source)):
        return []  # parsing only the files that may import one keeps the check quick
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = [module, *(f"{module}.{alias.name}".lstrip(".") for alias in node.names)]
        found += [name for name in names if name.rsplit(".", 1)[-1].startswith("test_")]
    return found


def python_sources() -> dict[Path, str]:
    """Every Python file of the repository (not the virtualenv, caches or other hidden folders)."""
    return {
        path: path.read_text()
        for path in ROOT.rglob("*.py")
        if not any(
            part.startswith(".") or part == "node_modules" for part in path.relative_to(ROOT).parts
        )
    }


def test_no_module_imports_a_test_module() -> None:
    """What two test modules share is a fixture in their package's ``conftest.py`` or a helper
    module (``tests/support`` when several packages use it), never one test module's insides."""
    found = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path, source in python_sources().items()
        for name in imported_test_modules(source)
    ]
    assert found == []


def test_the_check_catches_every_way_of_importing_a_test_module() -> None:
    source = (
        "from gateway.tests.test_slack import answer\n"
        "from indexer.tests import test_sources as sources\n"
        "from .test_mcp import session\n"
        "def f():\n    import tests.test_k8s\n"
        "from gateway.tests.conftest import serve\nfrom tests.support import wait_until\n"
    )
    assert imported_test_modules(source) == [
        "gateway.tests.test_slack",
        "indexer.tests.test_sources",
        ".test_mcp",
        "tests.test_k8s",
    ]
