"""End to end: the whole stack as `deskpilot up` starts it, driven through its public API."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import websockets

from deploy.cli.main import main as cli_main
from deploy.runner import Stack
from tests.support import REPO_ROOT, wait_until, wait_until_sync
from tests.support.stack import StackUser, ask, log_records, new_user

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("shared-stack")]

CHAT_FIELDS = {
    "answer",
    "action",
    "citations",
    "conversation_id",
    "turn_id",
    "trace_id",
    "ticket",
    "incident",
    "category",
    "questions",
    "checklist",
    "similar_cases",
    "crawled",
    "redaction_notice",
}


def ws_url(stack: Stack, query: str = "") -> str:
    return stack.url.replace("http://", "ws://") + "/ws/chat" + query


def ws_url_of(stack: Stack, user: StackUser, conversation_id: str | None = None) -> str:
    """The chat socket as ``user`` (its token as ``?token=``), continuing ``conversation_id``."""
    query = f"?token={user.token}"
    if conversation_id is not None:
        query += f"&conversation_id={conversation_id}"
    return ws_url(stack, query)


def deskpilot_ask(stack: Stack, token_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``deskpilot ask`` against the stack, keeping its anonymous token in ``token_file``."""
    return subprocess.run(
        [sys.executable, "-m", "deploy.cli", "ask", *args]
        + ["--url", stack.url, "--token-file", str(token_file)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def next_frame(socket: Any, timeout: float = 60) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), timeout))
    return frame


def test_ask_answers_from_the_demo_knowledge_base_with_citations(
    stack: Stack, tmp_path: Path
) -> None:
    result = deskpilot_ask(
        stack, tmp_path / "tokens.json", "How do I reset my VPN password?", "--json"
    )
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert set(body) == CHAT_FIELDS
    assert body["action"] == "answer"
    assert body["citations"][0]["n"] == 1
    assert body["citations"][0]["url"].endswith("/kb/vpn-password-reset")
    assert "[1]" in body["answer"]
    assert "self-service" in body["answer"]  # the actual reset steps are quoted
    assert body["ticket"] is None
    assert body["incident"] is None
    assert len(body["trace_id"]) == 32


def test_ask_prints_a_readable_answer(stack: Stack, tmp_path: Path) -> None:
    result = deskpilot_ask(stack, tmp_path / "tokens.json", "How do I change my display name?")
    assert result.returncode == 0, result.stderr
    assert "[1] " in result.stdout
    assert "https://it.northwind.example/kb/change-display-or-legal-name" in result.stdout
    assert re.search(r"--conversation-id [0-9a-f]{32}\b", result.stdout)  # says how to go on


def test_ask_continues_a_conversation_with_the_token_it_kept(stack: Stack, tmp_path: Path) -> None:
    tokens = tmp_path / "state" / "tokens.json"
    first = deskpilot_ask(stack, tokens, "How do I find my MAC address?", "--json")
    assert first.returncode == 0, first.stderr
    started = json.loads(first.stdout)
    assert started["action"] == "clarify", started  # asks for the operating system
    assert tokens.stat().st_mode & 0o777 == 0o600  # the token is the conversation's only key
    kept = json.loads(tokens.read_text())[stack.url]
    assert kept["user_id"].startswith("anon:")

    conversation = started["conversation_id"]
    second = deskpilot_ask(
        stack, tokens, "im on linux", "--conversation-id", conversation, "--json"
    )
    assert second.returncode == 0, second.stderr
    continued = json.loads(second.stdout)
    assert continued["conversation_id"] == conversation
    assert continued["action"] == "answer"  # the follow-up was understood in the conversation
    assert "On Linux" in continued["answer"]
    turn = httpx.get(
        f"{stack.url}/api/turns/{continued['turn_id']}",
        headers={"Authorization": f"Bearer {kept['token']}"},
        timeout=10,
    )
    assert turn.status_code == 200  # the turn is the kept token's user's

    # Another token file is another user: the conversation is not theirs to continue.
    stranger = deskpilot_ask(
        stack, tmp_path / "other.json", "and on windows?", "--conversation-id", conversation
    )
    assert stranger.returncode == 1
    assert "no token" in stranger.stderr  # nothing kept for this gateway yet
    greeted = deskpilot_ask(stack, tmp_path / "other.json", "Hello!")
    assert greeted.returncode == 0, greeted.stderr  # now it has a token of its own
    refused = deskpilot_ask(
        stack, tmp_path / "other.json", "and on windows?", "--conversation-id", conversation
    )
    assert refused.returncode == 1
    assert "error 404" in refused.stderr


def test_ask_replaces_a_token_the_gateway_refuses(stack: Stack, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    real = new_user(stack)
    unsigned = real.token.rsplit(".", 1)[0] + "." + "A" * 43  # its signature zeroed
    forged = {"token": unsigned, "user_id": real.user_id, "expires_at": 4102444800}
    tokens.write_text(json.dumps({stack.url: forged, "http://elsewhere.example": forged}))
    result = deskpilot_ask(stack, tokens, "How do I reset my VPN password?", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["action"] == "answer"
    kept = json.loads(tokens.read_text())
    assert kept[stack.url]["token"] != forged["token"]
    assert kept["http://elsewhere.example"] == forged  # other gateways' tokens stay
    # A conversation cannot be continued with a refused token: it says so.
    tokens.write_text(json.dumps({stack.url: forged}))
    continued = deskpilot_ask(stack, tokens, "and then?", "--conversation-id", "conv-x")
    assert continued.returncode == 1
    assert "no longer accepts the kept token" in continued.stderr
    # A token file that is not one costs a new anonymous user, nothing more.
    tokens.write_text("{not json")
    fresh = deskpilot_ask(stack, tokens, "How do I reset my VPN password?", "--json")
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(tokens.read_text())[stack.url]["user_id"].startswith("anon:")


@pytest.mark.parametrize(
    ("question", "article"),
    [
        ("I forgot my password and can't log in", "reset-your-account-password"),
        ("my headset doesnt work in teams", "headset-not-recognised-in-teams"),
        ("I need a replacement charger for my laptop", "exchange-laptop-charger"),
        ("where do I sign up for an IT training course", "enrol-in-it-training-course"),
    ],
)
def test_common_requests_cite_the_right_article(stack: Stack, question: str, article: str) -> None:
    body = ask(stack, question).json()
    assert body["action"] in {"answer", "checklist"}, body
    assert body["citations"][0]["url"].endswith(f"/kb/{article}")


@pytest.mark.parametrize("question", ["What is the capital of France?", "how do I bake bread"])
def test_off_topic_questions_are_declined(stack: Stack, question: str) -> None:
    body = ask(stack, question).json()
    assert body["action"] == "refuse"
    assert body["citations"] == []


def test_it_questions_the_knowledge_base_lacks_get_an_honest_no_answer(stack: Stack) -> None:
    body = ask(stack, "How do I configure the SAP GUI transaction ME21N shortcuts?").json()
    assert body["action"] == "no_answer"
    assert body["citations"] == []
    assert "ticket" in body["answer"]


def test_a_conversation_keeps_its_id(stack: Stack) -> None:
    user = new_user(stack)
    first = ask(stack, "How do I connect to the office Wi-Fi?", user=user).json()
    conversation = first["conversation_id"]
    second = ask(stack, "And the guest Wi-Fi?", user=user, conversation_id=conversation).json()
    assert second["conversation_id"] == conversation
    assert second["turn_id"] != first["turn_id"]
    # Only its owner goes on with it; anyone else gets the answer of an unknown id.
    stranger = ask(stack, "And the guest Wi-Fi?", conversation_id=conversation)
    assert stranger.status_code == 404
    assert stranger.json()["error_code"] == "unknown_conversation"


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({"text": ""}, 422, "empty_message"),
        ({"text": "   \n\t "}, 422, "empty_message"),
        ({"text": "x" * 8193}, 413, "message_too_long"),
        ({"text": "é" * 4097}, 413, "message_too_long"),  # 8,194 bytes in UTF-8
        ({"nope": "x"}, 422, "invalid_request"),
        ({"text": 42}, 422, "invalid_request"),
    ],
)
def test_bad_chat_requests_get_clear_errors(
    stack: Stack, payload: dict[str, Any], status: int, code: str
) -> None:
    response = httpx.post(f"{stack.url}/api/chat", json=payload, timeout=30)
    assert response.status_code == status
    assert response.json()["error_code"] == code
    assert response.json()["detail"]


def test_invalid_json_body_is_rejected(stack: Stack) -> None:
    response = httpx.post(
        f"{stack.url}/api/chat",
        content=b"{not json",
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 400
    assert response.json()["error_code"] == "invalid_json"


async def test_websocket_turn_streams_progress_then_the_answer(stack: Stack) -> None:
    async with websockets.connect(ws_url(stack)) as socket:
        ready = await next_frame(socket)
        assert ready["type"] == "ready"
        assert ready["conversation_id"]
        await socket.send(
            json.dumps({"type": "message", "text": "How do I enrol in an IT training course?"})
        )
        accepted = await next_frame(socket)
        assert accepted["type"] == "accepted"
        stages = []
        while True:
            frame = await next_frame(socket)
            if frame["type"] == "progress":
                assert frame["turn_id"] == accepted["turn_id"]
                stages.append(frame["stage"])
                continue
            break
        assert frame["type"] == "answer"
        assert set(frame) - {"type"} == CHAT_FIELDS
        assert frame["turn_id"] == accepted["turn_id"]
        assert frame["conversation_id"] == ready["conversation_id"]
        assert frame["citations"][0]["url"].endswith("/kb/enrol-in-it-training-course")
        assert stages == ["redacting", "searching", "composing"]


async def test_websocket_bad_frames_get_errors_and_the_socket_keeps_working(stack: Stack) -> None:
    async with websockets.connect(ws_url_of(stack, new_user(stack))) as socket:
        conversation = (await next_frame(socket))["conversation_id"]
        assert conversation
        bad_frames = [
            ("{oops", "invalid_json"),
            (json.dumps(["a list"]), "invalid_request"),
            (json.dumps({"type": "dance"}), "invalid_request"),
            (json.dumps({"type": "message", "text": 5}), "invalid_request"),
            (json.dumps({"type": "message", "text": "  "}), "empty_message"),
            (json.dumps({"type": "message", "text": "y" * 9000}), "message_too_long"),
        ]
        for raw, code in bad_frames:
            await socket.send(raw)
            frame = await next_frame(socket)
            assert frame == {"type": "error", "error_code": code, "detail": frame["detail"]}
            assert frame["detail"]
        await socket.send(json.dumps({"type": "message", "text": "", "client_id": "m-1"}))
        assert (await next_frame(socket))["client_id"] == "m-1"
        await socket.send(
            json.dumps(
                {"type": "message", "text": "How do I unlock my account?", "client_id": "m-2"}
            )
        )
        accepted = await next_frame(socket)
        assert accepted["type"] == "accepted"
        assert accepted["client_id"] == "m-2"
        while (frame := await next_frame(socket))["type"] != "answer":
            assert frame["type"] == "progress"
        assert frame["conversation_id"] == conversation


async def test_answer_can_be_fetched_after_disconnecting_mid_turn(stack: Stack) -> None:
    user = new_user(stack)
    async with websockets.connect(ws_url_of(stack, user)) as socket:
        conversation = (await next_frame(socket))["conversation_id"]
        await socket.send(
            json.dumps({"type": "message", "text": "How do I request a second monitor?"})
        )
        accepted = await next_frame(socket)
    turn_url = f"{stack.url}/api/turns/{accepted['turn_id']}"

    async def done() -> dict[str, Any] | None:
        async with httpx.AsyncClient() as client:
            response = await client.get(turn_url, headers=user.headers)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body if body["status"] == "done" else None

    turn = await wait_until(done, 60, interval_s=0.2)
    assert turn["answer"]["turn_id"] == accepted["turn_id"]
    assert turn["answer"]["citations"][0]["url"].endswith("/kb/request-second-monitor")
    # Only the user who sent it may fetch it.
    stranger = httpx.get(turn_url, headers=new_user(stack).headers, timeout=10)
    assert stranger.status_code == 404
    assert stranger.json()["error_code"] == "unknown_turn"
    # Reconnecting with the same token continues the same conversation.
    async with websockets.connect(ws_url_of(stack, user, conversation)) as socket:
        assert (await next_frame(socket))["conversation_id"] == conversation


def test_unknown_turn_is_404(stack: Stack) -> None:
    response = httpx.get(
        f"{stack.url}/api/turns/does-not-exist", headers=new_user(stack).headers, timeout=10
    )
    assert response.status_code == 404
    assert response.json()["error_code"] == "unknown_turn"


def test_feedback_is_stored_durably_and_validated(stack: Stack, tmp_path: Path) -> None:
    asker = new_user(stack)
    user = asker.headers
    turn = ask(stack, "How do I find the IT policy documents?", user=asker).json()
    url = f"{stack.url}/api/feedback"
    created = httpx.post(
        url, json={"turn_id": turn["turn_id"], "score": 4, "comment": "ok"}, headers=user
    )
    assert created.status_code == 201
    assert created.json()["score"] == 4
    client = redis.Redis.from_url(stack.redis_url)
    key = f"deskpilot:gateway:feedback:{turn['turn_id']}"
    stored = json.loads(client.get(key) or b"{}")
    assert stored["score"] == 4
    assert client.ttl(key) > 0  # expires with its turn
    # The comment comes back from the redactor, redacted, on feedback.recorded.
    wait_until_sync(
        lambda: json.loads(client.get(key) or b"{}").get("comment") == "ok",
        120,
        message="the redacted comment was not kept",
    )
    events = client.xrevrange("feedback.recorded", count=20)
    assert any(turn["turn_id"].encode() in fields[b"__data__"] for _, fields in events)

    for bad in ({"score": "five"}, {"score": 0}, {"score": 6}, {"score": 4.5}, {}):
        response = httpx.post(url, json={"turn_id": turn["turn_id"], **bad}, headers=user)
        assert response.status_code == 422, bad
        assert response.json()["error_code"] == "invalid_request"
    unknown = httpx.post(url, json={"turn_id": "nope", "score": 3}, headers=user)
    assert unknown.status_code == 404
    stranger = httpx.post(url, json={"turn_id": turn["turn_id"], "score": 1})
    assert stranger.status_code == 404  # only the turn's own user rates it


def test_one_trace_and_one_correlation_id_span_the_turn(stack: Stack) -> None:
    body = ask(stack, "My webcam does not work").json()
    turn_id, trace_id = body["turn_id"], body["trace_id"]
    for service in ("gateway", "redactor", "orchestrator"):
        lines = [r for r in log_records(stack, service) if r.get("correlation_id") == turn_id]
        assert lines, f"{service} logged nothing for the turn"
        assert {r.get("trace_id") for r in lines} == {trace_id}, service


def test_the_retrieval_snapshot_is_built_at_start_not_by_the_first_question(
    stack: Stack,
) -> None:
    ask(stack, "My webcam does not work")  # a turn has run, whichever test ran first
    records = log_records(stack, "orchestrator")
    built = [i for i, r in enumerate(records) if "retrieval snapshot built" in r.get("msg", "")]
    turns = [i for i, r in enumerate(records) if r.get("correlation_id")]
    assert built, "the orchestrator never built its retrieval snapshot"
    assert turns
    assert built[0] < turns[0]
    assert records[built[0]].get("correlation_id") is None


def test_raw_text_is_deleted_once_redacted(stack: Stack) -> None:
    secret_mail = "jane.doe.e2e@northwind.example"
    body = ask(stack, f"Please email {secret_mail} about the VPN password reset").json()
    assert body["action"] in {"answer", "checklist"}
    client = redis.Redis.from_url(stack.redis_url)
    for stream in ("message.received", "query.received"):
        for _, fields in client.xrange(stream):
            assert secret_mail.encode() not in fields[b"__data__"], stream
    queries = [f[b"__data__"] for _, f in client.xrange("query.received")]
    assert any(b"<EMAIL_ADDRESS_1>" in q and body["turn_id"].encode() in q for q in queries)


def test_the_user_is_told_what_was_removed_without_repeating_it(stack: Stack) -> None:
    body = ask(
        stack, "My password is Gr4nite-Heron-61, how do I connect to the office Wi-Fi?"
    ).json()
    assert body["action"] in {"answer", "checklist"}
    notice = body["redaction_notice"]
    assert notice.startswith("I removed a password from your message")
    assert "Gr4nite" not in json.dumps(body)
    plain = ask(stack, "How do I connect to the office Wi-Fi?").json()
    assert plain["redaction_notice"] is None


def test_a_value_keeps_its_placeholder_for_the_whole_conversation(stack: Stack) -> None:
    user = new_user(stack)
    first = ask(
        stack, "Please email lena.holm.e2e@fastmail.com about the VPN password", user=user
    ).json()
    conversation = first["conversation_id"]
    second = ask(
        stack,
        "cc per.ahl.e2e@fastmail.com and lena.holm.e2e@fastmail.com on the printer ticket",
        user=user,
        conversation_id=conversation,
    ).json()
    assert second["conversation_id"] == conversation
    client = redis.Redis.from_url(stack.redis_url)
    queries = {
        turn: next(
            f[b"__data__"]
            for _, f in client.xrange("query.received")
            if turn.encode() in f[b"__data__"]
        )
        for turn in (first["turn_id"], second["turn_id"])
    }
    assert b"email <EMAIL_ADDRESS_1> about" in queries[first["turn_id"]]
    assert b"cc <EMAIL_ADDRESS_2> and <EMAIL_ADDRESS_1> on" in queries[second["turn_id"]]


def test_health_reports_every_service(stack: Stack) -> None:
    response = httpx.get(f"{stack.url}/health", timeout=10)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["dependencies"]["redis"] is True
    for service in ("gateway", "redactor", "ocr", "orchestrator", "indexer", "ticketing"):
        assert body["services"][service] >= 1


def test_chat_page_is_served(stack: Stack) -> None:
    page = httpx.get(stack.url + "/", timeout=10)
    assert page.status_code == 200
    assert "/ws/chat" in httpx.get(stack.url + "/static/chat.js", timeout=10).text
    assert "chat.js" in page.text


def test_ingest_adds_knowledge_the_running_stack_answers_from(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "plotter.md").write_text(
        "---\ntitle: Calibrate the Zephyr-9 plotter\n"
        "url: https://it.northwind.example/kb/zephyr-plotter\ncategory: peripheral_question\n"
        "os: any\n---\n# Calibrate the Zephyr-9 plotter\n\n"
        "The Zephyr-9 large-format plotter drifts after a paper change.\n\n"
        "1. Load a full roll of matte paper.\n2. Hold the Zephyr key for five seconds.\n"
        "3. Choose Calibrate and wait for the test print.\n"
    )
    argv = ["ingest", str(folder), "--data-dir", str(stack.data_dir), "--json"]

    def ingest() -> dict[str, Any]:
        # The command's own entry, in this process: a second interpreter importing torch and
        # the model for each call cost most of this test's time.
        capsys.readouterr()
        assert cli_main(argv) == 0
        report: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        return report

    first = ingest()
    assert first["files_indexed"] == 1
    assert first["chunks_written"] >= 1
    # Chunks written while the orchestrator runs join its snapshot within seconds (the refresh
    # runs in the background: a question asked at that moment may be answered from the snapshot
    # before, as one was in a run with 3 workers on 2 cores).
    answers: list[dict[str, Any]] = []

    def answered_from_the_page() -> bool:
        answers.append(ask(stack, "How do I calibrate the Zephyr-9 plotter?").json())
        citations = answers[-1]["citations"]
        return bool(citations) and citations[0]["url"].endswith("/kb/zephyr-plotter")

    wait_until_sync(answered_from_the_page, 30, interval_s=1.0, message=lambda: str(answers))
    assert "Hold the Zephyr key" in answers[-1]["answer"]
    again = ingest()
    assert again["files_unchanged"] == 1
    assert again["chunks_written"] == 0
