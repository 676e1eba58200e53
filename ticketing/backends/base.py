"""The ticket-backend plugin interface: what the ticketing service needs from a ticket system.

A backend files, reads, updates, comments on, links and resolves tickets, adds attachments and
finds a ticket by the idempotency key it was filed under. Every method is async; backends whose
client is blocking (sqlite3, the ``jira`` library) run it in a thread.

Errors are mapped to four kinds so the service decides what to do without knowing the vendor:

* :class:`BackendUnavailable`: down, overloaded, rate-limited, timed out. Retry later.
* :class:`BackendAuthError`: credentials refused. Retrying will not help until an operator fixes
  the settings; the service keeps the request and retries slowly.
* :class:`BackendRejected`: the system refused the request as invalid (with its reasons).
* :class:`TicketNotFound`: no such ticket (or no permission to see it).
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from typing import ClassVar

from pydantic import BaseModel, Field, field_validator

from contracts.events import TicketRecord

DESKPILOT_LABEL = "deskpilot"
"""Every ticket Deskpilot files carries this label."""


class BackendError(Exception):
    """A ticket backend failed; the message never carries ticket content or secrets."""

    permanent: ClassVar[bool] = False


class BackendUnavailable(BackendError):
    """Down, overloaded, rate-limited or timed out: worth retrying."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BackendAuthError(BackendError):
    """The credentials were refused (401/403): an operator must fix the settings."""

    permanent = True


class BackendRejected(BackendError):
    """The backend refused the request as invalid, with its own reasons."""

    permanent = True

    def __init__(
        self, message: str, error_messages: list[str], errors: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.error_messages = error_messages
        self.errors = errors or {}


class TicketNotFound(BackendError):
    """No such ticket, or no permission to see it."""

    permanent = True


LABEL_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,199}$")
"""What any label Deskpilot sets looks like: lower case, no spaces, no markup, at most 200."""


def checked_labels(labels: list[str]) -> list[str]:
    """``labels``, or ValueError when one is outside :data:`LABEL_PATTERN`."""
    bad = [value for value in labels if not LABEL_PATTERN.match(value)]
    if bad:
        raise ValueError(f"{len(bad)} label(s) outside the label alphabet [a-z0-9_.-]")
    return labels


def require_label_alphabet(labels: list[str]) -> None:
    """:class:`BackendRejected` when a label to add is outside :data:`LABEL_PATTERN`."""
    try:
        checked_labels(labels)
    except ValueError as exc:
        raise BackendRejected(str(exc), [str(exc)], {"labels": str(exc)}) from None


class TicketDraft(BaseModel):
    """A ticket to file. Every text in it is already redacted; labels come from fixed
    vocabularies and digests only (see :func:`ticketing.content.build_ticket`)."""

    summary: str = Field(min_length=1)
    description: str = ""
    labels: list[str] = Field(default_factory=list)
    category: str | None = None
    queue: str | None = None
    priority: str | None = None
    components: list[str] = Field(default_factory=list)
    user_id: str | None = None
    conversation_id: str | None = None
    incident_id: str | None = None
    idempotency_key: str = Field(min_length=1)

    _labels_checked = field_validator("labels")(checked_labels)


class TicketQuery(BaseModel):
    """Tickets carrying every one of ``labels``; newest first."""

    labels: list[str] = Field(default_factory=list)
    open_only: bool = False
    limit: int = Field(20, ge=1, le=100)

    _labels_checked = field_validator("labels")(checked_labels)


class TicketBackend(ABC):
    """The plugin interface; see the module docstring for the error contract."""

    name: ClassVar[str]

    @abstractmethod
    async def create(self, draft: TicketDraft) -> TicketRecord:
        """File a ticket. The idempotency key is stored on it (findable afterwards)."""

    @abstractmethod
    async def get(self, key: str) -> TicketRecord:
        """The ticket as it is now, comments and links included."""

    @abstractmethod
    async def update(
        self,
        key: str,
        *,
        summary: str | None = None,
        description: str | None = None,
        add_labels: list[str] | None = None,
    ) -> TicketRecord:
        """Change fields; labels are added, never removed."""

    @abstractmethod
    async def comment(self, key: str, body: str) -> None:
        """Add a comment."""

    @abstractmethod
    async def link(self, key: str, other_key: str) -> None:
        """Link two tickets ("relates to")."""

    @abstractmethod
    async def search(self, query: TicketQuery) -> list[TicketRecord]:
        """Deskpilot's tickets matching ``query``, newest first."""

    @abstractmethod
    async def add_attachment(self, key: str, filename: str, content: bytes) -> str:
        """Attach a file; returns the attachment's id."""

    @abstractmethod
    async def attachments(self, key: str) -> list[tuple[str, int]]:
        """(file name, size in bytes) of the ticket's attachments, oldest first."""

    @abstractmethod
    async def find_by_idempotency_key(self, idempotency_key: str) -> TicketRecord | None:
        """The ticket filed under ``idempotency_key``, if any."""

    @abstractmethod
    async def resolve(self, key: str) -> TicketRecord:
        """Move the ticket to its done state."""

    @abstractmethod
    def is_done(self, record: TicketRecord) -> bool:
        """Whether ``record`` (as returned by this backend) is in a done state."""

    async def status(self, key: str) -> str:
        """The ticket's status name as the backend shows it."""
        return (await self.get(key)).status

    async def check(self) -> bool:
        """A cheap liveness and credentials probe for the heartbeat."""
        return True

    async def close(self) -> None:  # noqa: B027 (optional: not every backend holds resources)
        """Release connections and threads."""


# -- labels shared by every backend -----------------------------------------------------------

_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def label(prefix: str, value: str) -> str:
    """A label safe in any ticket system (no spaces; Jira allows 255 characters). Only for
    values of fixed vocabularies (categories, queues, configured labels, incident ids): never
    for anything a user wrote."""
    cleaned = _LABEL_UNSAFE.sub("-", value.strip()).strip("-._").lower() or _digest(value)[:12]
    return f"{prefix}{cleaned}"[:200]


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:32]


def request_reference(idempotency_key: str) -> str:
    """What a ticket keeps of the request that filed it: the key's whole SHA-256 (the key names
    the turn, and a turn id must not be readable by everyone who can read the ticket)."""
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


def conversation_reference(conversation_id: str) -> str:
    """An opaque name of a conversation for ticket text, Jira properties and labels.

    The conversation id itself is not printed where every ticket reader sees it: with it, a
    reader could address the conversation in Deskpilot's API. The reference is a digest, so it
    opens nothing; technicians reach the conversation through the admin API, signed in, by the
    ticket's key (the read model there keeps the id)."""
    return (
        "conv-"
        + hashlib.sha256(f"deskpilot:conversation:{conversation_id}".encode()).hexdigest()[:16]
    )


def idempotency_label(idempotency_key: str) -> str:
    """The label an idempotency key is findable by (a digest: keys may hold any character)."""
    return f"dp-idem-{_digest(idempotency_key)}"


_ANONYMOUS_REQUESTER = re.compile(r"^anonymous:[0-9a-f]{24}$")


def requester_key(user_id: str) -> str:
    """The requester as tickets keep it. An anonymous requester is named after its conversation
    by a digest (``anonymous:<24 hex>``, as the orchestrator sends it); one named by anything
    else, such as the conversation id itself, gets a digest here, so no ticket, property or
    label ever keeps a conversation id."""
    if user_id.startswith("anonymous:") and not _ANONYMOUS_REQUESTER.match(user_id):
        digest = hashlib.sha256(f"deskpilot:requester:{user_id}".encode()).hexdigest()
        return f"anonymous:{digest[:24]}"
    return user_id


def user_label(user_id: str) -> str:
    """The label of a requester's tickets: a digest, so user ids never show in label lists."""
    return f"dp-user-{_digest(user_id)[:20]}"


def topic_label(topic: str) -> str:
    """The label of a requester's topic: a digest, because the topic key is made of the words of
    the user's message, and labels are visible to everyone in Jira."""
    return f"dp-topic-{_digest(topic)[:20]}"


def incident_label(incident_id: str) -> str:
    return label("incident-", incident_id)
