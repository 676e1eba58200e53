"""``deskpilot eval ocr``'s target on screenshots rendered by ``deskpilot screenshots`` in the
system Chromium, read by the ocr service's own reader (real EasyOCR)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deploy.evals.ocr import score
from deploy.evals.screenshots import build_scenes, render
from ocr.config import OcrSettings
from ocr.images import ImageText, ScreenReader
from tests.support.chromium import needs_chromium

pytestmark = needs_chromium

# A Windows dialog, a terminal and a macOS dialog of the default set.
SCENES = (0, 1, 2)


@pytest.fixture(scope="module")
def screen_reader() -> ScreenReader:
    return ScreenReader(OcrSettings())


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[bytes, str]]:
    scenes = [scene for i, scene in enumerate(build_scenes(max(SCENES) + 1)) if i in SCENES]
    out = tmp_path_factory.mktemp("screenshots")
    pngs = asyncio.run(render(scenes, out))
    return [(png.read_bytes(), Path(png).with_suffix(".txt").read_text()) for png in pngs]


@pytest.fixture(scope="module")
def readings(
    screen_reader: ScreenReader, screenshots: list[tuple[bytes, str]]
) -> list[tuple[ImageText, str]]:
    return [(screen_reader.read(png), truth) for png, truth in screenshots]


def test_rendered_screenshots_are_read_within_five_percent_cer(
    readings: list[tuple[ImageText, str]],
) -> None:
    distance = chars = 0
    for read, truth in readings:
        d, c = score(read.text, truth)
        assert d / c <= 0.10, f"CER {d / c:.1%} on one screenshot:\n{read.text}\n---\n{truth}"
        assert read.lines == len(truth.splitlines())
        distance, chars = distance + d, chars + c

    assert distance / chars <= 0.05


def test_error_codes_on_a_screenshot_become_signatures(
    readings: list[tuple[ImageText, str]],
) -> None:
    read, truth = readings[0]  # a Windows dialog with an 0x8... code

    codes = [word.strip("().:") for word in truth.split() if word.startswith("0x8")]
    assert codes
    assert set(codes) <= set(read.signatures)
