"""Channel adapters: Deskpilot where employees already are (Slack first).

An adapter turns a platform's request into the same turn a web-chat message makes
(:meth:`gateway.turns.TurnService.submit`: ``message.received``, sealed on the bus, for the
redactor), with the platform's user mapped to the principal the web chat's token names, and a
conversation per thread or chat. It then turns the turn's progress and answer, which reach this
gateway instance's reply stream like any other turn's, into the platform's messages
(:mod:`gateway.channels.delivery`). Nothing downstream of the gateway knows which channel asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gateway.config import GatewaySettings, secret_value

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import APIRouter

    from gateway.channels.delivery import ChannelTurns
    from gateway.conversations import ConversationIndex
    from gateway.directory import Directory
    from gateway.feedback import FeedbackService
    from gateway.ratelimit import RateLimiter
    from gateway.turns import TurnService


@dataclass
class Channels:
    """The configured channels: their shared turns, their routers, and what the routes read
    from the app's state (``slack``, ``slack_signature``, ``teams``, ``teams_auth``)."""

    turns: ChannelTurns
    routers: list[APIRouter] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


def build(
    settings: GatewaySettings,
    turns: TurnService,
    index: ConversationIndex,
    client: aioredis.Redis,
    feedback: FeedbackService,
    limiter: RateLimiter | None,
    directory: Directory,
) -> Channels | None:
    """The channels the settings turn on (Slack with a signing secret, Teams with an app id);
    None when there are none. Their packages are imported only then (slack_sdk...)."""
    slack_on = bool(secret_value(settings.slack_signing_secret))
    teams_on = bool(settings.teams_app_id)
    if not (slack_on or teams_on):
        return None
    from gateway.channels.delivery import ChannelTurns

    channel_turns = ChannelTurns(
        turns,
        index,
        client,
        delivery_ttl_s=settings.channel_delivery_ttl_s,
        conversation_ttl_s=settings.turn_ttl_s,
        directory=directory,
    )
    built = Channels(channel_turns)
    if slack_on:
        from gateway.channels.slack.adapter import SlackAdapter
        from gateway.channels.slack.api import SlackApi
        from gateway.channels.slack.routes import router as slack_router
        from gateway.channels.slack.signature import SlackSignature

        api = SlackApi(secret_value(settings.slack_bot_token), settings.slack_api_url)
        built.state["slack"] = SlackAdapter(settings, api, channel_turns, feedback, limiter)
        built.state["slack_signature"] = SlackSignature(
            secret_value(settings.slack_signing_secret).encode()
        )
        built.routers.append(slack_router)
    if teams_on:
        from gateway.channels.teams.adapter import TeamsAdapter
        from gateway.channels.teams.auth import BotFrameworkAuth
        from gateway.channels.teams.connector import BotConnector
        from gateway.channels.teams.routes import router as teams_router

        app_id = str(settings.teams_app_id)
        token_url = settings.teams_token_url.replace(
            "{tenant}", settings.teams_tenant_id or "botframework.com"
        )
        connector = BotConnector(app_id, secret_value(settings.teams_app_password), token_url)
        built.state["teams"] = TeamsAdapter(settings, connector, channel_turns, feedback, limiter)
        built.state["teams_auth"] = BotFrameworkAuth(
            app_id, openid_url=settings.teams_openid_url, issuer=settings.teams_issuer
        )
        built.routers.append(teams_router)
    return built
