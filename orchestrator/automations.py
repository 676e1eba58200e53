"""Approved automations: actions the assistant performs for a user, such as resetting a password.

Pure orchestration, no bus and no Redis: the service wires it in and keeps the one piece of
state between two messages (:class:`PendingAutomation`) in the conversation's memory.

How a turn goes through it (:class:`AutomationRunner`):

1. ``runner.start(text, user, request_id)`` on a new message: the allow-listed automation whose
   trigger matches the (redacted) message answers with

   - :class:`Offer`: the question to ask ("shall I reset it?") and the :class:`PendingAutomation`
     to remember, when the user is authenticated;
   - :class:`SelfService`: how to do it oneself, when the user is not authenticated (the gateway
     did not verify who they are, so nothing is run on their word);
   - ``None``: no automation applies; handle the message as usual.

2. ``await runner.reply(pending, text, user, turn_id)`` on the next message while an offer is
   pending: an explicit yes in a *later* message (a different turn) from the same, still
   authenticated user, within ``ORCHESTRATOR_AUTOMATION_OFFER_TTL_S``, runs the executor:
   :class:`Done` or :class:`Failed`. An explicit no is :class:`Declined`; a yes after the offer
   lapsed is a fresh :class:`Offer`; anything else is ``None`` (the offer is dropped and the
   message handled as usual). Whatever comes back, the pending offer is spent: the service
   clears it, and keeps the new one of a fresh offer.

Every result carries the text to tell the user and an :data:`AuditEntry` (action, outcome,
reason, ids, HTTP status: never a secret, a password or user text) for the audit stream;
:func:`audit_event` wraps it in the contract's :class:`~contracts.events.AuditRecorded`.

Self-service is a pointer, decided here: :class:`SelfService` and :class:`Failed` carry the
knowledge-base article's URL (``ORCHESTRATOR_PASSWORD_RESET_ARTICLE_URL``) for the orchestrator
to answer from, with its steps cited like any other answer, so the steps are written once, in
the knowledge base; their ``text`` is a short lead-in that already holds the link, enough on its
own if the article cannot be found.

The password-reset webhook (what an operator's endpoint implements)
----------------------------------------------------------------------
``POST <ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL>`` with ``Content-Type: application/json`` and the
body ``{"action": "password_reset", "request_id": ..., "timestamp": <unix seconds>,
"user_id": ...}`` (compact JSON, keys sorted). Headers:

- ``X-Deskpilot-Signature: sha256=<hex>``: HMAC-SHA256 keyed with the shared secret
  (``ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET``) over the exact body bytes;
- ``X-Deskpilot-Timestamp``: the body's ``timestamp`` again. The receiver checks that the two
  agree and that the time is recent (five minutes is usual), which stops replays, since the
  body's copy is signed;
- ``Idempotency-Key``: the request id. A retry (after a timeout, a 5xx or a redelivered turn)
  sends the same key, and the receiver must answer it with the first request's outcome rather
  than reset the password again.

Answers: ``200`` with ``{"delivered_to": "<where the new password was sent>"}`` (for example
"your registered mobile phone"); ``401`` for a bad signature or a stale timestamp; ``404`` for an
unknown user; ``409`` while a request with the same key is still being processed; ``422`` when a
key is reused for a different request; ``429`` when rate-limited; ``5xx`` when broken. Any other
field of the answer is ignored, and a new password must never be in it: if one is, it is dropped
unread, and a ``delivered_to`` that seems to carry it is replaced by a neutral phrase.
Connection errors and ``5xx`` answers are retried (same key) up to
``ORCHESTRATOR_PASSWORD_RESET_ATTEMPTS`` times; a timeout is not, as the user is waiting.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, TypedDict

import httpx
from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from contracts.events import AuditRecorded, utcnow
from contracts.settings import ServiceSettings
from orchestrator.sentiment import clauses

log = logging.getLogger("deskpilot.orchestrator.automations")

PASSWORD_RESET = "password_reset"  # noqa: S105 - the automation's name, not a credential  # nosec B105
SIGNATURE_HEADER = "X-Deskpilot-Signature"
TIMESTAMP_HEADER = "X-Deskpilot-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"
DEFAULT_ARTICLE_URL = "https://it.northwind.example/kb/reset-your-account-password"
NEUTRAL_DESTINATION = "the contact details registered for your account"
MIN_SECRET_LENGTH = 32
RETRY_PAUSE_S = 0.2


# ---------------------------------------------------------------------------------------------
# Settings


class AutomationSettings(ServiceSettings):
    """Which automations may run, and how to reach the password-reset webhook.

    Meant to be a base of :class:`orchestrator.config.OrchestratorSettings` (same prefix).
    """

    model_config = SettingsConfigDict(env_prefix="ORCHESTRATOR_")

    automations: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated names of the automations the assistant may run for users "
        "(the allow-list; known: `password_reset`); none means it never runs one.",
    )
    automation_offer_ttl_s: int = Field(
        600,
        ge=10,
        description="How long an offer to run an automation waits for the user's explicit yes; "
        "a later yes asks again.",
    )
    password_reset_webhook_url: str | None = Field(
        None,
        description="The endpoint that resets a user's account password and sends them the new "
        "one (required with `password_reset` allowed); put no credentials in it, requests are "
        "signed with the secret.",
    )
    password_reset_webhook_secret: SecretStr | None = Field(
        None,
        description="Shared secret of the HMAC-SHA256 signature of every webhook request; at "
        f"least {MIN_SECRET_LENGTH} characters in production.",
    )
    password_reset_timeout_s: float = Field(
        8.0, gt=0, description="Seconds to wait for the webhook to connect and to answer."
    )
    password_reset_attempts: int = Field(
        2,
        ge=1,
        le=5,
        description="Tries per reset when the webhook cannot be reached or answers 5xx, all with "
        "the same Idempotency-Key; a timeout is never retried.",
    )
    password_reset_article_url: str = Field(
        DEFAULT_ARTICLE_URL,
        description="The knowledge-base article on resetting one's password oneself, offered "
        "to users who are not signed in and when a reset fails.",
    )

    @field_validator("automations", mode="before")
    @classmethod
    def _automation_names(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _automations_known_and_configured(self) -> AutomationSettings:
        unknown = sorted(set(self.automations) - set(REGISTRY))
        if unknown:
            raise ValueError(
                f"unknown automations {unknown}; known: {sorted(REGISTRY)}"  # names, not secrets
            )
        if PASSWORD_RESET in self.automations:
            secret = self.password_reset_webhook_secret
            if not self.password_reset_webhook_url or secret is None:
                raise ValueError(
                    "password_reset needs ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL and "
                    "ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET"
                )
            value = secret.get_secret_value()
            if self.environment == "production" and (
                len(value) < MIN_SECRET_LENGTH or value in {"change-me", "changeme", "secret"}
            ):
                raise ValueError(
                    "ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET must be a real secret of at "
                    f"least {MIN_SECRET_LENGTH} characters in production"
                )
        return self


# ---------------------------------------------------------------------------------------------
# Results


class Outcome(StrEnum):
    OFFERED = "offered"
    SELF_SERVICE = "self_service"
    DECLINED = "declined"
    DONE = "done"
    FAILED = "failed"


class FailureReason(StrEnum):
    """Why an executor failed; the orchestrator offers self-service and a ticket for each."""

    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"
    UNAUTHORIZED = "unauthorized"
    """The endpoint refused our signature (wrong secret, clock skew): an operator's problem."""
    UNKNOWN_USER = "unknown_user"
    CONFLICT = "conflict"
    """The same request is still being processed by the endpoint."""
    RATE_LIMITED = "rate_limited"
    REJECTED = "rejected"
    SERVER_ERROR = "server_error"
    INVALID_RESPONSE = "invalid_response"
    """A success status with an answer that is not the documented JSON: the reset may have
    happened, but where the password went is unknown."""


class AuditEntry(TypedDict):
    """What happened, for the audit stream: ids, names and codes only."""

    action: str
    outcome: str
    reason: str
    user_id: str
    request_id: str | None
    http_status: int | None
    attempts: int
    destination_withheld: bool


def _audit(
    action: str,
    outcome: Outcome,
    reason: str,
    user: UserContext,
    request_id: str | None,
    http_status: int | None = None,
    attempts: int = 0,
    destination_withheld: bool = False,
) -> AuditEntry:
    return AuditEntry(
        action=action,
        outcome=outcome.value,
        reason=reason,
        user_id=user.user_id,
        request_id=request_id,
        http_status=http_status,
        attempts=attempts,
        destination_withheld=destination_withheld,
    )


class PendingAutomation(BaseModel):
    """An offer waiting for the user's yes; the service keeps it in the conversation's memory."""

    action: str = Field(description="The automation's name.")
    request_id: str = Field(
        description="The offering turn's correlation id; the executor's idempotency key, so one "
        "offer resets at most once however often its yes is delivered."
    )
    user_id: str = Field(description="Only this user's yes counts.")
    offered_at: datetime


@dataclass(frozen=True)
class UserContext:
    user_id: str
    authenticated: bool = False
    """The gateway verified who the user is (``QueryReceived.authenticated``)."""


@dataclass(frozen=True)
class Offer:
    """Ask the user to confirm; remember ``pending`` until the next message."""

    action: str
    question: str
    pending: PendingAutomation
    audit: AuditEntry

    @property
    def text(self) -> str:
        return self.question


@dataclass(frozen=True)
class SelfService:
    """The user must do it themselves: answer from the article at ``article_url``."""

    action: str
    reason: str
    article_url: str
    text: str
    audit: AuditEntry


@dataclass(frozen=True)
class Declined:
    """The user said no; nothing was run."""

    action: str
    text: str
    audit: AuditEntry


@dataclass(frozen=True)
class Done:
    """It ran. ``delivered_to`` says where the new password went (never the password)."""

    action: str
    delivered_to: str
    text: str
    audit: AuditEntry


@dataclass(frozen=True)
class Failed:
    """It did not run (or could not be confirmed): tell the user, point to self-service
    (``article_url``) and offer a ticket."""

    action: str
    reason: FailureReason
    text: str
    article_url: str
    audit: AuditEntry
    offer_ticket: bool = True


StartResult = Offer | SelfService
ReplyResult = Offer | SelfService | Declined | Done | Failed
ExecutionResult = Done | Failed


def audit_event(
    entry: AuditEntry, correlation_id: str, conversation_id: str, trace_id: str | None = None
) -> AuditRecorded:
    """The audit-stream event of one step; its id is derived from the request and outcome, so a
    redelivered turn records it once."""
    key = f"automation:{entry['action']}:{entry['request_id'] or correlation_id}:{entry['outcome']}"
    return AuditRecorded(
        event_id=uuid.uuid5(uuid.NAMESPACE_URL, key).hex,
        correlation_id=correlation_id,
        conversation_id=conversation_id,
        service="orchestrator",
        action="automation",
        reason=f"{entry['action']} {entry['outcome']}: {entry['reason']}",
        trace_id=trace_id,
        details=dict(entry),
    )


# ---------------------------------------------------------------------------------------------
# The plugin interface


@dataclass(frozen=True)
class Trigger:
    """An automation the message asks for, and the kind of evidence (for logs and audit)."""

    action: str
    kind: str


@dataclass(frozen=True)
class ExecutionRequest:
    user_id: str
    request_id: str


class Automation(ABC):
    """One approved action: a trigger over redacted text, the user-facing texts, an executor.

    The runner enforces the preconditions every automation shares (allow-listed, authenticated
    user, an explicit yes in a later message, the offer still fresh) and audits each step; a
    plugin only says when it applies and how it runs.
    """

    name: ClassVar[str]

    @abstractmethod
    def detect(self, text: str) -> Trigger | None:
        """The trigger, over the user's redacted message."""

    @abstractmethod
    def offer_question(self) -> str: ...

    @abstractmethod
    def self_service(self) -> tuple[str, str]:
        """The article URL and the text for users who must do it themselves."""

    @abstractmethod
    def declined_text(self) -> str: ...

    @abstractmethod
    async def execute(self, request: ExecutionRequest, user: UserContext) -> ExecutionResult:
        """Run it once for this request id; safe to call again with the same id."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections."""


# ---------------------------------------------------------------------------------------------
# Password reset: the trigger


def _words(text: str) -> frozenset[str]:
    """The words of a space-separated list: word lists read better as text."""
    return frozenset(text.split())


# Spellings of the word, normalised first ("pass word", "passwd", "pwd", "pw").
_PASSWORD_WORD = re.compile(r"\bpass words?\b|\bpasswd\b|\bpwd\b|\bpw\b")
_IS_PASSWORD = frozenset({"password", "passwords"})
_DETERMINERS = _words("my the our a an this that your his her their its any new")
# Words that end the modifiers walked back from "password": verbs and function words of the
# phrases matched below, and adjectives the rules read ("expired", "new").
_STOP = _words(
    """
    i me you we it is am are was were be been has have had do does did not never no and or to
    for of on in at with reset resetting change changing changed renew renewing recover
    recovering replace replacing update updating forgot forgotten forget forgetting remember
    recall know lost misplaced find need needs want wants like please can could would will
    should must may help get give send set expired expiring old new current temporary default
    what which when how where why whats if my the our a an this that your his her their its
    any
    """
)
# What the webhook resets: the directory account ("Your Northwind account password signs you
# in to your laptop, email, Teams and most internal apps").
_OWN_WORDS = _words(
    """
    account accounts northwind login logon log sign signin windows network domain ad active
    directory sso single company work corporate computer laptop pc desktop email e-mail mail
    outlook office 365 microsoft m365 teams user main normal usual own entra azure okta me
    myself
    """
)
# Other credentials, which the webhook does not reset ("Your VPN password is a separate
# credential"), and passwords of things rather than of the user.
_FOREIGN_WORDS = _words(
    """
    vpn wifi wi-fi wi fi wireless guest hotspot router modem bios uefi bitlocker voicemail
    voice phone mobile iphone android sim pin keychain zip pdf excel word file files document
    documents spreadsheet database db sql admin administrator root local service shared
    printer github gitlab aws personal private gmail yahoo hotmail facebook linkedin instagram
    amazon netflix bank banking apple icloud bitwarden vault master ssh key keys server wlan
    encryption
    """
)
# Someone else's password: the webhook resets only the signed-in user's own.
_OTHER_OWNERS = _words(
    """
    his her their him them someone somebody someones somebodys colleague colleagues coworker
    coworkers co-worker co-workers manager managers boss bosses employee employees intern
    interns team wife husband son sons daughter daughters mom moms dad dads mother mothers
    father fathers friend friends starter starters hire hires contractor contractors customer
    customers client clients assistant assistants users
    """
)
_PLACEHOLDER = re.compile(r"^<[a-z_]+\d*>s?$")
_POST_PREPOSITIONS = frozenset({"for", "of", "to", "on"})
# After these, only the account's own names keep the password the user's ("the password for
# the guest wifi", "for the coffee machine"); after "to" and "on" only another credential or
# owner makes it someone else's ("the password to log in", "reset it on the portal").
_STRICT_PREPOSITIONS = frozenset({"for", "of"})

_OWN = "pwdown"
_OTHER = "pwdother"

_NEGATION = re.compile(r"\b(not|never|no need|no|without|stop|cancel|nobody|neither)\b")
_TROUBLE = re.compile(
    r"\b(can not|could not|unable to|not able to|fail|failed|fails|failing|trouble|problem|"
    r"problems|issue|issues|help|not let me|will not let me|does not let me|error|stuck)\b"
)
_HOW_TO = re.compile(
    r"\b(how (do|can|should|would|could|does|did|to|is|are)|steps to|way to|ways to|"
    r"where (do|can|should|would) (i|we)|instructions|guide|explain|tutorial|show me how|"
    r"tell me how|what is the (process|procedure)|process for|procedure for)\b"
)
_HYPOTHETICAL = re.compile(
    r"\b(if|in case|whenever|what happens|what should i do|what do i do|what to do|"
    r"suppose|supposing)\b"
)
_ADVICE = re.compile(
    r"\b(should (i|we)|do (i|we) (need|have) to|must (i|we)|is it (necessary|required|"
    r"mandatory|a good idea|worth|safe)|how often|how frequently|when (should|do|must|will) "
    r"(i|we)|why (do|should|must) (i|we)|how long until)\b"
)
_RULES = re.compile(
    r"\b(rules?|requirements?|required|policy|policies|complexity|criteria|length|how long|"
    r"characters?|symbols?|letters?|digits?|special|uppercase|lowercase|upper case|lower case|"
    r"strong|stronger|secure|weak|reuse|re use|history|expiry|expiration|passphrase|"
    r"choose|choosing|pick|picking|come up with|ideas?|tips?|allowed|valid|minimum|maximum|"
    r"blocked list|generator|manager)\b"
)
_REQUESTING_SUBJECTS = _words("you u someone somebody anyone anybody ya yall please one")
# The user already did it: "I reset my password and now Outlook keeps asking".
_DONE_ALREADY = re.compile(
    r"\bi (?:(?:have|had|just|already|recently|also|then|successfully|finally) )*"
    r"(reset|changed|renewed|updated|recovered|replaced)\b"
)
_VERB = (
    r"(?:reset|resetting|change|changing|renew|renewing|recover|recovering|replace|"
    r"replacing|update|updating|regenerate)"
)
_VERB_REQUEST = re.compile(rf"\b{_VERB}\b(?: [\w<>\-]+){{0,2}}? {_OWN}\b")
_VERB_IT = re.compile(rf"\b{_VERB} (it|that|this|one|this one|that one)\b")
_FORGOT = re.compile(
    r"\b(forgot|forgotten|forget|forgetting|can not remember|do not remember|can not recall|"
    r"do not recall|do not know|no idea what|lost|misplaced|can not find|locked out of)"
    rf"(?: [\w<>\-]+){{0,2}}? {_OWN}\b"
)
_EXPIRED = re.compile(
    rf"\b{_OWN} (?:<[a-z_]+\d*> )?(?:(?:has|had|is|was|just|already|now|apparently|seems to|"
    rf"have) )*(expired|run out|ran out)\b|\bexpired {_OWN}\b"
)
_NOUN_REQUEST = re.compile(rf"\b{_OWN} (reset|change|changed|renewal|renewed|recovery|resets)\b")
_NEW_PASSWORD = re.compile(rf"\bnew {_OWN}\b")
_NEED = re.compile(
    r"\b(need|needs|want|would like|request|requesting|requested|get|please|help|give me|"
    r"send me|issue me|asap|urgent|urgently|quick|quickly)\b"
)
_FILLER = _words("hi hello hey please thanks thank you ok okay urgent asap now for me a my the")


def _password_mentions(words: list[str]) -> list[str]:
    """The clause's words with each mention of a password replaced by a marker saying whose
    (the user's own account password, or another credential's or person's), the modifiers and
    the prepositional phrase that decided it folded in."""
    out = list(words)
    index = 0
    while index < len(out):
        if out[index] not in _IS_PASSWORD:
            index += 1
            continue
        start = index
        while start > 0 and index - start < 3 and out[start - 1] not in _STOP:
            start -= 1
        modifiers = out[start:index]
        owner = out[start - 1] if start > 0 else ""
        foreign = out[index] == "passwords"  # passwords in general, not the user's own
        if any(
            word in _FOREIGN_WORDS or word in _OTHER_OWNERS or _PLACEHOLDER.match(word)
            for word in modifiers
        ):
            foreign = True
        if owner in {"his", "her", "their"} or (
            modifiers and modifiers[-1].endswith("s") and modifiers[-1] not in _OWN_WORDS
        ):
            foreign = True  # "<person_1>'s password", "his password", "a colleague's password"
        end = index + 1
        if end < len(out) and out[end] in _POST_PREPOSITIONS:
            cursor = end + 1
            while cursor < len(out) and out[cursor] in _DETERMINERS:
                cursor += 1
            if out[end] not in _STRICT_PREPOSITIONS:
                following = out[cursor : cursor + 4]
                if any(w in _FOREIGN_WORDS or w in _OTHER_OWNERS for w in following):
                    foreign = True
            elif cursor < len(out):
                if out[cursor] not in _OWN_WORDS:
                    foreign = True
                end = cursor + 1
        out[start:end] = [_OTHER if foreign else _OWN]
        index = start + 1
    return out


_MODALS = _words("can could will would does do did may might shall")
_STATEMENT_SUBJECTS = _words("i we you someone somebody")
_SUBJECT_FILLERS = _words("not please just maybe somehow quickly kindly")


def _modal_subject_ok(before: str) -> bool:
    """A modal shortly before the verb asks the assistant or "someone" ("can you reset"), or
    states the user's need ("I can't reset", "I would like to reset"); "can my manager reset",
    "who can reset" and "can I change it from my phone?" (a question about what is possible)
    are not requests."""
    words = before.split()
    if "possible to" in before:
        return True  # "would it be possible to reset my password"
    for back in range(1, min(5, len(words)) + 1):
        if words[-back] not in _MODALS:
            continue
        if len(words) > back and words[-back - 1] in _STATEMENT_SUBJECTS:
            return True  # a statement: "I can't reset", "I would like to reset"
        between = [w for w in words[len(words) - back + 1 :] if w not in _SUBJECT_FILLERS]
        return bool(between) and between[0] in _REQUESTING_SUBJECTS
    return True


def _request_ok(clause: str, at: int, verb: bool = True) -> bool:
    """A request to reset is a request unless negated, a how-to, advice, a hypothesis, about
    someone else doing it, or already done; "I can't reset my password" is one (trouble)."""
    before = clause[:at]
    if _HOW_TO.search(before) or _ADVICE.search(before) or _HYPOTHETICAL.search(before):
        return False
    done = _DONE_ALREADY.search(clause)
    if done is not None and done.start(1) == at:
        preceding = clause[: done.start()].split()
        if not preceding or preceding[-1] not in _MODALS:
            return False
    if _NEGATION.search(before) and not _TROUBLE.search(before):
        return False
    return not verb or _modal_subject_ok(before)  # "can I get a password reset" asks for one


def detect_password_reset(text: str) -> str | None:
    """Why the (redacted) message asks for the user's own account password to be reset
    (``request``, ``forgot``, ``expired``, ``trouble``), or ``None``.

    A need triggers it: an explicit request ("reset my password", "I need a password reset",
    "can you reset it" after naming the password), a forgotten password, an expired one, or a
    failed attempt ("I can't reset my password"). How-to questions ("how do I reset my
    password?", "can I change it from my phone?"), advice and hypotheses ("should I change
    it?", "what if I forget it?") and questions about the password rules are answered from the
    knowledge base instead (its article has the self-service steps the user asked for); other
    credentials (VPN, Wi-Fi, a PIN, a token), other people's passwords and passwords of things
    ("the password for the coffee machine") never trigger it.
    """
    text = _PASSWORD_WORD.sub("password", text.lower())
    kind: str | None = None
    last_mention: str | None = None
    for raw in clauses(text):
        words = _password_mentions(raw.split())
        clause = " ".join(words)
        found = _clause_kind(clause, last_mention)
        for word in words:
            if word in {_OWN, _OTHER}:
                last_mention = word
        if found is not None and kind is None:
            kind = found
    return kind


def _clause_kind(clause: str, last_mention: str | None) -> str | None:
    if _RULES.search(clause) and not (_FORGOT.search(clause) or _EXPIRED.search(clause)):
        return None
    match = _FORGOT.search(clause)
    if match is not None:
        before = clause[: match.start()]
        if not (
            _NEGATION.search(before)
            or _HYPOTHETICAL.search(before)
            or _HOW_TO.search(before)
            or _ADVICE.search(before)
        ):
            return "forgot"
    match = _EXPIRED.search(clause)
    if match is not None:
        before = clause[: match.start()]
        if not (_HYPOTHETICAL.search(before) or _ADVICE.search(before) or _HOW_TO.search(before)):
            return "expired"
    for pattern in (_VERB_REQUEST, _VERB_IT):
        match = pattern.search(clause)
        if match is None:
            continue
        if pattern is _VERB_IT and (last_mention != _OWN or _OWN in clause or _OTHER in clause):
            continue
        if _request_ok(clause, match.start()):
            before = clause[: match.start()]
            return "trouble" if _TROUBLE.search(before) else "request"
    for pattern in (_NOUN_REQUEST, _NEW_PASSWORD):
        match = pattern.search(clause)
        if match is None:
            continue
        rest = [w for w in clause.split() if w not in _FILLER and w != _OWN]
        noun = {"reset", "change", "renewal", "recovery", "resets", "new"}
        if (_NEED.search(clause) or set(rest) <= noun) and _request_ok(
            clause, match.start(), verb=False
        ):
            return "request"
    return None


# ---------------------------------------------------------------------------------------------
# Password reset: the executor


class PasswordReset(Automation):
    """Reset the signed-in user's account password through the operator's webhook."""

    name: ClassVar[str] = PASSWORD_RESET

    def __init__(
        self,
        url: str,
        secret: SecretStr,
        timeout_s: float = 8.0,
        attempts: int = 2,
        article_url: str = DEFAULT_ARTICLE_URL,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self._secret = secret
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.article_url = article_url
        self._client = client
        self._owns_client = client is None
        self._clock = clock

    @classmethod
    def from_settings(
        cls, settings: AutomationSettings, client: httpx.AsyncClient | None = None
    ) -> PasswordReset:
        if settings.password_reset_webhook_url is None:
            raise ValueError("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_URL is not set")
        if settings.password_reset_webhook_secret is None:
            raise ValueError("ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET is not set")
        return cls(
            url=settings.password_reset_webhook_url,
            secret=settings.password_reset_webhook_secret,
            timeout_s=settings.password_reset_timeout_s,
            attempts=settings.password_reset_attempts,
            article_url=settings.password_reset_article_url,
            client=client,
        )

    # -- texts -------------------------------------------------------------------------------

    def detect(self, text: str) -> Trigger | None:
        kind = detect_password_reset(text)
        return None if kind is None else Trigger(self.name, kind)

    def offer_question(self) -> str:
        return (
            "I can reset your account password for you now. A new password will be sent to "
            "the contact details registered for your account, never shown here. "
            "Shall I reset it? Reply yes to go ahead or no to cancel."
        )

    def self_service(self) -> tuple[str, str]:
        return self.article_url, (
            "I can only reset passwords for users who are signed in, so I can't do it for you "
            "here. You can reset it yourself at the self-service portal in a few minutes, no "
            f"ticket needed. The steps: {self.article_url}"
        )

    def declined_text(self) -> str:
        return "All right, I won't reset your password."

    def failed_text(self, reason: FailureReason) -> str:
        if reason is FailureReason.INVALID_RESPONSE:
            lead = (
                "I asked for your password to be reset, but I couldn't confirm that it worked "
                "or where the new one was sent. If nothing arrives within ten minutes, "
            )
        elif reason is FailureReason.UNKNOWN_USER:
            lead = "I couldn't reset it: the reset service doesn't know your account. "
        elif reason is FailureReason.CONFLICT:
            lead = "A reset for this request is still in progress. If nothing arrives soon, "
        else:
            lead = "I couldn't reset your password just now. "
        follow = "you can" if lead.endswith(", ") else "You can"
        return (
            f"{lead}{follow} reset it yourself at the self-service portal ({self.article_url}), "
            "or I can create a ticket for the service desk."
        )

    # -- the webhook -------------------------------------------------------------------------

    def signed_request(self, request: ExecutionRequest) -> tuple[bytes, dict[str, str]]:
        """The exact body bytes and headers of one call (a retry signs a fresh timestamp)."""
        timestamp = int(self._clock())
        payload = {
            "action": self.name,
            "request_id": request.request_id,
            "timestamp": timestamp,
            "user_id": request.user_id,
        }
        body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        digest = hmac.new(self._secret.get_secret_value().encode(), body, hashlib.sha256)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            SIGNATURE_HEADER: f"sha256={digest.hexdigest()}",
            TIMESTAMP_HEADER: str(timestamp),
            IDEMPOTENCY_HEADER: request.request_id,
        }
        return body, headers

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s), follow_redirects=False
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def execute(self, request: ExecutionRequest, user: UserContext) -> ExecutionResult:
        status: int | None = None
        reason: FailureReason | None = None
        response: httpx.Response | None = None
        attempt = 0
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                await asyncio.sleep(RETRY_PAUSE_S * (attempt - 1))
            body, headers = self.signed_request(request)
            try:
                response = await self._http().post(
                    self.url, content=body, headers=headers, timeout=self.timeout_s
                )
            except httpx.TimeoutException as exc:
                log.warning(
                    "automation %s request %s: webhook timed out (%s, attempt %d)",
                    self.name, request.request_id, type(exc).__name__, attempt,
                )  # fmt: skip
                reason, response = FailureReason.TIMEOUT, None
                break
            except httpx.HTTPError as exc:
                log.warning(
                    "automation %s request %s: webhook unreachable (%s, attempt %d)",
                    self.name, request.request_id, type(exc).__name__, attempt,
                )  # fmt: skip
                reason, response = FailureReason.UNREACHABLE, None
                continue
            status = response.status_code
            if status >= 500:
                log.warning(
                    "automation %s request %s: webhook answered %d (attempt %d)",
                    self.name, request.request_id, status, attempt,
                )  # fmt: skip
                reason = FailureReason.SERVER_ERROR
                continue
            reason = None
            break
        if response is not None and reason is None:
            reason, delivered_to, withheld = _read_answer(response)
            if reason is None and delivered_to is not None:
                audit = _audit(
                    self.name, Outcome.DONE, "webhook confirmed", user, request.request_id,
                    status, attempt, withheld,
                )  # fmt: skip
                log.info(
                    "automation %s request %s: done (status %d, attempt %d, destination %s)",
                    self.name, request.request_id, status, attempt,
                    "withheld" if withheld else "reported",
                )  # fmt: skip
                return Done(
                    action=self.name,
                    delivered_to=delivered_to,
                    text=(
                        "Done: I reset your account password. The new password was sent to "
                        f"{delivered_to}. Sign in with it, then update it wherever it is saved, "
                        "such as the mail app on your phone."
                    ),
                    audit=audit,
                )
        assert reason is not None  # nosec B101 # type narrowing: every branch above sets it
        if reason is FailureReason.UNAUTHORIZED:
            log.error(
                "automation %s request %s: the webhook refused our signature (status %s); "
                "check ORCHESTRATOR_PASSWORD_RESET_WEBHOOK_SECRET and the clocks",
                self.name, request.request_id, status,
            )  # fmt: skip
        else:
            log.warning(
                "automation %s request %s: failed, %s (status %s, attempts %d)",
                self.name, request.request_id, reason.value, status, attempt,
            )  # fmt: skip
        return Failed(
            action=self.name,
            reason=reason,
            text=self.failed_text(reason),
            article_url=self.article_url,
            audit=_audit(
                self.name, Outcome.FAILED, reason.value, user, request.request_id, status, attempt
            ),
        )


_STATUS_REASONS: Mapping[int, FailureReason] = {
    401: FailureReason.UNAUTHORIZED,
    403: FailureReason.UNAUTHORIZED,
    404: FailureReason.UNKNOWN_USER,
    409: FailureReason.CONFLICT,
    429: FailureReason.RATE_LIMITED,
}
_SECRET_WORDS = re.compile(r"pass ?word|passwd|pwd|passcode|credential|temporary|\btemp\b", re.I)
_MAX_DESTINATION = 120


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _read_answer(response: httpx.Response) -> tuple[FailureReason | None, str | None, bool]:
    """The failure, or where the new password went and whether that phrase was withheld.

    Only ``delivered_to`` is read. A destination that names a password, is too long, or holds
    any other string of the answer (a password the endpoint should not have sent) becomes a
    neutral phrase, so the password can never reach the user, a log or a reply.
    """
    status = response.status_code
    if not 200 <= status < 300:
        return _STATUS_REASONS.get(status, FailureReason.REJECTED), None, False
    try:
        document = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return FailureReason.INVALID_RESPONSE, None, False
    if not isinstance(document, dict):
        return FailureReason.INVALID_RESPONSE, None, False
    delivered = document.get("delivered_to")
    if not isinstance(delivered, str) or not delivered.strip():
        return FailureReason.INVALID_RESPONSE, None, False
    delivered = " ".join(delivered.split())
    others = [
        value
        for key, item in document.items()
        if key != "delivered_to"
        for value in _strings(item)
        if len(value.strip()) >= 4
    ]
    if (
        len(delivered) > _MAX_DESTINATION
        or _SECRET_WORDS.search(delivered)
        or any(value.strip() in delivered for value in others)
        or not delivered.isprintable()
    ):
        return None, NEUTRAL_DESTINATION, True
    return None, delivered, False


# ---------------------------------------------------------------------------------------------
# The runner

Reply = Literal["yes", "no"]

_YES_HEAD = _words(
    """
    yes yeah yep yup ya yea y sure ok okay confirm confirmed absolutely certainly definitely
    please go
    """
)
_YES_WORDS = _YES_HEAD | _words(
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
    parts = clauses(_PASSWORD_WORD.sub("password", text.lower()))
    if not parts:
        return None
    joined = " ".join(parts)
    if _NO_PHRASES.match(joined):
        return "no"
    words = joined.split()
    if len(words) > 10 or _NEGATION.search(joined):
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
                audit=_audit(
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
            audit=_audit(automation.name, Outcome.OFFERED, why, user, request_id),
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
                audit=_audit(
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
