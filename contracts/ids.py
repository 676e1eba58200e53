"""Ids every service agrees on: what a conversation id may look like, and how an event id is
derived from what caused the event, and how a store names a conversation without its id.

The gateway issues conversation ids (uuid4 hex, :func:`contracts.events.new_id`), and callers
hand them back: the chat API and the WebSocket to continue a conversation, the admin API and
``deskpilot purge`` to purge one, the audit API to read its records. All of them accept exactly
the same ids, so an id that one of them takes is never refused by another.

An event published because of another event (or of a stored request) takes a derived id
(:func:`derived_event_id`) instead of a random one: a redelivered input, a retried step or a
replica doing the same work again publishes the same event id, and consumers, which de-duplicate
by event id, act once.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Annotated

from pydantic import StringConstraints

CONVERSATION_ID_MAX_LENGTH = 128
CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
"""Letters, digits and ``_ . : -``, 1 to 128 characters (ASCII only)."""

_CONVERSATION_ID = re.compile(CONVERSATION_ID_PATTERN)

ConversationId = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=CONVERSATION_ID_MAX_LENGTH, pattern=CONVERSATION_ID_PATTERN
    ),
]
"""A conversation id as a pydantic field type."""


def is_conversation_id(value: object) -> bool:
    """True when ``value`` is a well-formed conversation id (whether or not it exists)."""
    # fullmatch: ``$`` alone would let a trailing newline through.
    return isinstance(value, str) and _CONVERSATION_ID.fullmatch(value) is not None


def derived_event_id(*parts: str) -> str:
    """The event id derived from ``parts``: the same parts give the same id, in every process
    and every version (uuid5 in the URL namespace of the parts joined with ``:``, as hex).

    The first parts say what kind of event it is (``escalation``; ``deskpilot``,
    ``attachment-extracted``), the rest what caused it (an event id, a correlation id, an
    idempotency key). Derived ids are kept in Redis (de-duplication markers, pending requests)
    and compared across replicas and versions, so a call site's parts must never change: a
    rolling upgrade would publish its events a second time under new ids.
    """
    if not parts:
        raise ValueError("derived_event_id needs at least one part")
    return uuid.uuid5(uuid.NAMESPACE_URL, ":".join(parts)).hex


def conversation_digest(conversation_id: str) -> str:
    """How a store names a conversation it must remember after its purge (a tombstone) or count
    without naming it: a digest of the id, the same in every service, from which the id cannot
    be read back."""
    return hashlib.sha256(f"deskpilot:conversation:{conversation_id}".encode()).hexdigest()[:32]
