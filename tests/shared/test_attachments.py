"""Attachments end to end: gateway → attachment.received → ocr → attachment.extracted →
redactor → the upload's answer and attachment.redacted → orchestrator → a chat answer using it.

The whole stack runs as ``deskpilot up`` starts it; files go in through the public API only.
Screenshots are drawn here with Pillow's own scalable font, so no system font is assumed.
"""

from __future__ import annotations

import io
import json

import httpx
import pytest
import redis
from PIL import Image, ImageDraw, ImageFont

from deploy.runner import Stack
from tests.support import deskpilot, wait_until
from tests.support.stack import (
    SHARED_ADMIN_TOKEN,
    SHARED_MAX_LOG_BYTES,
    StackUser,
    ask,
    new_user,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]

TOKEN = SHARED_ADMIN_TOKEN
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
MAX_LOG = SHARED_MAX_LOG_BYTES

LOG = (
    "2026-11-25 08:59:58 INFO vpnagent: starting tunnel for user dana.whitfield@northwind.example\n"
    + "".join(f"2026-11-25 09:00:{i:02d} DEBUG vpnagent: keepalive {i}\n" for i in range(40))
    + "2026-11-25 09:01:07 ERROR vpnagent: connection to gw1.northwind.example failed: "
    "0x800704cf (network location cannot be reached)\n"
    + "2026-11-25 09:01:09 INFO vpnagent: retrying in 30 s\n"
).encode()


def screenshot(lines: list[str]) -> bytes:
    font = ImageFont.load_default(size=28)
    image = Image.new("RGB", (900, 70 + 50 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((30, 35 + 50 * row), line, fill="black", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def attach(
    stack: Stack,
    user: StackUser,
    filename: str,
    data: bytes,
    conversation_id: str | None = None,
) -> httpx.Response:
    """Upload as ``user``, into ``conversation_id`` (a conversation of theirs), or into a new
    conversation the answer names when None."""
    fields = {"conversation_id": conversation_id} if conversation_id else {}
    return httpx.post(
        f"{stack.url}/api/attachments",
        files={"file": (filename, data, "application/octet-stream")},
        data=fields,
        headers=user.headers,
        timeout=120,
    )


def chat(
    stack: Stack, user: StackUser, conversation_id: str, text: str, attachments: list[str]
) -> httpx.Response:
    return ask(stack, text, user=user, conversation_id=conversation_id, attachments=attachments)


def fetch(stack: Stack, path: str, user: StackUser) -> httpx.Response:
    return httpx.get(f"{stack.url}{path}", headers=user.headers, timeout=10)


def test_a_log_is_read_redacted_and_used_to_answer(stack: Stack) -> None:
    user = new_user(stack)
    response = attach(stack, user, "vpnagent.log", LOG)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["kind"] == "log"
    assert body["bytes"] == len(LOG)
    conversation = body["conversation_id"]  # a new conversation, named by the gateway
    assert "0x800704cf" in [signature.lower() for signature in body["signatures"]]
    # The e-mail address in the log never comes back; its placeholder does.
    assert "dana.whitfield" not in json.dumps(body)
    assert "<EMAIL_ADDRESS_1>" in body["text_excerpt"]

    answer = chat(stack, user, conversation, "my vpn won't connect, log attached", [body["id"]])
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["conversation_id"] == conversation
    assert "0x800704cf" in reply["answer"].lower()
    assert "From your attachments" in reply["answer"]
    assert "dana.whitfield" not in answer.text

    fetched = fetch(stack, f"/api/attachments/{body['id']}", user)
    assert fetched.status_code == 200
    assert fetched.json()["signatures"] == body["signatures"]
    # Only its uploader reads it back; to anyone else it is an unknown id.
    stranger = fetch(stack, f"/api/attachments/{body['id']}", new_user(stack))
    assert stranger.status_code == 404
    unknown = fetch(stack, f"/api/attachments/{'0' * 32}", user)
    assert stranger.json() == unknown.json()


def test_a_screenshot_is_read_with_ocr(stack: Stack) -> None:
    image = screenshot(
        ["Outlook cannot connect to the server.", "Error code: 0x800CCC0E", "Close    Help"]
    )
    response = attach(stack, new_user(stack), "outlook.png", image)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["conversation_id"]  # a new conversation, named by the gateway
    assert body["kind"] == "image"
    assert "0x800ccc0e" in [signature.lower() for signature in body["signatures"]]
    assert "connect to the server" in body["text_excerpt"]


@pytest.mark.parametrize(
    ("filename", "data", "status", "code"),
    [
        ("report.log", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", 415, "unsupported_file_type"),
        ("setup.txt", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00", 415, "unsupported_file_type"),
        ("huge.log", b"ERROR disk full\n" * (MAX_LOG // 10), 413, "file_too_large"),
        ("broken.png", b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 50, 422, "corrupt_file"),
        ("empty.log", b"", 422, "invalid_request"),
    ],
)
def test_bad_files_get_clear_errors_and_nothing_is_kept(
    stack: Stack, filename: str, data: bytes, status: int, code: str
) -> None:
    response = attach(stack, new_user(stack), filename, data)
    assert response.status_code == status, response.text
    assert response.json()["error_code"] == code
    assert response.json()["detail"]
    client = redis.Redis.from_url(stack.redis_url)
    # The bytes never stay on the bus, whatever happened to them: the ocr service's refusal
    # and the raw entry's deletion are one write, so by the time the gateway has answered, the
    # entry is gone (they were two writes, and the gateway once answered in between).
    assert client.xlen("attachment.received") == 0
    assert client.xlen("attachment.extracted") == 0


def test_a_message_cannot_use_another_conversations_attachment(stack: Stack) -> None:
    user = new_user(stack)
    body = attach(stack, user, "app.log", LOG).json()
    other = ask(stack, "Hello!", user=user).json()["conversation_id"]  # the same user's
    assert other != body["conversation_id"]
    # A file can go into a conversation its user already has ...
    added = attach(stack, user, "other.log", b"ERROR printer offline 0x00000709\n", other)
    assert added.status_code == 200, added.text
    assert added.json()["conversation_id"] == other
    # ... but a message there cannot use another conversation's attachment.
    response = chat(stack, user, other, "what does this log mean?", [body["id"]])
    assert response.status_code == 404
    assert response.json()["error_code"] == "unknown_attachment"
    # Nor can someone else attach to that conversation, or use the file in one of theirs.
    stranger = new_user(stack)
    intruding = attach(stack, stranger, "other.log", LOG, other)
    assert intruding.status_code == 404
    assert intruding.json()["error_code"] == "unknown_conversation"
    theirs = ask(stack, "Hello!", user=stranger).json()["conversation_id"]
    response = chat(stack, stranger, theirs, "what does this log mean?", [body["id"]])
    assert response.status_code == 404
    assert response.json()["error_code"] == "unknown_attachment"


def keys_mentioning(stack: Stack, needles: list[str]) -> list[str]:
    client = redis.Redis.from_url(stack.redis_url)
    found = []
    for key in client.scan_iter(count=1000):
        name = key.decode()
        if any(needle in name for needle in needles):
            found.append(name)
    return found


async def test_purge_deletes_the_conversation_everywhere(stack: Stack) -> None:
    user = new_user(stack)
    attachment = attach(stack, user, "vpnagent.log", LOG).json()
    conversation = attachment["conversation_id"]
    turn = chat(stack, user, conversation, "vpn error, see log", [attachment["id"]]).json()
    assert turn["conversation_id"] == conversation
    needles = [conversation, attachment["id"], turn["turn_id"]]
    assert keys_mentioning(stack, needles), "the conversation left no keys to purge"
    assert fetch(stack, f"/api/attachments/{attachment['id']}", user).status_code == 200
    assert fetch(stack, f"/api/turns/{turn['turn_id']}", user).status_code == 200

    refused = httpx.delete(f"{stack.url}/api/admin/conversations/{conversation}", timeout=10)
    assert refused.status_code == 401
    accepted = httpx.delete(
        f"{stack.url}/api/admin/conversations/{conversation}", headers=ADMIN, timeout=10
    )
    assert accepted.status_code == 202, accepted.text

    async def gone() -> bool:
        return not keys_mentioning(stack, needles)

    await wait_until(gone, 30, message=lambda: f"left: {keys_mentioning(stack, needles)}")
    assert fetch(stack, f"/api/attachments/{attachment['id']}", user).status_code == 404
    assert fetch(stack, f"/api/turns/{turn['turn_id']}", user).status_code == 404
    # Nor can its owner go on with it: the conversation is gone too.
    again = ask(stack, "still broken", user=user, conversation_id=conversation)
    assert again.status_code == 404
    assert again.json()["error_code"] == "unknown_conversation"


def test_purge_from_the_command_line(stack: Stack) -> None:
    user = new_user(stack)
    attachment = attach(stack, user, "vpnagent.log", LOG).json()
    conversation = attachment["conversation_id"]
    turn = chat(stack, user, conversation, "vpn error, see log", [attachment["id"]]).json()
    assert turn["conversation_id"] == conversation
    done = deskpilot("purge", "--conversation", conversation, "--data-dir", str(stack.data_dir))
    assert done.returncode == 0, done.stderr
    assert "purged conversation" in done.stdout
    assert not keys_mentioning(stack, [conversation, attachment["id"], turn["turn_id"]])
