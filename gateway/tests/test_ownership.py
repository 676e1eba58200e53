"""Who may reach a conversation, a turn or an attachment: only the user who made it.

The app is built by ``create_app`` on a real valkey (a database of its own per test);
nothing answers the turns and uploads, so they stay pending, which is all ownership needs. Each
test plays the attacker the issue describes: another client, with or without credentials of
its own, that knows the victim's ids.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import jwt
import pytest
import redis
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse

from contracts.ids import CONVERSATION_ID_PATTERN, is_conversation_id
from contracts.topics import Topic
from gateway.app import create_app
from gateway.config import GatewaySettings
from gateway.conversations import INDEX_PREFIX, OWNER_PREFIX
from gateway.identity import ANONYMOUS_KEY, ANONYMOUS_KID, AnonymousIds
from gateway.tests.conftest import (
    ADMIN_TOKEN,
    JWT_SECRET,
    anonymous_user,
    bearer,
    user_headers,
    user_token,
)
from tests.support import wait_until_sync

QUESTION = "My VPN drops every few minutes"


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    return {
        "jwt_secret": JWT_SECRET,
        "turn_timeout_s": 0.3,
        "attachment_timeout_s": 0.3,
        "rate_limit_enabled": False,
        "frame_ancestors": "'self',https://intranet.northwind.example,https://*.sharepoint.com",
        "cors_origins": "https://portal.northwind.example",
    }


def anonymous(client: TestClient) -> tuple[dict[str, str], str]:
    """A new anonymous user: the headers that act as them, and their user id."""
    user = anonymous_user(client)
    return user.headers, user.user_id


def employee(subject: str) -> dict[str, str]:
    return user_headers(subject)


def ask(client: TestClient, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    """Send a message (nobody answers: 504 with the turn and conversation ids)."""
    response = client.post("/api/chat", json={"text": QUESTION, **fields}, headers=headers)
    assert response.status_code == 504, response.text
    body: dict[str, Any] = response.json()
    return body


def attach(client: TestClient, headers: dict[str, str], conversation_id: str | None = None) -> Any:
    fields = {"conversation_id": conversation_id} if conversation_id else {}
    log = b"2026-11-25 10:00:01 ERROR vpnagent: connect failed 0x800704cf\n"
    return client.post(
        "/api/attachments", files={"file": ("vpn.log", log)}, data=fields, headers=headers
    )


def same_answer(mine: Any, unknown: Any, hidden: str, unknown_id: str) -> None:
    """Two 404s are the same answer, but for the id each one names."""
    assert mine.status_code == unknown.status_code == 404
    assert mine.json() == json.loads(json.dumps(unknown.json()).replace(unknown_id, hidden))
    assert mine.headers.get("content-length") == unknown.headers.get("content-length")


# -- turns ---------------------------------------------------------------------------------------


def test_a_turn_is_read_only_by_its_sender(client: TestClient) -> None:
    victim, _ = anonymous(client)
    turn = ask(client, victim)["turn_id"]
    assert client.get(f"/api/turns/{turn}", headers=victim).json()["status"] == "pending"

    stranger, _ = anonymous(client)
    unknown_id = uuid.uuid4().hex
    unknown = client.get(f"/api/turns/{unknown_id}", headers=stranger)
    for headers in (stranger, {}, employee("emp-7"), bearer(ADMIN_TOKEN)):
        same_answer(client.get(f"/api/turns/{turn}", headers=headers), unknown, turn, unknown_id)


def test_an_employees_turn_is_theirs_across_tokens(client: TestClient) -> None:
    turn = ask(client, employee("emp-1"))["turn_id"]
    # A new token of the same employee (a refresh) reads it; another employee does not.
    assert client.get(f"/api/turns/{turn}", headers=employee("emp-1")).status_code == 200
    assert client.get(f"/api/turns/{turn}", headers=employee("emp-2")).status_code == 404


def test_someone_elses_id_costs_redis_what_an_unknown_one_costs(
    client: TestClient, raw: redis.Redis
) -> None:
    """No timing difference: a turn that exists but is not yours and one that does not exist
    take the same commands inside Redis (one script, one HGET), so nothing tells them apart."""
    victim, _ = anonymous(client)
    turn = ask(client, victim)["turn_id"]
    stranger, stranger_id = anonymous(client)

    def commands(turn_id: str) -> list[str]:
        with redis_commands(raw) as seen:
            assert client.get(f"/api/turns/{turn_id}", headers=stranger).status_code == 404
        mentioning = [line for line in seen if turn_id in line]
        return [line.replace(turn_id, "<id>").replace(stranger_id, "<me>") for line in mentioning]

    foreign, unknown = commands(turn), commands(uuid.uuid4().hex)
    assert foreign == unknown
    assert len(foreign) == 2  # the script call and the one HGET it makes


@contextmanager
def redis_commands(raw: redis.Redis) -> Iterator[list[str]]:
    """Every command Redis executes meanwhile (scripts' own commands included), as MONITOR
    shows them."""
    seen: list[str] = []
    ready, end = f"ready-{uuid.uuid4().hex}", f"end-{uuid.uuid4().hex}"
    watching = threading.Event()

    def watch() -> None:
        with raw.monitor() as monitor:  # type: ignore[no-untyped-call]
            while True:
                command = monitor.next_command()["command"]
                if ready in command:
                    watching.set()
                elif end in command:
                    return
                elif watching.is_set():
                    seen.append(command)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    # MONITOR shows commands from when it is registered on: until it shows one, send another.
    wait_until_sync(lambda: raw.echo(ready) and watching.is_set(), 10)
    try:
        yield seen
    finally:
        raw.echo(end)
        watcher.join(10)


def test_a_turn_record_is_not_brought_back_by_a_late_answer(client: TestClient) -> None:
    """A purged turn stays purged when its answer arrives afterwards."""
    store = client.app.state.turns.store  # type: ignore[attr-defined]
    from gateway.models import ChatRead

    answer = ChatRead(
        answer="x", action="answer", conversation_id="c", turn_id="t-gone", trace_id=None
    )
    assert client.portal.call(store.complete, "t-gone", answer) is True  # type: ignore[union-attr]
    assert client.portal.call(store.record, "t-gone") is None  # type: ignore[union-attr]


# -- conversations -------------------------------------------------------------------------------


def test_only_the_owner_continues_a_conversation_over_http(
    client: TestClient, raw: redis.Redis
) -> None:
    victim, victim_id = anonymous(client)
    conversation = ask(client, victim)["conversation_id"]
    assert raw.get(OWNER_PREFIX + conversation) == victim_id.encode()
    ask(client, victim, conversation_id=conversation)  # the owner continues it

    published = raw.xlen(Topic.MESSAGE_RECEIVED)
    stranger, _ = anonymous(client)
    unknown_id = uuid.uuid4().hex
    unknown = client.post(
        "/api/chat", json={"text": "yes", "conversation_id": unknown_id}, headers=stranger
    )
    assert unknown.json()["error_code"] == "unknown_conversation"
    for headers in (stranger, {}, employee("emp-7"), bearer(ADMIN_TOKEN)):
        hijack = client.post(
            "/api/chat",
            json={"text": "yes please file the ticket", "conversation_id": conversation},
            headers=headers,
        )
        same_answer(hijack, unknown, conversation, unknown_id)
    # A client-chosen id is not a conversation either: ids are the gateway's to give.
    chosen = client.post("/api/chat", json={"text": QUESTION, "conversation_id": "c-1"})
    assert chosen.json()["error_code"] == "unknown_conversation"
    assert raw.xlen(Topic.MESSAGE_RECEIVED) == published
    members: Any = raw.smembers(INDEX_PREFIX + conversation)
    assert len(members) == 2  # the owner's two turns, nobody else's


def test_the_websocket_gives_a_stranger_a_conversation_of_their_own(
    client: TestClient, raw: redis.Redis
) -> None:
    with client.websocket_connect("/ws/chat") as socket:
        ready = socket.receive_json()
        socket.send_json({"type": "message", "text": QUESTION})
        assert socket.receive_json()["type"] == "accepted"
    victim_conversation, victim_token = ready["conversation_id"], ready["anonymous_token"]

    def opened(query: str) -> dict[str, Any]:
        with client.websocket_connect(f"/ws/chat?{query}") as socket:
            frame: dict[str, Any] = socket.receive_json()
            socket.send_json({"type": "message", "text": "yes please file the ticket"})
            assert socket.receive_json()["type"] == "accepted"
            return frame

    # The owner comes back to the same conversation, as the same anonymous user.
    again = opened(f"conversation_id={victim_conversation}&user={victim_token}")
    assert again["conversation_id"] == victim_conversation
    assert (
        jwt.decode(again["anonymous_token"], options={"verify_signature": False})["sub"]
        == (jwt.decode(victim_token, options={"verify_signature": False})["sub"])
    )

    stranger_token = opened("")["anonymous_token"]
    for query in (
        f"conversation_id={victim_conversation}",
        f"conversation_id={victim_conversation}&token={employee_token('emp-7')}",
    ):
        assert opened(query)["conversation_id"] != victim_conversation
    # Someone else's conversation is answered as an unknown one: a new conversation.
    hijack = opened(f"conversation_id={victim_conversation}&user={stranger_token}")
    requested = uuid.uuid4().hex
    unknown = opened(f"conversation_id={requested}&user={stranger_token}")
    assert hijack["conversation_id"] != victim_conversation
    assert unknown["conversation_id"] != requested
    assert unknown.keys() == hijack.keys()
    members = raw.smembers(INDEX_PREFIX + victim_conversation)
    assert len(members) == 2  # the victim's message and the owner's return, nothing more


def employee_token(subject: str) -> str:
    return user_token(subject)


# -- attachments ---------------------------------------------------------------------------------


def test_an_attachment_is_seen_and_used_only_by_its_uploader(
    client: TestClient, raw: redis.Redis
) -> None:
    victim, _ = anonymous(client)
    conversation = ask(client, victim)["conversation_id"]
    uploaded = attach(client, victim, conversation)
    assert uploaded.status_code == 504, uploaded.text  # nobody reads it here
    attachment = uploaded.json()["attachment_id"]
    assert client.get(f"/api/attachments/{attachment}", headers=victim).status_code == 200

    stranger, _ = anonymous(client)
    unknown_id = uuid.uuid4().hex
    unknown = client.get(f"/api/attachments/{unknown_id}", headers=stranger)
    for headers in (stranger, {}, employee("emp-7")):
        mine = client.get(f"/api/attachments/{attachment}", headers=headers)
        same_answer(mine, unknown, attachment, unknown_id)

    # Nor may a stranger put files into the victim's conversation, or cite the victim's file
    # in a conversation of their own.
    refused = attach(client, stranger, conversation)
    assert (refused.status_code, refused.json()["error_code"]) == (404, "unknown_conversation")
    own = ask(client, stranger)["conversation_id"]
    cited = client.post(
        "/api/chat",
        json={"text": "see log", "conversation_id": own, "attachments": [attachment]},
        headers=stranger,
    )
    assert (cited.status_code, cited.json()["error_code"]) == (404, "unknown_attachment")


# -- anonymous tokens ----------------------------------------------------------------------------


def forged_tokens(raw: redis.Redis, victim_token: str) -> dict[str, str]:
    claims = jwt.decode(victim_token, options={"verify_signature": False})
    header = {"kid": ANONYMOUS_KID}
    other_key = AnonymousIds(b"k" * 32, 3600).issue(claims["sub"]).token
    key: Any = raw.get(ANONYMOUS_KEY)
    assert key
    stale = AnonymousIds(key, 3600, clock=lambda: time.time() - 7200)
    head, _, signature = victim_token.split(".")
    edited = {**claims, "sub": "anon:" + "A" * 22}
    edited_payload = base64.urlsafe_b64encode(json.dumps(edited).encode()).rstrip(b"=").decode()
    return {
        "another gateway's key": other_key,
        "edited subject": f"{head}.{edited_payload}.{signature}",
        "unsigned": jwt.encode(claims, None, algorithm="none", headers=header),  # type: ignore[arg-type]
        "user token secret": jwt.encode(claims, JWT_SECRET, algorithm="HS256", headers=header),
        "expired": stale.issue(claims["sub"]).token,
        "self-chosen id": claims["sub"],
    }


def test_a_forged_anonymous_token_reaches_nothing(client: TestClient, raw: redis.Redis) -> None:
    victim, victim_id = anonymous(client)
    turn = ask(client, victim)
    token = victim["Authorization"].removeprefix("Bearer ")
    for name, forged in forged_tokens(raw, token).items():
        read = client.get(f"/api/turns/{turn['turn_id']}", headers=bearer(forged))
        assert read.status_code in (401, 404), name
        as_field = client.post(
            "/api/chat",
            json={"text": "yes", "conversation_id": turn["conversation_id"], "user_id": forged},
        )
        assert as_field.status_code in (401, 404), name
        with client.websocket_connect(
            f"/ws/chat?conversation_id={turn['conversation_id']}&user={forged}"
        ) as socket:
            ready = socket.receive_json()
        assert ready["conversation_id"] != turn["conversation_id"], name
        renewed = jwt.decode(ready["anonymous_token"], options={"verify_signature": False})
        assert renewed["sub"] != victim_id, name


def test_an_anonymous_token_is_never_an_admin_or_an_employee(client: TestClient) -> None:
    headers, _ = anonymous(client)
    refused = client.get("/api/admin/tickets", headers=headers)
    assert (refused.status_code, refused.json()["error_code"]) == (401, "unauthorized")
    assert client.get("/api/documents/doc-1", headers=headers).status_code == 401


def test_anonymous_ids_survive_a_restart_of_the_gateway(
    make_settings: Callable[..., GatewaySettings],
) -> None:
    """The key is kept in Redis: a new gateway process knows the same anonymous users."""
    with TestClient(create_app(make_settings())) as first:
        headers, _ = anonymous(first)
        turn = ask(first, headers)["turn_id"]
    with TestClient(create_app(make_settings())) as second:
        assert second.get(f"/api/turns/{turn}", headers=headers).status_code == 200


# -- Origin --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        None,  # a program, not a browser
        "http://testserver",  # the gateway's own page
        "https://testserver",  # the same, behind a TLS-terminating proxy
        "https://intranet.northwind.example",  # GATEWAY_FRAME_ANCESTORS
        "https://contoso.sharepoint.com",  # https://*.sharepoint.com
        "https://portal.northwind.example",  # GATEWAY_CORS_ORIGINS
    ],
)
def test_the_websocket_opens_for_its_own_and_configured_pages(
    client: TestClient, origin: str | None
) -> None:
    headers = {"origin": origin} if origin else {}
    with client.websocket_connect("/ws/chat", headers=headers) as socket:
        assert socket.receive_json()["type"] == "ready"


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "http://testserver.evil.example",
        "https://sharepoint.com",  # *.sharepoint.com means subdomains only
        "https://intranet.northwind.example:8443",
        "http://testserver:8080",
        "null",
        "not an origin",
    ],
)
def test_the_websocket_refuses_other_pages(
    client: TestClient, raw: redis.Redis, origin: str
) -> None:
    owners = len(list(raw.scan_iter(OWNER_PREFIX + "*")))
    with (
        pytest.raises(WebSocketDenialResponse) as refused,
        client.websocket_connect("/ws/chat", headers={"origin": origin}),
    ):
        pass
    assert refused.value.status_code == 403
    assert refused.value.json()["error_code"] == "forbidden"
    assert len(list(raw.scan_iter(OWNER_PREFIX + "*"))) == owners  # nothing was opened


# -- one pattern for conversation ids ------------------------------------------------------------

SAMPLE_IDS = [
    "0123456789abcdef0123456789abcdef",
    "conv-1",
    "a.b:c_d-e",
    "x" * 128,
    "x" * 129,
    "",
    "a b",
    "conv-1\n",
    "caf\u00e9",
    "\u0661\u0662",  # Arabic-Indic digits are digits to str.isdigit, not to the pattern
    "../etc",
    "a/b",
]


@pytest.mark.parametrize("conversation_id", SAMPLE_IDS)
def test_every_entry_point_takes_exactly_the_same_conversation_ids(
    client: TestClient, conversation_id: str
) -> None:
    valid = is_conversation_id(conversation_id)
    assert valid == bool(re.fullmatch(CONVERSATION_ID_PATTERN.strip("^$"), conversation_id))
    headers, _ = anonymous(client)
    chat = client.post(
        "/api/chat", json={"text": QUESTION, "conversation_id": conversation_id}, headers=headers
    )
    # Well-formed: 404, it is nobody's conversation of this user. Malformed: 422.
    assert chat.status_code == (404 if valid else 422), chat.text
    upload = attach(client, headers, conversation_id)
    if conversation_id:  # an empty field is no field: a new conversation
        assert upload.status_code == (404 if valid else 422), upload.text
    purge = client.request(
        "DELETE", f"/api/admin/conversations/{quote(conversation_id)}", headers=bearer(ADMIN_TOKEN)
    )
    if "/" not in conversation_id and conversation_id:  # a path segment of its own
        assert purge.status_code == (202 if valid else 422), purge.text
    audit = client.get(
        "/api/admin/audit", params={"conversation_id": conversation_id}, headers=bearer(ADMIN_TOKEN)
    )
    assert audit.status_code == (200 if valid else 422), audit.text
    with client.websocket_connect(
        "/ws/chat", params={"conversation_id": conversation_id}
    ) as socket:
        ready = socket.receive_json()
    assert is_conversation_id(ready["conversation_id"])
    assert ready["conversation_id"] != conversation_id  # never a caller's own choice


# -- the admin token -----------------------------------------------------------------------------


def test_an_empty_admin_token_accepts_nothing(
    make_settings: Callable[..., GatewaySettings],
) -> None:
    settings = make_settings(admin_token="")
    with TestClient(create_app(settings)) as app:
        for presented in ("change-me", "", " ", "changeme"):
            response = app.get("/api/admin/tickets", headers=bearer(presented))
            assert response.status_code == 401, presented


def test_the_admin_token_has_no_known_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DESKPILOT_ADMIN_TOKEN", raising=False)
    assert GatewaySettings().admin_token.get_secret_value() == ""
    monkeypatch.setenv("DESKPILOT_ADMIN_TOKEN", "")
    assert GatewaySettings().admin_token.get_secret_value() == ""
    monkeypatch.setenv("DESKPILOT_ADMIN_TOKEN", "change-me")
    with pytest.raises(ValueError, match="placeholder"):
        GatewaySettings()


@pytest.mark.parametrize(
    ("sources", "origin", "allowed"),
    [
        (["https:"], "https://anything.example", True),
        (["https:"], "http://anything.example", False),
        (["http://intranet.example"], "https://intranet.example", True),  # an upgrade
        (["https://intranet.example"], "http://intranet.example", False),
        (["intranet.example"], "https://intranet.example", True),  # any scheme, default port
        (["https://intranet.example:*"], "https://intranet.example:9443", True),
        (["https://intranet.example:9443"], "https://intranet.example:9443", True),
        (["https://intranet.example:9443"], "https://intranet.example", False),
        (["https://*.example"], "https://a.b.example", True),
        (["https://*.example"], "https://evilexample", False),
        (["*"], "https://anything.example", True),
        (["*"], "null", False),
        (["'none'"], "https://intranet.example", False),
        (["'self'"], "https://gateway.example", True),
        (["'self'"], "https://intranet.example", False),
        ([], "HTTPS://GATEWAY.EXAMPLE", True),
        ([], "https://gateway.example/path", False),
    ],
)
def test_origins_match_as_csp_source_expressions(
    sources: list[str], origin: str, allowed: bool
) -> None:
    from gateway.origins import OriginPolicy

    assert OriginPolicy(sources).allows(origin, "gateway.example") is allowed
