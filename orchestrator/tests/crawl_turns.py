"""An orchestrator whose turns may wait on a crawl of the help site :data:`SEED`, wired to the
real models, a Chroma collection, Redis and a recorder in the crawler fleet's place (the fixtures
of ``conftest.py``), for the modules that test those turns."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from contracts.runtime_config import RuntimeConfigReader
from orchestrator.config import OrchestratorSettings
from orchestrator.crawl import CrawlWaits
from orchestrator.embedding import QueryEncoder
from orchestrator.intent import IntentClassifier
from orchestrator.memory import ConversationStore
from orchestrator.retrieval import HybridConfig, Retriever
from orchestrator.service import Orchestrator
from orchestrator.sites import SiteProfiles
from orchestrator.state import TurnStore
from orchestrator.tests.stand_ins import RecordingFleet
from orchestrator.turn import TurnDeps
from orchestrator.turn.deps import AuditTrail

SEED = "http://help.example/index.html"
"""The help site's seed every orchestrator made here is configured with."""


def make_orchestrator(
    encoder: QueryEncoder,
    intents: IntentClassifier,
    collection: Any,
    redis: aioredis.Redis,
    fleet: RecordingFleet,
    sites: SiteProfiles | None = None,
    audit: AuditTrail | None = None,
    runtime: RuntimeConfigReader | None = None,
    **settings: Any,
) -> Orchestrator:
    """An orchestrator over these stand-ins, with ``settings`` over the defaults (the seed
    :data:`SEED`, no similar cases) and, where given, the help sites' profiles, an audit trail
    and the admins' runtime configuration."""
    config = OrchestratorSettings(cases_max=0, **{"crawl_seed_urls": [SEED], **settings})
    deps = TurnDeps(
        retriever=Retriever(encoder, collection, HybridConfig(refresh_interval_s=3600)),
        intents=intents,
        turns=TurnStore(redis, 600),
        conversations=ConversationStore(redis, 600),
        fleet=fleet,
        waits=CrawlWaits(redis, lock_wait_s=5),
        sites=sites,
        runtime=runtime,
        **({"audit": audit} if audit is not None else {}),
    )
    return Orchestrator(deps, config)
