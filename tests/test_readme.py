"""The README teaches in five minutes and tells the truth: its two commands first, CI calling its
test command, a length a newcomer reads, and links that lead somewhere.

The rest of the documentation (docs/, its settings table, diagrams and figures) is held to the code
by ``tests/test_docs.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAX_LINES = 250


def test_the_first_lines_are_the_run_and_test_commands() -> None:
    first_lines = README.splitlines()[:4]
    assert any(line.startswith("make up") for line in first_lines)
    assert any(line.startswith("make test") for line in first_lines)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    makefile = (ROOT / "Makefile").read_text()
    assert "\nup:" in makefile
    assert "\ntest:" in makefile


def test_the_readme_is_an_introduction_not_a_manual() -> None:
    lines = README.splitlines()
    assert len(lines) < MAX_LINES, f"{len(lines)} lines: move the detail into docs/"
    for section in ("## How it fits together", "## A five-minute tour", "## Read on"):
        assert section in lines, section
    assert "```mermaid" in README, "the diagram of the services and streams"


def test_the_readme_points_to_every_audience() -> None:
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README))
    for page in (
        "docs/users.md",
        "docs/operators.md",
        "docs/security.md",
        "docs/developers.md",
        "docs/figures.md",
        "docs/reference/settings.md",
        "docs/reference/asyncapi.md",
    ):
        assert page in linked, page


def test_the_tour_uses_files_that_exist() -> None:
    """The crawl step serves the help site the tests crawl and asks what only it answers."""
    assert "--directory tests/sites" in README
    assert "CRAWL_SEED_URLS=http://127.0.0.1:8081/help/index.html" in README
    assert (ROOT / "tests" / "sites" / "help" / "index.html").is_file()
    calibrate = (ROOT / "tests" / "sites" / "help" / "tablets" / "wacom-calibrate.html").read_text()
    assert "Calibrate the Wacom tablet pen" in calibrate
    assert "How do I calibrate the Wacom drawing tablet pen?" in README
