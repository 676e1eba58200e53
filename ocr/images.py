"""Screenshots: bytes in, the text on them as lines and their error signatures out.

* :func:`screen_image` refuses what it will not decode, before decoding a pixel: files over the
  byte limit, formats other than PNG, JPEG, GIF, WebP and BMP, and canvases wider, taller or
  larger than the settings allow (a decompression bomb claims a huge canvas in a small file).
  Then it verifies the file's structure and decodes it (a GIF's first frame), refusing corrupt
  or truncated files.
* :class:`ScreenReader` holds one EasyOCR reader, built once (seconds: it loads two networks),
  with the weights of the ``easyocr_en_models`` package and downloads disabled. Its
  :meth:`ScreenReader.read` rebuilds the text as lines: detections grouped by vertical position,
  ordered left to right.
"""

from __future__ import annotations

import io
import re
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from ocr import signatures
from ocr.config import OcrSettings
from ocr.errors import AttachmentRefused

FORMATS = frozenset({"PNG", "JPEG", "GIF", "WEBP", "BMP"})
_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")

UNSUPPORTED_DETAIL = (
    "This image format cannot be read. Attach the screenshot as PNG, JPEG, GIF, WebP or BMP."
)
CORRUPT_DETAIL = (
    "The image file is damaged or incomplete and cannot be read. Take the screenshot again and "
    "attach the new file."
)


@dataclass(frozen=True)
class ImageText:
    """What was read from a screenshot."""

    text: str
    signatures: list[str]
    lines: int
    width: int
    height: int


def screen_image(data: bytes, settings: OcrSettings) -> Image.Image:
    """The image's first frame as RGB, once it passed every limit and check; else refused."""
    if len(data) > settings.max_image_bytes:
        raise AttachmentRefused(
            "attachment_too_large",
            f"The image is larger than {settings.max_image_bytes // (1024 * 1024)} MiB. Attach "
            "a PNG or JPEG screenshot of the window that shows the error.",
        )
    with warnings.catch_warnings():
        # Pillow's own bomb check warns below its hard limit; ours below is stricter anyway.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            probe = Image.open(io.BytesIO(data))
        except Image.DecompressionBombError as exc:
            raise _too_many_pixels(settings) from exc
        except UnidentifiedImageError as exc:
            known = data.startswith(_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")
            raise AttachmentRefused(
                "corrupt_attachment" if known else "unsupported_media_type",
                CORRUPT_DETAIL if known else UNSUPPORTED_DETAIL,
            ) from exc
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            # A known header over a cut-off or garbled body ("Truncated File Read").
            raise AttachmentRefused("corrupt_attachment", CORRUPT_DETAIL) from exc
        if probe.format not in FORMATS:
            raise AttachmentRefused("unsupported_media_type", UNSUPPORTED_DETAIL)
        width, height = probe.size
        if (
            width > settings.max_image_side
            or height > settings.max_image_side
            or width * height > settings.max_image_pixels
        ):
            raise _too_many_pixels(settings)
        if width < 1 or height < 1:
            raise AttachmentRefused("corrupt_attachment", CORRUPT_DETAIL)
        try:
            probe.verify()
            # verify() leaves the image unusable: open again to decode the first frame.
            image = Image.open(io.BytesIO(data))
            image.seek(0)
            image.load()
            return _as_rgb(image)
        except Image.DecompressionBombError as exc:
            raise _too_many_pixels(settings) from exc
        except (OSError, SyntaxError, ValueError, EOFError, IndexError) as exc:
            raise AttachmentRefused("corrupt_attachment", CORRUPT_DETAIL) from exc


def _too_many_pixels(settings: OcrSettings) -> AttachmentRefused:
    return AttachmentRefused(
        "attachment_too_large",
        f"The image is too large to read: at most {settings.max_image_side} pixels a side and "
        f"{settings.max_image_pixels / 1e6:g} megapixels in all. Attach a screenshot of the "
        "window that shows the error, not of the whole desktop at full resolution.",
    )


def _as_rgb(image: Image.Image) -> Image.Image:
    """Transparent parts become white, like a dialog's background, rather than black."""
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def prepare_for_ocr(image: Image.Image, settings: OcrSettings) -> Image.Image:
    """Scale the image the way OCR reads best: enlarged by ``upscale``, within ``max_ocr_side``."""
    scale = settings.upscale
    longest = max(image.size)
    if longest * scale > settings.max_ocr_side:
        scale = settings.max_ocr_side / longest
    if abs(scale - 1.0) < 1e-3:
        return image
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


Detection = tuple[list[list[float]], str, float]
"""EasyOCR's (four corner points, text, confidence)."""


# Minimise, maximise and close in a title bar read as "- 0 X": glyphs of icons, not text.
_CONTROL_GLYPHS = re.compile(r"[-_–—=xX0Oo□■]{1,3}")


def drop_window_controls(
    detections: list[Detection], width: float, height: float
) -> list[Detection]:
    """Detections of window controls removed: at most three control glyphs near the top right
    corner (on the topmost row of text, or in the top 15 % of the image, and starting in its
    right third)."""
    spans = [_vertical_span(corners) for corners, _, _ in detections]
    top_row = min(spans, key=lambda span: span[0] + span[1], default=(0.0, 0.0))
    kept = []
    for detection, (top, bottom) in zip(detections, spans, strict=True):
        corners, text, _ = detection
        centre = (top + bottom) / 2
        control = (
            _CONTROL_GLYPHS.fullmatch(text.replace(" ", "")) is not None
            and (top_row[0] <= centre <= top_row[1] or centre < 0.15 * height)
            and min(float(point[0]) for point in corners) > 2 * width / 3
        )
        if not control:
            kept.append(detection)
    return kept


def _vertical_span(corners: list[list[float]]) -> tuple[float, float]:
    ys = [float(point[1]) for point in corners]
    return min(ys), max(ys)


def lines_from_detections(detections: list[Detection]) -> list[str]:
    """The detected words as lines of text, top to bottom, each left to right.

    A detection belongs to a line when its vertical centre lies within the line's first box,
    so text of one visual line stays together even when EasyOCR splits it into several boxes.
    """
    boxes = []
    for corners, text, _confidence in detections:
        text = text.strip()
        if not text:
            continue
        ys = [float(point[1]) for point in corners]
        xs = [float(point[0]) for point in corners]
        boxes.append((min(ys), max(ys), min(xs), text))
    boxes.sort(key=lambda box: (box[0] + box[1]) / 2)
    rows: list[tuple[float, float, list[tuple[float, str]]]] = []
    for top, bottom, left, text in boxes:
        centre = (top + bottom) / 2
        if rows and rows[-1][0] <= centre <= rows[-1][1]:
            rows[-1][2].append((left, text))
        else:
            rows.append((top, bottom, [(left, text)]))
    return [" ".join(text for _, text in sorted(words)) for _, _, words in rows]


# A hex code read with a letter O for a zero ("Ox80O70005"): the recogniser confuses the two, and
# the signature extractor needs the digits. Only tokens made of hex digits and O, with a digit.
_HEX_CODE = re.compile(r"(?<![\w])[0Oo][xX]((?=[0-9A-Fa-fOo]*\d)[0-9A-Fa-fOo]{3,8})(?![\w])")


def repair_codes(line: str) -> str:
    """``0x`` codes as written on screen, with the letter O read for a zero put right."""
    return _HEX_CODE.sub(lambda m: "0x" + re.sub("[Oo]", "0", m.group(1)), line)


class ScreenReader:
    """One EasyOCR reader for the process; :meth:`read` may be called from any thread.

    Building it loads the text detector and recogniser (seconds), so do it once, off the event
    loop. Reads are serialised: torch already spreads one read over ``torch_threads`` threads.
    """

    def __init__(self, settings: OcrSettings, reader: Any | None = None) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._reader = reader if reader is not None else build_reader(settings)

    def read(self, data: bytes) -> ImageText:
        image = screen_image(data, self.settings)
        lines = self.read_lines(image)
        text = "\n".join(lines)
        return ImageText(
            text=text,
            signatures=signatures.extract(text, self.settings.max_signatures),
            lines=len(lines),
            width=image.width,
            height=image.height,
        )

    def read_lines(self, image: Image.Image) -> list[str]:
        """The text of a screened image, as lines."""
        import numpy as np

        prepared = prepare_for_ocr(image, self.settings)
        if self.settings.invert_dark and _is_dark(prepared):
            prepared = ImageOps.invert(prepared)
        with self._lock, warnings.catch_warnings():
            # torch warns on every read that there is no GPU to pin memory for.
            warnings.filterwarnings("ignore", message=".*pin_memory.*", category=UserWarning)
            detections = self._reader.readtext(np.asarray(prepared), detail=1, paragraph=False)
        detections = drop_window_controls(detections, prepared.width, prepared.height)
        return [repair_codes(line) for line in lines_from_detections(detections)]


def _is_dark(image: Image.Image) -> bool:
    """Light text on a dark background (dark themes, terminals)."""
    grey = image.convert("L").reduce(4) if min(image.size) >= 8 else image.convert("L")
    histogram = grey.histogram()
    mean = sum(level * count for level, count in enumerate(histogram)) / max(sum(histogram), 1)
    return mean < 110


def build_reader(settings: OcrSettings) -> Any:
    """EasyOCR's reader on the packaged English weights; it never downloads anything."""
    import easyocr
    import easyocr_en_models
    import torch

    torch.set_num_threads(settings.torch_threads)
    with warnings.catch_warnings():
        # EasyOCR quantises its recogniser with APIs torch has deprecated; nothing to act on.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize.*", category=UserWarning)
        return easyocr.Reader(
            ["en"],
            gpu=settings.gpu,
            model_storage_directory=easyocr_en_models.model_dir(),
            download_enabled=False,
            verbose=False,
        )
