"""What admins do on a running stack: ratings and their analytics, knowledge-base proposals, the
runtime configuration. The three modules share one stack (tests/admin/conftest.py) with the
settings all of them need, started for the package and stopped after its last test.

They run in this order (pytest's, by file name) in one xdist worker, and each leaves the stack as
the next expects: proposals asks questions nobody else asks; ratings re-ranks the VPN article
(nothing later asks for it); runtime_config restores what its first test changes.
"""

from uuid import uuid4

ADMIN = f"admin-{uuid4().hex}"
"""The admin token of the package's stack."""

STACK_ENV = {
    "DESKPILOT_ADMIN_TOKEN": ADMIN,
    # Ratings and proposals ask many questions from one client in seconds.
    "GATEWAY_RATE_LIMIT_ENABLED": "false",
    # Proposals: the indexer's gap rounds every second, three questions make a cluster.
    "INDEXER_GAPS_INTERVAL_S": "1",
    "INDEXER_GAPS_MIN_SIZE": "3",
    # Runtime configuration: a cap the admin page shows and the tests change.
    "ORCHESTRATOR_CLARIFY_CAP": "2",
}
"""The union of what the package's modules need."""
