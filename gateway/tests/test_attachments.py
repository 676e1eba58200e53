"""The gateway's screening of attachments, without a server: the type comes from the bytes."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from gateway.attachments import AttachmentService, sniff
from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode
from gateway.uploads import Upload


def image_bytes(fmt: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(out, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize(
    ("fmt", "content_type"),
    [
        ("PNG", "image/png"),
        ("JPEG", "image/jpeg"),
        ("GIF", "image/gif"),
        ("WEBP", "image/webp"),
        ("BMP", "image/bmp"),
    ],
)
def test_images_are_recognised_by_their_bytes(fmt: str, content_type: str) -> None:
    assert sniff(image_bytes(fmt)) == ("image", content_type)


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        (b"2026-11-25 10:00:01 ERROR vpnagent: connect failed 0x800704cf\n", "text/plain"),
        (b'{"level": "error", "code": 503}', "application/json"),
        (b"<?xml version='1.0'?><Event><Level>2</Level></Event>", "application/xml"),
        (b"time,level,message\n10:00,ERROR,timeout\n", "text/plain"),
        ("\ufeffcaf\u00e9 log\n".encode(), "text/plain"),
        ("Fehler beim Verbinden\r\n".encode("utf-16"), "text/plain"),
        # UTF-16 without a byte-order mark, as some Windows tools write logs: NULs in every
        # other byte, yet text (the ocr service reads it).
        ("2026-11-25 Fehler beim Verbinden mit dem VPN\r\n".encode("utf-16-le"), "text/plain"),
        ('{"level": "error", "code": 503}'.encode("utf-16-be"), "application/json"),
        ("Erreur r\u00e9seau\n".encode("cp1252"), "text/plain"),
        (b"\x1b[31mERROR\x1b[0m coloured terminal output\n", "text/plain"),
    ],
)
def test_text_logs_in_any_encoding_are_logs(data: bytes, content_type: str) -> None:
    assert sniff(data) == ("log", content_type)


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.7\n1 0 obj\n",
        b"PK\x03\x04\x14\x00\x00\x00zip archive",
        b"MZ\x90\x00\x03\x00\x00\x00windows executable",
        b"\x7fELF\x02\x01\x01linux executable",
        bytes(range(256)) * 4,
    ],
)
def test_binaries_are_refused_whatever_their_name(data: bytes) -> None:
    with pytest.raises(ApiError) as caught:
        sniff(data)
    assert caught.value.code is ErrorCode.UNSUPPORTED_FILE_TYPE


def service(**limits: int) -> AttachmentService:
    settings = GatewaySettings(**limits)  # type: ignore[arg-type]
    return AttachmentService(bus=None, turns=None, records=None, settings=settings)  # type: ignore[arg-type]


def test_size_limits_apply_per_kind() -> None:
    screen = service(max_log_bytes=100, max_image_bytes=10_000).screen
    assert screen(Upload("big.png", image_bytes("PNG")))[0] == "image"
    with pytest.raises(ApiError) as caught:
        screen(Upload("app.log", b"ERROR timeout\n" * 20))
    assert caught.value.code is ErrorCode.FILE_TOO_LARGE
    assert "at most 100 bytes" in caught.value.detail


def test_an_empty_file_is_refused() -> None:
    with pytest.raises(ApiError) as caught:
        service().screen(Upload("empty.log", b""))
    assert caught.value.code is ErrorCode.INVALID_REQUEST
