"""Fixtures of the ocr service's tests.

Building EasyOCR's reader loads two networks (seconds), so one :class:`ScreenReader` serves the
whole session; tests that run the worker hand it to :func:`ocr.app.create_worker`.
"""

from __future__ import annotations

import pytest

from ocr.config import OcrSettings
from ocr.images import ScreenReader


@pytest.fixture(scope="session")
def screen_reader() -> ScreenReader:
    return ScreenReader(OcrSettings())
