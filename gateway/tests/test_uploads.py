"""Uploads under load: admission before the body is read (429/503 with Retry-After), a refused
upload leaves nothing behind, files never reach a temporary file, and a waiting upload holds no
bytes. The app is built by ``create_app`` on a real valkey (a database of its own per test);
nobody reads the attachments, so each stays queued on ``attachment.received`` as it would while
the ocr service is busy or down."""

from __future__ import annotations

import asyncio
import tempfile
import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from fastapi.testclient import TestClient

from contracts.topics import Topic
from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode
from gateway.tests.conftest import anonymous_user, serve
from gateway.uploads import UploadGate
from tests.support import wait_until
from tests.support.stack import new_user

LOG_LINE = b"2026-11-25 10:00:01 ERROR vpnagent: connect failed 0x800704cf\n"
KIB = 1024


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {
        "rate_limit_enabled": False,
        "attachment_timeout_s": 0.3,
        "max_log_bytes": 512 * KIB,
        "max_image_bytes": 512 * KIB,
        "max_upload_bytes": 512 * KIB,
        "upload_memory_bytes": 2048 * KIB,
        "ocr_queue_max_bytes": 64 * 1024 * KIB,
    }


def log_file(size: int) -> bytes:
    return (LOG_LINE * (size // len(LOG_LINE) + 1))[:size]


def stored_keys(raw: redis.Redis) -> set[bytes]:
    """The gateway's records of attachments and conversations."""
    return {
        key
        for key in raw.scan_iter("deskpilot:gateway:*")
        if b":attachment:" in key or b"conversation" in key
    }


# -- the gate itself -----------------------------------------------------------------------------


@pytest.fixture
def gate_for(
    make_settings: Callable[..., GatewaySettings], redis: aioredis.Redis
) -> Callable[..., UploadGate]:
    """An upload gate on the test's database, with these settings changed."""

    def make(**overrides: Any) -> UploadGate:
        return UploadGate(make_settings(**overrides), redis)

    return make


async def test_concurrent_uploads_are_capped_per_user_per_ip_and_in_all(
    gate_for: Callable[..., UploadGate],
) -> None:
    gate = gate_for(
        upload_concurrency_per_user=1,
        upload_concurrency_per_ip=2,
        upload_concurrency_total=3,
    )
    async with gate.admit("u-1", "10.0.0.1", 1000, 512 * KIB):
        with pytest.raises(ApiError) as same_user:
            async with gate.admit("u-1", "10.0.0.9", 1000, 512 * KIB):
                pass
        assert same_user.value.code is ErrorCode.TOO_MANY_UPLOADS
        assert same_user.value.headers["Retry-After"] == "5"
        async with gate.admit("u-2", "10.0.0.1", 1000, 512 * KIB):
            with pytest.raises(ApiError) as same_ip:
                async with gate.admit("u-3", "10.0.0.1", 1000, 512 * KIB):
                    pass
            assert same_ip.value.code is ErrorCode.TOO_MANY_UPLOADS
            async with gate.admit(None, "10.0.0.2", 1000, 512 * KIB):
                with pytest.raises(ApiError) as total:
                    async with gate.admit("u-4", "10.0.0.3", 1000, 512 * KIB):
                        pass
                assert total.value.code is ErrorCode.UPLOADS_BUSY
                assert total.value.headers["Retry-After"] == "5"
    # Everything was given back, refused attempts included.
    assert not gate.in_progress
    assert gate.memory_bytes == 0


async def test_memory_is_reserved_until_the_file_is_published(
    gate_for: Callable[..., UploadGate],
) -> None:
    gate = gate_for(upload_memory_bytes=1024 * KIB)
    async with gate.admit("u-1", None, 600 * KIB, 512 * KIB) as first:
        assert gate.memory_bytes == 512 * KIB  # never more than the file limit
        async with gate.admit("u-2", None, 400 * KIB, 512 * KIB):
            with pytest.raises(ApiError) as full:
                async with gate.admit("u-3", None, 200 * KIB, 512 * KIB):
                    pass
            assert full.value.code is ErrorCode.UPLOADS_BUSY
        first.release_memory()  # published: it now only waits for the ocr service
        # A body that declares no length reserves the whole limit.
        async with gate.admit("u-3", None, None, 512 * KIB):
            assert gate.memory_bytes == 512 * KIB
    assert gate.memory_bytes == 0


async def test_the_ocr_queue_in_redis_is_measured_not_counted(
    gate_for: Callable[..., UploadGate], redis: aioredis.Redis
) -> None:
    """The bytes waiting for the ocr service are what the stream holds: entries the ocr service
    deleted (or that a crash left behind) count exactly as they are."""
    gate = gate_for(ocr_queue_max_bytes=1024 * KIB)
    queue = f"attachments-{uuid.uuid4().hex}"
    async with gate.admit("u-1", None, 300 * KIB, 512 * KIB, queue=queue):
        pass
    ids = [await redis.xadd(queue, {"payload": b"x" * (300 * KIB)}) for _ in range(3)]
    with pytest.raises(ApiError) as full:
        async with gate.admit("u-1", None, 300 * KIB, 512 * KIB, queue=queue):
            pass
    assert full.value.code is ErrorCode.UPLOADS_BUSY
    assert full.value.headers["Retry-After"] == "5"
    await redis.xdel(queue, *ids)  # the ocr service caught up
    async with gate.admit("u-1", None, 300 * KIB, 512 * KIB, queue=queue):
        pass


# -- through the API -----------------------------------------------------------------------------


async def upload(client: httpx.AsyncClient, headers: dict[str, str], size: int) -> httpx.Response:
    return await client.post(
        "/api/attachments", files={"file": ("vpn.log", log_file(size))}, headers=headers
    )


def test_caps_answer_429_and_503_and_keep_nothing(
    make_settings: Callable[..., GatewaySettings], raw: redis.Redis
) -> None:
    settings = make_settings(
        attachment_timeout_s=1.5,
        upload_concurrency_per_user=1,
        upload_concurrency_total=2,
    )

    def queued_for_ocr(count: int) -> Callable[[], bool]:
        return lambda: raw.xlen(Topic.ATTACHMENT_RECEIVED) == count

    async def run() -> None:
        alice, bob, carol = [new_user(url).headers for _ in range(3)]
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            first = asyncio.create_task(upload(client, alice, 100 * KIB))
            await wait_until(queued_for_ocr(1))  # alice's upload waits for the ocr service
            queued, keys = raw.xlen(Topic.ATTACHMENT_RECEIVED), stored_keys(raw)
            again = await upload(client, alice, 100 * KIB)
            assert again.status_code == 429, again.text
            assert again.json()["error_code"] == "too_many_uploads"
            assert again.headers["retry-after"] == "5"
            second = asyncio.create_task(upload(client, bob, 100 * KIB))
            await wait_until(queued_for_ocr(queued + 1))  # bob's waits too
            busy = await upload(client, carol, 100 * KIB)
            assert busy.status_code == 503, busy.text
            assert busy.json()["error_code"] == "uploads_busy"
            assert busy.headers["retry-after"] == "5"
            # Bob's upload was queued and recorded; the refused ones left nothing.
            assert raw.xlen(Topic.ATTACHMENT_RECEIVED) == queued + 1
            assert len(stored_keys(raw) - keys) == 3  # bob's record, conversation, owner
            assert {(await first).status_code, (await second).status_code} == {504}
            # Once they are done, alice may upload again.
            assert (await upload(client, alice, 100 * KIB)).status_code == 504

    with serve(settings) as url:
        asyncio.run(run())


def test_a_full_ocr_queue_answers_503_before_the_body_is_read(
    make_settings: Callable[..., GatewaySettings], raw: redis.Redis
) -> None:
    settings = make_settings(ocr_queue_max_bytes=2000 * KIB)

    async def run() -> None:
        user = new_user(url).headers
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            # 2 x 500 KiB (base64: 2 x 667 KiB, more as Redis allocates it) wait for the ocr
            # service; a third would take the queue over 2000 KiB.
            for _ in range(2):
                assert (await upload(client, user, 500 * KIB)).status_code == 504
            queued, keys = raw.xlen(Topic.ATTACHMENT_RECEIVED), stored_keys(raw)
            full = await upload(client, user, 500 * KIB)
            assert full.status_code == 503, full.text
            assert full.json() == {
                "error_code": "uploads_busy",
                "detail": "Many attachments are waiting to be read; try again in 5 s.",
            }
            assert full.headers["retry-after"] == "5"
            assert raw.xlen(Topic.ATTACHMENT_RECEIVED) == queued
            assert stored_keys(raw) == keys
            raw.xtrim(Topic.ATTACHMENT_RECEIVED, maxlen=0)  # the ocr service read them
            assert (await upload(client, user, 500 * KIB)).status_code == 504

    with serve(settings) as url:
        asyncio.run(run())


def test_an_attachment_never_reaches_a_temporary_file(
    make_settings: Callable[..., GatewaySettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starlette spools a file part over 1 MiB to disk; an attachment is not redacted yet."""
    rolled: list[int] = []
    original = tempfile.SpooledTemporaryFile.rollover

    def rollover(self: Any) -> None:
        rolled.append(1)
        original(self)

    monkeypatch.setattr(tempfile.SpooledTemporaryFile, "rollover", rollover)
    settings = make_settings(
        max_log_bytes=3 * 1024 * KIB,
        max_image_bytes=3 * 1024 * KIB,
        max_upload_bytes=3 * 1024 * KIB,
        upload_memory_bytes=4 * 1024 * KIB,
    )
    with TestClient(create_app(settings)) as client:
        response = client.post(
            "/api/attachments",
            files={"file": ("big.log", log_file(int(2.5 * 1024 * KIB)))},
            headers=anonymous_user(client).headers,
        )
    assert response.status_code == 504, response.text  # queued for the ocr service
    assert not rolled


def test_a_waiting_upload_holds_no_file_bytes(
    make_settings: Callable[..., GatewaySettings],
) -> None:
    """Once on the bus, an attachment's bytes are let go while the upload waits for its reply."""
    with TestClient(create_app(make_settings(attachment_timeout_s=2.0))) as client:
        gate: UploadGate = client.app.state.upload_gate  # type: ignore[attr-defined]
        headers = anonymous_user(client).headers
        seen: list[tuple[int, int]] = []

        def watch() -> None:
            for _ in range(30):
                seen.append((gate.in_progress["total"], gate.memory_bytes))
                threading.Event().wait(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        response = client.post(
            "/api/attachments", files={"file": ("vpn.log", log_file(300 * KIB))}, headers=headers
        )
        watcher.join()
    assert response.status_code == 504
    # While it waited (in progress), it held no memory reservation.
    assert (1, 0) in seen
