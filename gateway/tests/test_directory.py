"""Teams and Slack users' groups from the directory (Entra ID through a local Microsoft Graph,
tests/support/fake_directory.py, on loopback) with a real valkey: which groups, how they are
cached, what a failing or hostile directory gives (no groups, never more), and that a Teams and a
Slack turn carry them on ``message.received`` as a web-chat turn carries its token's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError
from redis import Redis

from contracts.readers import MAX_GROUPS
from gateway.config import GatewaySettings
from gateway.directory import GraphDirectory, NoDirectory, Unavailable, build
from gateway.identity import GroupReader
from gateway.tests.conftest import (
    JWT_SECRET,
    answer_next,
    bearer,
    gateway_settings,
    one_question,
    serve,
    user_token,
)
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, FakeGraph
from tests.support.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.support.fake_teams import APP_PASSWORD, FakeTeams
from tests.support.mcp_client import session, structured

ALICE = "0f5a8c3e-1b2d-4e6f-8a9b-0c1d2e3f4a5b"
BOB = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
STRANGER = "11111111-0000-4000-8000-00000000dead"
OUTSIDE = "d0000000-0000-4000-8000-000000000004"
HR, PAYROLL, STAFF = (
    "a0000000-0000-4000-8000-000000000001",
    "a0000000-0000-4000-8000-000000000002",
    "a0000000-0000-4000-8000-000000000003",
)


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[FakeGraph]:
    with FakeGraph(tmp_path) as fake:
        fake.add_user(ALICE, "alice@northwind.example", mail="alice@northwind.example")
        # Bob's sign-in name is not his address: he is found by mail.
        fake.add_user(BOB, "bob.k@northwind.onmicrosoft.example", mail="bob@northwind.example")
        fake.add_group(PAYROLL, "payroll", ALICE)
        fake.add_group(HR, "hr-team", PAYROLL)  # Alice through payroll
        fake.add_group(STAFF, "all-staff", HR, BOB)
        yield fake


def directory_overrides(graph: FakeGraph, **more: Any) -> dict[str, Any]:
    return {
        "directory_tenant_id": TENANT,
        "directory_client_id": CLIENT_ID,
        "directory_client_secret": CLIENT_SECRET,
        "directory_graph_url": graph.graph_url,
        "directory_authority_host": graph.origin,
        "directory_ca_bundle": graph.ca_bundle,
        **more,
    }


@pytest.fixture
async def directory(
    graph: FakeGraph, fresh_redis_url: str, redis: aioredis.Redis
) -> AsyncIterator[GraphDirectory]:
    found = GraphDirectory(gateway_settings(fresh_redis_url, **directory_overrides(graph)), redis)
    yield found
    await found.aclose()


def make_directory(graph: FakeGraph, url: str, redis: aioredis.Redis, **more: Any) -> Any:
    return GraphDirectory(gateway_settings(url, **directory_overrides(graph, **more)), redis)


async def test_a_user_is_in_their_groups_and_the_groups_those_are_in(
    directory: GraphDirectory, graph: FakeGraph
) -> None:
    assert sorted(await directory.groups_of(ALICE)) == sorted([PAYROLL, HR, STAFF])
    assert await directory.groups_of(BOB.upper()) == (STAFF,)
    [first, *_] = graph.directory_requests
    assert "/transitiveMemberOf/microsoft.graph.group" in first
    assert "%24count=true" in first or "$count=true" in first


async def test_the_answer_is_cached_and_the_key_names_no_one(
    directory: GraphDirectory, graph: FakeGraph, redis: aioredis.Redis
) -> None:
    await directory.groups_of("alice@northwind.example")
    asked = len(graph.directory_requests)
    assert await directory.groups_of("Alice@Northwind.example") != ()
    assert len(graph.directory_requests) == asked  # from the cache
    keys = [k.decode() async for k in redis.scan_iter("deskpilot:gateway:directory:*")]
    assert len(keys) == 1
    assert "alice" not in keys[0].lower()
    assert 0 < await redis.ttl(keys[0]) <= 900


async def test_an_address_that_is_no_sign_in_name_is_found_by_mail(
    directory: GraphDirectory, graph: FakeGraph
) -> None:
    assert await directory.groups_of("bob@northwind.example") == (STAFF,)
    assert any("mail+eq" in r or "mail%20eq" in r for r in graph.directory_requests)


async def test_a_quote_in_an_address_stays_inside_the_filter(
    directory: GraphDirectory, graph: FakeGraph
) -> None:
    graph.add_user(STRANGER, "dan.obrien@northwind.onmicrosoft.example", mail="o'brien@x.example")
    graph.add_group(OUTSIDE, "contractors", STRANGER)
    assert await directory.groups_of("o'brien@x.example") == (OUTSIDE,)
    # An address made to close the literal early is still one literal: its quotes doubled.
    assert await directory.groups_of("x'or'mail'ne'y@x.example") == ()
    assert "x%27%27or%27%27mail%27%27ne%27%27y@x.example" in graph.directory_requests[-1]


async def test_unknown_people_and_other_principals_get_no_groups(
    directory: GraphDirectory, graph: FakeGraph
) -> None:
    assert await directory.groups_of(STRANGER) == ()
    assert await directory.groups_of("nobody@northwind.example") == ()
    asked = len(graph.directory_requests)
    assert await directory.groups_of(STRANGER) == ()  # an unknown user is cached too
    for principal in ("slack:T0:U0", "anon:abc", "../../users", "a/b@x.example", ""):
        assert await directory.groups_of(principal) == ()
    assert len(graph.directory_requests) == asked


async def test_the_configured_group_field_is_kept_and_invalid_values_dropped(
    graph: FakeGraph, fresh_redis_url: str, redis: aioredis.Redis
) -> None:
    graph.add_group("b0000000-0000-4000-8000-000000000009", "bad|name", ALICE)
    graph.add_group("b0000000-0000-4000-8000-00000000000a", "x" * 300, ALICE)
    directory = make_directory(graph, fresh_redis_url, redis, directory_group_field="displayName")
    try:
        assert sorted(await directory.groups_of(ALICE)) == ["all-staff", "hr-team", "payroll"]
    finally:
        await directory.aclose()


async def test_pages_are_followed_and_the_groups_capped(
    graph: FakeGraph, fresh_redis_url: str, redis: aioredis.Redis
) -> None:
    for n in range(MAX_GROUPS + 40):
        graph.add_group(f"c0000000-0000-4000-8000-{n:012d}", f"g{n:04d}", BOB)
    directory = make_directory(graph, fresh_redis_url, redis)
    directory.page_size = 300
    try:
        groups = await directory.groups_of(BOB)
    finally:
        await directory.aclose()
    assert len(groups) == MAX_GROUPS
    assert len(set(groups)) == MAX_GROUPS
    assert len(graph.directory_requests) == 2  # 300 and then 300 more, capped at 500


async def test_a_link_to_another_host_is_not_followed(directory: GraphDirectory) -> None:
    with pytest.raises(Unavailable, match="another host"):
        await directory._get("https://graph.attacker.example/v1.0/users")


async def test_an_expired_token_is_asked_for_again_once(
    directory: GraphDirectory, graph: FakeGraph
) -> None:
    assert await directory.groups_of(BOB) == (STAFF,)
    graph.expire_tokens()
    assert await directory.groups_of(ALICE) != ()
    assert graph.token_requests == 2


async def test_a_missing_permission_gives_no_groups_and_names_the_permission(
    directory: GraphDirectory, graph: FakeGraph, caplog: pytest.LogCaptureFixture
) -> None:
    graph.deny_directory()
    with caplog.at_level(logging.WARNING, logger="deskpilot.gateway.directory"):
        assert await directory.groups_of(ALICE) == ()
    assert "User.Read.All" in caplog.text
    assert ALICE not in caplog.text
    graph.deny_directory(False)
    asked = len(graph.directory_requests)
    assert await directory.groups_of(ALICE) == ()  # paused: not asked again at once
    assert len(graph.directory_requests) == asked
    directory._paused_until = 0.0  # the pause over: nothing of the failure was cached
    assert await directory.groups_of(ALICE) != ()


async def test_throttling_pauses_for_retry_after(
    directory: GraphDirectory, graph: FakeGraph
) -> None:
    graph.throttle_next(1)  # 429 with Retry-After: 1
    assert await directory.groups_of(ALICE) == ()
    assert await directory.groups_of(ALICE) == ()
    assert len(graph.directory_requests) == 1
    await asyncio.sleep(1.1)
    assert await directory.groups_of(ALICE) != ()


async def test_a_slow_directory_gives_the_turn_no_groups_in_time(
    graph: FakeGraph, fresh_redis_url: str, redis: aioredis.Redis
) -> None:
    graph.delay_directory(2.0)
    directory = make_directory(graph, fresh_redis_url, redis, directory_timeout_s=0.3)
    try:
        started = asyncio.get_running_loop().time()
        assert await directory.groups_of(ALICE) == ()
        assert asyncio.get_running_loop().time() - started < 1.5
    finally:
        await directory.aclose()


async def test_a_wrong_secret_gives_no_groups(
    graph: FakeGraph, fresh_redis_url: str, redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    directory = make_directory(graph, fresh_redis_url, redis, directory_client_secret="wrong")
    try:
        with caplog.at_level(logging.WARNING, logger="deskpilot.gateway.directory"):
            assert await directory.groups_of(ALICE) == ()
    finally:
        await directory.aclose()
    assert "invalid_client" in caplog.text
    assert "wrong" not in caplog.text
    assert graph.directory_requests == []


def test_settings_need_the_whole_app_registration_and_https(
    graph: FakeGraph, fresh_redis_url: str
) -> None:
    with pytest.raises(ValidationError, match="GATEWAY_DIRECTORY_CLIENT_SECRET") as missing:
        gateway_settings(fresh_redis_url, directory_tenant_id=TENANT, directory_client_id="x")
    assert CLIENT_SECRET not in str(missing.value)
    with pytest.raises(ValidationError, match="GATEWAY_DIRECTORY_GRAPH_URL must be https"):
        gateway_settings(
            fresh_redis_url,
            **directory_overrides(graph, directory_graph_url="http://graph.example/v1.0"),
        )
    with pytest.raises(ValidationError, match="directory_tenant_id"):
        gateway_settings(fresh_redis_url, **directory_overrides(graph, directory_tenant_id="a/b"))
    unset = gateway_settings(fresh_redis_url)
    assert isinstance(build(unset, aioredis.Redis()), NoDirectory)


# -- the channels ---------------------------------------------------------------------------------


@pytest.fixture
def teams() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user("U0ALICE", "Alice@Northwind.example", name="alice")
        fake.add_user("U0GUEST", "guest@elsewhere.example", name="guest")
        fake.add_channel("C0ITHELP")
        yield fake


@pytest.fixture
def settings_overrides(graph: FakeGraph, teams: FakeTeams, slack: FakeSlack) -> dict[str, Any]:
    return directory_overrides(graph) | {
        "teams_app_id": teams.app_id,
        "teams_app_password": APP_PASSWORD,
        "teams_openid_url": teams.openid_url,
        "teams_token_url": teams.token_url,
        "teams_service_url_prefixes": teams.service_url,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_bot_token": BOT_TOKEN,
        "slack_api_url": slack.api_url,
        "slack_response_url_prefix": slack.hooks_prefix,
    }


def test_teams_and_slack_turns_carry_the_directorys_groups(
    settings: GatewaySettings, teams: FakeTeams, slack: FakeSlack, raw: Redis
) -> None:
    with serve(settings) as url:
        teams.gateway_url = slack.gateway_url = url
        teams.send(teams.message(ALICE, "a:1personal-alice", "Where is the HR handbook?"))
        in_teams = one_question(raw)
        slack.send_event(slack.mention("U0ALICE", "C0ITHELP", "Where is the HR handbook?"))
        in_slack = one_question(raw, 2)
        slack.send_event(slack.mention("U0GUEST", "C0ITHELP", "Where is the HR handbook?"))
        guest = one_question(raw, 3)
    assert (in_teams.user_id, sorted(in_teams.groups)) == (ALICE, sorted([PAYROLL, HR, STAFF]))
    assert in_slack.user_id == "alice@northwind.example"
    assert sorted(in_slack.groups) == sorted([PAYROLL, HR, STAFF])
    assert (guest.authenticated, guest.groups) == (True, [])
    assert len(list(raw.scan_iter("deskpilot:gateway:directory:*"))) == 3  # one per person


# -- users in more groups than their token holds (Entra's overage claim) -------------------------

OVERAGE = {"_claim_names": {"groups": "src1"}, "_claim_sources": {"src1": {"endpoint": "x"}}}


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({**OVERAGE, "oid": ALICE.upper()}, ALICE),
        ({**OVERAGE, "oid": ALICE, "groups": ["it-staff"]}, None),  # the token's list counts
        ({**OVERAGE, "oid": "not-an-object-id"}, None),
        ({**OVERAGE}, None),
        ({"_claim_names": {"roles": "src1"}, "oid": ALICE}, None),
        ({"_claim_names": "groups", "oid": ALICE}, None),
        ({"oid": ALICE}, None),
    ],
)
def test_only_an_overage_claim_with_an_object_id_asks_the_directory(
    claims: dict[str, Any], expected: str | None
) -> None:
    assert GroupReader().overage(claims) == expected


def test_a_web_chat_user_in_too_many_groups_for_a_token_gets_the_directorys(
    make_settings: Any, graph: FakeGraph, raw: Redis
) -> None:
    settings = make_settings(jwt_secret=JWT_SECRET, turn_timeout_s=0.2)
    overage = user_token("emp-alice", oid=ALICE, **OVERAGE)
    listed = user_token("emp-bob", oid=BOB, groups=["listed-group"])
    with serve(settings) as url:
        for token in (overage, listed):
            asked = httpx.post(
                f"{url}/api/chat", json={"text": "Where is the HR handbook?"}, headers=bearer(token)
            )
            assert asked.status_code == 504, asked.text  # nobody answers here
    alice, bob = one_question(raw), one_question(raw, 2)
    assert (alice.user_id, sorted(alice.groups)) == ("emp-alice", sorted([PAYROLL, HR, STAFF]))
    assert (bob.user_id, bob.groups) == ("emp-bob", ["listed-group"])
    assert len(graph.directory_requests) == 1


async def test_an_mcp_caller_in_too_many_groups_for_a_token_gets_the_directorys(
    make_settings: Any, graph: FakeGraph, raw: Redis
) -> None:
    settings = make_settings(jwt_secret=JWT_SECRET, mcp_enabled=True)
    token = user_token("emp-bob", oid=BOB, **OVERAGE)
    with serve(settings) as url:
        async with session(url, token) as client:
            call = asyncio.create_task(client.call_tool("ask", {"question": "Budget?"}))
            message = await asyncio.to_thread(answer_next, settings, raw, 1)
            structured(await call)
    assert (message.user_id, message.groups) == ("emp-bob", [STAFF])
