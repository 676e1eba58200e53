"""Uploaded documents end to end: gateway → document.submitted → indexer → document.status.

The whole stack runs as `deskpilot up` starts it, with a real admin token and a small upload
limit; documents are uploaded, found in answers, deleted and gone, through the public API only.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from typing import Any
from uuid import uuid4

import chromadb
import httpx
import pytest
import redis

from deploy.runner import Stack
from tests.support import wait_until
from tests.support.pdf import build_pdf
from tests.support.stack import SHARED_ADMIN_TOKEN, SHARED_MAX_UPLOAD_BYTES

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]

TOKEN = SHARED_ADMIN_TOKEN
MAX_UPLOAD = SHARED_MAX_UPLOAD_BYTES
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
QUASAR_QUESTION = "How do I reset the Quasar-7 badge printer?"

PRINTER_MD = b"""# Reset the Quasar-7 badge printer

The Quasar-7 badge printer at reception stops printing visitor badges when its ribbon
cartridge runs low or the print head overheats.

1. Open the front cover of the Quasar-7 and remove the ribbon cartridge.
2. Hold the blue Quasar reset key for ten seconds until the status light blinks amber.
3. Reinsert the ribbon cartridge and print a test badge from the visitor kiosk.
"""

PLOTTER_PDF = build_pdf(
    [
        [
            (20, "Calibrate the Nimbus-5 label plotter"),
            (11, "The Nimbus-5 label plotter in the warehouse prints shipping labels."),
            (11, "After a roll change its labels come out skewed until it is calibrated."),
            (14, "Calibration steps"),
            (11, "1. Load a fresh roll of Nimbus thermal labels."),
            (11, "2. Press and hold the feed button until three blank labels come out."),
            (11, "3. Print the calibration grid from the plotter's menu."),
        ],
        [
            (14, "When to call the service desk"),
            (11, "If the grid is still skewed after two calibrations, the platen roller is"),
            (11, "worn and the plotter needs a technician visit."),
        ],
    ],
    title="Nimbus-5 label plotter calibration",
)


def upload(
    stack: Stack, filename: str, data: bytes, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(
        f"{stack.url}/api/documents",
        files={"file": (filename, data, "application/octet-stream")},
        headers=ADMIN if headers is None else headers,
        timeout=30,
    )


async def status_of(stack: Stack, document_id: str, wanted: str) -> dict[str, Any]:
    """Poll GET /api/documents/{id} until it reports ``wanted`` (or fails, which it returns)."""
    last: dict[str, Any] = {}

    async def reached() -> dict[str, Any] | None:
        nonlocal last
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{stack.url}/api/documents/{document_id}", headers=ADMIN)
        assert response.status_code == 200, response.text
        last = response.json()
        return last if last["status"] in (wanted, "failed") else None

    return await wait_until(reached, 60, interval_s=0.2, message=lambda: f"last: {last}")


def cited_urls(body: dict[str, Any]) -> list[str]:
    return [citation["url"] for citation in body["citations"]]


async def answer_when(
    stack: Stack, question: str, condition: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Ask until the answer meets ``condition``. Search sees new and deleted chunks at once, but
    the orchestrator's keyword index is rebuilt only every few seconds, so give it that long."""
    last: dict[str, Any] = {}

    async def answered() -> dict[str, Any] | None:
        nonlocal last
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"{stack.url}/api/chat", json={"text": question}, timeout=90
            )
        last = response.json()
        return last if condition(last) else None

    return await wait_until(answered, 30, interval_s=1.0, message=lambda: f"last: {last}")


async def test_markdown_upload_is_answered_from_then_deleted(stack: Stack) -> None:
    accepted = upload(stack, "quasar-printer.md", PRINTER_MD)
    assert accepted.status_code == 202, accepted.text
    document_id = accepted.json()["id"]
    assert accepted.json() == {"id": document_id, "status": "queued"}

    indexed = await status_of(stack, document_id, "indexed")
    assert indexed["status"] == "indexed", indexed
    assert indexed["id"] == document_id
    assert indexed["chunks"] >= 1

    url = f"upload://{document_id}/quasar-printer.md"
    body = await answer_when(stack, QUASAR_QUESTION, lambda b: cited_urls(b)[:1] == [url])
    assert "ribbon cartridge" in body["answer"]  # quoted from the upload (answer or checklist)

    # The bytes do not linger on the bus once the document is indexed.
    client = redis.Redis.from_url(stack.redis_url)
    for _, fields in client.xrange("document.submitted"):
        assert document_id.encode() not in fields[b"__data__"]

    deleted = httpx.delete(f"{stack.url}/api/documents/{document_id}", headers=ADMIN, timeout=30)
    assert deleted.status_code == 202
    assert deleted.json() == {"id": document_id, "status": "queued"}
    gone = await status_of(stack, document_id, "deleted")
    assert gone["status"] == "deleted", gone
    assert gone["chunks"] == 0

    await answer_when(stack, QUASAR_QUESTION, lambda b: url not in cited_urls(b))

    # Deleting again is harmless and changes nothing.
    repeated = httpx.delete(f"{stack.url}/api/documents/{document_id}", headers=ADMIN, timeout=30)
    assert repeated.status_code == 202
    assert (await status_of(stack, document_id, "deleted"))["status"] == "deleted"


async def test_pdf_upload_is_answered_from_its_text_layer(stack: Stack) -> None:
    accepted = upload(stack, "Nimbus plotter.pdf", PLOTTER_PDF)
    assert accepted.status_code == 202, accepted.text
    document_id = accepted.json()["id"]
    indexed = await status_of(stack, document_id, "indexed")
    assert indexed["status"] == "indexed", indexed

    url = f"upload://{document_id}/Nimbus%20plotter.pdf"
    body = await answer_when(
        stack,
        "How do I calibrate the Nimbus-5 label plotter?",
        lambda b: cited_urls(b)[:1] == [url],
    )
    assert body["citations"][0]["title"] == "Nimbus-5 label plotter calibration"
    assert "Nimbus thermal labels" in body["answer"]

    # The stack is shared with other modules: leave its knowledge as it was.
    deleted = httpx.delete(f"{stack.url}/api/documents/{document_id}", headers=ADMIN, timeout=30)
    assert deleted.status_code == 202
    assert (await status_of(stack, document_id, "deleted"))["status"] == "deleted"


async def test_an_unreadable_pdf_fails_with_a_reason_that_quotes_nothing(stack: Stack) -> None:
    secret = b"TOPSECRET-PAYLOAD-4711"
    accepted = upload(stack, "broken.pdf", b"%PDF-1.7\n" + secret + b"\n%%EOF")
    assert accepted.status_code == 202
    failed = await status_of(stack, accepted.json()["id"], "failed")
    assert failed["status"] == "failed"
    assert failed["chunks"] == 0
    assert "not a readable PDF" in failed["detail"]
    assert secret.decode() not in json.dumps(failed)


GERMAN_NOTE = (
    "Zephyr-9 Etikettendrucker im Büro Zürich\n\n"
    "1. Öffnen Sie „Geräte und Drucker“ und wählen Sie den Zephyr-9.\n"
    "2. Stellen Sie die Größe auf 62 mm – fertig. Ersatzrolle: 12 €.\n"
)


def chunk_texts(stack: Stack, url: str) -> list[str]:
    """The knowledge base's chunks of the document at ``url``, as retrieval reads them."""
    collection = chromadb.HttpClient(host=stack.chroma_host, port=stack.chroma_port).get_collection(
        "deskpilot_kb"
    )
    return [str(text) for text in collection.get(where={"url": url})["documents"] or []]


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("zephyr.txt", codecs.BOM_UTF16_LE + GERMAN_NOTE.encode("utf-16-le")),
        ("zephyr.md", GERMAN_NOTE.encode("cp1252")),
    ],
    ids=["utf-16-le-bom", "cp1252"],
)
async def test_text_saved_in_another_encoding_is_indexed_readable(
    stack: Stack, filename: str, data: bytes
) -> None:
    accepted = upload(stack, filename, data)
    assert accepted.status_code == 202, accepted.text
    document_id = accepted.json()["id"]
    indexed = await status_of(stack, document_id, "indexed")
    assert indexed["status"] == "indexed", indexed

    text = " ".join(chunk_texts(stack, f"upload://{document_id}/{filename}"))
    for words in ("Büro Zürich", "„Geräte und Drucker“", "Größe auf 62 mm – fertig", "12 €"):
        assert words in text, text

    deleted = httpx.delete(f"{stack.url}/api/documents/{document_id}", headers=ADMIN, timeout=30)
    assert deleted.status_code == 202
    assert (await status_of(stack, document_id, "deleted"))["status"] == "deleted"


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {TOKEN}"}],
    ids=["missing", "wrong", "not-bearer"],
)
def test_document_endpoints_need_the_admin_token(stack: Stack, headers: dict[str, str]) -> None:
    some_id = uuid4().hex
    responses = [
        upload(stack, "note.md", b"# Note\n\nText.", headers=headers),
        httpx.get(f"{stack.url}/api/documents/{some_id}", headers=headers, timeout=10),
        httpx.delete(f"{stack.url}/api/documents/{some_id}", headers=headers, timeout=10),
    ]
    for response in responses:
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        # The same answer for every failure, so it tells an attacker nothing.
        assert response.json() == {
            "error_code": "unauthorized",
            "detail": "Admin credentials are missing or not valid.",
        }


@pytest.mark.parametrize(
    ("filename", "data", "status", "code"),
    [
        ("big.md", b"# Big\n\n" + b"x" * MAX_UPLOAD, 413, "file_too_large"),
        ("huge.txt", b"y" * (MAX_UPLOAD * 4), 413, "file_too_large"),  # refused before reading
        ("report.docx", b"PK\x03\x04 not for us", 415, "unsupported_file_type"),
        ("no-extension", b"plain words", 415, "unsupported_file_type"),
        ("fake.pdf", b"<html>not a pdf</html>", 415, "unsupported_file_type"),
        ("binary.txt", b"text\x00with NUL bytes", 415, "unsupported_file_type"),
        (
            "photo.txt",
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
            415,
            "unsupported_file_type",
        ),
        ("empty.md", b"", 422, "invalid_request"),
    ],
)
def test_bad_uploads_get_clear_errors(
    stack: Stack, filename: str, data: bytes, status: int, code: str
) -> None:
    response = upload(stack, filename, data)
    assert response.status_code == status, response.text
    assert response.json()["error_code"] == code
    assert response.json()["detail"]


def test_an_upload_must_be_a_multipart_file(stack: Stack) -> None:
    url = f"{stack.url}/api/documents"
    as_json = httpx.post(url, json={"file": "x"}, headers=ADMIN, timeout=10)
    assert as_json.status_code == 422
    assert as_json.json()["error_code"] == "invalid_request"
    no_file = httpx.post(url, data={"other": "x"}, files={"x": ("a.md", b"# A")}, headers=ADMIN)
    assert no_file.status_code == 422
    assert "`file`" in no_file.json()["detail"]


def test_unknown_documents_are_404(stack: Stack) -> None:
    for document_id in (uuid4().hex, "not-an-id"):
        response = httpx.get(f"{stack.url}/api/documents/{document_id}", headers=ADMIN)
        assert response.status_code == 404
        assert response.json()["error_code"] == "unknown_document"
