"""The escalation checkpoint: explicit requests and their near-misses, offer replies, ticket
status questions, and the decision with its reasons."""

from __future__ import annotations

import pytest

from contracts.events import EscalationReason
from orchestrator.escalation import (
    DEFAULT_ANGER_THRESHOLD,
    EscalationCheckpoint,
    EscalationPolicy,
    OfferReply,
    detect_human_request,
    detect_status_question,
    extract_ticket_key,
    read_offer_reply,
)
from orchestrator.sentiment import AngerScorer, Trajectory


@pytest.fixture(scope="module")
def checkpoint() -> EscalationCheckpoint:
    return EscalationCheckpoint(AngerScorer())


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # asking for a person, many ways
        ("I need a human", "person"),
        ("Could I please talk to an actual person about my laptop?", "person"),
        ("is it possible to speak with somebody from IT", "person"),
        ("put me through to the service desk", "person"),
        ("please pass me on to a technician", "person"),
        ("connect me with a live agent", "person"),
        ("get me a real agent", "person"),
        ("I'd rather deal with an IT tech, can I talk to one?", "person"),
        ("could somebody from support ring me back", "person"),
        ("how can I reach a real person?", "person"),
        ("Is there anyone human I could chat with?", "person"),
        ("are there any real people working there", "person"),
        ("I'm done chatting with a machine", "person"),
        ("no more talking to bots, please", "person"),
        ("Why can't I simply speak to someone?", "person"),
        ("you are not helping, let me speak to your supervisor", "person"),
        ("stop. I want a person now", "person"),
        ("representative please", "person"),
        ("Operator!", "person"),
        ("someone from the help desk please", "person"),
        ("I need assistance from a human", "person"),
        # typos in the key words
        ("can i tlak to a humna", "person"),
        ("give me a persn", "person"),
        # tickets
        ("create a ticket", "ticket"),
        ("please open a ticket for the broken docking station", "ticket"),
        ("Can you raise an incident? Outlook crashes on start", "ticket"),
        ("I would like to log a support request", "ticket"),
        ("file a new urgent ticket", "ticket"),
        ("put a ticket in for me", "ticket"),
        ("I want a ticket", "ticket"),
        ("new ticket pls", "ticket"),
        ("could you open a tikcet", "ticket"),
        ("ticket create now for monitor flicker", "ticket"),
        # escalations
        ("escalate", "escalate"),
        ("Please escalate this to second level", "escalate"),
        ("I need this escalated", "escalate"),
        ("can this be escalated?", "escalate"),
    ],
)
def test_explicit_requests(text: str, kind: str) -> None:
    request = detect_human_request(text)
    assert request is not None, text
    assert request.kind == kind
    assert request.reason


@pytest.mark.parametrize(
    "text",
    [
        # negations
        "I don't need a ticket",
        "no ticket needed, thanks",
        "please do not escalate, it is sorted",
        "don't create a ticket, I'll try again later",
        "I don't want to talk to anyone, just give me the steps",
        # how-to questions about a tool, advice, questions about the assistant
        "how do I create a ticket in Jira for my team's project?",
        "how do I assign an incident to a colleague in ServiceNow",
        "should I open a ticket for a slow laptop?",
        "do I need to raise a ticket to get a new mouse?",
        "am I talking to a human?",
        "are you a real person?",
        "Is this a bot?",
        # other senses of the words
        "the ticket printer is broken",
        "I need to print train tickets for the offsite",
        "my phone case is cracked",
        "the support agent software keeps crashing",
        "the antivirus agent needs an update",
        "connect me to the VPN",
        "the person at reception cannot log in",
        "Someone sent me a suspicious email",
        "I am a real person trying to reset my password",
        "the live chat widget on the intranet is broken",
        "the human resources portal does not load",
        "what does escalation mean in ITIL?",
        "the problem escalated quickly after the update",
        "it says contact your administrator",
        # reports about tickets and people in the past
        "I already opened a ticket yesterday",
        "I spoke to a technician last week and he fixed it",
        "What has happened with my open ticket?",
        "do I have any open incidents?",
        "my manager needs access to the shared drive",
        # no request at all
        "how do I reset my VPN password",
        "I need help with Outlook",
    ],
)
def test_near_misses_are_not_requests(text: str) -> None:
    assert detect_human_request(text) is None


@pytest.mark.parametrize(
    "text",
    [
        # what a product does: the verb's subject is a thing, not the user or a person
        "How can Dispatch start a Zoom call for an incident?",
        "Can Dispatch message the employee involved in a suspicious alert to check it was them?",
        "Does ServiceNow open an incident automatically when monitoring alerts?",
        "can the incident bot page the on-call engineer?",
        "Can Slack call the on-call engineer when a case opens",
        # how to reach someone with a tool, not the company's help
        "What slash command do I use to page the on-call engineer from the incident channel?",
        "How do I message the employee involved in an alert from Dispatch?",
        "how do I chat with a colleague in Teams",
        "What command do I use to message the incident commander?",
        "Where do employees go to report an incident?",
        "Can Dispatch page me when an incident opens?",
    ],
)
def test_questions_about_a_product_feature_are_not_requests(text: str) -> None:
    assert detect_human_request(text) is None


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("can I talk to someone", "person"),
        ("get me a human", "person"),
        ("I want a technician to call me", "person"),
        # the user, the assistant or a person as the subject still asks
        ("can someone from IT call me back", "person"),
        ("could the service desk call me", "person"),
        ("can you message a technician for me", "person"),
        ("can IT open a ticket for me", "ticket"),
        ("can Deskpilot open a ticket for me", "ticket"),
        ("Can the help desk start a ticket for this?", "ticket"),
        ("can the service desk open a ticket for my monitor", "ticket"),
        ("can the bot open a ticket for me", "ticket"),
        # a how-to question about reaching the company's help asks for it
        ("how do I reach the help desk", "person"),
        ("how can I reach a real employee", "person"),
        # the on-call engineer asked for, not asked about
        ("call the on-call engineer now", "person"),
        ("please page the on-call engineer", "person"),
        ("I want to talk to the on-call engineer", "person"),
        ("could you connect me to the on call engineer", "person"),
        # the help asked to reach or page the user, as people write it
        ("can the it department reach me please", "person"),
        ("can the service desk page me", "person"),
    ],
)
def test_requests_beside_product_questions_still_escalate(text: str, kind: str) -> None:
    request = detect_human_request(text)
    assert request is not None, text
    assert request.kind == kind


def test_redaction_placeholders_are_people_one_can_ask_for() -> None:
    assert detect_human_request("can I talk to <PERSON_1> from the network team?") is not None
    assert detect_human_request("my colleague <PERSON_1> cannot log in") is None


def test_a_later_clause_can_ask_after_a_negated_one() -> None:
    assert detect_human_request("I don't need the manual, I want a person") is not None
    assert detect_human_request("no, get me a human") is not None


@pytest.mark.parametrize(
    ("text", "reply"),
    [
        ("yes", OfferReply.ACCEPT),
        ("Yes please!", OfferReply.ACCEPT),
        ("please do", OfferReply.ACCEPT),
        ("sure, create it", OfferReply.ACCEPT),
        ("ok go ahead", OfferReply.ACCEPT),
        ("yep", OfferReply.ACCEPT),
        ("that would be great", OfferReply.ACCEPT),
        ("create a ticket", OfferReply.ACCEPT),
        ("no, I want to speak to a person", OfferReply.ACCEPT),
        ("hmm no, file it anyway", OfferReply.ACCEPT),
        ("never mind, do not create it", OfferReply.DECLINE),
        ("no", OfferReply.DECLINE),
        ("no thanks", OfferReply.DECLINE),
        ("nah, not now", OfferReply.DECLINE),
        ("never mind, it works now", OfferReply.DECLINE),
        ("don't bother", OfferReply.DECLINE),
        ("ok thanks, bye", OfferReply.DECLINE),
        ("I'll try again tomorrow", OfferReply.DECLINE),
        ("what is a ticket?", OfferReply.NEITHER),
        ("how long does that usually take?", OfferReply.NEITHER),
        ("my screen is flickering too", OfferReply.NEITHER),
        ("", OfferReply.NEITHER),
    ],
)
def test_offer_replies(text: str, reply: OfferReply) -> None:
    assert read_offer_reply(text) is reply


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("what's the status of my ticket", None),
        ("any update on IT-123?", "IT-123"),
        ("Has anyone looked at my ticket yet?", None),
        ("is my incident closed", None),
        ("how is my request for a new monitor going", None),
        ("When will HELP-4521 be resolved?", "HELP-4521"),
        ("status of ticket #4711", "4711"),
        ("did someone pick up incident INC0012345?", "INC0012345"),
        ("I raised a ticket on Monday, any news?", None),
        ("still waiting to hear back about my case", None),
        ("any updates on it-88", "IT-88"),
        ("SD-12?", "SD-12"),
        ("do I have any open tickets?", None),
    ],
)
def test_status_questions_and_their_keys(text: str, key: str | None) -> None:
    question = detect_status_question(text)
    assert question is not None, text
    assert question.ticket_key == key


@pytest.mark.parametrize(
    "text",
    [
        "what's the status of the VPN outage?",
        "I get status code 500 from the portal",
        "please open a ticket",
        "the Windows-10 upgrade failed",
        "my ticket printer jams",
        "how do I reset my password",
    ],
)
def test_not_status_questions(text: str) -> None:
    assert detect_status_question(text) is None


def test_ticket_keys_are_not_confused_with_versions_or_encodings() -> None:
    assert extract_ticket_key("the file is utf-8 and I run win-10") is None
    assert extract_ticket_key("see OPS-77 and IT-1") == "OPS-77"
    assert extract_ticket_key("case no. 88231") == "88231"
    assert extract_ticket_key("nothing here") is None


def test_a_request_escalates_as_user_request(checkpoint: EscalationCheckpoint) -> None:
    decision = checkpoint.check("can I speak to someone please")
    assert decision.escalate
    assert decision.reason is EscalationReason.USER_REQUEST
    assert decision.reasons == ["asked to talk to a person"]
    assert decision.reason_detail == "asked to talk to a person"


def test_anger_escalates_with_its_reasons(checkpoint: EscalationCheckpoint) -> None:
    decision = checkpoint.check("This is useless, the wifi STILL DOES NOT WORK!!!")
    assert decision.escalate
    assert decision.reason is EscalationReason.ANGER
    assert decision.request is None
    assert decision.anger.score >= DEFAULT_ANGER_THRESHOLD
    assert decision.reasons[0].startswith("anger ")
    assert "still not working" in decision.reasons
    assert "calls it useless or worse" in decision.reasons


def test_a_request_and_anger_keep_both_reasons(checkpoint: EscalationCheckpoint) -> None:
    decision = checkpoint.check("I'm fed up with this useless bot, get me a human!!")
    assert decision.reason is EscalationReason.USER_REQUEST
    assert decision.reasons[0] == "asked for a person"
    assert any(r.startswith("anger ") for r in decision.reasons)


def test_calm_and_mildly_negative_messages_do_not_escalate(
    checkpoint: EscalationCheckpoint,
) -> None:
    for text in ("this is a bit annoying", "the printer is broken", "I lost my password"):
        decision = checkpoint.check(text)
        assert not decision.escalate, text
        assert decision.reason is None
        assert decision.reasons == []


def test_the_trajectory_tips_an_unhappy_message_over(checkpoint: EscalationCheckpoint) -> None:
    text = "the scanner still fails"
    assert not checkpoint.check(text).escalate
    decision = checkpoint.check(text, Trajectory(failed_steps=2, clarify_cap_reached=True))
    assert decision.escalate
    assert decision.reason is EscalationReason.ANGER
    assert "2 checklist step(s) failed" in decision.reasons


def test_the_threshold_is_a_policy() -> None:
    scorer = AngerScorer()
    text = "useless, it still does not work"
    lenient = EscalationCheckpoint(scorer, EscalationPolicy(anger_threshold=0.95))
    strict = EscalationCheckpoint(scorer, EscalationPolicy(anger_threshold=0.3))
    assert not lenient.check(text).escalate
    assert strict.check(text).reason is EscalationReason.ANGER
