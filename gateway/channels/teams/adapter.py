"""Teams activities made into Deskpilot turns and ratings, answers made into Adaptive Cards.

* A message to the bot in a personal chat, a group chat or a channel (where Teams delivers only
  messages that @mention it) is a turn of the sender, in a conversation per Teams conversation
  (a channel thread is one) and user, answered with a reply there.
* A card button (``Action.Submit``) comes back as a message whose ``value`` names the action
  and the turn (:mod:`.cards`): the checklist buttons and "Talk to a technician" start the next
  turn of that turn's conversation, a rating is recorded through
  :class:`gateway.feedback.FeedbackService`, and only for the turn's own user.

The sender is their Entra ID object id (``from.aadObjectId``, lower case), the principal the
web chat's token names when the identity provider's subject is the object id. A message is
handled once per activity id, however often the Bot Framework (or a replay of a captured
request, within its token's lifetime) delivers it. While the turn runs the conversation shows
the typing indicator, renewed at each progress stage.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import logging
import re
from dataclasses import dataclass
from typing import Any

from contracts.events import TurnReply
from gateway.channels.delivery import ChannelTurn, ChannelTurns, DeliveryFailed
from gateway.channels.teams import cards
from gateway.channels.teams.connector import BotConnector, ConnectorFailure
from gateway.channels.words import FIXED_TEXT, STILL_BROKEN_TEXT
from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode
from gateway.feedback import FeedbackService
from gateway.models import ChatRead, FeedbackCreate
from gateway.ratelimit import LimitKind, RateLimiter

log = logging.getLogger("deskpilot.gateway.teams")

ACTIVITY_PREFIX = "deskpilot:gateway:teams:activity:"
_OBJECT_ID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_TURN_ID = re.compile(r"[0-9a-f]{32}")
_MENTION = re.compile(r"<at>.*?</at>", re.DOTALL)
_TAG = re.compile(r"<[^>]{0,500}>")
MAX_ID = 512

HELP_TEXT = "Ask me an IT question, for example: how do I reset my VPN password?"
NOT_YOURS_TEXT = "Only the person who asked can use these buttons."
NO_IDENTITY_TEXT = "I cannot tell who you are in this chat, so I cannot answer here."


def plain_text(text: str) -> str:
    """What the user typed: mentions (``<at>Deskpilot</at>``) and HTML dropped, entities
    decoded."""
    return html.unescape(_TAG.sub(" ", _MENTION.sub(" ", text))).strip()


@dataclass(frozen=True)
class Where:
    """A Teams conversation and the activity a reply answers."""

    service_url: str
    conversation_id: str
    activity_id: str | None
    tenant: str


class TeamsAdapter:
    """The Teams channel: activities in, cards out (the :class:`Deliverer` of ``teams``)."""

    def __init__(
        self,
        settings: GatewaySettings,
        connector: BotConnector,
        channel_turns: ChannelTurns,
        feedback: FeedbackService,
        limiter: RateLimiter | None,
    ) -> None:
        self.settings = settings
        self.connector = connector
        self.turns = channel_turns
        self.client = channel_turns.client
        self.feedback = feedback
        self.limiter = limiter
        channel_turns.deliverers["teams"] = self

    async def on_activity(self, activity: dict[str, Any]) -> None:
        """A verified activity (the route checked the token and ``serviceUrl``)."""
        if activity.get("type") != "message" or activity.get("channelId") != "msteams":
            return
        where = self._where(activity)
        sender = activity.get("from")
        if where is None or not isinstance(sender, dict):
            return
        object_id = sender.get("aadObjectId")
        if not isinstance(object_id, str) or not _OBJECT_ID.fullmatch(object_id):
            await self._say(where, NO_IDENTITY_TEXT)
            return
        principal = object_id.lower()
        if where.activity_id and not await self._first(where):
            log.info("Teams activity already handled")
            return
        if not await self._allowed(principal, where):
            return
        value = activity.get("value")
        if isinstance(value, dict) and "deskpilot" in value:
            await self._on_button(principal, where, value)
            return
        text = activity.get("text")
        question = plain_text(text) if isinstance(text, str) else ""
        key = f"teams:{where.tenant}:{where.conversation_id}:{principal}"
        conversation = await self.turns.conversation(key, principal)
        await self._start(principal, where, question, conversation)

    def _where(self, activity: dict[str, Any]) -> Where | None:
        conversation = activity.get("conversation")
        if not isinstance(conversation, dict):
            return None
        conversation_id = conversation.get("id")
        tenant = conversation.get("tenantId")
        channel_data = activity.get("channelData")
        if tenant is None and isinstance(channel_data, dict):
            tenant_field = channel_data.get("tenant")
            tenant = tenant_field.get("id") if isinstance(tenant_field, dict) else None
        activity_id = activity.get("id")
        if not (isinstance(conversation_id, str) and 0 < len(conversation_id) <= MAX_ID):
            return None
        if not isinstance(tenant, str) or not _OBJECT_ID.fullmatch(tenant):
            return None
        wanted = self.settings.teams_tenant_id
        if wanted and tenant.lower() != wanted.lower():
            return None
        if activity_id is not None and not (
            isinstance(activity_id, str) and 0 < len(activity_id) <= MAX_ID
        ):
            return None
        return Where(str(activity["serviceUrl"]), conversation_id, activity_id, tenant.lower())

    async def _first(self, where: Where) -> bool:
        digest = hashlib.sha256(f"{where.conversation_id}\n{where.activity_id}".encode())
        key = ACTIVITY_PREFIX + digest.hexdigest()
        # As long as a channel turn is remembered: far longer than a token lives.
        ttl = self.settings.channel_delivery_ttl_s
        return bool(await self.client.set(key, "1", nx=True, ex=ttl))

    async def _allowed(self, principal: str, where: Where) -> bool:
        if self.limiter is None:
            return True
        decision = await self.limiter.hit(LimitKind.CHAT, f"token:{principal}", None)
        if not decision.allowed:
            await self._say(
                where,
                f"You are sending messages faster than I can answer; try again in "
                f"{decision.retry_after_s} s.",
            )
        return decision.allowed

    async def _on_button(self, principal: str, where: Where, value: dict[str, Any]) -> None:
        action, turn_id = value.get("deskpilot"), value.get("turn_id")
        if not isinstance(turn_id, str) or not _TURN_ID.fullmatch(turn_id):
            return
        if action == "rate":
            score = value.get("score")
            if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 5:
                return
            try:
                await self.feedback.record(FeedbackCreate(turn_id=turn_id, score=score), principal)
            except ApiError as exc:
                await self._say(
                    where, NOT_YOURS_TEXT if exc.code is ErrorCode.UNKNOWN_TURN else exc.detail
                )
                return
            await self._say(where, f"Thanks: you rated this answer {score}/5.")
            return
        starts = {
            "fixed": (FIXED_TEXT, False),
            "still_broken": (STILL_BROKEN_TEXT, False),
            "ticket": ("", True),
        }
        if action not in starts:
            return
        text, request_ticket = starts[str(action)]
        record = await self.turns.turns.store.records.get_owned(turn_id, principal)
        conversation = record.get("conversation_id") if record else None
        if not isinstance(conversation, str):
            await self._say(where, NOT_YOURS_TEXT)
            return
        await self._start(principal, where, text, conversation, request_ticket=request_ticket)

    async def _start(
        self,
        principal: str,
        where: Where,
        text: str,
        conversation: str,
        *,
        request_ticket: bool = False,
    ) -> None:
        target = {"service_url": where.service_url, "conversation_id": where.conversation_id}
        if where.activity_id:
            target["reply_to"] = where.activity_id
        turn = ChannelTurn(channel="teams", user_id=principal, target=target)
        try:
            await self.turns.start(turn, text, conversation, request_ticket=request_ticket)
        except ApiError as exc:
            await self._say(where, HELP_TEXT if exc.code is ErrorCode.EMPTY_MESSAGE else exc.detail)
            if exc.code is ErrorCode.BUS_UNAVAILABLE:
                raise
            return
        await self._typing(where.service_url, where.conversation_id)

    async def _say(self, where: Where, text: str) -> None:
        """A short notice in the conversation (best effort)."""
        notice = {"type": "message", "text": text, "textFormat": "plain"}
        with contextlib.suppress(ConnectorFailure):  # logged by the connector
            await self.connector.reply(
                where.service_url, where.conversation_id, where.activity_id, notice
            )

    async def _typing(self, service_url: str, conversation_id: str) -> None:
        with contextlib.suppress(ConnectorFailure):  # the indicator is a courtesy
            await self.connector.reply(service_url, conversation_id, None, {"type": "typing"})

    # -- delivery ------------------------------------------------------------------------------

    async def progress(self, turn: ChannelTurn, reply: TurnReply) -> None:
        target = turn.target
        await self._typing(target.get("service_url", ""), target.get("conversation_id", ""))

    async def answer(self, turn: ChannelTurn, answer: ChatRead) -> None:
        target = turn.target
        try:
            await self.connector.reply(
                target.get("service_url", ""),
                target.get("conversation_id", ""),
                target.get("reply_to"),
                cards.answer_activity(answer),
            )
        except ConnectorFailure as exc:
            if exc.transient:
                raise DeliveryFailed(exc.error) from None
            log.warning("Teams answer given up", extra={"error": exc.error})
