"""The shared stack (see tests/shared/__init__.py), one per package run, with every channel on:
a local Slack and a local Bot Framework, started before it, stand in for slack.com and
Microsoft's (tests/shared/test_channels.py talks to the stack through them)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from deploy.runner import Stack
from tests.support.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.support.fake_teams import APP_PASSWORD, FakeTeams
from tests.support.stack import (
    SHARED_ENV,
    SHARED_MCP_NOC_TOKEN,
    SHARED_MCP_TOKEN,
    SHARED_SLACK_CHANNEL,
    SHARED_SLACK_USER,
    running_stack,
)


@pytest.fixture(scope="package")
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        user, email = SHARED_SLACK_USER
        fake.add_user(user, email, name="alice")
        fake.add_channel(SHARED_SLACK_CHANNEL)
        yield fake


@pytest.fixture(scope="package")
def teams() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


def channel_env(slack: FakeSlack, teams: FakeTeams) -> dict[str, str]:
    """Slack, Teams and MCP on, pointed at the local fakes."""
    return {
        "GATEWAY_MCP_ENABLED": "true",
        "GATEWAY_MCP_CLIENTS": json.dumps(
            {
                "itsm": {"token": SHARED_MCP_TOKEN, "roles": ["employee"]},
                "noc": {"token": SHARED_MCP_NOC_TOKEN, "roles": ["technician"]},
            }
        ),
        "GATEWAY_TEAMS_APP_ID": teams.app_id,
        "GATEWAY_TEAMS_APP_PASSWORD": APP_PASSWORD,
        "GATEWAY_TEAMS_OPENID_URL": teams.openid_url,
        "GATEWAY_TEAMS_TOKEN_URL": teams.token_url,
        "GATEWAY_TEAMS_SERVICE_URL_PREFIXES": teams.service_url,
        "GATEWAY_SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "GATEWAY_SLACK_BOT_TOKEN": BOT_TOKEN,
        "GATEWAY_SLACK_API_URL": slack.api_url,
        "GATEWAY_SLACK_RESPONSE_URL_PREFIX": slack.hooks_prefix,
    }


@pytest.fixture(scope="package")
def stack(
    tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack, teams: FakeTeams
) -> Iterator[Stack]:
    env = {**SHARED_ENV, **channel_env(slack, teams)}
    with running_stack(tmp_path_factory.mktemp("shared-stack"), env) as running:
        slack.gateway_url = teams.gateway_url = running.url
        yield running
