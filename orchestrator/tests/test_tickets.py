"""What a technician gets from an escalation, built from the conversation's memory alone."""

from __future__ import annotations

from contracts.events import (
    AttachmentSummary,
    EscalationReason,
    TicketChange,
    TicketEvent,
    TicketRef,
)
from orchestrator.memory import ChecklistState, Conversation, StepOutcome
from orchestrator.state import TurnState
from orchestrator.tickets import (
    build_escalation,
    requester,
    status_reply,
    summary_of,
    ticket_reply,
    topic_key,
)


def turn(question: str, user_id: str = "anonymous") -> TurnState:
    return TurnState(
        correlation_id="turn-1",
        conversation_id="conv-1",
        user_id=user_id,
        reply_to="reply.gw",
        question=question,
    )


def conversation() -> Conversation:
    memory = Conversation(conversation_id="conv-1", facts={"os": "windows"})
    memory.new_topic("My VPN keeps dropping with error 0x800704CF", "connectivity")
    memory.checklist = ChecklistState(
        url="https://it.northwind.example/kb/vpn-keeps-disconnecting",
        title="VPN keeps disconnecting",
        steps=["Restart the VPN client", "Switch to the wired network", "Reinstall the client"],
        current=2,
        tried=[
            StepOutcome(step="Restart the VPN client", outcome="failed"),
            StepOutcome(step="Switch to the wired network", outcome="failed"),
        ],
    )
    memory.remember(
        "My VPN keeps dropping with error 0x800704CF",
        "checklist",
        "https://it.northwind.example/kb/vpn-keeps-disconnecting",
        "Step 1: Restart the VPN client [1]",
    )
    memory.attachments.append(
        AttachmentSummary(id="a1", kind="log", bytes=10, signatures=["0x800704CF", "ETIMEDOUT"])
    )
    return memory


def test_the_escalation_carries_everything_a_technician_needs() -> None:
    event = build_escalation(
        turn("This still doesn't work. I need a human."),
        conversation(),
        reason=EscalationReason.USER_REQUEST,
        reason_detail="asked to talk to a person",
        queue="network-team",
        sentiment=0.31,
    )
    assert event.problem == "My VPN keeps dropping with error 0x800704CF"
    assert event.summary.startswith("Connectivity: ")
    assert "vpn" in event.summary.lower()
    assert event.summary != event.problem
    assert [t.step for t in event.tried] == [
        "Restart the VPN client",
        "Switch to the wired network",
    ]
    assert all(t.outcome == "failed" for t in event.tried)
    assert event.citations[0].url.endswith("/kb/vpn-keeps-disconnecting")
    assert event.environment["os"] == "windows"
    assert "0x800704CF" in event.environment["error_codes"]
    assert "ETIMEDOUT" in event.environment["error_codes"]
    assert event.transcript[-1].text == "This still doesn't work. I need a human."
    assert [line.role for line in event.transcript] == ["user", "assistant", "user"]
    assert event.attachments[0].id == "a1"
    assert event.queue == "network-team"
    assert event.idempotency_key == "turn:turn-1"
    # A redelivered turn builds the same event.
    again = build_escalation(
        turn("This still doesn't work. I need a human."),
        conversation(),
        reason=EscalationReason.USER_REQUEST,
        reason_detail="asked to talk to a person",
        queue="network-team",
        sentiment=0.31,
    )
    assert again.event_id == event.event_id


def test_anonymous_people_do_not_share_tickets() -> None:
    first = requester(turn("hi"))
    assert first == requester(turn("hello"))  # one conversation, one requester
    other = turn("hi")
    other.conversation_id = "conv-2"
    assert requester(other) != first
    assert requester(turn("hi", user_id="e1234")) == "e1234"


def test_an_anonymous_requester_does_not_name_the_conversation() -> None:
    # The requester is written into the ticket, which every ticket reader sees; the
    # conversation id would let a reader address the conversation.
    anonymous = requester(turn("hi"))
    assert anonymous.startswith("anonymous:")
    assert "conv-1" not in anonymous
    escalation = build_escalation(
        turn("I need a human"),
        conversation(),
        reason=EscalationReason.USER_REQUEST,
        reason_detail="asked for a person",
        queue=None,
        sentiment=None,
    )
    assert "conv-1" not in escalation.user_id


def test_one_problem_in_other_words_has_one_topic() -> None:
    assert topic_key("connectivity", "vpn keeps dropping") == topic_key(
        "connectivity", "Keeps dropping, the VPN!"
    )
    assert topic_key("connectivity", "vpn keeps dropping") != topic_key(
        "peripheral", "vpn keeps dropping"
    )


def test_a_summary_is_derived_not_copied() -> None:
    summary = summary_of("account", "How do I unlock my locked account?", {"error": "0x775"})
    assert summary == "Account: Unlock locked account (0x775)"


def ticket_event(change: TicketChange) -> TicketEvent:
    return TicketEvent(
        correlation_id="turn-1",
        conversation_id="conv-1",
        change=change,
        ticket=TicketRef(key="DP-7", url="http://tickets/DP-7", status="Open"),
    )


def test_the_user_is_told_the_key_or_what_happens_instead() -> None:
    created = ticket_reply(ticket_event(TicketChange.CREATED), "network", "desk@example.com")
    assert "DP-7" in created
    assert "http://tickets/DP-7" in created
    commented = ticket_reply(ticket_event(TicketChange.COMMENTED), None, "desk@example.com")
    assert "already have an open ticket" in commented
    deferred = ticket_reply(ticket_event(TicketChange.DEFERRED), None, "desk@example.com")
    assert "will follow" in deferred
    assert "desk@example.com" in deferred


def test_status_answers_list_the_tickets() -> None:
    event = ticket_event(TicketChange.STATUS)
    assert "DP-7: Open" in status_reply(event, None)
    empty = TicketEvent(correlation_id="t", conversation_id="c", change=TicketChange.STATUS)
    assert "IT-9" in status_reply(empty, "IT-9")
