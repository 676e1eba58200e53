"""One attachment in, its text and signatures out, or the reason it cannot be read.

The logic the handler calls; it knows nothing of the bus. Log parsing is cheap and pure; images
go through the process's one :class:`ocr.images.ScreenReader`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Literal

from ocr.config import OcrSettings
from ocr.errors import AttachmentRefused
from ocr.images import ScreenReader
from ocr.logs import read_log


@dataclass(frozen=True)
class Extracted:
    """What the ocr service publishes about an attachment it could read."""

    text: str
    signatures: list[str]
    first_error_at: str | None
    lines: int


class AttachmentReader:
    """Reads attachments of both kinds with the settings' limits."""

    def __init__(self, settings: OcrSettings, screens: ScreenReader) -> None:
        self.settings = settings
        self.screens = screens

    def read(self, kind: Literal["log", "image"], content_b64: str) -> Extracted:
        """Raises :class:`AttachmentRefused` for content it will not or cannot read."""
        data = decode_content(content_b64)
        if kind == "log":
            log = read_log(data, self.settings)
            return Extracted(log.text, log.signatures, log.first_error_at, log.lines)
        image = self.screens.read(data)
        if not image.text.strip():
            raise AttachmentRefused(
                "extraction_failed",
                "No text could be read from this image. Attach a sharper screenshot of the "
                "error, or type the error message.",
            )
        # A page of small print can hold more text than a log is allowed to keep.
        return Extracted(
            image.text[: self.settings.log_max_chars], image.signatures, None, image.lines
        )


def decode_content(content_b64: str) -> bytes:
    try:
        return base64.b64decode(content_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise AttachmentRefused(
            "corrupt_attachment", "The upload arrived damaged. Attach the file again."
        ) from exc
