"""The shared stack (see tests/shared/__init__.py), one per package run, with every channel on:
a local Slack and a local Bot Framework, started before it, stand in for slack.com and
Microsoft's (tests/shared/test_channels.py talks to the stack through them)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from deploy.runner import Stack
from tests.support.channels import channel_env
from tests.support.fake_slack import FakeSlack
from tests.support.fake_teams import FakeTeams
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


def shared_channel_env(slack: FakeSlack, teams: FakeTeams) -> dict[str, str]:
    """Slack, Teams and MCP on, pointed at the local fakes."""
    return {
        **channel_env(slack, teams),
        "GATEWAY_MCP_ENABLED": "true",
        "GATEWAY_MCP_CLIENTS": json.dumps(
            {
                "itsm": {"token": SHARED_MCP_TOKEN, "roles": ["employee"]},
                "noc": {"token": SHARED_MCP_NOC_TOKEN, "roles": ["technician"]},
            }
        ),
    }


@pytest.fixture(scope="package")
def stack(
    tmp_path_factory: pytest.TempPathFactory, slack: FakeSlack, teams: FakeTeams
) -> Iterator[Stack]:
    env = {**SHARED_ENV, **shared_channel_env(slack, teams)}
    with running_stack(tmp_path_factory.mktemp("shared-stack"), env) as running:
        slack.gateway_url = teams.gateway_url = running.url
        yield running
