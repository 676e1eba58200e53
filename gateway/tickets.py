"""The admin API's read model of tickets, fed by the ticketing service's ``ticket.events``.

Every ticket event that carries the ticket as it is now (``record``) replaces the stored copy
unless the stored one is newer: the ticket's ``updated_at`` decides (then its ``created_at``, then
the event's time), and on a tie the later event wins. Replaying or redelivering events therefore
converges on the same state, in any order.

Keys: ``deskpilot:gateway:ticket:<key>`` is a hash (the record as JSON, its version, status, user
and last change); ``deskpilot:gateway:tickets`` and its ``:status:<status>`` and ``:user:<id>``
variants are sorted sets of ticket keys scored by version, for listings newest first. One Lua
script updates the hash and the indexes together, so a listing never sees half an update.
Tickets are kept until deleted by an operator: technicians own them, a conversation purge does
not remove them.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from contracts.events import TicketChange, TicketEvent, TicketRecord
from gateway.models import TicketRead

log = logging.getLogger("deskpilot.gateway.tickets")

NAMESPACE = "deskpilot:gateway"

TICKET_KEY_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")

# KEYS[1] the ticket's hash, KEYS[2] the index of all tickets.
# ARGV: ticket key, version, tie-breaker, record JSON, normalised status, user id ("" for none),
#       change, status index prefix, user index prefix.
# Returns 1 when stored, 0 when the stored copy is newer.
_STORE = """
local old = redis.call('HMGET', KEYS[1], 'version', 'tiebreak', 'status', 'user_id')
if old[1] then
  local version, new_version = tonumber(old[1]), tonumber(ARGV[2])
  if version > new_version or (version == new_version and tonumber(old[2]) > tonumber(ARGV[3]))
  then
    return 0
  end
  redis.call('ZREM', ARGV[8] .. old[3], ARGV[1])
  if old[4] ~= '' then redis.call('ZREM', ARGV[9] .. old[4], ARGV[1]) end
end
redis.call('HSET', KEYS[1], 'record', ARGV[4], 'version', ARGV[2], 'tiebreak', ARGV[3],
  'status', ARGV[5], 'user_id', ARGV[6], 'change', ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', ARGV[8] .. ARGV[5], ARGV[2], ARGV[1])
if ARGV[6] ~= '' then redis.call('ZADD', ARGV[9] .. ARGV[6], ARGV[2], ARGV[1]) end
return 1
"""


def normalise_status(status: str) -> str:
    """Statuses compare case- and space-insensitively ("In Progress" = "in progress")."""
    return " ".join(status.split()).casefold()


def _micros(moment: datetime) -> int:
    """Whole microseconds since the epoch: exact in a Lua number and a sorted-set score."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000)


class TicketReadModel:
    """Stores the newest copy of each ticket and lists them for the admin API."""

    def __init__(self, client: aioredis.Redis, namespace: str = NAMESPACE) -> None:
        self.client = client
        self.namespace = namespace
        self.ticket_prefix = f"{namespace}:ticket:"
        self.index = f"{namespace}:tickets"
        self.status_index = f"{self.index}:status:"
        self.user_index = f"{self.index}:user:"
        self._store = client.register_script(_STORE)

    async def apply(self, event: TicketEvent) -> bool:
        """Keep the event's ticket unless a newer copy is stored; False when nothing changed
        (no ticket in the event, or an older copy)."""
        if event.record is None:
            return False
        return await self.put(event.record, event.change, event.occurred_at)

    async def put(self, record: TicketRecord, change: TicketChange, seen_at: datetime) -> bool:
        version = _micros(record.updated_at or record.created_at or seen_at)
        stored = await self._store(
            keys=[self.ticket_prefix + record.key, self.index],
            args=[
                record.key,
                version,
                _micros(seen_at),
                record.model_dump_json(),
                normalise_status(record.status),
                record.user_id or "",
                change.value,
                self.status_index,
                self.user_index,
            ],
        )
        if not stored:
            log.info("older ticket copy ignored", extra={"change": change.value})
        return bool(stored)

    async def get(self, key: str) -> TicketRead | None:
        if not TICKET_KEY_PATTERN.match(key):
            return None
        record, change = await self.client.hmget(self.ticket_prefix + key, ["record", "change"])
        return _read(record, change)

    async def list(
        self, *, status: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> list[TicketRead]:
        """Tickets newest first (by ``updated_at``), filtered by status and user."""
        wanted_status = normalise_status(status) if status else None
        if user_id is not None:
            index = self.user_index + user_id
        elif wanted_status is not None:
            index = self.status_index + wanted_status
        else:
            index = self.index
        found: list[TicketRead] = []
        batch = max(limit, 50)
        start = 0
        while len(found) < limit:
            keys: Any = await self.client.zrevrange(index, start, start + batch - 1)
            if not keys:
                break
            start += len(keys)
            async with self.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hmget(self.ticket_prefix + key.decode(), ["record", "change"])
                rows: list[list[Any]] = await pipe.execute()
            for record, change in rows:
                ticket = _read(record, change)
                if ticket is None:
                    continue
                if wanted_status is not None and normalise_status(ticket.status) != wanted_status:
                    continue
                found.append(ticket)
        return found[:limit]


def _read(record: bytes | str | None, change: bytes | str | None) -> TicketRead | None:
    if record is None:
        return None
    if isinstance(change, bytes):
        change = change.decode()
    return TicketRead.model_validate({**json.loads(record), "last_change": change or None})
