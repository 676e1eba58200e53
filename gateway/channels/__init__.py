"""Channel adapters: Deskpilot where employees already are (Slack first).

An adapter turns a platform's request into the same turn a web-chat message makes
(:meth:`gateway.turns.TurnService.submit`: ``message.received``, sealed on the bus, for the
redactor), with the platform's user mapped to the principal the web chat's token names, and a
conversation per thread or chat. It then turns the turn's progress and answer, which reach this
gateway instance's reply stream like any other turn's, into the platform's messages
(:mod:`gateway.channels.delivery`). Nothing downstream of the gateway knows which channel asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config import GatewaySettings, secret_value

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from fastapi import APIRouter

    from gateway.channels.slack.adapter import SlackAdapter
    from gateway.channels.slack.signature import SlackSignature
    from gateway.conversations import ConversationIndex
    from gateway.feedback import FeedbackService
    from gateway.ratelimit import RateLimiter
    from gateway.turns import TurnService


def slack_adapter(
    settings: GatewaySettings,
    turns: TurnService,
    index: ConversationIndex,
    client: aioredis.Redis,
    feedback: FeedbackService,
    limiter: RateLimiter | None,
) -> SlackAdapter | None:
    """The Slack channel when ``GATEWAY_SLACK_SIGNING_SECRET`` is set, else None (off)."""
    if not secret_value(settings.slack_signing_secret):
        return None
    # Deferred: slack_sdk is only needed where the channel is on.
    from gateway.channels.delivery import ChannelTurns
    from gateway.channels.slack.adapter import SlackAdapter
    from gateway.channels.slack.api import SlackApi

    channel_turns = ChannelTurns(
        turns,
        index,
        client,
        delivery_ttl_s=settings.channel_delivery_ttl_s,
        conversation_ttl_s=settings.turn_ttl_s,
    )
    api = SlackApi(secret_value(settings.slack_bot_token), settings.slack_api_url)
    return SlackAdapter(settings, api, channel_turns, feedback, limiter)


def slack_signature(settings: GatewaySettings) -> SlackSignature:
    from gateway.channels.slack.signature import SlackSignature

    return SlackSignature(secret_value(settings.slack_signing_secret).encode())


def slack_router() -> APIRouter:
    from gateway.channels.slack.routes import router

    return router
