"""The runner: the allow-listed automations and the preconditions they share (an explicit yes
in a later message from the same, authenticated user, while the offer is fresh)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Literal

import httpx

from contracts.events import utcnow
from orchestrator.automations.detection import NEGATION, PASSWORD_WORD
from orchestrator.automations.outcomes import (
    Declined,
    Offer,
    Outcome,
    PendingAutomation,
    ReplyResult,
    SelfService,
    StartResult,
    UserContext,
    audit_entry,
)
from orchestrator.automations.plugin import Automation, ExecutionRequest, Trigger
from orchestrator.automations.settings import PASSWORD_RESET, AutomationSettings
from orchestrator.automations.webhook import PasswordReset
from orchestrator.sentiment import clauses, word_set

log = logging.getLogger("deskpilot.orchestrator.automations")

Reply = Literal["yes", "no"]

_YES_HEAD = word_set(
    """
    yes yeah yep yup ya yea y sure ok okay confirm confirmed absolutely certainly definitely
    please go
    """
)
_YES_WORDS = _YES_HEAD | word_set(
    """
    ahead do it that please thanks thank you reset my the password now for me right away
    sounds good fine of course correct right this is that is i want to would like go yes and
    proceed one new thing
    """
)
_NO_PHRASES = re.compile(
    r"^(no|nope|nah|cancel|stop|do not|dont|never mind|nevermind|not now|no thanks|"
    r"no thank you|i changed my mind|forget it|leave it|skip)\b"
)


def read_confirmation(text: str) -> Reply | None:
    """An explicit yes or no to "shall I do it?", or ``None`` for anything else.

    A yes must be only that ("yes", "yes please", "go ahead", "ok, reset it now"): a question,
    a hedge ("I guess", "maybe"), a negation or a new request is not one.
    """
    if "?" in text:
        return None
    parts = clauses(PASSWORD_WORD.sub("password", text.lower()))
    if not parts:
        return None
    joined = " ".join(parts)
    if _NO_PHRASES.match(joined):
        return "no"
    words = joined.split()
    if len(words) > 10 or NEGATION.search(joined):
        return None
    if words[0] in _YES_HEAD and all(word in _YES_WORDS for word in words):
        return "yes"
    if joined in {"do it", "please do", "reset it", "please reset it", "go for it", "of course"}:
        return "yes"
    return None


class AutomationRunner:
    """The allow-listed automations and the preconditions they share."""

    def __init__(
        self,
        automations: Sequence[Automation],
        offer_ttl_s: float = 600,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.automations = {automation.name: automation for automation in automations}
        self.offer_ttl = timedelta(seconds=offer_ttl_s)
        self._clock = clock

    @classmethod
    def from_settings(
        cls, settings: AutomationSettings, client: httpx.AsyncClient | None = None
    ) -> AutomationRunner:
        """Only the automations named in ``ORCHESTRATOR_AUTOMATIONS`` are built."""
        return cls(
            [REGISTRY[name](settings, client) for name in dict.fromkeys(settings.automations)],
            offer_ttl_s=settings.automation_offer_ttl_s,
        )

    async def aclose(self) -> None:
        for automation in self.automations.values():
            await automation.aclose()

    def detect(self, text: str) -> Trigger | None:
        """Which allowed automation the message asks for, if any."""
        for automation in self.automations.values():
            trigger = automation.detect(text)
            if trigger is not None:
                return trigger
        return None

    def start(self, text: str, user: UserContext, request_id: str) -> StartResult | None:
        """A new message: offer the automation it asks for, or self-service without sign-in.

        ``request_id`` is this turn's correlation id; a redelivered turn makes the same offer.
        """
        trigger = self.detect(text)
        if trigger is None:
            return None
        return self._offer(self.automations[trigger.action], user, request_id, trigger.kind)

    def _offer(
        self, automation: Automation, user: UserContext, request_id: str, why: str
    ) -> StartResult:
        if not user.authenticated:
            article_url, text = automation.self_service()
            log.info("automation %s: self-service, user not authenticated", automation.name)
            return SelfService(
                action=automation.name,
                reason="not_authenticated",
                article_url=article_url,
                text=text,
                audit=audit_entry(
                    automation.name, Outcome.SELF_SERVICE, "not authenticated", user, request_id
                ),
            )
        pending = PendingAutomation(
            action=automation.name,
            request_id=request_id,
            user_id=user.user_id,
            offered_at=self._clock(),
        )
        log.info("automation %s request %s: offered (%s)", automation.name, request_id, why)
        return Offer(
            action=automation.name,
            question=automation.offer_question(),
            pending=pending,
            audit=audit_entry(automation.name, Outcome.OFFERED, why, user, request_id),
        )

    async def reply(
        self, pending: PendingAutomation, text: str, user: UserContext, turn_id: str
    ) -> ReplyResult | None:
        """The message after an offer: run it on an explicit yes; ``None`` when the message
        is not an answer to the offer (or not a later one), so it is handled as usual."""
        automation = self.automations.get(pending.action)
        if automation is None:
            log.info("automation %s is no longer allowed; offer dropped", pending.action)
            return None
        if turn_id == pending.request_id or user.user_id != pending.user_id:
            return None  # the offering message itself, or someone else
        answer = read_confirmation(text)
        if answer is None:
            log.info("automation %s request %s: lapsed", pending.action, pending.request_id)
            return None
        if answer == "no":
            log.info("automation %s request %s: declined", pending.action, pending.request_id)
            return Declined(
                action=automation.name,
                text=automation.declined_text(),
                audit=audit_entry(
                    automation.name, Outcome.DECLINED, "user said no", user, pending.request_id
                ),
            )
        if not user.authenticated:
            return self._offer(automation, user, turn_id, "confirmation")
        if self._clock() - pending.offered_at > self.offer_ttl:
            log.info("automation %s request %s: offer expired", automation.name, turn_id)
            return self._offer(automation, user, turn_id, "offer expired, asked again")
        return await automation.execute(
            ExecutionRequest(user_id=user.user_id, request_id=pending.request_id), user
        )


REGISTRY: dict[str, Callable[[AutomationSettings, httpx.AsyncClient | None], Automation]] = {
    PASSWORD_RESET: PasswordReset.from_settings,
}
"""Every automation an operator may allow, by name."""
