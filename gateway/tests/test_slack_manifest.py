"""The Slack app manifest an operator installs matches what the gateway serves and calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from gateway.app import create_app
from gateway.config import GatewaySettings

MANIFEST = Path(__file__).parents[2] / "deploy" / "slack" / "manifest.yaml"


def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return loaded


def test_every_request_url_of_the_manifest_is_a_route_of_the_gateway() -> None:
    settings = GatewaySettings(
        redis_url="redis://127.0.0.1:1/0",
        slack_signing_secret="s" * 32,
        slack_bot_token="xoxb-test",
    )
    paths = set(create_app(settings).openapi()["paths"])
    app = manifest()
    urls = [
        app["settings"]["event_subscriptions"]["request_url"],
        app["settings"]["interactivity"]["request_url"],
        *(command["url"] for command in app["features"]["slash_commands"]),
    ]
    assert {urlsplit(url).path for url in urls} == {
        "/slack/events",
        "/slack/interactivity",
        "/slack/commands",
    }
    assert {urlsplit(url).path for url in urls} <= paths
    assert all(url.startswith("https://") for url in urls)  # Slack calls https only


def test_the_manifest_asks_for_what_the_channel_uses_and_nothing_more() -> None:
    app = manifest()
    assert set(app["oauth_config"]["scopes"]["bot"]) == {
        "app_mentions:read",
        "im:history",
        "chat:write",
        "commands",
        "users:read",
        "users:read.email",
    }
    assert set(app["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_mention",
        "message.im",
    }
    assert [c["command"] for c in app["features"]["slash_commands"]] == ["/it"]
    assert app["settings"]["socket_mode_enabled"] is False


def test_without_a_signing_secret_the_slack_routes_do_not_exist() -> None:
    app = create_app(GatewaySettings(redis_url="redis://127.0.0.1:1/0"))
    assert not [path for path in app.openapi()["paths"] if path.startswith("/slack")]
