"""Permission-aware answers on the whole stack: a Confluence space with pages restricted to
different groups, synced by the indexer; users whose tokens list different groups ask the same
question over the REST API and the WebSocket, and escalate to a (fake) Jira. Each gets, and each
ticket's "answers given" holds, only what that user may read; an anonymous user only public pages;
a token forged to carry groups is refused; a restriction changed at the source holds after the
next sync. The same people in Teams and Slack get the groups the directory (Entra ID through
Microsoft Graph) lists for them, and so the same pages.

Confluence, Jira, Graph, Teams and Slack are the emulators in tests/support (the vendors'
documented shapes) on loopback; everything else is the real stack.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import httpx
import jwt
import pytest
import websockets

from deploy.runner import Stack
from tests.support import wait_until_sync
from tests.support.channels import channel_env, slack_answers, teams_cards
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, FakeGraph
from tests.support.fake_jira import FakeJira
from tests.support.fake_slack import FakeSlack
from tests.support.fake_teams import FakeTeams
from tests.support.stack import ask, running_stack, source_synced

pytestmark = [pytest.mark.slow]

ADMIN = f"admin-{uuid4().hex}"
JWT_SECRET = f"user-tokens-{uuid4().hex}{uuid4().hex}"
QUESTION = "How do I request parental leave?"
HR_PAGE = (
    "Kestrel leave requests",
    "<h1>Kestrel leave requests</h1><p>Request parental leave with the Kestrel form in the HR "
    "portal at least eight weeks before the leave starts. Your HR partner confirms the parental "
    "leave within five days.</p>",
)
IT_PAGE = (
    "Osprey leave requests",
    "<h1>Osprey leave requests</h1><p>Request parental leave with the Osprey form in the staff "
    "portal at least eight weeks before the leave starts. Your team lead confirms the parental "
    "leave within five days.</p>",
)


@pytest.fixture(scope="module")
def confluence() -> Iterator[FakeConfluence]:
    with FakeConfluence({"PEOPLE": "People"}) as fake:
        fake.add_page("PEOPLE", *HR_PAGE, read_groups=["hr-team"])
        fake.add_page("PEOPLE", *IT_PAGE, read_groups=["it-staff"])
        yield fake


@pytest.fixture(scope="module")
def jira() -> Iterator[FakeJira]:
    with FakeJira() as fake:
        yield fake


HANA_OBJECT_ID = "5e0a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
NORA_OBJECT_ID = "6f1b2c3d-4e5f-4061-9b7c-8d9e0f1a2b3c"
IVAN_SLACK, IVAN_EMAIL = "U0IVAN", "ivan@northwind.example"
SLACK_CHANNEL = "C0PEOPLE"


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGraph]:
    """The directory: Hana (Teams) in hr-team; Ivan (Slack, found by his mail) in it-staff
    through a nested group; Nora in none. Confluence names groups, so the gateway takes
    groups' display names (GATEWAY_DIRECTORY_GROUP_FIELD)."""
    with FakeGraph(tmp_path_factory.mktemp("graph")) as fake:
        fake.add_user(HANA_OBJECT_ID, "hana@northwind.example", mail="hana@northwind.example")
        fake.add_user(NORA_OBJECT_ID, "nora@northwind.example", mail="nora@northwind.example")
        ivan = "7a2c3d4e-5f60-4172-8c8d-9e0f1a2b3c4d"
        fake.add_user(ivan, "ivan.k@northwind.onmicrosoft.example", mail=IVAN_EMAIL)
        fake.add_group("e1000000-0000-4000-8000-000000000001", "hr-team", HANA_OBJECT_ID)
        fake.add_group("e1000000-0000-4000-8000-000000000002", "service-desk", ivan)
        fake.add_group(
            "e1000000-0000-4000-8000-000000000003",
            "it-staff",
            "e1000000-0000-4000-8000-000000000002",
        )
        yield fake


@pytest.fixture(scope="module")
def teams() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user(IVAN_SLACK, IVAN_EMAIL, name="ivan")
        fake.add_channel(SLACK_CHANNEL)
        yield fake


def directory_env(graph: FakeGraph) -> dict[str, str]:
    return {
        "GATEWAY_DIRECTORY_TENANT_ID": TENANT,
        "GATEWAY_DIRECTORY_CLIENT_ID": CLIENT_ID,
        "GATEWAY_DIRECTORY_CLIENT_SECRET": CLIENT_SECRET,
        "GATEWAY_DIRECTORY_GRAPH_URL": graph.graph_url,
        "GATEWAY_DIRECTORY_AUTHORITY_HOST": graph.origin,
        "GATEWAY_DIRECTORY_CA_BUNDLE": str(graph.ca_bundle),
        "GATEWAY_DIRECTORY_GROUP_FIELD": "displayName",
    }


@pytest.fixture(scope="module")
def stack(
    confluence: FakeConfluence,
    jira: FakeJira,
    graph: FakeGraph,
    teams: FakeTeams,
    slack: FakeSlack,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    source = {
        "name": "people",
        "kind": "confluence",
        "base_url": confluence.base_url,
        "spaces": ["PEOPLE"],
        "email": EMAIL,
        "api_token": TOKEN,
    }
    env = {
        "DESKPILOT_ADMIN_TOKEN": ADMIN,
        "GATEWAY_JWT_SECRET": JWT_SECRET,
        "INDEXER_SOURCES": json.dumps([source]),
        "TICKETING_BACKEND": "jira",
        "JIRA_BASE_URL": jira.base_url,
        "JIRA_EMAIL": jira.email,
        "JIRA_API_TOKEN": jira.token,
        **channel_env(slack, teams),
        **directory_env(graph),
    }
    with running_stack(tmp_path_factory.mktemp("permissions"), env) as running:
        slack.gateway_url = teams.gateway_url = running.url
        status = sync(running, None)
        assert status["last_summary"]["new"] == 2, status
        yield running


def admin(stack: Stack, method: str, path: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    return httpx.request(method, f"{stack.url}{path}", headers=headers, timeout=30)


def sync(stack: Stack, after: str | None) -> dict[str, Any]:
    """Sync the space and wait for the run that ended after ``after``; its status."""
    return source_synced(stack, ADMIN, "people", after)


def user_token(subject: str, groups: Any, secret: str = JWT_SECRET) -> str:
    claims = {"sub": subject, "exp": int(datetime.now(UTC).timestamp()) + 900, "groups": groups}
    return jwt.encode(claims, secret, algorithm="HS256")


HANA = user_token("emp-hana", ["hr-team"])
IVAN = user_token("emp-ivan", ["it-staff", "vpn-users"])
NOBODY = user_token("emp-nora", [])


def rest(stack: Stack, token: str, text: str, conversation_id: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"text": text}
    if conversation_id:
        body["conversation_id"] = conversation_id
    return httpx.post(
        f"{stack.url}/api/chat",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=90,
    )


def seen(answer: dict[str, Any]) -> str:
    """Everything the reply shows, as one lower-cased string (answer, citations, see-also,
    checklist, similar cases: wherever a title or a snippet could surface)."""
    return json.dumps(answer).lower()


def comes_to_see(stack: Stack, token: str, question: str, words: str) -> None:
    """Ask until the answer shows ``words``: what was just indexed reaches a reader who may not
    read everything when the orchestrator's snapshot is next checked (within seconds)."""
    answers: list[str] = []

    def shown() -> bool:
        answers.append(seen(rest(stack, token, question).json()))
        return words in answers[-1]

    wait_until_sync(shown, 60, interval_s=2.0, message=lambda: str(answers[-3:]))


def only(answer: Any, mine: str, theirs: str) -> None:
    shown = seen(answer)
    assert mine in shown, answer
    assert theirs not in shown, answer


def test_each_reader_gets_only_their_page_over_the_api(stack: Stack) -> None:
    hana = rest(stack, HANA, QUESTION)
    ivan = rest(stack, IVAN, QUESTION)
    assert hana.status_code == ivan.status_code == 200
    only(hana.json(), "kestrel", "osprey")
    only(ivan.json(), "osprey", "kestrel")
    assert any("/spaces/PEOPLE/pages/" in c["url"] for c in hana.json()["citations"])

    # Without groups (a token without them, an anonymous user): as if neither page existed.
    for answer in (rest(stack, NOBODY, QUESTION).json(), ask(stack, QUESTION).json()):
        shown = seen(answer)
        assert "kestrel" not in shown, answer
        assert "osprey" not in shown, answer
        assert not [c for c in answer["citations"] if "/spaces/PEOPLE/" in c["url"]], answer


def test_a_forged_token_with_groups_is_refused(stack: Stack) -> None:
    forged = user_token("emp-ivan", ["hr-team"], secret=f"not-the-secret-{uuid4().hex}")
    refused = rest(stack, forged, QUESTION)
    assert refused.status_code == 401
    assert "kestrel" not in refused.text.lower()
    # A groups claim edited into a genuine token (its signature no longer matches).
    header, _, signature = IVAN.split(".")
    payload = user_token("emp-ivan", ["hr-team"]).split(".")[1]
    assert rest(stack, f"{header}.{payload}.{signature}", QUESTION).status_code == 401

    async def handshake() -> int:
        url = stack.url.replace("http://", "ws://") + f"/ws/chat?token={forged}"
        try:
            async with websockets.connect(url):
                return 101
        except websockets.InvalidStatus as exc:
            return int(exc.response.status_code)

    assert asyncio.run(handshake()) == 401


async def say(socket: Any, text: str) -> dict[str, Any]:
    await socket.send(json.dumps({"type": "message", "text": text}))
    while True:
        frame: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), 90))
        if frame["type"] in ("answer", "error"):
            return frame


async def websocket_turns(stack: Stack, token: str, *texts: str) -> list[dict[str, Any]]:
    url = stack.url.replace("http://", "ws://") + f"/ws/chat?token={token}"
    async with websockets.connect(url) as socket:
        ready = json.loads(await asyncio.wait_for(socket.recv(), 30))
        assert ready["type"] == "ready", ready
        return [await say(socket, text) for text in texts]


def test_each_reader_gets_only_their_page_over_the_websocket_and_in_the_ticket(
    stack: Stack, jira: FakeJira, confluence: FakeConfluence
) -> None:
    escalate = "That did not help, I need a human please."
    hana = asyncio.run(websocket_turns(stack, HANA, QUESTION, escalate))
    ivan = asyncio.run(websocket_turns(stack, IVAN, QUESTION, escalate))
    only(hana[0], "kestrel", "osprey")
    only(ivan[0], "osprey", "kestrel")

    page = {p.title: f"/pages/{p.id}" for p in confluence.pages.values()}
    hr, it = page[HR_PAGE[0]], page[IT_PAGE[0]]
    for turns, mine, theirs in ((hana, hr, it), (ivan, it, hr)):
        assert turns[1]["action"] == "escalated", turns[1]
        key = turns[1]["ticket"]["key"]
        description = wait_until_sync(lambda key=key: jira_description(jira, key), 60)
        # The technician sees the answers this user was given (by their source) and nothing
        # of the page the user may not read.
        answers_given = description.split("Answers given", 1)[1].split("h3.", 1)[0]
        assert mine in answers_given, description
        assert theirs not in description, description
        other_word = "osprey" if mine == hr else "kestrel"
        assert other_word not in description.lower(), description


def test_teams_and_slack_users_read_what_their_directory_groups_may(
    stack: Stack, teams: FakeTeams, slack: FakeSlack
) -> None:
    def in_teams(person: str) -> str:
        chat = teams.add_conversation(f"a:1{person[:8]}-{uuid4().hex[:8]}")
        assert teams.send(teams.message(person, chat, QUESTION)).status_code == 200
        [card] = teams_cards(teams, chat, 1)
        return seen(card.activity["attachments"][0]["content"])

    only(in_teams(HANA_OBJECT_ID), "kestrel", "osprey")
    nora = in_teams(NORA_OBJECT_ID)  # in the directory, in no group: as if neither existed
    assert "kestrel" not in nora
    assert "osprey" not in nora

    envelope = slack.mention(IVAN_SLACK, SLACK_CHANNEL, QUESTION)
    assert slack.send_event(envelope).status_code == 200
    [answer] = slack_answers(slack, SLACK_CHANNEL, str(envelope["event"]["ts"]), 1)
    only(answer.blocks, "osprey", "kestrel")


def jira_description(jira: FakeJira, key: str) -> str | None:
    issue = jira.issues.get(key)
    return str(issue.fields.get("description") or "") if issue is not None else None


def test_a_restriction_changed_at_the_source_holds_after_the_next_sync(
    stack: Stack, confluence: FakeConfluence
) -> None:
    before = admin(stack, "GET", "/api/admin/sources/people").json()
    hr_page = next(p for p in confluence.pages.values() if p.title == HR_PAGE[0])
    # HR opens its page to IT staff too.
    confluence.edit_page(hr_page.id, read_groups=["hr-team", "it-staff"])
    after = sync(stack, before["last_finished_at"])
    assert after["last_summary"]["changed"] == 1, after

    # (Not "the Kestrel form": the redactor takes an unknown capitalised word for a name.)
    question = "Does my HR partner in the HR portal confirm parental leave?"
    comes_to_see(stack, IVAN, question, "kestrel form")
    # Still nobody else's.
    assert "kestrel" not in seen(rest(stack, NOBODY, question).json())


BIKES = b"""# Bike storage

Bikes are stored in the Wren cage behind building C. Ask reception for a bike storage badge;
the Wren cage opens with it from 6 am to 10 pm.
"""


def test_an_upload_an_admin_restricts_is_answered_to_its_readers_only(stack: Stack) -> None:
    def upload(params: dict[str, Any], token: str = ADMIN) -> httpx.Response:
        return httpx.post(
            f"{stack.url}/api/documents",
            params=params,
            files={"file": ("bikes.md", BIKES, "text/markdown")},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )

    # Attacks and slips first: ids that could never match (or would match a part), a user
    # token instead of the admin's.
    for params in ({"read_groups": "hr-team|it-staff"}, {"read_users": ""}, {"read_groups": " x"}):
        refused = upload(params)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error_code"] == "invalid_request"
    assert upload({"read_groups": "hr-team"}, token=HANA).status_code in (401, 403)

    accepted = upload({"read_groups": "it-staff"})
    assert accepted.status_code == 202, accepted.text
    document_id = accepted.json()["id"]

    def indexed() -> bool:
        status = admin(stack, "GET", f"/api/documents/{document_id}").json()
        assert status["status"] != "failed", status
        return status["status"] == "indexed"

    wait_until_sync(indexed, 120, interval_s=0.5)
    question = "Where are bikes stored and how do I get a bike storage badge?"
    comes_to_see(stack, IVAN, question, "wren cage")
    for token in (HANA, NOBODY):
        assert "wren" not in seen(rest(stack, token, question).json())
    assert "wren" not in seen(ask(stack, question).json())
