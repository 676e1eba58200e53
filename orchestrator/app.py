"""Wires the orchestrator: loads the encoder, classifier and Chroma once, registers handlers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.runtime import Worker
from orchestrator import handlers
from orchestrator.cases import CaseRetriever, open_cases_collection
from orchestrator.config import OrchestratorSettings
from orchestrator.embedding import QueryEncoder
from orchestrator.intent import IntentClassifier
from orchestrator.llm import build_provider
from orchestrator.memory import ConversationStore
from orchestrator.retrieval import Retriever, open_collection
from orchestrator.service import Orchestrator
from orchestrator.state import TurnStore

SERVICE = "orchestrator"


def build_retriever(
    settings: OrchestratorSettings, encoder: QueryEncoder | None = None
) -> Retriever:
    return Retriever(encoder or QueryEncoder(settings.torch_threads), open_collection(settings))


def create_worker(settings: OrchestratorSettings | None = None) -> Worker:
    settings = settings or OrchestratorSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        encoder = await asyncio.to_thread(QueryEncoder, settings.torch_threads)
        retriever = await asyncio.to_thread(build_retriever, settings, encoder)
        intents = await asyncio.to_thread(IntentClassifier.from_settings, encoder, settings)
        llm = build_provider(settings)
        orchestrator = Orchestrator(
            retriever,
            intents,
            TurnStore(bus.redis, settings.turn_ttl_s),
            ConversationStore(bus.redis, settings.conversation_ttl_s),
            settings,
            llm,
            CaseRetriever(encoder, await asyncio.to_thread(open_cases_collection, settings)),
        )
        handlers.register(bus, orchestrator, settings.concurrency)

        async def chroma() -> bool:
            return await asyncio.to_thread(retriever.ping)

        try:
            yield {"chroma": chroma}
        finally:
            await llm.aclose()

    return Worker(bus, resources)
