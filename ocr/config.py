"""Settings of the ocr service (environment prefix ``OCR_``)."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from contracts.settings import ServiceSettings


class OcrSettings(ServiceSettings):
    """Limits on attachments and how EasyOCR runs; shared bus settings come from the base class."""

    model_config = SettingsConfigDict(env_prefix="OCR_")

    concurrency: int = Field(
        1,
        ge=1,
        description=(
            "Attachments one process reads at once. OCR is CPU-bound and already uses "
            "OCR_TORCH_THREADS threads, so scale throughput by starting more ocr processes."
        ),
    )
    max_log_bytes: int = Field(
        5 * 1024 * 1024,
        ge=1,
        description="Largest log file read, in bytes; a larger one is refused as too large.",
    )
    max_image_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1,
        description="Largest image file read, in bytes; a larger one is refused as too large.",
    )
    max_image_side: int = Field(
        8000,
        ge=16,
        description=(
            "Largest width or height of an image, in pixels, read from the file header before "
            "any pixel is decoded."
        ),
    )
    max_image_pixels: int = Field(
        24_000_000,
        ge=256,
        description=(
            "Largest width × height of an image, checked from the header before decoding, so a "
            "decompression bomb (a small file claiming a huge canvas) is refused unread."
        ),
    )
    log_head_lines: int = Field(40, ge=0, description="Lines kept from the start of a long log.")
    log_tail_lines: int = Field(60, ge=0, description="Lines kept from the end of a long log.")
    log_max_lines: int = Field(
        300,
        ge=1,
        description=(
            "Most lines kept from a log (head, error-bearing lines and tail together, omission "
            "markers not counted); error lines beyond what fits are dropped."
        ),
    )
    log_max_chars: int = Field(
        20_000,
        ge=200,
        description=(
            "Most characters of text kept from one attachment; longer lines are cut and the "
            "excess dropped, keeping the head, errors and tail in proportion."
        ),
    )
    max_line_chars: int = Field(
        500, ge=40, description="A longer log line is cut to this many characters."
    )
    max_signatures: int = Field(
        20, ge=1, description="Most error signatures reported per attachment."
    )
    gpu: bool = Field(False, description="Run EasyOCR on a CUDA GPU (needs a CUDA build of torch).")
    torch_threads: int = Field(
        2,
        ge=1,
        description="CPU threads torch uses for OCR in this process (torch.set_num_threads).",
    )
    upscale: float = Field(
        1.5,
        ge=0.5,
        le=4.0,
        description=(
            "Factor by which an image is enlarged (Lanczos) before OCR, within OCR_MAX_OCR_SIDE; "
            "1 reads it as it is. On rendered screenshots 1.5 read with fewer errors than 1 or 2 "
            "(`deskpilot eval ocr --upscale` measures it)."
        ),
    )
    max_ocr_side: int = Field(
        2560,
        ge=64,
        description=(
            "Longest side, in pixels, of the image OCR reads; larger images are scaled down to "
            "it, bounding the time one screenshot takes."
        ),
    )
    invert_dark: bool = Field(
        False,
        description=(
            "Invert images that are mostly dark (dark themes, terminals) before OCR, so text is "
            "dark on light as the recogniser mostly saw in training."
        ),
    )

    @model_validator(mode="after")
    def _head_and_tail_fit(self) -> OcrSettings:
        if self.log_head_lines + self.log_tail_lines > self.log_max_lines:
            raise ValueError(
                "OCR_LOG_HEAD_LINES + OCR_LOG_TAIL_LINES must not exceed OCR_LOG_MAX_LINES"
            )
        return self
