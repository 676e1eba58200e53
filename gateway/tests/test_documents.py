"""The gateway's side of uploads without the app: file checks, and the status record on the
test's own database of the real valkey (``redis`` of gateway/tests/conftest.py)."""

from __future__ import annotations

from typing import Any, cast

import pytest
import redis.asyncio as aioredis
from starlette.requests import Request

from contracts.bus import Bus
from contracts.events import DocumentStatus
from gateway.config import GatewaySettings
from gateway.documents import DocumentRecords, DocumentService, check_upload, safe_filename
from gateway.errors import ApiError, ErrorCode
from gateway.uploads import Upload, read_upload


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("guide.pdf", "guide.pdf"),
        ("C:\\Users\\ann\\Desktop\\VPN guide.md", "VPN guide.md"),
        ("../../etc/passwd.txt", "passwd.txt"),
        ("tab\there\x00.html", "tabhere.html"),
        (".hidden.md", "hidden.md"),
        ("x" * 300 + ".pdf", "x" * 196 + ".pdf"),
    ],
)
def test_file_names_lose_folders_and_control_characters(raw: str, expected: str) -> None:
    assert safe_filename(raw) == expected


@pytest.mark.parametrize("raw", [None, "", "///", "\x01\x02"])
def test_a_file_needs_a_name(raw: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        safe_filename(raw)
    assert caught.value.code is ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("name", "data", "result"),
    [
        ("a.md", b"# A", "text/markdown"),
        ("a.MARKDOWN", b"# A", "text/markdown"),
        ("a.htm", b"<p>A</p>", "text/html"),
        ("a.txt", b"A", "text/plain"),
        ("a.pdf", b"%PDF-1.7\n...", "application/pdf"),
        ("a.pdf", b"\n  %PDF-1.4\n...", "application/pdf"),
        ("a.md", b"x" * 101, ErrorCode.FILE_TOO_LARGE),
        ("a.docx", b"PK", ErrorCode.UNSUPPORTED_FILE_TYPE),
        ("a.pdf", b"<html>", ErrorCode.UNSUPPORTED_FILE_TYPE),
        ("a.txt", b"a\x00b", ErrorCode.UNSUPPORTED_FILE_TYPE),
        ("a.md", b"", ErrorCode.INVALID_REQUEST),
    ],
)
def test_uploads_are_checked_by_size_extension_and_content(
    name: str, data: bytes, result: str | ErrorCode
) -> None:
    if not isinstance(result, ErrorCode):  # (an ErrorCode is a str too)
        assert check_upload(name, data, max_bytes=100) == result
        return
    with pytest.raises(ApiError) as caught:
        check_upload(name, data, max_bytes=100)
    assert caught.value.code is result
    assert caught.value.detail


def status(document_id: str, state: str, chunks: int = 0) -> DocumentStatus:
    return DocumentStatus.model_validate(
        {
            "correlation_id": "c",
            "conversation_id": document_id,
            "document_id": document_id,
            "status": state,
            "chunks": chunks,
        }
    )


async def test_deleted_is_final_whatever_arrives_later(redis: aioredis.Redis) -> None:
    records = DocumentRecords(redis)
    service = DocumentService(cast(Bus, None), records, GatewaySettings())
    document_id = "0" * 32

    await service.on_status(status(document_id, "indexed", 4))
    assert (await service.get(document_id)).chunks == 4
    await service.on_status(status(document_id, "deleted"))
    await service.on_status(status(document_id, "indexed", 4))  # a late redelivery
    record = await service.get(document_id)
    assert (record.status, record.chunks) == ("deleted", 0)


async def test_unknown_and_malformed_ids_are_404(redis: aioredis.Redis) -> None:
    service = DocumentService(cast(Bus, None), DocumentRecords(redis), GatewaySettings())
    for document_id in ("f" * 32, "not-an-id", "../x"):
        with pytest.raises(ApiError) as caught:
            await service.get(document_id)
        assert caught.value.code is ErrorCode.UNKNOWN_DOCUMENT


def multipart_request(chunks: list[bytes], headers: dict[str, str]) -> Request:
    """A request whose body arrives in ``chunks``, like a chunked upload without a length."""
    messages = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]
    received: list[int] = []

    async def receive() -> dict[str, Any]:
        received.append(1)
        return messages[len(received) - 1]

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/documents",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return Request(scope, receive)


def multipart_body(filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = "deskpilot-test-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


async def test_reading_stops_once_a_body_without_a_length_outgrows_the_limit() -> None:
    body, content_type = multipart_body("big.txt", b"x" * 300_000)
    chunks = [body[i : i + 50_000] for i in range(0, len(body), 50_000)]
    request = multipart_request(chunks, {"content-type": content_type})
    with pytest.raises(ApiError) as caught:
        await read_upload(request, max_bytes=10_000)
    assert caught.value.code is ErrorCode.FILE_TOO_LARGE


async def test_a_multipart_upload_is_read_whole_within_the_limit() -> None:
    body, content_type = multipart_body("notes.md", b"# Notes\n\nText.")
    request = multipart_request([body[:10], body[10:]], {"content-type": content_type})
    assert await read_upload(request, max_bytes=10_000) == Upload("notes.md", b"# Notes\n\nText.")
