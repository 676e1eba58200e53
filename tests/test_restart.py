"""Data survives a restart of the whole embedded stack."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import redis

from tests.support.stack import ask, log_records, running_stack

pytestmark = pytest.mark.slow


def test_turns_feedback_and_knowledge_survive_a_restart(tmp_path: Path) -> None:
    with running_stack(tmp_path) as stack:
        first = ask(stack, "How do I reset my VPN password?").json()
        rated = httpx.post(
            f"{stack.url}/api/feedback", json={"turn_id": first["turn_id"], "score": 5}, timeout=30
        )
        assert rated.status_code == 201

    with running_stack(tmp_path) as stack:
        turn = httpx.get(f"{stack.url}/api/turns/{first['turn_id']}", timeout=30).json()
        assert turn["status"] == "done"
        assert turn["answer"]["answer"] == first["answer"]
        client = redis.Redis.from_url(stack.redis_url)
        assert client.exists(f"deskpilot:gateway:feedback:{first['turn_id']}")
        again = ask(stack, "How do I reset my VPN password?").json()
        assert again["citations"] == first["citations"]
        seeded = [
            r for r in log_records(stack, "indexer") if r["msg"] == "demo knowledge base ingested"
        ]
        assert seeded
        assert "(0 indexed, 32 unchanged" in seeded[-1]["report"]
