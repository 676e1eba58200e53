"""The system Chromium that the crawler, the browser tests and the OCR screenshots drive.

Playwright never downloads a browser here: tests use Debian's ``chromium`` (``CHROMIUM_PATH``,
default ``/usr/bin/chromium``, as the crawler does). Where it is missing a test that needs it
skips, naming the one command that installs it; with ``CI=true`` it fails instead, so a CI run
can never pass having quietly left out every rendering test. ``make test`` installs it first.

Use the root conftest's ``chromium`` fixture (it returns the path), or mark a test or module
with :data:`needs_chromium`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

INSTALL_COMMAND = "sudo apt-get install -y --no-install-recommends chromium fonts-dejavu-core"
"""What ``make test`` runs as root; the command it names when it cannot."""


class TestEnvironment(BaseSettings):
    """What the test run reads from its environment about the machine it runs on."""

    __test__ = False  # not a test class, whatever its name
    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore")

    ci: bool = Field(False, validation_alias="CI", description="true on CI: fail, never skip.")
    chromium_path: Path = Field(
        Path("/usr/bin/chromium"),
        validation_alias=AliasChoices("CHROMIUM_PATH", "chromium_path"),
        description="The Chromium binary (the crawler's setting of the same name).",
    )


def missing_chromium(environment: TestEnvironment | None = None) -> str | None:
    """Why Chromium cannot be used here, or None when it can."""
    path = (environment or TestEnvironment()).chromium_path
    if os.access(path, os.X_OK):
        return None
    return f"no Chromium at {path}; install it with: {INSTALL_COMMAND}"


def require_chromium() -> Path:
    """The Chromium binary; skips the calling test without one, or fails it with ``CI=true``."""
    environment = TestEnvironment()
    reason = missing_chromium(environment)
    if reason is not None:
        if environment.ci:
            pytest.fail(f"{reason} (CI=true: tests that need Chromium fail, never skip)")
        pytest.skip(reason)
    return environment.chromium_path


needs_chromium = pytest.mark.usefixtures("chromium")
"""Mark for a test (or ``pytestmark`` for a module) that drives the system Chromium."""
