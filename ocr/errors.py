"""The one error a reader raises for content it will not read, with the code the user sees."""

from __future__ import annotations

from typing import Literal

ErrorCode = Literal[
    "unsupported_media_type", "attachment_too_large", "corrupt_attachment", "extraction_failed"
]


class AttachmentRefused(Exception):
    """The attachment's content cannot be read; ``detail`` is for the user and never quotes it."""

    def __init__(self, error_code: ErrorCode, detail: str) -> None:
        super().__init__(error_code)
        self.error_code: ErrorCode = error_code
        self.detail = detail
