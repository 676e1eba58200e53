"""Real EasyOCR on a dialog-like screenshot with known text, drawn here with Pillow.

How well the reader does on screenshots rendered in Chromium is ``deskpilot eval ocr``'s question
(``deploy/tests/evals``); this checks the reader itself: the lines come back as the picture shows
them, close to the text drawn, and an error code on the picture becomes a signature.
"""

from __future__ import annotations

import difflib
import io

from PIL import Image, ImageDraw, ImageFont

from ocr.images import ScreenReader

LINES = (
    "Windows Update",
    "We couldn't install some updates.",
    "Error 0x80070005: Access is denied.",
    "Try again later or contact the IT Service Desk.",
)


def dialog_png() -> bytes:
    """A light dialog: a grey title bar, the message lines below it, one line per row."""
    image = Image.new("RGB", (640, 40 + 36 * len(LINES)), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 640, 44), fill="#f3f3f3")
    font = ImageFont.truetype("DejaVuSans.ttf", 18)
    for row, line in enumerate(LINES):
        draw.text((20, 12 + 40 * row), line, fill="#1b1b1b", font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_dialog_is_read_line_by_line_and_its_error_code_becomes_a_signature(
    screen_reader: ScreenReader,
) -> None:
    read = screen_reader.read(dialog_png())

    assert read.lines == len(LINES), read.text
    similarity = difflib.SequenceMatcher(None, read.text, "\n".join(LINES)).ratio()
    assert similarity >= 0.95, read.text
    assert "0x80070005" in read.signatures
