"""The leak test: sensitive values typed into the chat appear in no place the system writes.

Unique marker values of every sensitive kind go into chat messages that drive the flows built so
far (an answer, a clarification, a checklist, a crawl of the help site), on the whole stack with
the crawler and its Chromium. Afterwards every place the system wrote is read back and searched
for any marker:

* every Redis key of every type, streams and dead-letter streams included;
* every Chroma collection, documents and metadata;
* every service's log, which also holds the OpenTelemetry spans (``OTEL_TRACES_EXPORTER=console``
  prints each finished span, attributes included, to the service's output);
* every frame and answer sent to the user.

Attachments join in: a log file and a screenshot carrying markers are uploaded and used in a
conversation, and every upload answer is searched too. So do tickets: a conversation carrying
markers is escalated, and the ticket store (the local backend's SQLite file) is searched with the
rest (the gateway's ticket read model and the audit stream are Redis keys).
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest
import redis
import websockets
from PIL import Image, ImageDraw, ImageFont

from crawler.tests.siteserver import SiteServer
from deploy.runner import Stack
from tests.support.stack import HELP_SITE, help_site_env, running_stack

pytestmark = pytest.mark.slow


# name -> (value as typed, the parts that must never be found)
MARKERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "person": ("Zebulon Quackenbush", ("Zebulon", "Quackenbush")),
    "email": ("zq7731.leak@fastmail.com", ("zq7731.leak",)),
    "phone": ("(415) 555-0173", ("555-0173", "5550173")),
    "card": ("4111 1111 1111 1111", ("4111 1111 1111 1111", "4111111111111111")),
    "password": ("Quokka!Tr0mb0ne#88", ("Quokka!Tr0mb0ne", "Tr0mb0ne#88")),
    "aws key": ("AKIAZ7QW3ERT5YUI9OPL", ("AKIAZ7QW3ERT5YUI9OPL",)),
    "jwt": (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ6cTc3MzEiLCJuYW1lIjoiWmVidWxvbiJ9"
        ".bGVha21hcmtlcnNpZ25hdHVyZTc3MzFxcQ",
        ("eyJzdWIiOiJ6cTc3MzEiLCJuYW1lIjoiWmVidWxvbiJ9", "bGVha21hcmtlcnNpZ25hdHVyZTc3MzFxcQ"),
    ),
    "private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
        "QyNTUxOQAAACBMZWFrTWFya2VyNzczMVplYnVsb25RdWFja2VuYnVzaEtleQAAAJhMZWFr\n"
        "-----END OPENSSH PRIVATE KEY-----",
        ("BMZWFrTWFya2VyNzczMVplYnVsb25RdWFja2VuYnVzaEtleQ", "QyNTUxOQAAACBMZWFr"),
    ),
    "connection string": (
        "postgres://svc_zq:Pl4typus7731x@db7731.corp.internal:5432/tickets",
        ("Pl4typus7731x", "svc_zq:"),
    ),
}


def marker(name: str) -> str:
    return MARKERS[name][0]


# Each message drives one flow; together they carry every marker.
MESSAGES = [
    # an answer from the knowledge base
    f"Hi, I'm {marker('person')} ({marker('email')}, card on file {marker('card')}). "
    "How do I connect to the office Wi-Fi?",
    # a clarification: too vague to search
    f"it's still not working!! I'm {marker('person')}, {marker('phone')}",
    # a troubleshooting checklist
    f"My VPN keeps disconnecting since this morning. My password is {marker('password')}, "
    f"the token {marker('jwt')} did not help, nor the key {marker('aws key')}",
    # a crawl of the help site: the knowledge base does not know the tablet
    f"How do I calibrate the Wacom drawing tablet pen? I'm {marker('person')}, "
    f"my key is\n{marker('private key')}\nand the database is {marker('connection string')}",
]


# A log file and a screenshot carrying markers, attached to one message.
LOG_FILE = (
    "2026-11-25 08:59:58 INFO sync: signed in as "
    f"{marker('email')} ({marker('person')})\n"
    f"2026-11-25 08:59:59 DEBUG sync: password={marker('password')}\n"
    f"2026-11-25 09:00:00 DEBUG sync: AWS_ACCESS_KEY_ID={marker('aws key')}\n"
    f"2026-11-25 09:00:01 ERROR sync: cannot open {marker('connection string')}: "
    "0x80070005 access denied\n"
    f"2026-11-25 09:00:02 ERROR sync: card {marker('card')} declined\n"
).encode()
SCREENSHOT_LINES = [
    "Sign-in failed",
    f"Account: {marker('email')}",
    f"Phone: {marker('phone')}",
    "Error code: 0x80070005",
]
ATTACHED_MESSAGE = "My file sync fails, log and screenshot attached"
ESCALATED_MESSAGE = (
    f"This still doesn't work. I need a human. I'm {marker('person')}, call me on "
    f"{marker('phone')}, my password is {marker('password')}"
)


def screenshot(lines: list[str]) -> bytes:
    font = ImageFont.load_default(size=30)
    image = Image.new("RGB", (1000, 60 + 56 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((30, 30 + 56 * row), line, fill="black", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def chat_with_attachments(stack: Stack) -> list[dict[str, Any]]:
    """Upload the log and the screenshot into a conversation, then use them in a message, and
    escalate that conversation to a ticket. Returns every upload answer and frame."""
    url = stack.url.replace("http://", "ws://") + "/ws/chat"
    frames: list[dict[str, Any]] = []
    async with websockets.connect(url) as ws:
        ready = json.loads(await ws.recv())
        frames.append(ready)
        ids = []
        async with httpx.AsyncClient(timeout=180) as client:
            for name, data in (
                ("sync.log", LOG_FILE),
                ("signin.png", screenshot(SCREENSHOT_LINES)),
            ):
                response = await client.post(
                    f"{stack.url}/api/attachments",
                    files={"file": (name, data, "application/octet-stream")},
                    data={"conversation_id": ready["conversation_id"]},
                )
                assert response.status_code == 200, response.text
                frames.append({"type": "upload", **response.json()})
                ids.append(response.json()["id"])
        for text, extra in ((ATTACHED_MESSAGE, {"attachments": ids}), (ESCALATED_MESSAGE, {})):
            await ws.send(json.dumps({"type": "message", "text": text, **extra}))
            async with asyncio.timeout(120):
                while True:
                    frame = json.loads(await ws.recv())
                    frames.append(frame)
                    if frame["type"] in ("answer", "error"):
                        break
    return frames


@pytest.fixture(scope="module")
def site() -> Iterator[SiteServer]:
    with SiteServer(HELP_SITE) as server:
        yield server


async def chat(stack: Stack, texts: list[str]) -> list[dict[str, Any]]:
    """Every frame of the turns, each text in a conversation of its own, up to each answer."""
    url = stack.url.replace("http://", "ws://") + "/ws/chat"
    frames: list[dict[str, Any]] = []
    for text in texts:
        async with websockets.connect(url) as ws:
            frames.append(json.loads(await ws.recv()))
            await ws.send(json.dumps({"type": "message", "text": text}))
            async with asyncio.timeout(120):
                while True:
                    frame = json.loads(await ws.recv())
                    frames.append(frame)
                    if frame["type"] in ("answer", "error"):
                        break
    return frames


def redis_dump(url: str) -> dict[str, bytes]:
    """Every key's whole content, whatever its type."""
    client = redis.Redis.from_url(url)
    dump: dict[str, bytes] = {}
    try:
        for raw_key in client.scan_iter(count=1000):
            key = raw_key.decode()
            kind = client.type(raw_key).decode()
            parts: list[Any]
            if kind == "string":
                parts = [client.get(raw_key)]
            elif kind == "hash":
                parts = [item for pair in client.hgetall(raw_key).items() for item in pair]
            elif kind == "list":
                parts = client.lrange(raw_key, 0, -1)
            elif kind == "set":
                parts = list(client.smembers(raw_key))
            elif kind == "zset":
                parts = client.zrange(raw_key, 0, -1)
            elif kind == "stream":
                parts = [
                    item
                    for _, fields in client.xrange(raw_key)
                    for pair in fields.items()
                    for item in pair
                ]
            elif kind == "none":
                continue  # gone since the scan saw it (a lock, an expired entry)
            else:
                raise AssertionError(f"key {key} of type {kind} is not read by the leak test")
            dump[f"{kind} {key}"] = b"\n".join(p for p in parts if isinstance(p, bytes))
    finally:
        client.close()
    return dump


def chroma_dump(host: str, port: int) -> dict[str, str]:
    client = chromadb.HttpClient(host=host, port=port)
    dump: dict[str, str] = {}
    for collection in client.list_collections():
        records = collection.get(include=["documents", "metadatas"])
        dump[collection.name] = json.dumps(
            {"ids": records["ids"], "documents": records["documents"], "meta": records["metadatas"]}
        )
    return dump


def found(text: str) -> list[str]:
    """The markers (by name) whose parts occur in ``text``."""
    folded = text.replace("\\n", "\n")
    return [name for name, (_, parts) in MARKERS.items() if any(p in folded for p in parts)]


def test_no_marker_reaches_any_store_log_span_or_answer(tmp_path: Path, site: SiteServer) -> None:
    env = {
        **help_site_env(site.url("/help/index.html")),
        "OTEL_TRACES_EXPORTER": "console",
        "LOG_LEVEL": "DEBUG",  # what the services log at their most talkative
    }
    with running_stack(tmp_path / "stack", env, crawler="on") as stack:
        frames = asyncio.run(chat(stack, MESSAGES))
        attached = asyncio.run(chat_with_attachments(stack))
        answers = [f for f in frames if f["type"] == "answer"]
        redis_contents = redis_dump(stack.redis_url)
        chroma_contents = chroma_dump(stack.chroma_host, stack.chroma_port)
    logs = {
        path.name: path.read_text(errors="replace")
        for path in (tmp_path / "stack").glob("logs/*.log")
    }
    tickets = {
        path.name: path.read_bytes().decode(errors="replace")
        for path in (tmp_path / "stack").glob("tickets.sqlite3*")
    }

    # The flows really ran: otherwise finding nothing would prove nothing.
    assert [a["action"] for a in answers][:2] == ["answer", "clarify"], answers
    assert answers[2]["action"] in ("answer", "checklist"), answers[2]
    assert any(
        c["url"].endswith("/help/tablets/wacom-calibrate.html") for c in answers[3]["citations"]
    ), answers[3]
    assert any(key.startswith("stream ") for key in redis_contents)
    assert any(key.startswith("stream crawl.tasks") for key in redis_contents), sorted(
        redis_contents
    )
    assert any("wacom" in text.lower() for text in chroma_contents.values())
    assert '"trace_id"' in logs["orchestrator.log"]
    assert '"kind": "SpanKind.' in logs["redactor.log"]  # spans, printed by the console exporter
    assert set(logs) >= {
        "gateway.log",
        "redactor.log",
        "orchestrator.log",
        "indexer.log",
        "crawler.log",
        "ocr.log",
        "ticketing.log",
    }
    uploads = [f for f in attached if f["type"] == "upload"]
    # Both files were read, and what they held was redacted, not lost.
    assert "<EMAIL_ADDRESS_1>" in uploads[0]["text_excerpt"], uploads[0]
    assert "0x80070005" in [sig.lower() for sig in uploads[0]["signatures"]]
    # (the screenshot's address, as OCR reads it, may get a number of its own)
    assert "<EMAIL_ADDRESS_" in uploads[1]["text_excerpt"], uploads[1]
    attached_answers = [f for f in attached if f["type"] == "answer"]
    assert "From your attachments" in attached_answers[0]["answer"], attached_answers[0]
    escalated = attached_answers[1]
    assert escalated["action"] == "escalated", escalated
    key = escalated["ticket"]["key"]
    assert any(key in text for text in tickets.values()), "the ticket store was not found"
    assert any(key in value.decode(errors="replace") for value in redis_contents.values())

    leaks = {
        **{
            f"redis {key}": found(value.decode(errors="replace"))
            for key, value in redis_contents.items()
        },
        **{f"chroma {name}": found(text) for name, text in chroma_contents.items()},
        **{f"log {name}": found(text) for name, text in logs.items()},
        **{f"frame {i} ({f['type']})": found(json.dumps(f)) for i, f in enumerate(frames)},
        **{
            f"attachment frame {i} ({f['type']})": found(json.dumps(f))
            for i, f in enumerate(attached)
        },
        **{f"tickets {name}": found(text) for name, text in tickets.items()},
    }
    assert {where: names for where, names in leaks.items() if names} == {}
