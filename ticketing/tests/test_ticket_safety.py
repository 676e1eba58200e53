"""What reaches technicians is inert and opens nothing: user text in tickets, comments and labels.

Every text field of an escalation (and of an incident) is filled with wiki markup a user or an
outside source could write: headings, "Approved by IT Security" panels, colours, mentions,
macros, images, links, rules, emphasis, a ``{code}`` or ``{noformat}`` closed early, list and
table line starts. Filed through the Jira backend to the fake Jira, the markup part of what
arrives (everything outside ``{noformat}`` blocks, read the way Jira reads them) holds nothing
but Deskpilot's own plain lines; the planted text itself arrives whole, verbatim. Conversation
and turn ids never reach Jira, and labels come from fixed vocabularies and digests only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from contracts.events import (
    AttachmentSummary,
    Citation,
    EscalationRequested,
    Incident,
    IncidentReported,
    TicketChange,
    TranscriptLine,
    TriedStep,
)
from tests.support.fake_jira import FakeJira, live_markup, split_noformat
from ticketing.backends.base import (
    BackendRejected,
    TicketBackend,
    TicketDraft,
    conversation_reference,
    idempotency_label,
    request_reference,
)
from ticketing.backends.jira import JiraBackend
from ticketing.config import TicketingSettings
from ticketing.content import (
    HEADINGS,
    MAX_DESCRIPTION,
    build_ticket,
    describe,
    follow_up_comment,
    incident_comment,
    incident_resolved_comment,
    inert,
    section_text,
)
from ticketing.service import TicketingService
from ticketing.tests.conftest import jira_config, settings_for
from ticketing.tests.escalations import RecordingOutbox, escalation

MARKER = "EVIL"
PAYLOADS = [
    "h1. EVIL Approved by IT Security",
    "{panel:title=EVIL Approved by IT Security|bgColor=#e3fcef}Approved{panel}",
    "{color:green}EVIL approved{color}",
    "[~admin] EVIL please approve",
    "{html}<script>EVIL()</script>{html}",
    "{iframe:src=http://evil.example/EVIL}{iframe}",
    "!http://evil.example/EVIL.png!",
    "[reset your password|http://evil.example/EVIL]",
    "----",
    "*EVIL bold* _EVIL_ -EVIL- +EVIL+ ^EVIL^ ~EVIL~ ??EVIL??",
    "{code}EVIL{code}\nh2. EVIL closed the code block early",
    "{noformat}\nh1. EVIL closed your noformat block\n{noformat}",
    "{NOFORMAT}EVIL{NoFormat:title=x}",
    "# EVIL numbered",
    "* EVIL bullet",
    "|| EVIL || head ||",
    "| EVIL | cell |",
    "bq. EVIL quote",
    "(/) EVIL approved (x) (!) :)",
    "EVIL forced \\\\ break",
    "http://evil.example/EVIL bare link, www.evil.example",
    "[^EVIL.txt] [#EVIL] {anchor:EVIL} {{EVIL}} {quote}EVIL{quote}",
    "h3. What was tried\n* Disable the firewall EVIL — fixed",
]
MULTILINE = "\n".join(PAYLOADS)
KB_URL = "https://it.northwind.example/kb/vpn-keeps-disconnecting"
VOCABULARY = re.compile(
    r"^(deskpilot|dp-silent|dp-(idem|user|topic)-[0-9a-f]{20,32}|"
    r"connectivity|account|courses|documentation|peripheral_exchange|peripheral_question|other|"
    r"queue-[a-z0-9.-]+|incident-[a-z0-9.-]+)$"
)
"""Every label Deskpilot may set with the default routes."""


def hostile(n: int = 1, **overrides: Any) -> EscalationRequested:
    """An escalation with markup in every text a user or an outside source fills."""
    values: dict[str, Any] = {
        "user_id": f"[~admin] {MARKER}",
        "summary": MULTILINE,
        "problem": MULTILINE,
        "category": "{color:red}EVIL{color}",
        "queue": "[EVIL|http://evil.example]",
        "environment": {"os": MULTILINE, "application": MULTILINE, "h1. EVIL key": MULTILINE},
        "tried": [TriedStep(step=MULTILINE, outcome="failed")],
        "answers_given": [MULTILINE],
        "citations": [
            Citation(n=1, url=KB_URL, title=MULTILINE, snippet=""),
            Citation(n=2, url="http://evil.example/EVIL|x]", title="x", snippet=""),
            Citation(n=3, url="javascript:EVIL()", title="y", snippet=""),
        ],
        "attachments": [
            AttachmentSummary(
                id="a1",
                kind="log",
                bytes=10,
                filename="EVIL[x|http://evil.example].log",
                text_excerpt=MULTILINE,
                signatures=["{color:red}EVIL{color}"],
                first_error_at="!http://evil.example/EVIL.png!",
            )
        ],
        "reason_detail": MULTILINE,
        "sentiment": 0.5,
        "incident_id": "inc|EVIL",
        "transcript": [
            TranscriptLine(role="user", text=MULTILINE),
            TranscriptLine(role="assistant", text=MULTILINE),
        ],
    }
    values.update(overrides)
    return escalation(n, **values)


def assert_inert(text: str, *, headings: tuple[str, ...] = ()) -> None:
    assert live_markup(text, headings=headings, links=(KB_URL,)) == []
    markup, verbatim = split_noformat(text)
    assert MARKER not in markup
    assert MARKER in verbatim


# -- markup --------------------------------------------------------------------------------


def test_every_field_of_a_description_is_inert_and_kept_verbatim() -> None:
    event = hostile()
    description, whole = describe(event)
    assert whole is None
    assert_inert(description, headings=HEADINGS)
    _, verbatim = split_noformat(description)
    for payload in PAYLOADS[:9]:
        assert payload in verbatim  # shown as written
    assert f"* source 1: {KB_URL}" in description  # a plain knowledge-base link stays a link


def test_a_user_cannot_close_the_noformat_block() -> None:
    problem = "It fails.\n{noformat}\nh1. Approved by IT Security EVIL\nthanks"
    description, _ = describe(escalation(1, problem=problem))
    markup, verbatim = split_noformat(description)
    assert "Approved by IT Security" not in markup
    assert "h1. Approved by IT Security EVIL" in verbatim
    assert "{ noformat}" in verbatim  # the user's tag, shown and harmless


def test_only_deskpilots_headings_start_a_line_and_sections_read_back() -> None:
    event = hostile()
    description, _ = describe(event)
    assert re.findall(r"^h3\. (.+)$", description, re.MULTILINE) == list(HEADINGS)
    assert section_text(description, "Problem") == inert(MULTILINE)
    # A planted "— fixed" step never reads as a step of ours.
    tried = section_text(description, "What was tried").splitlines()
    assert [line for line in tried if re.match(r"^\* (.+?) — fixed$", line.strip())] == []


def test_a_description_stays_within_jiras_limit_and_balanced_whatever_it_holds() -> None:
    huge = (MULTILINE + "\n") * 300
    event = hostile(
        problem=huge,
        environment={f"k{n}": huge for n in range(100)},
        tried=[TriedStep(step=huge) for _ in range(50)],
        answers_given=[huge] * 50,
        reason_detail=huge,
        transcript=[TranscriptLine(role="user", text=huge) for _ in range(40)],
    )
    description, whole = describe(event)
    assert len(description) <= MAX_DESCRIPTION
    assert whole is not None
    assert_inert(description, headings=HEADINGS)


def test_comments_are_inert() -> None:
    assert_inert(follow_up_comment(hostile()))
    incident = Incident(
        id="inc|EVIL",
        title=MULTILINE,
        status="{color:red}EVIL{color}",
        affected_services=[MULTILINE],
        latest_update=MULTILINE,
        url="http://evil.example/EVIL|click]",
    )
    for comment in (
        incident_comment(incident, "[deskpilot-incident:inc|EVIL]"),
        incident_resolved_comment(incident, "[deskpilot-incident-resolved:inc|EVIL]"),
    ):
        assert_inert(comment)
        assert "[deskpilot-incident" in split_noformat(comment)[1]


# -- through the fake Jira -----------------------------------------------------------------


def jira_service(
    fake: FakeJira, redis: aioredis.Redis, tmp_path: Path, redis_url: str
) -> tuple[TicketingService, RecordingOutbox]:
    outbox = RecordingOutbox()
    settings = settings_for(tmp_path, redis_url, support_email="desk@northwind.example")
    return TicketingService(JiraBackend(jira_config(fake)), redis, settings, outbox), outbox


def sent(fake: FakeJira, method: str, pattern: str) -> list[Any]:
    return [request.json() for request in fake.calls(method, pattern)]


async def test_what_arrives_at_jira_is_inert(
    fake_jira: FakeJira, redis: aioredis.Redis, tmp_path: Path, redis_url: str
) -> None:
    service, _ = jira_service(fake_jira, redis, tmp_path, redis_url)
    event = hostile(1, category="connectivity", topic="connectivity:vpn")
    await service.escalate(event)
    [created] = sent(fake_jira, "POST", r"/issue$")
    fields = created["fields"]
    assert_inert(fields["description"], headings=HEADINGS)
    # The summary is plain text in Jira (never rendered): one bounded line.
    assert "\n" not in fields["summary"]
    assert len(fields["summary"]) <= 255
    assert all(VOCABULARY.match(value) for value in fields["labels"]), fields["labels"]

    # The same user on the same topic again: a follow-up comment, inert too.
    await service.escalate(hostile(2, category="connectivity", topic="connectivity:vpn"))
    [comment] = sent(fake_jira, "POST", r"/comment$")
    assert_inert(comment["body"])

    # An incident whose words are markup, matched to the ticket by its category.
    incident = Incident(
        id="inc-9",
        title=MULTILINE,
        status="investigating",
        latest_update=MULTILINE,
        category="connectivity",
        url="http://evil.example/EVIL|x]",
    )
    report = IncidentReported(correlation_id="inc-9", conversation_id="inc-9", incident=incident)
    assert await service.incidents.on_incident(report) == 1
    bodies = [body["body"] for body in sent(fake_jira, "POST", r"/comment$")]
    assert len(bodies) == 2
    assert_inert(bodies[1])
    assert bodies[1].startswith("Deskpilot linked this ticket to incident inc-9.")


# -- ids that would let a reader in --------------------------------------------------------


async def test_no_conversation_or_turn_id_reaches_jira(
    fake_jira: FakeJira, redis: aioredis.Redis, tmp_path: Path, redis_url: str
) -> None:
    conversation = f"c-{uuid4().hex}"
    turn = uuid4().hex
    event = escalation(
        1,
        conversation_id=conversation,
        correlation_id=turn,
        idempotency_key=f"turn:{turn}",
        user_id=f"anonymous:{conversation}",  # how requesters of anonymous users once looked
    )
    service, outbox = jira_service(fake_jira, redis, tmp_path, redis_url)
    await service.escalate(event)
    again = event.model_copy(update={"idempotency_key": f"turn:{uuid4().hex}"})
    await service.escalate(again)  # a follow-up comment
    assert len(fake_jira.calls("POST", r"/comment$")) == 1
    for request in fake_jira.requests:
        seen = f"{request.path} {json.dumps(request.query)} {request.body.decode(errors='replace')}"
        assert conversation not in seen, request.path
        assert turn not in seen, request.path
    [issue] = fake_jira.issues.values()
    assert conversation_reference(conversation) in issue.fields["description"]
    assert issue.properties["deskpilot"]["request"] == request_reference(f"turn:{turn}")
    # Technicians still reach the conversation: the record published for the admin read model
    # carries its id (the Jira issue does not).
    [created] = outbox.ticket_events(TicketChange.CREATED)
    assert created.record is not None
    assert created.record.conversation_id == conversation
    [commented] = outbox.ticket_events(TicketChange.COMMENTED)
    assert commented.record is not None
    assert commented.record.conversation_id == conversation
    # A redelivery is still recognised by the digest the issue keeps.
    backend = service.backend
    found = await backend.find_by_idempotency_key(f"turn:{turn}")
    assert found is not None
    assert found.key == issue.key


async def test_issues_filed_with_the_key_in_clear_are_still_found(fake_jira: FakeJira) -> None:
    backend = JiraBackend(jira_config(fake_jira))
    try:
        record = await backend.create(TicketDraft(summary="Old ticket", idempotency_key="old-1"))
        issue = fake_jira.issues[record.key]
        issue.properties["deskpilot"] = {"idempotency_key": "old-1", "conversation_id": "c-old"}
        found = await backend.find_by_idempotency_key("old-1")
        assert found is not None
        assert found.key == record.key
        assert found.conversation_id == "c-old"
    finally:
        await backend.close()


# -- labels ----------------------------------------------------------------------------------


def test_labels_never_carry_user_text() -> None:
    secret = "Hunter2-Spring-42"  # a password that looks like a label, missed by the redactor
    event = escalation(
        1,
        category="account",
        topic=f"account:{secret.lower()} logging password",
        problem=f"I tried logging in again with my password {secret} and it still fails",
        summary=f"Account: logging again password {secret.lower()} still fails",
    )
    labels = build_ticket(event, TicketingSettings().category_routes).draft.labels
    assert not [value for value in labels if "hunter2" in value or "spring" in value]
    assert all(VOCABULARY.match(value) for value in labels), labels
    assert "account" in labels


def test_a_category_outside_the_vocabulary_is_no_label() -> None:
    event = escalation(1, category="hunter2-spring-42", queue=None)
    draft = build_ticket(event, TicketingSettings().category_routes).draft
    assert not [value for value in draft.labels if "hunter2" in value]
    assert draft.category is None
    assert all(VOCABULARY.match(value) for value in draft.labels), draft.labels


def test_a_draft_refuses_labels_outside_the_label_alphabet() -> None:
    with pytest.raises(ValidationError):
        TicketDraft(summary="s", idempotency_key="k", labels=["my password is x"])
    with pytest.raises(ValidationError):
        TicketDraft(summary="s", idempotency_key="k", labels=["Hunter2"])


async def test_backends_refuse_added_labels_outside_the_label_alphabet(
    backend: TicketBackend,
) -> None:
    record = await backend.create(TicketDraft(summary="s", idempotency_key="k-1"))
    with pytest.raises(BackendRejected):
        await backend.update(record.key, add_labels=["pw Hunter2"])
    assert (await backend.get(record.key)).labels == ["deskpilot", idempotency_label("k-1")]
