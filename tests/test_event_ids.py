"""Every service's derived event ids stay what they were when each wrote its own ``uuid5``.

Each call site of :func:`contracts.ids.derived_event_id` is called here with known inputs and
must give the id its hand-written expression gave (pinned below, computed with the old code):
derived ids sit in Redis (de-duplication markers, pending requests) and are compared by replicas
of two versions during a rolling upgrade, so a changed id would publish an event twice.
"""

from __future__ import annotations

import hashlib
import uuid

from contracts.events import EscalationReason, Incident
from gateway.incidents import report_event_id
from ocr.handlers import error_event_id, extracted_event_id
from orchestrator.automations.outcomes import AuditEntry, audit_event
from orchestrator.memory import Conversation
from orchestrator.state import TurnState
from orchestrator.tickets import build_escalation
from redactor.handlers import derived_event_id as redactor_event_id
from redactor.handlers import query_event_id
from ticketing.incidents import ticket_event_id

EVENT = "e" * 32


def test_the_redactor_derives_the_ids_it_always_did() -> None:
    assert query_event_id(EVENT) == "5712c0ab188a54599954966459f9f4e9"
    assert redactor_event_id("attachment", EVENT) == "737a1eb2a9d75348b0138df5e790dc38"


def test_ocr_derives_the_ids_it_always_did() -> None:
    assert extracted_event_id(EVENT) == "1c5d349f59715760a067336056988859"
    assert error_event_id(EVENT) == "d7ec6a8553805c2481bf6e7e405fcb4e"


def test_ticketing_derives_the_ids_it_always_did() -> None:
    assert ticket_event_id("esc-1", "created") == "57872c1b9cf45071ae9b4b6d813ff13e"
    assert ticket_event_id("statuspage", "inc-7", "f00d") == "45d131ad85605855bbd1427289a47d07"


def test_the_orchestrator_derives_the_ids_it_always_did() -> None:
    turn = TurnState(
        correlation_id="turn-1",
        conversation_id="conv-1",
        user_id="u",
        reply_to="reply.gw",
        question="I need a human",
    )
    escalation = build_escalation(
        turn,
        Conversation(conversation_id="conv-1"),
        reason=EscalationReason.USER_REQUEST,
        reason_detail="asked for a person",
        queue=None,
        sentiment=None,
    )
    assert escalation.event_id == "095c55cc581e566abee61bb995f63e89"
    entry = AuditEntry(
        action="reset_password",
        outcome="done",
        reason="ok",
        user_id="u",
        request_id=None,
        http_status=200,
        attempts=1,
        destination_withheld=False,
    )
    # No request id: the turn's correlation id stands in.
    assert audit_event(entry, "turn-1", "conv-1").event_id == "78025c5d167a53d8a6d53257f2b141f7"
    entry["request_id"], entry["outcome"] = "req-9", "failed"
    assert audit_event(entry, "turn-1", "conv-1").event_id == "af062372aba2534cbffcfb8743bd8998"


def test_the_gateway_derives_the_incident_report_id_it_always_did() -> None:
    incident = Incident(id="inc-7", title="VPN down", status="investigating")
    # The id hashes the whole report, so it is pinned as the old expression, not as a value
    # (a new field in Incident changes it, as it always did).
    digest = hashlib.sha256(incident.model_dump_json().encode()).hexdigest()
    old = uuid.uuid5(uuid.NAMESPACE_URL, f"deskpilot-incident:{incident.id}:{digest}").hex
    assert report_event_id(incident) == old
