"""Reading the audit stream back for one conversation.

Every service appends its actions to ``audit.log`` (redacted at the source). The groups that
consume it (the gateway's analytics, the indexer's gap window) do not own its entries: a
conversation's history is read here by a plain range scan. The stream is not indexed by
conversation: a read walks it from the newest entry backwards, in pages, and stops after
``max_scan`` entries, so one request costs a bounded amount of Redis work however long the stream
is. Conversations older than that window are not found (the answer says so with
``complete=false``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis.asyncio as aioredis
from pydantic import ValidationError

from contracts.bus import RAW_FIELD, decode_entry
from contracts.events import AuditRecorded
from contracts.topics import Topic
from gateway.models import AuditEntryRead, AuditRead

log = logging.getLogger("deskpilot.gateway.audit")

PAGE = 500


class AuditReader:
    def __init__(self, client: aioredis.Redis, max_scan: int, stream: str = Topic.AUDIT) -> None:
        self.client = client
        self.max_scan = max_scan
        self.stream = stream

    async def conversation(self, conversation_id: str, limit: int) -> AuditRead:
        """The conversation's newest ``limit`` records among the newest ``max_scan`` entries,
        returned oldest first."""
        # An entry is decoded only when its bytes contain the id as a JSON string: most entries
        # belong to other conversations, and decoding them all would dominate the scan's cost.
        needle = json.dumps(conversation_id, ensure_ascii=False).encode()
        found: list[AuditEntryRead] = []
        scanned = 0
        undecodable = 0
        upper = "+"
        complete = False
        while scanned < self.max_scan and len(found) < limit:
            count = min(PAGE, self.max_scan - scanned)
            entries: Any = await self.client.xrevrange(self.stream, max=upper, min="-", count=count)
            for raw_id, fields in entries:
                scanned += 1
                if needle not in fields.get(RAW_FIELD, b""):
                    continue
                record = _decode(fields)
                if record is None:
                    undecodable += 1
                elif record.conversation_id == conversation_id:
                    found.append(AuditEntryRead.of(raw_id.decode(), record))
                    if len(found) == limit:
                        break
            if len(found) < limit and len(entries) < count:
                complete = True  # the oldest entry was read
                break
            # Exclusive range (Redis 6.2+): continue below the last entry read.
            upper = "(" + entries[-1][0].decode()
        if undecodable:
            log.warning("undecodable audit entries skipped", extra={"entries": undecodable})
        found.reverse()
        return AuditRead(
            conversation_id=conversation_id, records=found, scanned=scanned, complete=complete
        )


def _decode(fields: dict[bytes, bytes]) -> AuditRecorded | None:
    try:
        return decode_entry(fields, AuditRecorded)
    except (KeyError, ValueError, ValidationError):
        return None
