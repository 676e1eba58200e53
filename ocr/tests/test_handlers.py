"""The ocr worker end to end on the real valkey of the root conftest.

An attachment published on ``attachment.received`` comes out as ``attachment.extracted`` (same
ids, a deterministic event id) and its raw entry is deleted; one that cannot be read is answered
on the upload's reply stream with ``attachment_error``, publishes nothing downstream, and is
deleted too.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from PIL import Image, ImageDraw, ImageFont

from contracts.bus import RAW_FIELD, Bus, decode_entry
from contracts.events import AttachmentExtracted, AttachmentReceived, new_id
from contracts.topics import Topic
from ocr.app import create_worker
from ocr.config import OcrSettings
from ocr.handlers import extracted_event_id
from ocr.images import ScreenReader
from tests.support import unique_name, wait_until

TIMEOUT_S = 30.0


def payloads(entries: list[tuple[bytes, dict[bytes, bytes]]]) -> list[dict[str, Any]]:
    """Event payloads of stream entries written by FastStream (headers and JSON body together)."""
    out = []
    for _, fields in entries:
        raw = fields[RAW_FIELD]
        start = raw.find(b'{"event_id"')
        out.append(json.loads(raw[start : raw.rfind(b"}") + 1]))
    return out


@pytest.fixture
def settings(redis_url: str) -> OcrSettings:
    return OcrSettings(
        redis_url=redis_url, reclaim_idle_ms=2_000, heartbeat_interval_s=0.5, graceful_timeout_s=10
    )


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


@contextlib.asynccontextmanager
async def running_worker(settings: OcrSettings, screens: ScreenReader) -> AsyncIterator[None]:
    worker = create_worker(settings, screens=screens)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.serve(stop))
    await wait_until(
        lambda: task.done() or (worker.bus.broker.subscribers and worker.consuming()),
        TIMEOUT_S,
    )
    assert not task.done(), task.exception()
    yield
    stop.set()
    assert await asyncio.wait_for(task, TIMEOUT_S) == 0


@pytest.fixture
async def worker(settings: OcrSettings, screen_reader: ScreenReader) -> AsyncIterator[None]:
    async with running_worker(settings, screen_reader):
        yield


@pytest.fixture
async def producer(settings: OcrSettings) -> AsyncIterator[Bus]:
    bus = Bus(settings, "ocr-test-producer")
    await bus.start()
    yield bus
    await bus.stop()


def attachment(kind: str, data: bytes, reply_to: str) -> AttachmentReceived:
    return AttachmentReceived(
        correlation_id=new_id(),
        conversation_id=new_id(),
        attachment_id=new_id(),
        user_id="u-test",
        filename="upload.bin",
        kind=kind,  # type: ignore[arg-type]
        content_type="image/png" if kind == "image" else "text/plain",
        size_bytes=len(data),
        content_b64=base64.b64encode(data).decode(),
        reply_to=reply_to,
    )


async def extracted_for(redis: aioredis.Redis, event: AttachmentReceived) -> list[dict[str, Any]]:
    # A raw topic: its entries are sealed (contracts/sealing.py); decode_entry opens them.
    entries = await redis.xrange(Topic.ATTACHMENT_EXTRACTED)
    extracted = [decode_entry(fields, AttachmentExtracted) for _, fields in entries]
    return [
        e.model_dump(mode="json") for e in extracted if e.correlation_id == event.correlation_id
    ]


async def entry_gone(redis: aioredis.Redis, entry_id: str) -> bool:
    return not await redis.xrange(Topic.ATTACHMENT_RECEIVED, min=entry_id, max=entry_id)


@pytest.mark.usefixtures("worker")
async def test_log_is_extracted_and_its_raw_entry_deleted(
    producer: Bus, redis: aioredis.Redis
) -> None:
    log = (
        "2024-03-05 10:00:00 INFO vpn client starting\n"
        "2024-03-05 10:00:02 ERROR [vpnagent] connect ECONNREFUSED 10.0.0.5:443\n"
    ).encode("utf-16")
    event = attachment("log", log, unique_name("reply"))

    entry_id = await producer.publish(Topic.ATTACHMENT_RECEIVED, event)
    found = await wait_until(lambda: extracted_for(redis, event), TIMEOUT_S)

    assert len(found) == 1
    extracted = found[0]
    assert extracted["event_id"] == extracted_event_id(event.event_id)
    assert extracted["attachment_id"] == event.attachment_id
    assert extracted["conversation_id"] == event.conversation_id
    assert extracted["reply_to"] == event.reply_to
    assert extracted["kind"] == "log"
    assert "ECONNREFUSED 10.0.0.5:443" in extracted["text"]
    assert extracted["signatures"] == ["component vpnagent", "ECONNREFUSED"]
    assert extracted["first_error_at"] == "2024-03-05 10:00:02"
    await wait_until(lambda: entry_gone(redis, entry_id), TIMEOUT_S)


@pytest.mark.usefixtures("worker")
async def test_image_is_read_by_ocr(producer: Bus, redis: aioredis.Redis) -> None:
    image = Image.new("RGB", (520, 60), "white")
    font = ImageFont.truetype("DejaVuSans.ttf", 20)
    ImageDraw.Draw(image).text((10, 15), "Update failed: 0x80070005", fill="black", font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    event = attachment("image", buffer.getvalue(), unique_name("reply"))

    entry_id = await producer.publish(Topic.ATTACHMENT_RECEIVED, event)
    found = await wait_until(lambda: extracted_for(redis, event), TIMEOUT_S)

    assert found[0]["kind"] == "image"
    assert "0x80070005" in found[0]["text"]
    assert found[0]["signatures"] == ["0x80070005"]
    await wait_until(lambda: entry_gone(redis, entry_id), TIMEOUT_S)


@pytest.mark.usefixtures("worker")
async def test_corrupt_image_is_answered_with_an_error_and_not_extracted(
    producer: Bus, redis: aioredis.Redis
) -> None:
    reply_to = unique_name("reply")
    event = attachment("image", b"\x89PNG\r\n\x1a\n" + b"\x00" * 200, reply_to)

    entry_id = await producer.publish(Topic.ATTACHMENT_RECEIVED, event)

    async def replies() -> list[dict[str, Any]]:
        return payloads(await redis.xrange(reply_to))

    reply = (await wait_until(replies, TIMEOUT_S))[0]
    assert reply["kind"] == "attachment_error"
    assert reply["correlation_id"] == event.correlation_id
    assert reply["conversation_id"] == event.conversation_id
    assert reply["error"]["error_code"] == "corrupt_attachment"
    assert "upload.bin" not in reply["error"]["detail"]
    await wait_until(lambda: entry_gone(redis, entry_id), TIMEOUT_S)
    # The entry is deleted only after the reply was published: nothing went downstream.
    assert await extracted_for(redis, event) == []


class BrokenModel:
    """An OCR model that fails whatever it is given, as a model out of memory would."""

    def readtext(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError("out of memory")


async def test_a_reader_failure_on_the_last_delivery_is_answered_not_left_waiting(
    settings: OcrSettings, producer: Bus, redis: aioredis.Redis
) -> None:
    settings = settings.model_copy(update={"max_deliveries": 1})
    reply_to = unique_name("reply")
    image = Image.new("RGB", (40, 20), "white")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    event = attachment("image", buffer.getvalue(), reply_to)

    async with running_worker(settings, ScreenReader(settings, reader=BrokenModel())):
        entry_id = await producer.publish(Topic.ATTACHMENT_RECEIVED, event)

        async def replies() -> list[dict[str, Any]]:
            return payloads(await redis.xrange(reply_to))

        reply = (await wait_until(replies, TIMEOUT_S))[0]
        await wait_until(lambda: entry_gone(redis, entry_id), TIMEOUT_S)

    assert reply["kind"] == "attachment_error"
    assert reply["error"]["error_code"] == "extraction_failed"
    assert await extracted_for(redis, event) == []
