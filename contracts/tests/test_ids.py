"""Derived event ids: one rule for every service, and the ids it gives never change.

The pinned values were computed with the expressions each call site wrote by hand before the
rule moved here (``uuid5(NAMESPACE_URL, "<kind>:<cause>").hex``). Services keep derived ids in
Redis and replicas of two versions run side by side during an upgrade: a changed id would
publish the same event twice.
"""

from __future__ import annotations

import pytest

from contracts.events import ConversationPurged
from contracts.ids import conversation_digest, derived_event_id

EVENT = "e" * 32


@pytest.mark.parametrize(
    ("parts", "pinned"),
    [
        # orchestrator/turn/finish.py: f"resolved:{correlation_id}"
        (("resolved", "turn-1"), "2a94ca9971745fa1a0c61d773e72c60e"),
        # orchestrator/tickets.py: f"escalation:{correlation_id}"
        (("escalation", "turn-1"), "095c55cc581e566abee61bb995f63e89"),
        # orchestrator/automations/outcomes.py: f"automation:{action}:{request}:{outcome}"
        (("automation", "reset_password", "req-9", "failed"), "af062372aba2534cbffcfb8743bd8998"),
        # redactor/handlers.py: f"deskpilot:{kind}:{source_event_id}"
        (("deskpilot", "query", EVENT), "5712c0ab188a54599954966459f9f4e9"),
        # ticketing/incidents.py: "deskpilot:ticketing:" + ":".join(parts)
        (("deskpilot", "ticketing", "esc-1", "created"), "57872c1b9cf45071ae9b4b6d813ff13e"),
        # ocr/handlers.py: f"deskpilot:attachment-extracted:{received_event_id}"
        (("deskpilot", "attachment-extracted", EVENT), "1c5d349f59715760a067336056988859"),
        (("deskpilot", "attachment-error", EVENT), "d7ec6a8553805c2481bf6e7e405fcb4e"),
    ],
)
def test_derived_ids_are_the_ones_the_services_always_published(
    parts: tuple[str, ...], pinned: str
) -> None:
    assert derived_event_id(*parts) == pinned


def test_a_derived_id_is_a_plain_event_id_and_depends_on_every_part() -> None:
    first = derived_event_id("deskpilot", "query", EVENT)
    assert first == derived_event_id("deskpilot", "query", EVENT)
    assert len(first) == 32
    assert int(first, 16) >= 0
    others = {
        derived_event_id("deskpilot", "attachment", EVENT),
        derived_event_id("deskpilot", "query", "f" * 32),
        derived_event_id("query", EVENT),
    }
    assert first not in others
    assert len(others) == 3


def test_a_derived_id_needs_a_part() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        derived_event_id()


def test_a_purge_confirmation_keeps_its_id() -> None:
    purge = ConversationPurged(
        event_id=EVENT, correlation_id="t", conversation_id="c", requested_by="cli"
    )
    # f"purge-{service}:{purge.event_id}"
    assert purge.confirmation("gateway").event_id == "c6917d5b52275e4192b5ba46a540eb8e"


def test_a_conversations_digest_is_stable_distinct_and_does_not_hold_the_id() -> None:
    conversation = "4f1c2b9e8d7a6f5e4d3c2b1a09f8e7d6"
    digest = conversation_digest(conversation)
    assert digest == conversation_digest(conversation)  # the same in every service
    assert digest != conversation_digest(conversation[:-1] + "7")
    assert conversation not in digest
    assert len(digest) == 32
    assert set(digest) <= set("0123456789abcdef")
