"""Text documents saved in any encoding pass ``POST /api/documents`` and reach the indexer byte for
byte; binary data named as text is refused with a clear error. The app runs on the real valkey
(a database of its own per test, gateway/tests/conftest.py)."""

from __future__ import annotations

import base64
import codecs
import io
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from redis import Redis

from contracts.events import DocumentSubmitted
from contracts.textfiles import decode_text
from contracts.topics import Topic
from gateway.tests.conftest import admin, stream_events

NOTE = (
    "Drucker im Büro München einrichten\n\n"
    "1. Öffnen Sie „Geräte und Drucker“.\n"
    "2. Wählen Sie den Drucker – fertig. Größe: A4, Kosten 12 €.\n"
)


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {"rate_limit_enabled": False}


def upload(client: TestClient, filename: str, data: bytes) -> Any:
    return client.post(
        "/api/documents",
        files={"file": (filename, data, "application/octet-stream")},
        headers=admin(),
    )


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("drucker.txt", codecs.BOM_UTF16_LE + NOTE.encode("utf-16-le")),
        ("drucker.md", NOTE.encode("utf-16-be")),  # no BOM: told by its NULs' pattern
        ("drucker.txt", NOTE.encode("utf-32")),
        ("drucker.txt", NOTE.encode("cp1252")),
        ("drucker.html", f"<p>{NOTE}</p>".encode("utf-8-sig")),
    ],
    ids=["utf-16-le-bom", "utf-16-be", "utf-32-bom", "cp1252", "utf-8-bom"],
)
def test_text_in_any_encoding_is_queued_for_the_indexer_as_sent(
    client: TestClient, raw: Redis, filename: str, data: bytes
) -> None:
    accepted = upload(client, filename, data)

    assert accepted.status_code == 202, accepted.text
    [submitted] = stream_events(raw, Topic.DOCUMENT_SUBMITTED, DocumentSubmitted)
    assert submitted.document_id == accepted.json()["id"]
    sent = base64.b64decode(submitted.content_b64)
    assert sent == data
    assert NOTE in decode_text(sent)  # what the indexer reads of it


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("screenshot.txt", png_bytes()),
        ("notes.md", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4),
        ("page.html", b"<p>text</p>\x00\x01\x02\x03" * 64),
        ("notes.txt", bytes(b for b in random.Random(9).randbytes(8192) if b)[:4096]),
    ],
    ids=["png", "executable", "html-with-controls", "random-without-nul"],
)
def test_binary_data_named_as_text_is_refused(
    client: TestClient, raw: Redis, filename: str, data: bytes
) -> None:
    refused = upload(client, filename, data)

    assert refused.status_code == 415, refused.text
    suffix = filename.rsplit(".", 1)[1]
    assert refused.json() == {
        "error_code": "unsupported_file_type",
        "detail": f"The file is named .{suffix} but holds binary data, not text.",
    }
    assert raw.xlen(Topic.DOCUMENT_SUBMITTED) == 0
