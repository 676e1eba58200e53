"""Wires the orchestrator: loads the encoder and Chroma once, registers handlers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.runtime import Worker
from orchestrator import handlers
from orchestrator.config import OrchestratorSettings
from orchestrator.embedding import QueryEncoder
from orchestrator.retrieval import Retriever, open_collection
from orchestrator.service import Orchestrator
from orchestrator.state import TurnStore

SERVICE = "orchestrator"


def build_retriever(settings: OrchestratorSettings) -> Retriever:
    return Retriever(QueryEncoder(settings.torch_threads), open_collection(settings))


def create_worker(settings: OrchestratorSettings | None = None) -> Worker:
    settings = settings or OrchestratorSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        retriever = await asyncio.to_thread(build_retriever, settings)
        orchestrator = Orchestrator(retriever, TurnStore(bus.redis, settings.turn_ttl_s), settings)
        handlers.register(bus, orchestrator, settings.concurrency)

        async def chroma() -> bool:
            return await asyncio.to_thread(retriever.ping)

        yield {"chroma": chroma}

    return Worker(bus, resources)
