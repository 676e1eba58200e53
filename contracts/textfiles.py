"""The text of a text file whatever encoding it was saved in, and the line between text and binary.

Every service that receives a file someone calls text decodes it here: the gateway to tell an
upload's text from binary data with a misleading name, the indexer to read documents, crawled
pages and ticket exports, the ocr service to read log files. One decoder means a file the gateway
accepts is one the indexer can read, and a German log reads the same in a ticket as in a document.

The rules, in order: a byte-order mark decides (UTF-8, UTF-16, UTF-32); else valid UTF-8 is read
as UTF-8, exactly; else charset-normalizer detects the encoding: UTF-16 or UTF-32 without a BOM
when the bytes hold NULs (every ASCII character has one or three), otherwise a legacy code page,
cp1252 whenever it reads the text about as cleanly as the detector's first choice. What nothing
decodes, or what decodes full of control characters, is binary (:class:`NotText`).
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

from charset_normalizer import from_bytes

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16's: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_WIDE_ENCODINGS = ("utf_16", "utf_32")
"""charset-normalizer's names of the encodings whose text holds NUL bytes."""
WESTERN_CODE_PAGE = "cp1252"
"""What a Windows editor saves "ANSI" text in for Western languages, and what Latin-1 files fit."""
_WESTERN_CHAOS_MARGIN = 0.1
"""How much more "mess" (charset-normalizer's chaos, 0-1) cp1252 may show than the best guess and
still be preferred. Short Western text fits many code pages about equally, and the detector's
first choice is then often cp1250, cp775 or even UTF-16, which turn "è" or "ü" into other
letters; text in another script (Cyrillic, Greek) read as cp1252 is far messier than that."""
_DETECTION_SAMPLE_BYTES = 256 * 1024
"""How much of a file the detector reads (a multiple of 4, so no UTF-16/32 character is cut).
It decodes what it reads once per candidate encoding: 5 MB took half a second, 256 KiB 30 ms."""
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
"""Control characters that text never holds (tab, newlines, form feed and ESC are allowed)."""
_MAX_CONTROL_SHARE = 0.01


class NotText(ValueError):
    """The bytes are binary data, not text in any encoding (the caller names the file)."""

    def __init__(self) -> None:
        super().__init__("the file holds binary data, not text")


class DecodedText(NamedTuple):
    text: str
    encoding: str
    """The codec the bytes were read with (Python's name), without the byte-order mark's."""


def decode_text(data: bytes) -> str:
    """The text of a text file (see the module's rules); :class:`NotText` for binary data."""
    return read_text(data).text


def read_text(data: bytes) -> DecodedText:
    """The text of a text file and the encoding it was read in; :class:`NotText` for binary."""
    decoded = _decoded(data)
    text = decoded.text
    if "\x00" in text or len(_CONTROL.findall(text)) > _MAX_CONTROL_SHARE * len(text):
        raise NotText
    return decoded


def _decoded(data: bytes) -> DecodedText:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return DecodedText(data[len(bom) :].decode(encoding), encoding)
            except UnicodeDecodeError:
                raise NotText from None
    wide = b"\x00" in data
    if not wide:
        try:
            return DecodedText(data.decode("utf-8"), "utf-8")
        except UnicodeDecodeError:
            pass
    detected = _detected(data[:_DETECTION_SAMPLE_BYTES], wide)
    if len(data) > _DETECTION_SAMPLE_BYTES and not _reads(data, detected):
        # The sample's end cut a character the detector needed, or the rest holds bytes the
        # sample did not (an ASCII head, accented letters further on): detect on all of it.
        detected = _detected(data, wide)
    if detected is None:
        raise NotText
    return DecodedText(data.decode(detected, errors="replace"), detected)


def _reads(data: bytes, encoding: str | None) -> bool:
    """Whether ``encoding`` decodes all of ``data`` without an error."""
    if encoding is None:
        return False
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def _detected(data: bytes, wide: bool) -> str | None:
    matches = [
        match for match in from_bytes(data) if match.encoding.startswith(_WIDE_ENCODINGS) == wide
    ]
    if not matches:
        return None
    best = matches[0]
    western = any(
        WESTERN_CODE_PAGE in match.could_be_from_charset
        and match.chaos <= best.chaos + _WESTERN_CHAOS_MARGIN
        for match in matches
    )
    return WESTERN_CODE_PAGE if western else best.encoding
