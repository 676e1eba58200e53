"""Slack's events, slash commands and button presses made into Deskpilot turns and ratings.

Where a turn starts and where its answer goes:

* a mention of the app in a channel (``app_mention``): a conversation per thread and user,
  answered in the thread (a new thread under the message when it was not in one);
* a direct message (``message`` with ``channel_type`` ``im``): a conversation per DM and user,
  answered in the DM (in the thread when the message was in one);
* ``/it <question>``: a conversation per channel and user, answered only to the asker
  (ephemeral, through the command's ``response_url``);
* a checklist button ("That fixed it", "Done, still broken") or "Talk to a technician": the
  next turn of the conversation the pressed answer belongs to, in that answer's thread. Only the
  answer's own user may press them: anyone else's press changes nothing (the web chat's 404 of
  someone else's turn), and so for the rating buttons, which record a rating through
  :class:`gateway.feedback.FeedbackService` exactly as ``POST /api/feedback`` does.

The asker is a principal, as a web-chat token's subject would be (``GATEWAY_SLACK_PRINCIPAL``):
their Slack profile's email, or ``slack:<team>:<user>``. Their messages count against the
same chat rate limit as the web chat's (the same bucket for the same principal).

A message is shown a "looking into it" placeholder at once, which progress updates and the
answer replaces. The text of the message goes nowhere but :meth:`ChannelTurns.start` (sealed on
the bus for the redactor): it is never logged, kept or posted back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from contracts.events import TurnReply
from gateway.channels.delivery import ChannelTurn, ChannelTurns, DeliveryFailed
from gateway.channels.slack import blocks
from gateway.channels.slack.api import SlackApi, SlackFailure
from gateway.config import GatewaySettings
from gateway.errors import ApiError, ErrorCode
from gateway.feedback import FeedbackService
from gateway.models import ChatRead, FeedbackCreate
from gateway.ratelimit import LimitKind, RateLimiter

log = logging.getLogger("deskpilot.gateway.slack")

EVENT_PREFIX = "deskpilot:gateway:slack:event:"
SEEN_PREFIX = "deskpilot:gateway:slack:seen:"
PRINCIPAL_PREFIX = "deskpilot:gateway:slack:principal:"

_ID = re.compile(r"[A-Z0-9]{2,32}")
_TS = re.compile(r"\d{1,12}\.\d{1,9}")
_TURN_ID = re.compile(r"[0-9a-f]{32}")

HELP_TEXT = (
    "Ask me an IT question, for example `/it how do I reset my VPN password?`, or mention me "
    "with your question in a channel, or write to me directly."
)
UNKNOWN_USER_TEXT = (
    "I cannot tell who you are from your Slack profile (it has no email address), so I cannot "
    "answer here; please use the IT web chat."
)
NOT_YOURS_TEXT = "Only the person who asked can use these buttons."
UNAVAILABLE_TEXT = "Deskpilot is briefly unavailable; your message was not sent. Try again."


def is_id(value: object) -> bool:
    """A Slack id (``T...``, ``U...``, ``C...``, ``D...``): upper-case letters and digits."""
    return isinstance(value, str) and bool(_ID.fullmatch(value))


def is_ts(value: object) -> bool:
    """A Slack message timestamp (``1712345678.123456``)."""
    return isinstance(value, str) and bool(_TS.fullmatch(value))


_SLACK_MARKUP = re.compile(r"<([^<>]*)>")


def plain_text(text: str, bot_user: str | None = None) -> str:
    """What a user typed, from Slack's message markup: the app's own mention dropped, links as
    their URL (a ``mailto:`` as its address), channels as ``#name``, other users as ``@id``,
    entities decoded."""

    def unwrap(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return "" if bot_user and target[1:] == bot_user else f"@{target[1:]}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            return f"@{label or target[1:].split('^')[0]}"
        if target.startswith("mailto:"):
            return target[len("mailto:") :]
        return target

    text = _SLACK_MARKUP.sub(unwrap, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()


@dataclass(frozen=True)
class Asker:
    """A Slack user in a workspace, and who they are to Deskpilot."""

    team: str
    user: str
    principal: str


class SlackPrincipals:
    """Maps a Slack user to their Deskpilot principal (cached in Redis)."""

    def __init__(self, api: SlackApi, client: aioredis.Redis, settings: GatewaySettings) -> None:
        self.api = api
        self.client = client
        self.mode = settings.slack_principal
        self.ttl_s = settings.slack_identity_ttl_s

    async def of(self, team: str, user: str) -> str | None:
        """The principal, or None when Slack does not say who the user is (no email)."""
        if self.mode == "slack_id":
            return f"slack:{team}:{user}"
        key = f"{PRINCIPAL_PREFIX}{team}:{user}"
        cached = await self.client.get(key)
        if cached:
            return cached.decode() if isinstance(cached, bytes) else str(cached)
        email = await self.api.email_of(user)
        if email is not None:
            await self.client.set(key, email, ex=self.ttl_s)
        return email


class SlackAdapter:
    """The Slack channel: turns in, answers out (the :class:`Deliverer` of ``slack``)."""

    def __init__(
        self,
        settings: GatewaySettings,
        api: SlackApi,
        channel_turns: ChannelTurns,
        feedback: FeedbackService,
        limiter: RateLimiter | None,
    ) -> None:
        self.settings = settings
        self.api = api
        self.turns = channel_turns
        self.client = channel_turns.client
        self.feedback = feedback
        self.limiter = limiter
        self.principals = SlackPrincipals(api, channel_turns.client, settings)
        self.teams = frozenset(settings.slack_team_ids)
        channel_turns.deliverers["slack"] = self

    # -- requests ------------------------------------------------------------------------------

    async def first_sight(self, signature: str) -> bool:
        """False when a request with this signature was handled before (a replay): a
        signature is valid for the whole window, so it is remembered for longer."""
        digest = hashlib.sha256(signature.encode("utf-8", "replace")).hexdigest()
        return bool(
            await self.client.set(
                SEEN_PREFIX + digest, "1", nx=True, ex=self.settings.slack_event_ttl_s
            )
        )

    def team_allowed(self, team: object) -> bool:
        return is_id(team) and (not self.teams or team in self.teams)

    async def asker(self, team: str, user: str) -> Asker | None:
        principal = await self.principals.of(team, user)
        return Asker(team, user, principal) if principal else None

    async def _allowed(self, asker: Asker, channel: str) -> bool:
        """Counts a message against the principal's chat allowance (the web chat's bucket);
        tells the user when it is spent."""
        if self.limiter is None:
            return True
        decision = await self.limiter.hit(LimitKind.CHAT, f"token:{asker.principal}", None)
        if decision.allowed:
            return True
        await self.api.ephemeral(
            channel,
            asker.user,
            f"You are sending messages faster than I can answer; try again in "
            f"{decision.retry_after_s} s.",
        )
        return False

    # -- Events API ----------------------------------------------------------------------------

    async def on_event(self, envelope: dict[str, Any]) -> None:
        """An ``event_callback``: a mention or a direct message becomes a turn; anything else
        (edits, bots, the app's own messages, other event types) is acknowledged and left.
        Raises :class:`ApiError` ``bus_unavailable`` when the turn could not be sent (the route
        then answers 503, and Slack's retry is handled as new)."""
        event = envelope.get("event")
        team = envelope.get("team_id")
        event_id = envelope.get("event_id")
        if not isinstance(event, dict) or not self.team_allowed(team):
            return
        team = str(team)
        if not isinstance(event_id, str) or not 0 < len(event_id) <= 64:
            return
        kind = event.get("type")
        direct = kind == "message" and event.get("channel_type") == "im"
        if kind != "app_mention" and not direct:
            return
        if event.get("bot_id") or event.get("subtype") or event.get("hidden"):
            return
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        thread = event.get("thread_ts")
        text = event.get("text")
        if not (is_id(user) and is_id(channel) and is_ts(ts) and isinstance(text, str)):
            return
        if thread is not None and not is_ts(thread):
            return
        user, channel, ts = str(user), str(channel), str(ts)
        # Retries of one event carry its id: only the first delivery makes a turn.
        fresh = await self.client.set(
            EVENT_PREFIX + event_id, "1", nx=True, ex=self.settings.slack_event_ttl_s
        )
        if not fresh:
            log.info("Slack event already handled", extra={"event_type": kind})
            return
        try:
            await self._message(team, user, channel, ts, thread, text, direct, envelope)
        except ApiError as exc:
            if exc.code is ErrorCode.BUS_UNAVAILABLE:
                await self.client.delete(EVENT_PREFIX + event_id)
            raise

    async def _message(
        self,
        team: str,
        user: str,
        channel: str,
        ts: str,
        thread: str | None,
        text: str,
        direct: bool,
        envelope: dict[str, Any],
    ) -> None:
        asker = await self._asker_or_notice(team, user, channel)
        if asker is None or not await self._allowed(asker, channel):
            return
        bot_user = _bot_user(envelope)
        question = plain_text(text, bot_user)
        if direct and thread is None:
            key, reply_thread = f"slack:{team}:{channel}:{user}", None
        else:
            root = thread or ts
            key, reply_thread = f"slack:{team}:{channel}:{root}:{user}", root
        conversation = await self.turns.conversation(key, asker.principal)
        await self._start(asker, channel, reply_thread, question, conversation)

    async def _asker_or_notice(self, team: str, user: str, channel: str) -> Asker | None:
        try:
            asker = await self.asker(team, user)
        except SlackFailure as exc:
            if exc.transient:
                raise ApiError(ErrorCode.BUS_UNAVAILABLE, "Slack is not answering.") from None
            return None
        if asker is None:
            await self.api.ephemeral(channel, user, UNKNOWN_USER_TEXT)
        return asker

    async def _start(
        self,
        asker: Asker,
        channel: str,
        thread: str | None,
        text: str,
        conversation: str,
        *,
        request_ticket: bool = False,
    ) -> None:
        """Placeholder first (the answer replaces it), then the turn."""
        target = {"team": asker.team, "channel": channel}
        if thread:
            target["thread_ts"] = thread
        try:
            placeholder = await self.api.post(
                channel, blocks.WORKING_TEXT, thread_ts=thread, quick=True
            )
        except SlackFailure:
            placeholder = ""  # the answer is posted as a new message instead
        if placeholder:
            target["placeholder_ts"] = placeholder
        turn = ChannelTurn(channel="slack", user_id=asker.principal, target=target)
        try:
            await self.turns.start(turn, text, conversation, request_ticket=request_ticket)
        except ApiError as exc:
            notice = HELP_TEXT if exc.code is ErrorCode.EMPTY_MESSAGE else exc.detail
            if placeholder:
                await self._replace_quietly(channel, placeholder, notice)
            else:
                await self.api.ephemeral(channel, asker.user, notice)
            if exc.code is ErrorCode.BUS_UNAVAILABLE:
                raise

    async def _replace_quietly(self, channel: str, ts: str, text: str) -> None:
        with contextlib.suppress(SlackFailure):  # logged; the placeholder may stay
            await self.api.update(channel, ts, text)

    # -- slash command -------------------------------------------------------------------------

    async def on_command(self, form: dict[str, str]) -> dict[str, Any]:
        """``/it <question>``: the immediate (ephemeral) reply; the answer follows through
        ``response_url``."""
        team, user, channel = form.get("team_id"), form.get("user_id"), form.get("channel_id")
        response_url = form.get("response_url", "")
        text = form.get("text", "")
        if not (self.team_allowed(team) and is_id(user) and is_id(channel)):
            return _ephemeral("This workspace is not set up for Deskpilot.")
        team, user, channel = str(team), str(user), str(channel)
        if not response_url.startswith(self.settings.slack_response_url_prefix):
            log.warning("slash command with a foreign response_url refused")
            return _ephemeral("This request cannot be answered.")
        question = plain_text(text)
        if not question:
            return _ephemeral(HELP_TEXT)
        asker = await self._asker_or_notice(team, user, channel)
        if asker is None:
            return _ephemeral(UNKNOWN_USER_TEXT)
        if not await self._allowed(asker, channel):
            return _ephemeral("Too many messages; try again shortly.")
        conversation = await self.turns.conversation(
            f"slack:{team}:{channel}:{user}:command", asker.principal
        )
        target = {"team": team, "channel": channel, "response_url": response_url}
        turn = ChannelTurn(channel="slack", user_id=asker.principal, target=target)
        try:
            await self.turns.start(turn, question, conversation)
        except ApiError as exc:
            return _ephemeral(exc.detail)
        return _ephemeral(blocks.WORKING_TEXT)

    # -- interactivity -------------------------------------------------------------------------

    async def on_action(self, payload: dict[str, Any]) -> None:
        """A button of an answer pressed (``block_actions``)."""
        if payload.get("type") != "block_actions":
            return
        user_field, team_field = payload.get("user"), payload.get("team")
        user = user_field.get("id") if isinstance(user_field, dict) else None
        team = team_field.get("id") if isinstance(team_field, dict) else None
        if team is None and isinstance(user_field, dict):
            team = user_field.get("team_id")
        channel_field = payload.get("channel")
        channel = channel_field.get("id") if isinstance(channel_field, dict) else None
        actions = payload.get("actions")
        message = payload.get("message")
        if not (self.team_allowed(team) and is_id(user) and is_id(channel)):
            return
        if not (isinstance(actions, list) and actions and isinstance(actions[0], dict)):
            return
        team, user, channel = str(team), str(user), str(channel)
        action = actions[0]
        action_id, value = action.get("action_id"), action.get("value")
        if not isinstance(value, str) or len(value) > 100:
            return
        asker = await self._asker_or_notice(team, user, channel)
        if asker is None:
            return
        if action_id == blocks.RATE:
            await self._rate(asker, channel, value)
            return
        starts = {
            blocks.FIXED: (blocks.FIXED_TEXT, False),
            blocks.STILL_BROKEN: (blocks.STILL_BROKEN_TEXT, False),
            blocks.TICKET: ("", True),
        }
        if action_id not in starts or not _TURN_ID.fullmatch(value):
            return
        text, request_ticket = starts[action_id]
        record = await self.turns.turns.store.records.get_owned(value, asker.principal)
        conversation = record.get("conversation_id") if record else None
        if not isinstance(conversation, str):
            await self.api.ephemeral(channel, user, NOT_YOURS_TEXT)
            return
        if not await self._allowed(asker, channel):
            return
        thread = _thread_of(message, channel)
        await self._start(asker, channel, thread, text, conversation, request_ticket=request_ticket)

    async def _rate(self, asker: Asker, channel: str, value: str) -> None:
        turn_id, _, score = value.partition(":")
        if not (_TURN_ID.fullmatch(turn_id) and score in {"1", "2", "3", "4", "5"}):
            return
        try:
            await self.feedback.record(
                FeedbackCreate(turn_id=turn_id, score=int(score)), asker.principal
            )
        except ApiError as exc:
            text = NOT_YOURS_TEXT if exc.code is ErrorCode.UNKNOWN_TURN else exc.detail
            await self.api.ephemeral(channel, asker.user, text)
            return
        await self.api.ephemeral(channel, asker.user, f"Thanks: you rated this answer {score}/5.")

    # -- delivery ------------------------------------------------------------------------------

    async def progress(self, turn: ChannelTurn, reply: TurnReply) -> None:
        target = turn.target
        placeholder, channel = target.get("placeholder_ts"), target.get("channel")
        if not placeholder or not channel:
            return
        text = blocks.PROGRESS_TEXT.get(reply.stage or "", blocks.WORKING_TEXT)
        if reply.count is not None and reply.total:
            text = f"{text} ({reply.count}/{reply.total})"
        try:
            await self.api.update(channel, placeholder, text)
        except SlackFailure as exc:
            raise DeliveryFailed(exc.error) from None

    async def answer(self, turn: ChannelTurn, answer: ChatRead) -> None:
        target = turn.target
        channel = target.get("channel", "")
        shown = blocks.answer_blocks(answer)
        text = blocks.fallback_text(answer)
        try:
            if response_url := target.get("response_url"):
                body = {"response_type": "ephemeral", "text": text, "blocks": shown}
                await self.api.respond(response_url, body)
                return
            if placeholder := target.get("placeholder_ts"):
                try:
                    await self.api.update(channel, placeholder, text, blocks=shown)
                    return
                except SlackFailure as exc:
                    if exc.transient:
                        raise
                    # Deleted or no longer editable: say it in a new message.
            await self.api.post(channel, text, thread_ts=target.get("thread_ts"), blocks=shown)
        except SlackFailure as exc:
            if exc.transient:
                raise DeliveryFailed(exc.error) from None
            log.warning("Slack answer given up", extra={"error": exc.error})


def _ephemeral(text: str) -> dict[str, Any]:
    return {"response_type": "ephemeral", "text": text}


def _bot_user(envelope: dict[str, Any]) -> str | None:
    """The app's own bot user in this workspace (the mention to drop from questions)."""
    authorizations = envelope.get("authorizations")
    if isinstance(authorizations, list):
        for item in authorizations:
            if isinstance(item, dict) and item.get("is_bot") and is_id(item.get("user_id")):
                return str(item["user_id"])
    return None


def _thread_of(message: object, channel: str) -> str | None:
    """The thread a pressed answer is in: its thread, or (outside a DM) under it."""
    if not isinstance(message, dict):
        return None
    thread, ts = message.get("thread_ts"), message.get("ts")
    if is_ts(thread):
        return str(thread)
    if channel.startswith("D"):
        return None
    return str(ts) if is_ts(ts) else None


def parse_json(body: bytes) -> dict[str, Any] | None:
    """A request's JSON object, None for anything else."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
