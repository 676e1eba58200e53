"""Knowledge sources as the admin API shows them: the indexer's catalogue, read-only, and sync
requests put on the bus for whichever indexer replica is free.

The gateway knows no source's settings or secrets; it learns the configured names from the
catalogue the indexer keeps (``contracts.sources``), so a sync of a name no indexer announced is
refused with 404 before anything is published.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from contracts.bus import Bus
from contracts.events import SourceSyncRequested, new_id
from contracts.sources import (
    SOURCES_CONVERSATION,
    SourceStatus,
    is_source_name,
    read_catalogue,
    read_source,
)
from contracts.topics import Topic
from gateway.errors import ApiError, ErrorCode


class SourceService:
    def __init__(self, bus: Bus, client: aioredis.Redis) -> None:
        self.bus = bus
        self.client = client

    async def list(self) -> list[SourceStatus]:
        return await read_catalogue(self.client)

    async def get(self, name: str) -> SourceStatus:
        status = await read_source(self.client, name) if is_source_name(name) else None
        if status is None:
            raise ApiError(ErrorCode.UNKNOWN_SOURCE, "no source of that name is configured")
        return status

    async def request_sync(self, name: str, requested_by: str) -> str:
        """Queue a sync of ``name``; returns the request's id (the correlation id of its
        ``source.sync.completed`` event and audit record)."""
        if (await self.get(name)).taken_out:
            raise ApiError(
                ErrorCode.UNKNOWN_SOURCE,
                "the source is no longer configured (INDEXER_SOURCES): its documents are hidden "
                "and will be removed; configure it again to sync it",
            )
        request_id = new_id()
        await self.bus.publish(
            Topic.SOURCE_SYNC_REQUESTED,
            SourceSyncRequested(
                correlation_id=request_id,
                conversation_id=SOURCES_CONVERSATION,
                source=name,
                requested_by=requested_by,
            ),
        )
        return request_id
