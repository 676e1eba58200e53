"""The shared text decoder on files larger than what its detector samples: the encoding found in
the head must read the whole file, or the whole file decides."""

from __future__ import annotations

import pytest

from contracts.textfiles import NotText, read_text

HEAD_BYTES = 300 * 1024
"""More than the detector samples (256 KiB)."""


def test_accented_letters_after_a_long_ascii_head_are_read() -> None:
    head = "2024-03-05 10:12:01 INFO service started, all checks passed\n"
    tail = "2024-03-05 10:13:07 FEHLER Größe überschritten für Laufwerk Ü: – Zugriff verweigert\n"
    text = head * (HEAD_BYTES // len(head)) + tail

    decoded = read_text(text.encode("cp1252"))

    assert decoded.text == text
    assert decoded.encoding == "cp1252"


def test_utf16_cut_inside_a_character_at_the_sample_end_is_read() -> None:
    # "🙂" is a surrogate pair (4 bytes in UTF-16): the sample ends inside the first one.
    text = "x" * (256 * 1024 // 2 - 1) + "🙂 Größe\n" * 10

    decoded = read_text(text.encode("utf-16-le"))

    assert decoded.text == text


def test_binary_data_larger_than_the_sample_is_not_text() -> None:
    with pytest.raises(NotText):
        read_text(b"\x00\x01\x02\x03\xff\xfe\xfd" * (HEAD_BYTES // 7))
