"""Fixtures for the redactor's unit tests.

Loading the spaCy model takes seconds, so the analyzer is built once per test session and shared;
tests that need other settings build a cheap :class:`Redactor` around the same analyzer.
"""

from __future__ import annotations

import pytest
from presidio_analyzer import AnalyzerEngine

from redactor.config import RedactorSettings
from redactor.service import Redactor, build_analyzer


@pytest.fixture(scope="session")
def settings() -> RedactorSettings:
    return RedactorSettings()


@pytest.fixture(scope="session")
def analyzer(settings: RedactorSettings) -> AnalyzerEngine:
    return build_analyzer(settings)


@pytest.fixture(scope="session")
def redactor(settings: RedactorSettings, analyzer: AnalyzerEngine) -> Redactor:
    return Redactor(settings, analyzer=analyzer)
