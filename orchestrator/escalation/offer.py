"""Replies to a ticket offer: how the user answered "shall I create a ticket?"
(:func:`read_offer_reply`)."""

from __future__ import annotations

import re
from enum import StrEnum

from orchestrator.escalation.human_request import detect_human_request, is_negated
from orchestrator.sentiment import clauses


class OfferReply(StrEnum):
    """How the user answered "shall I create a ticket?"."""

    ACCEPT = "accept"
    DECLINE = "decline"
    NEITHER = "neither"
    """Something else: a new question, or a reply that says neither yes nor no."""


_RESOLVED = re.compile(
    r"\b((it|that|this|everything) (works|is working|is fixed|is fine|is ok|is okay|is good|is "
    r"sorted|worked|fixed it|did it|solved it)( now)?|(fixed|solved|sorted|resolved) (it|now|"
    r"itself)|all (good|set|sorted|fine) now|problem solved|works now|working now|never mind|"
    r"nevermind|nvm|forget (it|about it)|i (figured|worked) it out|i will (try|manage|do it|"
    r"handle it|sort it|wait)|let me try|maybe later|not (now|yet|today|necessary|needed)|no "
    r"need|do not bother|that is (ok|okay|fine|alright) (thanks|thank you)|i am (ok|okay|fine|"
    r"good))\b"
)
_ACCEPT_ACTION = re.compile(
    r"\b(create|open|file|raise|log|submit|make|send|escalate|do) (it|one|that|the ticket|so)\b"
)
_DECLINE_START = re.compile(
    r"^(no|nope|nah|na|no thanks|no thank you|negative|not really|rather not|i would rather not|"
    r"do not|dont|please do not|cancel|stop|i do not (want|need) (it|one|that|a ticket)|"
    r"not at all|no way|absolutely not|definitely not|thanks but no)\b"
)
_ACCEPT_START = re.compile(
    r"^(yes|yeah|yea|yep|yup|ya|yah|yess+|y|sure|ok|okay|k|kk|alright|all right|fine|please|"
    r"please do|do it|go ahead|go for it|go on|absolutely|definitely|of course|certainly|"
    r"sounds good|sounds great|that would be (great|good|nice|helpful|perfect)|perfect|great|"
    r"good idea|why not|let us do (it|that|this)|i would like that|i would appreciate (it|that)|"
    r"correct|right|affirmative|indeed|yes please|make it so|create it|open it|file it|"
    r"raise it|log it|submit it|send it|escalate it|i guess|guess so|i suppose|ok then|"
    r"that works|works for me|sure thing|by all means|please create|please open)\b"
)


def read_offer_reply(text: str) -> OfferReply:
    """Read a reply to a ticket offer: "yes", "please do", "sure, create it" accept it.

    Declines: "no", "no thanks", "not now", "never mind, it works now", "don't". Anything else,
    a new question included, is neither; an explicit request for a person or a ticket in the
    reply ("no, I want a person") accepts.
    """
    if detect_human_request(text):
        return OfferReply.ACCEPT
    parts = clauses(text)
    if not parts:
        return OfferReply.NEITHER
    whole = " ".join(parts)
    # "no, open it anyway": an instruction to go ahead, wherever it stands.
    for clause in parts:
        action = _ACCEPT_ACTION.search(clause)
        if action and not is_negated(clause, action.start()):
            return OfferReply.ACCEPT
    if _RESOLVED.search(whole):
        return OfferReply.DECLINE
    first = parts[0]
    if _DECLINE_START.search(first):
        return OfferReply.DECLINE
    if _ACCEPT_START.search(first):
        # "ok thanks, bye" after an offer is a polite close, not a yes.
        if re.match(r"(ok|okay|k|alright|fine|thanks)\b", first) and re.search(
            r"\b(bye|goodbye|see you|later|cheers)\b", whole
        ):
            return OfferReply.DECLINE
        return OfferReply.ACCEPT
    return OfferReply.NEITHER
