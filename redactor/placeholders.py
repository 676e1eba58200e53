"""Placeholders that stay the same across a conversation's messages.

Within one message the redactor numbers values itself (:meth:`Redactor.redact`). Across messages
the numbers live in Redis, one hash per conversation, ``deskpilot:redactor:placeholders:<id>``:

* ``n:<TYPE>``: how many values of that type the conversation has had;
* ``v:<hmac>``: the number given to one value, under a keyed SHA-256 HMAC of its type and
  normalised form (``REDACTOR_PLACEHOLDER_KEY``).

No value, and nothing a value can be recovered from without the key, is stored; the mapping from
placeholder back to value is never kept at all, since nothing needs it. Numbers are assigned in
one Lua script per message, so redactor replicas handling one conversation at once agree. The
hash expires ``REDACTOR_PLACEHOLDER_TTL_S`` after the conversation's last message.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import redis.asyncio as aioredis

KEY_PREFIX = "deskpilot:redactor:placeholders:"

# KEYS: the conversation's hash; ARGV: ttl_ms, then (type, hmac) pairs. Returns the numbers.
_ASSIGN = """
local numbers = {}
for i = 2, #ARGV, 2 do
    local field = 'v:' .. ARGV[i + 1]
    local number = redis.call('HGET', KEYS[1], field)
    if not number then
        number = redis.call('HINCRBY', KEYS[1], 'n:' .. ARGV[i], 1)
        redis.call('HSET', KEYS[1], field, number)
    end
    numbers[#numbers + 1] = tonumber(number)
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return numbers
"""


class ConversationPlaceholders:
    def __init__(self, client: aioredis.Redis, key: bytes, ttl_s: int) -> None:
        self.client = client
        self.key = key
        self.ttl_s = ttl_s
        self._assign = client.register_script(_ASSIGN)

    def digest(self, entity_type: str, identity: str) -> str:
        message = f"{entity_type}\x00{identity}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    async def numbers(
        self, conversation_id: str, values: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], int]:
        """The conversation's number for each ``(entity type, identity)``, new ones assigned."""
        unique = list(dict.fromkeys(values))
        if not unique:
            return {}
        args: list[str | int] = [self.ttl_s * 1000]
        for entity_type, identity in unique:
            args += [entity_type, self.digest(entity_type, identity)]
        result = await self._assign(keys=[KEY_PREFIX + conversation_id], args=args)
        return {value: int(number) for value, number in zip(unique, result, strict=True)}
