"""Property-based fuzzing of the gateway's HTTP API from its own OpenAPI document (schemathesis).

A real gateway process on a real valkey (no other service: the API must stand on its own) is
called with requests generated from every operation's schema, as an anonymous caller and with
the admin token. Each request carries a planted secret (a GitHub-token-shaped value) in a body
field, a query parameter, a header and the path. Two properties:

* no response is a server error (500), and a 5xx is one of the gateway's own answers with its
  error code (503 with ``Retry-After`` under load, 504 with the turn id when no worker answers);
* no response echoes the planted secret, in its body or its headers: not in a validation error,
  not in an id it repeats, not in a record it returns.

Bounded for CI: a fixed number of examples per operation, generated deterministically.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from conftest import start_valkey
from deploy.runner import free_port

# One gateway for the module: its tests run in one xdist worker.
pytestmark = pytest.mark.xdist_group("fuzz-api")

SECRET = "ghp_R7qLm2Xv9TzK4wNc8YbH3sJd6FpA1eGu5QoZ"
"""Shaped like a GitHub personal access token: what a user might paste anywhere."""
ADMIN_TOKEN = "fuzz-admin-4e1f0c7b9a2d48e6b3c5d7f9a1b3c5d7"
EXAMPLES = 10
"""Examples per operation (about 24 operations), each sent by both callers."""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m gateway`` on a fresh valkey; yields its base URL."""
    folder = tmp_path_factory.mktemp("fuzz")
    valkey = start_valkey(folder / "valkey")
    port = free_port()
    environment = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "DESKPILOT_DATA_DIR": str(folder / "data"),
        "DESKPILOT_ADMIN_TOKEN": ADMIN_TOKEN,
        "DESKPILOT_ENV": "development",
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(port),
        "GATEWAY_INCIDENT_TOKEN": "fuzz-incident-token-0123456789abcdef",
        "LOG_LEVEL": "WARNING",
        # No worker runs: POST /api/chat and /api/attachments answer their 504 after this long.
        "GATEWAY_TURN_TIMEOUT_S": "0.3",
        "GATEWAY_ATTACHMENT_TIMEOUT_S": "0.3",
    }
    log = (folder / "gateway.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway"], env=environment, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (folder / "gateway.log").read_text(errors="replace")
            try:
                if httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.25)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        valkey.stop()
        # What the gateway logged (requests with the planted secret) must not carry it either.
        logged = (folder / "gateway.log").read_text(errors="replace")
        assert SECRET not in logged, "the gateway logged the planted secret"


@pytest.fixture(scope="module")
def api_schema(gateway: str) -> Any:
    return schemathesis.openapi.from_url(f"{gateway}/openapi.json")


def _string_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _string_leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _string_leaves(item, (*path, index))


def _replace(value: Any, path: tuple[Any, ...], new: str) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def plant(case: Any) -> None:
    """Put the secret where a caller could: the longest string of the body (a message, a
    comment), a query parameter, a header and the path (an id: nobody's, so never found)."""
    leaves = sorted(_string_leaves(case.body), key=lambda leaf: len(leaf[1]), reverse=True)
    if leaves:
        where, text = leaves[0]
        case.body = _replace(case.body, where, f"my token is {SECRET} {text}"[: max(64, len(text))])
    case.query = {**(case.query or {}), "note": SECRET}
    case.headers = {**(case.headers or {}), "X-Request-Note": SECRET}
    if case.path_parameters:
        name = sorted(case.path_parameters)[0]
        case.path_parameters = {**case.path_parameters, name: SECRET}


def check(case: Any) -> None:
    """Send ``case`` with a planted secret, as an anonymous caller and with the admin token (the
    admin API's handlers run too)."""
    plant(case)
    documented = {str(code) for code in case.operation.definition.raw.get("responses", {})}
    for headers in ({}, {"Authorization": f"Bearer {ADMIN_TOKEN}"}):
        response = case.call(headers=headers, timeout=30)
        caller = "admin" if headers else "anonymous"
        label = f"{caller}: {case.method} {case.formatted_path} -> {response.status_code}"
        judge(response, documented, f"{label}\n{case.as_curl_command(headers=headers)}")


def judge(response: Any, documented: set[str], label: str) -> None:
    """Neither a 500 nor an undocumented 5xx that is not the gateway's own error answer, and
    the planted secret in neither the body nor a header."""
    status = response.status_code
    assert status != 500, f"{label}: {response.text[:500]}"
    if status >= 500 and str(status) not in documented:
        # Then only the gateway's own answers (bus down, overload, turn timeout), with their
        # error code, never an unhandled error.
        assert "error_code" in response.json(), f"{label}: {response.text[:500]}"
    assert SECRET not in response.text, f"echoed the planted secret: {label}"
    for name, values in response.headers.items():
        assert SECRET not in str(values), f"echoed the secret in header {name}: {label}"


def operation_labels() -> list[str]:
    """``METHOD /path`` of every operation in the gateway's OpenAPI document."""
    from gateway.app import create_app
    from gateway.config import GatewaySettings

    document = create_app(GatewaySettings(admin_token=ADMIN_TOKEN)).openapi()
    methods = {"get", "put", "post", "delete", "patch"}
    return sorted(
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method in operations
        if method in methods
    )


KNOWN_ECHOES: dict[str, str] = {}
"""Operations known to echo what the caller sent, with why (none now: every 404 names no id,
and a purge answers with its own id instead of the conversation's)."""


def _case_marks(label: str) -> list[pytest.MarkDecorator]:
    if label in KNOWN_ECHOES:
        return [pytest.mark.xfail(reason=KNOWN_ECHOES[label], strict=True)]
    return []


LABELS = operation_labels()


def test_the_live_document_has_the_operations_collected(api_schema: Any) -> None:
    live = sorted(result.ok().label for result in api_schema.get_all_operations())
    assert live == LABELS
    assert len(LABELS) >= 20


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "label", [pytest.param(label, marks=_case_marks(label)) for label in LABELS]
)
def test_no_server_error_and_no_echoed_secret(api_schema: Any, label: str) -> None:
    operation = api_schema[label.split(" ", 1)[1]][label.split(" ", 1)[0]]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(case=operation.as_strategy())
    def fuzz(case: Any) -> None:
        check(case)

    fuzz()


@dataclass
class Answer:
    """A response as the checks read it."""

    status_code: int
    text: str
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.text)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (Answer(200, json.dumps({"message": SECRET})), "echoed the planted secret"),
        (Answer(404, "{}", {"X-Id": SECRET}), "echoed the secret in header"),
        (Answer(500, '{"detail": "boom"}'), "500"),
        (Answer(502, '{"detail": "bad gateway"}'), "error_code"),
    ],
    ids=["body", "header", "500", "undocumented-502"],
)
def test_the_checks_see_what_they_look_for(answer: Answer, problem: str) -> None:
    # The property would hold against checks that see nothing.
    with pytest.raises(AssertionError, match=problem):
        judge(answer, {"200", "404", "422"}, "probe")
    judge(Answer(503, '{"error_code": "overloaded"}'), set(), "probe")  # the gateway's own
    judge(Answer(503, '{"status": "degraded"}'), {"503"}, "probe")  # documented (/health)
