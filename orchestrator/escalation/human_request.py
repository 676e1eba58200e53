"""Requests for a person: the user asks for a technician, a ticket or an escalation, in any
of the usual phrasings, read clause by clause with negation (:func:`detect_human_request`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.escalation.status import detect_status_question
from orchestrator.sentiment import clauses, word_set

# ---------------------------------------------------------------------------------------------
# Vocabulary

# Words that name a person who could help (as opposed to the assistant). "Agent" is also
# software (an antivirus agent), so it counts bare or after a service word only.
_PERSON = (
    r"(?:humans?|human beings?|person|people|representatives?|reps?|technicians?|"
    r"techs?|engineers?|specialists?|operators?|someone|somebody|staff|employees?|"
    r"colleagues?|managers?|supervisors?|administrators?|admins?|experts?|consultants?|"
    r"live chat|being)"
)
_AGENT = r"(?:(?:live|real|human|actual|support|service|customer|help ?desk|it)\s+)?agents?"
# Teams and desks one contacts.
_DESK = (
    r"(?:(?:it |tech |technical |customer |service |support |help ?desk |helpdesk )"
    r"(?:support|service|services|care|desk|team|department|dept|staff|people|crew)|"
    r"help ?desk|helpdesk|service ?desk|support|your team|the team|your staff|"
    r"it department|it dept|customer (?:service|care|support))"
)
# What makes "someone" or "an agent" clearly a person: "a real agent", "someone real".
_QUALIFIER = r"(?:real|live|actual|proper|human|genuine|flesh and blood)"
_DET = r"(?:(?:a|an|the|some|one|any|your|a real|another|other|different)\s+)?"
# Up to two modifier words before the noun ("a real acme employee", "a network engineer"), never
# words that end a phrase ("kind regards engineer" in a signature is no request).
_MODS = (
    r"(?:(?!(?:and|or|but|by|for|because|kind|regards|best|thanks|thank|you|please|with|from|"
    r"to|in|on|of|at|if|when|is|are|was|has|have|the|a|an|me|my|it)\b)[a-z0-9]+\s+){0,2}?"
)
# Help desks named the way error messages do ("contact your administrator") are quoted, not
# asked for: a user says "my admin", not "your admin".
_QUOTED_CONTACT = re.compile(
    r"\b(contact|call|reach|ask|see) your (system |network |it |local |domain )?(administrator|"
    r"admin|it department|help ?desk|support|it support|it team)s?\b"
)
_CONTACT_VERB = (
    r"(?:talk|talking|speak|speaking|chat|chatting|communicate|converse|discuss this|"
    r"get in touch|be in touch|get hold|reach out)"
)
_BOT = (
    r"(?:bots?|chat ?bots?|robots?|machines?|computers?|programs?|ai|automated \w+|you|this thing)"
)
_TICKET = (
    r"(?:tickets?|incidents?|cases?|support requests?|service requests?|it requests?|"
    r"help ?desk requests?|trouble tickets?)"
)
# "my open tickets", "any open incidents": "open" the adjective, not the verb.
_ADJECTIVE_BEFORE = re.compile(
    r"\b(my|any|the|our|all|your|his|her|their|still|currently|those|these|other|many|no|"
    r"an|a|already|recently|previously)\s*$"
)
# Words that may stand between "open" and "ticket": "open a new urgent support ticket".
_TICKET_ADJ = (
    r"(?:new|urgent|high|low|medium|priority|high priority|support|it|help ?desk|helpdesk|"
    r"service|quick|separate|formal|proper|official|corresponding|installation|critical|"
    r"p[1-4]|sev[1-4]|major|minor|jira|snow)"
)
_CREATE = r"(?:open|create|raise|file|log|submit|make|start|lodge|place|generate|register|write up)"
_NEGATION = re.compile(
    r"\b(not|never|no need|no longer|without|nobody|neither|nor|rather not|instead of|"
    r"no more|stop|quit|do not want|none)\b"
)
# Asked in frustration rather than negating: "why can't I talk to a person?"
_RHETORICAL = re.compile(r"\b(why (can|could|will|would|do|does|is|are) not|(can|could) not i)\b")
# "no" negates when it heads the noun phrase ("no ticket", "no need"), not as an interjection.
_NO_HEAD = re.compile(r"\bno (need|ticket|tickets|human|person|one|escalation|agent|thanks)\b")

# Other senses of "ticket" and "case".
_OTHER_TICKET = re.compile(
    r"\b(parking|speeding|train|bus|plane|flight|airline|concert|movie|cinema|theater|theatre|"
    r"show|game|match|lottery|raffle|event|festival|museum|ferry|boarding|season|lift|golf|"
    r"conference|travel|meal|lunch|printer|machine|dispenser|booth|office)\b"
)
_OTHER_CASE = re.compile(
    r"\b(phone|laptop|pc|computer|pencil|test|use|edge|upper|lower|camel|worst|best|base|"
    r"court|legal|special|brief|carrying|tablet|ipad|protective|display|server)\s+cases?\b|"
    r"\bcases? of\b|\bmake (a|the|my|our) case\b|\bin (that|this|any|which|case)\b"
)
# A how-to question about a ticketing tool or someone else's ticket, not a request for one.
_HOW_TO = re.compile(
    r"\b(how (do|can|should|would|does|could|to)|how is a|steps to|way to|where (do|can) (i|we)|"
    r"what is the (process|procedure|best way)|instructions|guide|tutorial|explain how|"
    r"teach me|show me how)\b"
)
_TOOL_CONTEXT = re.compile(
    r"\b(jira|servicenow|service now|zendesk|freshdesk|freshservice|github|gitlab|bitbucket|"
    r"trello|asana|monday|clickup|redmine|bugzilla|youtrack|linear|azure devops|board|"
    r"project|projects|sprint|backlog|epic|workflow|template|api|script|python|dashboard|"
    r"field|fields|for (my|our|the|a) (team|customers?|clients?|users?|colleagues?|staff)|"
    r"for (others|someone else|somebody else|another user)|on behalf)\b"
)
_ADVICE = re.compile(
    r"\b(should i|should we|do i (need|have) to|do we (need|have) to|is it (worth|necessary|"
    r"better|needed)|when (should|do) (i|we)|would it help to|is there a need to|must i)\b"
)
# "Am I talking to a human?", "are you a real person?": a question about the assistant.
_IDENTITY = re.compile(
    r"\b(are you|r you|are u|am i (talking|speaking|chatting|writing)( to| with)?|is this|"
    r"is that|is it|are these|who am i (talking|speaking|chatting)|you are|"
    r"you a)\s+(a |an |really |actually |even |just )*(real |live |actual )?"
    r"(human|person|bot|robot|machine|ai|people|real|live agent)\b"
)

# ---------------------------------------------------------------------------------------------
# Request patterns, each a (reason, pattern) pair tried on every clause.

_PERSON_NP = rf"{_DET}(?:(?:{_QUALIFIER}\s+)?{_MODS}(?:{_PERSON}|{_DESK})|{_AGENT})\b"
# Directly named, no modifiers: after verbs with other senses ("call", "message", "reach").
_PERSON_DIRECT = rf"{_DET}(?:{_QUALIFIER}\s+|oncall\s+)?(?:{_PERSON}|{_DESK}|{_AGENT})\b"
_REQUEST_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (kind, reason, re.compile(pattern))
    for kind, reason, pattern in (
        # "can I speak to an agent", "talk to someone", "how do I reach the help desk"
        (
            "person",
            "asked to talk to a person",
            rf"\b{_CONTACT_VERB}\s+(?:to|with|w)\s+{_PERSON_NP}",
        ),
        (
            "person",
            "asked to contact the help desk",
            rf"\b(?:contact|call|phone|ring|email|e-mail|reach|ping|message|page)\s+{_PERSON_DIRECT}",
        ),
        # "I want to talk to the founders", "could I speak with your manager"
        (
            "person",
            "asked to talk to someone",
            r"\b(?:i (?:want|would like|need|wish|would love|would prefer|prefer|demand|would "
            r"rather)|can i|could i|may i|let me|i am trying) (?:to )?(?:just )?"
            r"(?:talk|speak|chat|converse) (?:to|with) (?!(?:a |the |this |an )?"
            r"(?:bot|robot|machine|computer|ai|chatbot|you)\b)(?:<\w+>|\w+)",
        ),
        # "connect me to a person", "transfer me to your team", "hand this over to a human"
        (
            "person",
            "asked to be transferred to a person",
            rf"\b(?:connect|transfer|forward|put|pass|route|redirect|send|hand|switch|escalate|"
            rf"bring|take)\s+(?:me|us|this|it|the (?:chat|conversation|call|case)|a "
            rf"conversation|my (?:chat|conversation|case|issue|problem|request))\s+"
            rf"(?:on |over |through |across |back )?(?:to|with)\s+{_PERSON_NP}",
        ),
        (
            "person",
            "asked to be put in touch with a person",
            rf"\b(?:put|get|bring|set) (?:me|us) (?:in touch|in contact|through|up) with\s+"
            rf"{_PERSON_NP}",
        ),
        # "I want a human", "give me a real agent", "can you get a human to assist me"
        (
            "person",
            "asked for a person",
            rf"\b(?:i (?:want|would like|need|demand|request|prefer|would prefer|would rather "
            rf"have|require)|give me|get me|find me|send me|gimme|can i (?:get|have)|could i "
            rf"(?:get|have)|may i (?:get|have)|(?:can|could|would) you (?:get|find|send|bring))"
            rf"\s+(?:(?:to (?:have|get|see) )?{_DET}{_QUALIFIER}\s+{_MODS}(?:{_PERSON}|{_AGENT})\b|"
            rf"{_DET}(?:{_QUALIFIER}\s+)?(?:humans?|person|people|representatives?|technicians?|"
            rf"agents?|operators?|supervisors?|managers?|specialists?)\b|"
            rf"someone (?:to|who|that|real|from|at|in)\b|somebody (?:to|who|that|real|from|at)\b)",
        ),
        # "could someone from the service desk call me back"
        (
            "person",
            "asked a person to contact them",
            rf"\b(?:can|could|would|will|please|have|get|may)\s+{_PERSON_DIRECT}\s+"
            rf"(?:(?:from|at|in|on)\s+{_DET}(?:[a-z0-9]+\s+){{1,3}}?)?(?:please\s+)?(?:call|"
            rf"contact|ring|phone|email|e-mail|get back to|reach out to|come (?:over )?to|come "
            rf"and see|visit|message|text|reach|page)\s+(?:me|us)\b",
        ),
        # "I need help from a real human", "assistance from a person"
        (
            "person",
            "asked for help from a person",
            rf"\b(?:help|assistance|support|answer|advice)\s+(?:from|by|of)\s+{_PERSON_NP}",
        ),
        # "a real person", "live agent", "someone real": only people are called that.
        (
            "person",
            "asked for a real person",
            r"\b(?:real|live|actual|human|genuine) (?:humans?|person|people|beings?|agents?|"
            r"representatives?|someone|somebody|support|help|technicians?|employees?|"
            r"operators?|staff)\b|\b(?:someone|somebody) real\b",
        ),
        # "is there a human I can talk to", "do you have human support", "are there humans..."
        (
            "person",
            "asked whether a person is available",
            rf"\b(?:is there|are there|do you (?:guys )?have|have you got|any)\s+(?:any |also |a |"
            rf"an |some |even )*(?:{_QUALIFIER}\s+)?(?:humans?|people|person|representatives?|"
            rf"technicians?|human support|live (?:agents?|chat|support)|(?:someone|somebody|"
            rf"anyone|anybody) (?:human|real|live|i (?:can|could)|who|to (?:talk|speak|chat)))\b",
        ),
        # "I don't want to talk to a bot", "talking to a machine is stupid"
        (
            "person",
            "does not want to talk to a bot",
            rf"\b(?:not|never|no longer|no more|stop|quit|hate|tired of|sick of|fed up with|"
            rf"done with|done|finished|enough of|enough with)\s+(?:\w+\s+){{0,3}}?(?:talk|"
            rf"talking|speak|speaking|chat|chatting|deal|dealing|communicate|communicating|"
            rf"texting)\s+(?:to|with)\s+(?:a |an |the |this |some |your )?{_BOT}\b",
        ),
        (
            "person",
            "does not want to talk to a bot",
            rf"\b(?:talking|speaking|chatting|dealing)\s+(?:to|with)\s+(?:a |an |the |this |"
            rf"some |your )?{_BOT}\s+is\s+(?:\w+\s+)?(?:stupid|useless|pointless|annoying|"
            rf"frustrating|a waste|dumb|hopeless|not helping|ridiculous|silly|no use)",
        ),
        # "handover to a person", "hand off to support"
        ("person", "asked for a handoff", rf"\b(?:handoff|handover) (?:to|with) {_PERSON_NP}"),
        # "open a ticket", "can you raise an incident for me", "log a support request"
        (
            "ticket",
            "asked for a ticket",
            rf"\b{_CREATE}\s+(?:me |us |up )?(?:a |an |one |new |a new |another |the |my |two |"
            rf"three |some |separate |corresponding )?(?:{_TICKET_ADJ}\s+){{0,2}}{_TICKET}\b"
            rf"(?!\s+(?:printer|machine|number|system|queue|template|type|status|field|tool|"
            rf"portal|page))",
        ),
        (
            "ticket",
            "asked for a ticket",
            rf"\b(?:i (?:want|would like|need|require|request)|can i (?:get|have)|could i "
            rf"(?:get|have)|give me|get me)\s+(?:a |an |one |new |a new |another )"
            rf"(?:(?:support|it|help ?desk|helpdesk|service|urgent|new|high priority|quick)\s+)?"
            rf"{_TICKET}\b",
        ),
        # "open an issue", not "log issue" (an issue with logs) or "open issue" (one not closed)
        (
            "ticket",
            "asked for a ticket",
            rf"\b{_CREATE}\s+(?:me |us )?(?:an|a new|another|a)\s+(?:{_TICKET_ADJ}\s+){{0,2}}"
            rf"issues?\b",
        ),
        (
            "ticket",
            "asked for a ticket",
            rf"\bput (?:in )?(?:a |an )?{_TICKET}(?: in)?\b",
        ),
        # "escalate this", "please escalate", "I want an escalation"
        (
            "escalate",
            "asked to escalate",
            r"(?:^|\b(?:please|can you|could you|would you|want you to|need you to|want to|"
            r"need to|would like to|would like you to|let us|i|just|so|then)\s+)escalate\b"
            r"|\bescalate (?:this|it|that|my|the|to|please|now|immediately|asap)\b"
            r"|\b(?:an|for|request|want|need|demand) (?:an )?escalation\b"
            r"|\bescalation (?:please|now|asap|needed|required)\b"
            r"|\b(?:be|get|gets|getting|been) escalated\b(?! quickly)"
            r"|\bescalated (?:please|asap|now|immediately)\b"
            r"|\b(?:want|need|like|get|have) (?:this|it|that|my \w+|the \w+) escalated\b",
        ),
    )
)

# A clause that is nothing but a named helper: "real agent please", "service agent",
# "someone from customer care", "human please", "new ticket", "ticket pls".
_FILLER = word_set(
    "please now just right away asap thanks thank you ok okay hey hi hello so yes yeah i "
    "need want a an the some me to get give can could with from at in of for my one "
    "immediately quickly urgently already"
)
_BARE_PERSON = word_set(
    "human humans person agent agents representative rep technician tech someone somebody "
    "operator staff employee supervisor manager handoff handover escalation escalate "
    "helpdesk desk service support care customer live real actual proper being team"
)
_BARE_STRONG = word_set(
    "human humans person agent agents representative rep technician operator supervisor "
    "manager handoff handover escalation escalate helpdesk desk customer"
)
_BARE_TICKET = word_set(
    "ticket tickets incident incidents case new open create raise file log support it "
    "urgent helpdesk request"
)

# Typo tolerance: unknown words within one edit of a key noun are read as that noun.
_KEY_WORDS = (
    "human",
    "humans",
    "person",
    "people",
    "agent",
    "ticket",
    "tickets",
    "incident",
    "incidents",
    "technician",
    "representative",
    "someone",
    "somebody",
    "escalate",
    "escalation",
    "support",
    "speak",
    "please",
    "status",
    "helpdesk",
)
_SHORT_KEY_WORDS = ("talk", "chat", "want", "need")
# Real words one edit away from a key word, left as they are.
_KNOWN = frozenset(_KEY_WORDS) | word_set(
    "escalated escalates escalating persons personal agents agenda urgent humane tickle ticked "
    "someones supports supported speaks special pleased pleasing statue states stats statuses "
    "incidence humor humour perform passion"
)


def _within_one_edit(word: str, target: str) -> bool:
    """Damerau-Levenshtein distance of at most one (one insertion, deletion, change or swap)."""
    if abs(len(word) - len(target)) > 1 or word == target:
        return word == target
    if len(word) == len(target):
        diffs = [i for i, (a, b) in enumerate(zip(word, target, strict=True)) if a != b]
        if len(diffs) == 1:
            return True
        return (
            len(diffs) == 2
            and diffs[1] == diffs[0] + 1
            and word[diffs[0]] == target[diffs[1]]
            and word[diffs[1]] == target[diffs[0]]
        )
    shorter, longer = (word, target) if len(word) < len(target) else (target, word)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def _swapped(word: str, target: str) -> bool:
    """Two neighbouring letters swapped ("tlak" for "talk")."""
    diffs = [i for i, (a, b) in enumerate(zip(word, target, strict=True)) if a != b]
    return len(diffs) == 2 and diffs[1] == diffs[0] + 1 and word[diffs[0]] == target[diffs[1]]


def _correct(word: str) -> str:
    if len(word) == 4 and word not in _SHORT_KEY_WORDS:
        # Short words: only a swap, which never turns one real word into another here.
        return next(
            (
                key
                for key in _SHORT_KEY_WORDS
                if sorted(key) == sorted(word) and _swapped(word, key)
            ),
            word,
        )
    if len(word) < 5 or word in _KNOWN:
        return word
    for key in _KEY_WORDS:
        if word[0] == key[0] and _within_one_edit(word, key):
            return key
    return word


_PHRASES = (
    (re.compile(r"\bhuman resources\b"), "hr"),
    # "the on-call engineer" names a role; its "call" is no verb.
    (re.compile(r"\bon-call\b"), "oncall"),
    (re.compile(r"\b(the|our|my|an|their|your) on call\b"), r"\1 oncall"),
    (re.compile(r"\bhand (off|over)\b"), r"hand\1"),
    (re.compile(r"\bhelp desk\b"), "helpdesk"),
)


def _corrected_clauses(text: str) -> list[str]:
    """The clauses with typos in key nouns corrected and set phrases made single words."""
    corrected = []
    for clause in clauses(text):
        words = " ".join(_correct(word) for word in clause.split())
        for pattern, replacement in _PHRASES:
            words = pattern.sub(replacement, words)
        corrected.append(words)
    return corrected


def is_negated(clause: str, start: int) -> bool:
    """A negation stands before position ``start`` of the clause (and is not rhetorical)."""
    before = clause[:start]
    if _RHETORICAL.search(before):
        return False
    if _NO_HEAD.search(clause):
        return True
    # "I don't know how to reach a person" still wants one.
    if re.search(r"\bnot (know|sure) (how|where|who)\b", before):
        return False
    return bool(_NEGATION.search(before))


# A copula before the phrase describes someone ("I am a real person"), it asks for nobody.
_DESCRIBING = re.compile(r"\b(i am|we are|he is|she is|they are|is|was|am|are)\s+(a |an )?$")


# Who does what a request asks ("can Dispatch message the employee", "how can the tool start a
# call for an incident"): a question whose verb has a thing for its subject asks what a product
# can do; only the user, the assistant or a person ("can someone call me") ask for help.
_SUBJECT_BEFORE = re.compile(
    r"^(?:(?:how|why|when|where|what|so|and|then|also|but|hi|hello|hey)\s+)?(?:can|could|does|"
    r"do|did|will|would|should|may|might|is it possible for)\s+"
    r"(?P<subject>(?:[a-z0-9<>_-]+\s+){1,4}?)(?:to\s+)?$"
)
# Words between the modal and its verb that are no subject ("why can not i simply speak").
_NOT_SUBJECT = word_set(
    "not also automatically ever still even just simply really please actually maybe be able"
)
# A modal followed by a verb has no subject of its own there ("i would like to log a request").
_VERB_AFTER_MODAL = word_set("like love prefer rather want need have get go be try")
_ASKING_WORD = re.compile(
    rf"\b(?:i|we|you|ya|yall|someone|somebody|anyone|anybody|one|it|they|he|she|this|that|"
    rf"deskpilot|<\w+>|{_PERSON}|{_DESK}|{_AGENT})\b"
)
# The assistant named as the subject ("can the bot open a ticket"), not a product's own bot.
_ASSISTANT_SUBJECT = re.compile(rf"(?:the |this |a |an |you )?(?:{_BOT}|assistant)")
# A how-to question ("how do I message a colleague in Teams", "what command do I use to page the
# on-call engineer") asks how to reach someone with a tool; only reaching the company's help
# ("how do I reach the help desk", "how can I talk to a person") asks for that help.
_HOW_TO_USE = re.compile(
    rf"{_HOW_TO.pattern}|\b(?:what|which) (?:[a-z0-9-]+ ){{0,3}}(?:do|can|should) (?:i|we) "
    r"use\b|\bis there (?:a way|an option|a setting|a feature)\b"
)
_THIRD_PARTY = re.compile(
    r"\b(?:employees?|colleagues?|managers?|engineers?|people|staff|being|users?|customers?|"
    r"participants?|responders?|members?|reporters?|commanders?)\b"
)
_HELPER = re.compile(
    rf"\b(?:humans?|human beings?|person|representatives?|reps?|technicians?|techs?|"
    rf"specialists?|operators?|someone|somebody|supervisors?|administrators?|admins?|experts?|"
    rf"consultants?|live chat|<\w+>|{_QUALIFIER}|{_DESK}|{_AGENT})\b"
)


def _asked_of_a_thing(before: str) -> bool:
    """The verb after ``before`` has a thing for its subject ("can dispatch ", "how does the
    tool "): the clause asks what the thing does."""
    found = _SUBJECT_BEFORE.search(before)
    if found is None:
        return False
    words = [w for w in found.group("subject").split() if w not in _NOT_SUBJECT]
    if not words or words[0] in _VERB_AFTER_MODAL:
        return False
    if _ASSISTANT_SUBJECT.fullmatch(" ".join(words)):
        return False
    return not _ASKING_WORD.search(" ".join(words))


def _reaching_a_third_party(phrase: str, whole: str) -> bool:
    """A how-to question about reaching someone who is not the company's help."""
    return bool(
        _HOW_TO_USE.search(whole) and _THIRD_PARTY.search(phrase) and not _HELPER.search(phrase)
    )


@dataclass(frozen=True)
class HumanRequest:
    """An explicit request for a person, a ticket or an escalation."""

    kind: str
    """``person``, ``ticket`` or ``escalate``."""
    reason: str
    """A short phrase for the log and the ticket, e.g. "asked to talk to a person"."""


def _ticket_clause_excluded(clause: str, whole: str) -> bool:
    if _OTHER_TICKET.search(clause) and re.search(r"\btickets?\b", clause):
        return True
    if _OTHER_CASE.search(clause) and not re.search(r"\b(tickets?|incidents?)\b", clause):
        return True
    if _ADVICE.search(clause):
        return True
    return bool(_HOW_TO.search(whole) and _TOOL_CONTEXT.search(whole))


def _bare_request(clause: str) -> HumanRequest | None:
    clause = re.sub(
        r"\bit (support|team|department|dept|desk|staff|people|service)\b", r"\1", clause
    )
    words = [w for w in clause.split() if w not in _FILLER]
    if not words or len(words) > 4:
        return None
    unqualified = {"someone", "somebody"} & set(words)
    desk = {"support", "desk", "helpdesk", "service", "care", "team", "staff"} & set(words)
    strong = set(words) & _BARE_STRONG or (unqualified and desk)
    if set(words) <= _BARE_PERSON and strong:
        return HumanRequest("person", "asked for a person")
    has_ticket = {"ticket", "tickets", "incident", "incidents"} & set(words)
    if has_ticket and set(words) <= _BARE_TICKET:
        return HumanRequest("ticket", "asked for a ticket")
    return None


def detect_human_request(text: str) -> HumanRequest | None:
    """The first explicit request for a person, ticket or escalation in ``text``, or None."""
    parts = _corrected_clauses(text)
    whole = " ".join(parts)
    for clause in parts:
        if _IDENTITY.search(clause) and not re.search(r"\b(want|need|talk to|speak to)\b", clause):
            continue
        if clause.startswith("if ") or clause.startswith("in case"):
            continue
        for kind, reason, pattern in _REQUEST_PATTERNS:
            for match in pattern.finditer(clause):
                if kind != "escalate" and _asked_of_a_thing(clause[: match.start()]):
                    continue
                if kind == "person" and (
                    _QUOTED_CONTACT.search(match.group())
                    or _reaching_a_third_party(match.group(), whole)
                    or (
                        reason == "asked for a real person"
                        and _DESCRIBING.search(clause[: match.start()])
                    )
                ):
                    continue
                if kind == "ticket" and (
                    _ticket_clause_excluded(clause, whole)
                    or _ADJECTIVE_BEFORE.search(clause[: match.start()])
                ):
                    continue
                negated = is_negated(clause, match.start())
                if reason == "does not want to talk to a bot":
                    negated = False  # the negation is the request
                if not negated:
                    return HumanRequest(kind, reason)
        bare = _bare_request(clause)
        if bare and not is_negated(clause, len(clause)):
            return bare
    # Telegraphic ticket requests: "ticket support incident open now can you do that for me".
    words = whole.split()
    verbs = [
        m
        for m in re.finditer(rf"\b{_CREATE}\b", whole)
        if not _ADJECTIVE_BEFORE.search(whole[: m.start()])
        and not _asked_of_a_thing(whole[: m.start()])
    ]
    if (
        len(words) <= 12
        and verbs
        and re.search(rf"\b{_TICKET}\b", whole)
        and detect_status_question(text) is None
        and not re.search(r"\b(i|we|you) (opened|created|raised|filed|logged|submitted)\b", whole)
        and not re.search(r"\b(is|was|are|were|has been|still) (open|opened)\b", whole)
        and not is_negated(whole, len(whole))
        and not _ticket_clause_excluded(whole, whole)
        and not re.search(r"\b(status|update|closed|progress)\b", whole)
    ):
        return HumanRequest("ticket", "asked for a ticket")
    return None
