"""Wires the orchestrator: loads the encoder, classifier and Chroma once, registers handlers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import redis

from contracts.bus import Bus
from contracts.heartbeat import Probe
from contracts.live import LiveReader
from contracts.periodic import every
from contracts.runtime import Worker
from contracts.runtime_config import RuntimeConfigReader, defaults_of, publish_defaults
from orchestrator import handlers
from orchestrator.attachments import AttachmentStore, ConversationKeys
from orchestrator.automations import AutomationRunner
from orchestrator.cases import CaseRetriever, open_cases_collection
from orchestrator.config import OrchestratorSettings
from orchestrator.crawl import CrawlWaits, sweep_due
from orchestrator.embedding import QueryEncoder, one_embedding_per_text, seed_encoder
from orchestrator.feedback import FeedbackBoosts, FeedbackLedger
from orchestrator.incidents import IncidentStore
from orchestrator.intent import IntentClassifier
from orchestrator.llm import build_provider
from orchestrator.memory import ConversationStore
from orchestrator.retrieval import Retriever, open_collection, use_one_blas_thread
from orchestrator.service import Orchestrator
from orchestrator.sites import SiteProfiles
from orchestrator.state import TurnStore
from orchestrator.turn import TurnDeps

SERVICE = "orchestrator"

logger = logging.getLogger(__name__)


def build_retriever(
    settings: OrchestratorSettings,
    encoder: QueryEncoder | None = None,
    feedback: FeedbackBoosts | None = None,
    live: LiveReader | None = None,
) -> Retriever:
    use_one_blas_thread()
    return Retriever(
        encoder or QueryEncoder(settings.torch_threads),
        open_collection(settings),
        feedback=feedback,
        live=live,
    )


def create_worker(settings: OrchestratorSettings | None = None) -> Worker:
    settings = settings or OrchestratorSettings()
    bus = Bus(settings, SERVICE)

    @asynccontextmanager
    async def resources(bus: Bus) -> AsyncIterator[dict[str, Probe]]:
        encoder = await asyncio.to_thread(QueryEncoder, settings.torch_threads)
        boosts = FeedbackBoosts(FeedbackLedger(bus.redis, settings.feedback_turn_ttl_s), settings)
        # Retrieval runs in worker threads: a synchronous client reads the published
        # generations of synced documents (contracts.live).
        live_client = redis.Redis.from_url(settings.redis_url, health_check_interval=10)
        retriever = await asyncio.to_thread(
            build_retriever, settings, encoder, boosts, LiveReader(live_client)
        )
        await boosts.refresh()
        intents = await asyncio.to_thread(
            IntentClassifier.from_settings,
            encoder,
            settings,
            seed_encoder(encoder, settings.embedding_cache_dir),
        )
        llm = build_provider(settings)
        automations = AutomationRunner.from_settings(settings)
        waits = CrawlWaits(bus.redis)
        attachments = AttachmentStore(bus.redis, settings.conversation_ttl_s)
        keys = ConversationKeys(bus.redis, max(settings.turn_ttl_s, settings.conversation_ttl_s))
        incidents = IncidentStore(
            bus.redis,
            cache_s=settings.incident_cache_s,
            resolved_keep_s=settings.incident_resolved_keep_s,
            stale_after_s=settings.incident_stale_after_s,
        )
        deps = TurnDeps(
            retriever=retriever,
            intents=intents,
            turns=TurnStore(bus.redis, settings.turn_ttl_s),
            conversations=ConversationStore(bus.redis, settings.conversation_ttl_s),
            llm=llm,
            cases=CaseRetriever(encoder, await asyncio.to_thread(open_cases_collection, settings)),
            fleet=handlers.BusFleet(bus),
            waits=waits,
            attachments=attachments,
            keys=keys,
            desk=handlers.BusTicketDesk(bus),
            audit=handlers.BusAudit(bus),
            incidents=incidents,
            automations=automations,
            runtime=RuntimeConfigReader(bus.redis),
            sites=SiteProfiles(bus.redis),
        )
        orchestrator = Orchestrator(deps, settings)
        # What the admin API shows as defaults; admins' overrides apply per turn.
        await publish_defaults(
            bus.redis, SERVICE, defaults_of(settings, SERVICE, queues=intents.file_queues)
        )
        replies = handlers.register(bus, orchestrator, settings.concurrency)
        handlers.register_attachments(bus, attachments)
        handlers.register_incidents(bus, incidents)
        handlers.register_search(bus, retriever, settings.concurrency)
        handlers.register_feedback(bus, boosts, deps.turns)

        async def answer_late_turn(correlation_id: str) -> None:
            with one_embedding_per_text():
                await orchestrator.on_deadline(correlation_id, replies)

        async def sweep() -> None:
            await sweep_due(waits, answer_late_turn)

        async def chroma() -> bool:
            return await asyncio.to_thread(retriever.ping)

        async def warm_snapshot() -> None:
            # Built now rather than by the first question, which would wait for it (tens of
            # seconds at 100,000 chunks); a question asked meanwhile waits only for the rest.
            try:
                await asyncio.to_thread(retriever.refresh, force=True)
            except Exception:
                logger.exception("building the retrieval snapshot at start failed")

        warming = asyncio.create_task(warm_snapshot(), name="retrieval-snapshot")

        try:
            # Turns whose crawl neither finished nor reported in time are answered anyway;
            # ratings other replicas counted reach this one's ranking.
            async with (
                every(1.0, sweep, name="crawl-deadline-sweep"),
                every(settings.feedback_refresh_s, boosts.refresh, name="feedback-refresh"),
            ):
                yield {"chroma": chroma}
        finally:
            await asyncio.wait({warming}, timeout=settings.graceful_timeout_s)
            await llm.aclose()
            await automations.aclose()
            live_client.close()

    return Worker(bus, resources)
