"""The README tells the truth: its two commands, its settings table, CI calling its test command."""

from __future__ import annotations

from pathlib import Path

from deploy.envdoc import BEGIN, END, table

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


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


def test_settings_table_matches_the_settings_classes() -> None:
    documented = README.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert documented == table(), "run: python -m deploy.envdoc --write README.md"


def test_every_variable_has_a_meaning() -> None:
    for row in table().splitlines()[2:]:
        assert row.rstrip(" |").split("|")[-1].strip(), row
