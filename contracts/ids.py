"""What a conversation id may look like, defined once for every entry point that accepts one.

The gateway issues conversation ids (uuid4 hex, :func:`contracts.events.new_id`), and callers
hand them back: the chat API and the WebSocket to continue a conversation, the admin API and
``deskpilot purge`` to purge one, the audit API to read its records. All of them accept exactly
the same ids, so an id that one of them takes is never refused by another.
"""

from __future__ import annotations

import re
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
