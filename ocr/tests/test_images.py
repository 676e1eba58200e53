"""What the service refuses before OCR, and how it turns detections into lines (no model here)."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from ocr.config import OcrSettings
from ocr.errors import AttachmentRefused
from ocr.images import (
    drop_window_controls,
    lines_from_detections,
    prepare_for_ocr,
    repair_codes,
    screen_image,
)

SETTINGS = OcrSettings(max_image_side=4000, max_image_pixels=4_000_000)


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_claiming(width: int, height: int) -> bytes:
    """A tiny, well-formed PNG whose header claims a ``width`` by ``height`` canvas."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" * 64)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", pixels)
        + png_chunk(b"IEND", b"")
    )


def refusal(data: bytes, settings: OcrSettings = SETTINGS) -> str:
    with pytest.raises(AttachmentRefused) as refused:
        screen_image(data, settings)
    return refused.value.error_code


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP", "BMP"])
def test_supported_formats_decode_to_rgb(fmt: str) -> None:
    image = Image.new("RGB", (40, 20), (200, 30, 30))

    screened = screen_image(encode(image, fmt), SETTINGS)

    assert screened.mode == "RGB"
    assert screened.size == (40, 20)


def test_random_bytes_are_unsupported() -> None:
    assert refusal(b"this is not an image at all" * 10) == "unsupported_media_type"


def test_other_image_formats_are_unsupported() -> None:
    assert refusal(encode(Image.new("RGB", (10, 10)), "TIFF")) == "unsupported_media_type"


def test_corrupt_png_is_refused() -> None:
    good = encode(Image.new("RGB", (64, 64), (10, 200, 10)), "PNG")
    damaged = bytearray(good)
    damaged[40:60] = b"\xff" * 20  # inside the IDAT chunk: its CRC no longer matches

    assert refusal(bytes(damaged)) == "corrupt_attachment"


def test_truncated_jpeg_is_refused() -> None:
    noisy = Image.effect_noise((200, 200), 50).convert("RGB")
    data = encode(noisy, "JPEG", quality=90)

    assert refusal(data[: len(data) // 2]) == "corrupt_attachment"


def test_header_only_is_refused_as_corrupt() -> None:
    assert refusal(b"\x89PNG\r\n\x1a\n" + b"\x00" * 10) == "corrupt_attachment"


def test_decompression_bomb_is_refused_before_decoding() -> None:
    bomb = png_claiming(100_000, 100_000)  # 10 gigapixels in ~100 bytes

    assert len(bomb) < 200
    assert refusal(bomb) == "attachment_too_large"


def test_too_many_pixels_is_refused() -> None:
    assert refusal(png_claiming(3_000, 3_000)) == "attachment_too_large"  # 9 MP > 4 MP


@pytest.mark.parametrize(("width", "height"), [(5_000, 10), (10, 5_000)])
def test_a_side_over_the_limit_is_refused(width: int, height: int) -> None:
    assert refusal(encode(Image.new("L", (width, height)), "PNG")) == "attachment_too_large"


def test_file_over_the_byte_limit_is_refused() -> None:
    settings = OcrSettings(max_image_bytes=1_000)
    noisy = Image.effect_noise((100, 100), 80).convert("RGB")

    assert refusal(encode(noisy, "PNG"), settings) == "attachment_too_large"


def test_animated_gif_reads_its_first_frame() -> None:
    frames = [Image.new("RGB", (30, 30), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100)
    assert Image.open(io.BytesIO(data)).n_frames == 2

    screened = screen_image(data, SETTINGS)

    assert screened.getpixel((15, 15)) == (255, 0, 0)


def test_transparent_background_becomes_white() -> None:
    image = Image.new("RGBA", (20, 20), (0, 0, 0, 0))

    assert screen_image(encode(image, "PNG"), SETTINGS).getpixel((5, 5)) == (255, 255, 255)


def test_upscaling_stays_within_the_ocr_side_limit() -> None:
    settings = OcrSettings(upscale=2.0, max_ocr_side=1_000)

    assert prepare_for_ocr(Image.new("RGB", (300, 100)), settings).size == (600, 200)
    assert prepare_for_ocr(Image.new("RGB", (800, 100)), settings).size == (1000, 125)


def box(left: float, top: float, right: float, bottom: float) -> list[list[float]]:
    return [[left, top], [right, top], [right, bottom], [left, bottom]]


def test_detections_are_rebuilt_as_lines_left_to_right() -> None:
    detections = [
        (box(200, 52, 320, 70), "Access is denied.", 0.9),
        (box(10, 10, 120, 30), "Windows Update", 0.9),
        (box(10, 50, 190, 72), "Error 0x80070005:", 0.9),
        (box(300, 100, 340, 120), "OK", 0.9),
        (box(200, 101, 280, 121), "Cancel", 0.9),
    ]

    assert lines_from_detections(detections) == [
        "Windows Update",
        "Error 0x80070005: Access is denied.",
        "Cancel OK",
    ]


@pytest.mark.parametrize(
    ("read", "fixed"),
    [
        ("Error OxCOO4F074 at", "Error 0xC004F074 at"),
        ("code Ox80O70005.", "code 0x80070005."),
        ("Oxford and Oxide", "Oxford and Oxide"),  # words, no digit
        ("0x204", "0x204"),
    ],
)
def test_codes_read_with_a_letter_o_are_repaired(read: str, fixed: str) -> None:
    assert repair_codes(read) == fixed


def test_window_controls_in_the_title_bar_are_dropped() -> None:
    detections = [
        (box(10, 10, 120, 30), "Microsoft Excel", 0.9),
        (box(520, 12, 600, 28), "0 X", 0.5),  # maximise and close, top right
        (box(10, 50, 190, 72), "Retries", 0.9),
        (box(560, 50, 580, 72), "0", 0.9),  # a value: not in the title bar
        (box(10, 12, 30, 28), "X", 0.9),  # top left: not where Windows puts controls
    ]

    kept = drop_window_controls(detections, width=620, height=200)

    assert [text for _, text, _ in kept] == ["Microsoft Excel", "Retries", "0", "X"]
    # Lower than 15 % of a short image, but on the title bar's row all the same.
    assert len(drop_window_controls(detections, width=620, height=120)) == 4
