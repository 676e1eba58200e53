"""Which unanswered-question notices go out, to whom, and what they say.

A notice goes out when its category has a route (``TICKETING_NOTIFY_ROUTES``), its question was
not reported in that category within ``TICKETING_NOTIFY_DEDUP_S`` (one recurring question does
not flood inboxes: the same words, whatever their case, spacing and punctuation, count once),
and the category's cap per hour (``TICKETING_NOTIFY_MAX_PER_HOUR``) is not reached. One Lua
script takes that decision, so replicas agree: a question counts as reported only once a notice
of it is admitted (one held back by the cap is not, and a later one may go out), and it stops
counting when every channel of its notice failed (an outage of the SMTP server or Slack does not
mute the question for the window). The decision is kept per event, so a redelivered event is
decided the same way, and each channel (e-mail, Slack) remembers it delivered, so a retry after
one channel failed does not repeat the other. Every notice sent or failed is recorded on the
audit stream (``action="notification"``).

Every key shares one hash tag, so the scripts run on Redis Cluster too.

The message carries the redacted question, as the orchestrator kept it, never what the user
typed, and a link to the conversation in the admin page.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from urllib.parse import quote

import redis.asyncio as aioredis

from contracts.events import AuditRecorded, Event, UnansweredNotice
from contracts.topics import Topic
from ticketing.notify.config import NotifyRoute
from ticketing.notify.email import EmailChannel
from ticketing.notify.slack import SlackWebhookChannel, TryLater, Undeliverable, escape

logger = logging.getLogger(__name__)

PREFIX = "deskpilot:ticketing:{notice}:"
STATE_TTL_S = 2 * 86_400
RATE_TTL_S = 2 * 3600

# KEYS: the event's state hash, the question's seen key, the category's counter of this hour.
# ARGV: the event id, the de-duplication window (s), the cap per hour, the state's and the
# counter's TTL (s).
# An event decided before keeps its decision; the seen key is set only when the notice is admitted.
_ADMIT = """
local decided = redis.call('HGET', KEYS[1], 'admission')
if decided then return decided end
local admission = 'sent'
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then
  admission = 'duplicate'
elseif (tonumber(redis.call('GET', KEYS[3])) or 0) >= tonumber(ARGV[3]) then
  admission = 'rate_limited'
else
  redis.call('INCR', KEYS[3])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
  redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
end
redis.call('HSET', KEYS[1], 'admission', admission)
redis.call('EXPIRE', KEYS[1], ARGV[4])
return admission
"""

# KEYS: the question's seen key. ARGV: the event id. Only the event that set it releases it.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
Admission = Literal["sent", "not_configured", "duplicate", "rate_limited"]
OUTCOME_WORDS = {
    "no_answer": "could not answer",
    "low_confidence": "answered with low confidence",
}
UNITS = (("week", 604_800), ("day", 86_400), ("hour", 3600), ("minute", 60), ("second", 1))
Publish = Callable[[str, Event], Awaitable[object]]
# Sends on one channel; its outcome when it has more to say than "sent".
Send = Callable[[], Awaitable[str | None]]


@dataclass
class NoticeResult:
    """What became of one notice: whether it was to go out, and each channel's outcome."""

    admission: Admission
    channels: dict[str, str] = field(default_factory=dict)


def question_key(category: str, question: str) -> str:
    """The de-duplication key of a question in a category: its words, lower-cased."""
    words = " ".join(re.findall(r"\w+", question.lower()))
    return hashlib.sha256(f"{category}\n{words}".encode()).hexdigest()[:32]


def delivered(outcome: str) -> bool:
    """Whether a channel's outcome is a delivery (``sent``, perhaps with a remark)."""
    return outcome.startswith("sent")


def once_per(seconds: float) -> str:
    """The de-duplication window in words, as the admission script applies it (whole seconds):
    ``once a day``, ``once an hour``, ``once every 90 minutes``."""
    whole = max(1, int(seconds))
    for unit, size in UNITS:
        if whole % size == 0:
            count = whole // size
            if count == 1:
                return f"once {'an' if unit == 'hour' else 'a'} {unit}"
            return f"once every {count} {unit}s"
    raise AssertionError("a second divides every window")


class Notifier:
    def __init__(
        self,
        client: aioredis.Redis,
        routes: dict[str, NotifyRoute],
        publish: Publish,
        *,
        email: EmailChannel | None,
        slack: SlackWebhookChannel | None,
        admin_url: str | None,
        dedup_s: float,
        max_per_hour: int,
    ) -> None:
        self.client = client
        self.routes = routes
        self.publish = publish
        self.email = email
        self.slack = slack
        self.admin_url = admin_url.rstrip("/") if admin_url else None
        self.dedup_s = dedup_s
        self.max_per_hour = max_per_hour
        self._admit_script = client.register_script(_ADMIT)
        self._release_script = client.register_script(_RELEASE)

    async def on_notice(self, notice: UnansweredNotice, *, last_attempt: bool) -> NoticeResult:
        """Tell the category's people; raises :class:`TryLater` when a channel may take it
        later (unless ``last_attempt``: then the failure is recorded)."""
        route = self.routes.get(notice.category or "")
        if route is None:
            return NoticeResult("not_configured")
        state = PREFIX + notice.event_id
        admission = await self._admit(state, notice)
        if admission != "sent":
            logger.info("notice not sent", extra={"why": admission, "category": notice.category})
            return NoticeResult(admission)
        done: dict[Any, Any] = await self.client.hgetall(state)
        result = NoticeResult("sent")
        later: list[str] = []
        for name, send in self._channels(route, notice):
            recorded = done.get(name.encode(), b"").decode()
            if delivered(recorded):
                result.channels[name] = recorded
                continue
            try:
                outcome = await send() or "sent"
            except Undeliverable as exc:
                outcome = f"failed: {exc}"
            except TryLater as exc:
                if not last_attempt:
                    later.append(str(exc))
                    continue
                outcome = f"failed: {exc} (gave up)"
            result.channels[name] = outcome
            await self.client.hset(state, name, outcome)
        if later:
            raise TryLater("; ".join(later))
        if result.channels and not any(map(delivered, result.channels.values())):
            # Nobody was told: the next notice of this question may go out.
            await self._release_script(keys=[self._seen(notice)], args=[notice.event_id])
        await self._audit(notice, result)
        return result

    async def _admit(self, state: str, notice: UnansweredNotice) -> Admission:
        category = notice.category or ""
        hour = f"{PREFIX}rate:{category}:{int(time.time() // 3600)}"
        keys = [state, self._seen(notice), hour]
        window = max(1, int(self.dedup_s))  # as once_per() words it
        args: list[str | int] = [
            notice.event_id,
            window,
            self.max_per_hour,
            STATE_TTL_S,
            RATE_TTL_S,
        ]
        admission: bytes = await self._admit_script(keys=keys, args=args)
        return cast(Admission, admission.decode())

    def _seen(self, notice: UnansweredNotice) -> str:
        return f"{PREFIX}seen:{question_key(notice.category or '', notice.question)}"

    def _channels(self, route: NotifyRoute, notice: UnansweredNotice) -> list[tuple[str, Send]]:
        channels: list[tuple[str, Send]] = []
        email, slack = self.email, self.slack
        if route.emails and email is not None:
            subject, text = self.email_message(notice)
            channels.append(("email", lambda: email.send(route.emails, subject, text)))
        webhook = route.slack_webhook_url
        if webhook is not None and slack is not None:
            payload = self.slack_payload(notice)
            channels.append(("slack", lambda: slack.send(webhook.get_secret_value(), payload)))
        return channels

    def link(self, notice: UnansweredNotice) -> str | None:
        """The conversation in the admin page (its audit trail), when the page's URL is set."""
        if self.admin_url is None:
            return None
        return f"{self.admin_url}/admin#conversation={quote(notice.conversation_id, safe='')}"

    def email_message(self, notice: UnansweredNotice) -> tuple[str, str]:
        category = notice.category or "uncategorised"
        what = OUTCOME_WORDS[notice.outcome]
        confidence = (
            "no match in the knowledge base"
            if notice.confidence is None
            else f"best match {notice.confidence:.2f}"
        )
        link = self.link(notice)
        lines = [
            f"The assistant {what} a question in the category {category!r}.",
            "",
            "Question (personal data and secrets removed):",
            f"    {notice.question}",
            "",
            f"Confidence: {confidence}",
            f"Conversation: {link or notice.conversation_id}",
            "",
            f"You receive this as one of the people responsible for {category!r}. The same "
            f"question is reported at most {once_per(self.dedup_s)}.",
        ]
        label = "Unanswered" if notice.outcome == "no_answer" else "Low-confidence answer"
        return f"[Deskpilot] {label}: {category} question", "\n".join(lines)

    def slack_payload(self, notice: UnansweredNotice) -> dict[str, Any]:
        category = notice.category or "uncategorised"
        what = OUTCOME_WORDS[notice.outcome]
        link = self.link(notice)
        where = (
            f"<{link}|Open the conversation>" if link else f"Conversation {notice.conversation_id}"
        )
        return {
            "text": f"Deskpilot {what} a {category} question",
            "blocks": [
                {
                    "type": "section",
                    "text": {
                        "type": "mrkdwn",
                        "text": f"*The assistant {what} a question in {escape(category)}:*\n"
                        f">{escape(notice.question)}",
                    },
                },
                {"type": "context", "elements": [{"type": "mrkdwn", "text": where}]},
            ],
        }

    async def _audit(self, notice: UnansweredNotice, result: NoticeResult) -> None:
        failed = [name for name, outcome in result.channels.items() if not delivered(outcome)]
        details: dict[str, str | int | float | bool | None] = {
            "category": notice.category,
            "outcome": notice.outcome,
            **{f"{name}": outcome[:300] for name, outcome in result.channels.items()},
        }
        await self.publish(
            Topic.AUDIT,
            AuditRecorded(
                correlation_id=notice.correlation_id,
                conversation_id=notice.conversation_id,
                service="ticketing",
                action="notification",
                reason=f"failed on {', '.join(failed)}" if failed else "sent",
                details=details,
            ),
        )
