"""Ticket status questions: the user asks how a ticket of theirs is doing, with its key when
they name one (:func:`detect_status_question`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.sentiment import clauses

# A Jira key (IT-123, HELP-42); other tools' numbers after a ticket word ("ticket #4711",
# "incident INC0012345").
_JIRA_KEY = re.compile(r"\b([A-Za-z][A-Za-z0-9_]{0,9}-[0-9]{1,7})\b")
_NUMBERED = re.compile(
    r"\b(?:ticket|incident|case|request|issue|inc|req)\s*(?:number|no\.?|nr\.?|num|id)?\s*"
    r"[:#]?\s*((?:inc|req|ritm|sr|tkt)?[0-9]{3,12})\b",
    re.IGNORECASE,
)
_STANDALONE_NUMBERED = re.compile(r"\b((?:INC|REQ|RITM|SR|TKT)[0-9]{4,12})\b", re.IGNORECASE)
# Things that look like keys but are not tickets.
_NOT_A_KEY = re.compile(
    r"^(utf|iso|sha|md|x|rfc|cve|win|covid|windows|office|ipv|tls|ssl|wpa|h|mp|ms|"
    r"cat|usb|hdmi|e|f|a|b|c|v|gpt|pci|ddr|error|err|code|port|step|page|version)-",
    re.IGNORECASE,
)
_MY_TICKET = (
    r"(?:my|the|our|that|this|mine|me|an?|any)\s+(?:\w+\s+){0,2}?(?:ticket|tickets|incident|"
    r"incidents|case|cases|request|requests|issue|report|escalation)"
)
_STATUS_PATTERNS = tuple(
    re.compile(p)
    for p in (
        rf"\bstatus (?:of|on|for) {_MY_TICKET}\b",
        r"\b(?:my|the) (?:\w+ )?(?:ticket|incident|case|request) status\b",
        r"^(?:check )?(?:ticket|incident|case|request) status\b",
        r"\b(?:ticket|incident|case|request)s? status(?:es)?\b(?! (?:page|field|column|workflow))",
        rf"\b(?:update|updates|news|progress|word|eta|feedback|response|reply|answer)s? "
        rf"(?:on|about|for|regarding|with|from) {_MY_TICKET}\b",
        rf"\b(?:has|have|did) (?:anyone|anybody|someone|somebody|you|it|they|a technician|a "
        rf"tech|the team|support) (?:\w+ )?(?:looked|look|seen|see|picked|pick|read|touched|"
        rf"worked|work|responded|respond|replied|reply|gotten|got|get|received|receive|"
        rf"assigned|answered|answer|handled|checked) (?:at |up |on |to |into )?{_MY_TICKET}\b",
        rf"\b(?:is|was|are|has|have) {_MY_TICKET} (?:\w+ )?(?:been )?(?:closed|open|opened|"
        rf"resolved|fixed|done|finished|in progress|being (?:worked on|handled|looked at)|"
        rf"assigned|picked up|looked at|seen|handled|solved|still|received|progressing|moving)\b",
        rf"\b(?:what|anything) (?:is |has )?(?:happening|happened|going on|new|the news) "
        rf"(?:with|on|to|about) {_MY_TICKET}\b",
        rf"\bhow is {_MY_TICKET} (?:\w+ ){{0,5}}?(?:going|doing|coming along|progressing|"
        rf"getting on)\b",
        r"\bhow is (?:it|that) (?:going|doing|coming along|progressing)\b.*\b(?:ticket|"
        r"incident|case|request|issue)\b|\b(?:ticket|incident|case|request|issue)\b.*\bhow "
        r"is (?:it|that) (?:going|doing|coming along|progressing)\b",
        rf"\bwhen (?:will|is|does|can) {_MY_TICKET} (?:\w+ )?(?:be )?(?:resolved|fixed|closed|"
        rf"done|handled|looked at|picked up|answered|finished|solved|processed)\b",
        r"\b(?:any|have i|do i have|i have) (?:\w+ )?(?:open|pending|outstanding|active) "
        r"(?:tickets?|incidents?|cases?|requests?)\b",
        rf"\b(?:still waiting|waiting|heard nothing|no news|no word|no response|no reply|heard "
        rf"back|hear back) (?:\w+ ){{0,2}}(?:on|about|for|from|regarding) {_MY_TICKET}\b",
        r"\b(?:ticket|incident|case|request|issue) i (?:opened|raised|filed|logged|submitted|"
        r"created|reported|sent|made)\b.*\b(?:status|update|news|progress|going|doing|closed|"
        r"resolved|open|happened|happening|done)\b",
        r"\bi (?:opened|raised|filed|logged|submitted|created|reported|made) (?:a|an) "
        r"(?:\w+ )?(?:ticket|incident|case|request|issue)\b.*\b(?:status|update|news|progress|"
        r"going|doing|closed|resolved|open|happened|happening|done|heard)\b",
        r"\bis my (?:issue|problem|request|ticket|case) still (?:open|pending|being|unresolved|"
        r"there)\b",
    )
)
_STATUS_UPDATE_ONLY = re.compile(
    r"\b(?:any|an|what is the|what are the|is there an?|got any) (?:news|updates?|progress)\b"
)


@dataclass(frozen=True)
class StatusQuestion:
    """The user asks how a ticket of theirs is doing."""

    ticket_key: str | None = None
    """The ticket named (``IT-123``, ``INC0012345``, ``4711``), upper case, or None."""


def extract_ticket_key(text: str) -> str | None:
    """A ticket key or number named in ``text``, or None."""
    for match in _JIRA_KEY.finditer(text):
        key = match.group(1)
        project, _, _number = key.partition("-")
        if _NOT_A_KEY.match(key) or not project[0].isalpha():
            continue
        # Lower-case keys count only where a ticket word or a question makes them one.
        if project.islower() and not re.search(
            r"\b(ticket|incident|case|request|issue|updates?|status)\b|\?", text, re.IGNORECASE
        ):
            continue
        return key.upper()
    numbered = _STANDALONE_NUMBERED.search(text) or _NUMBERED.search(text)
    return numbered.group(1).upper() if numbered else None


def detect_status_question(text: str) -> StatusQuestion | None:
    """A question about the status of the user's ticket, with its key when named; or None.

    "what's the status of my ticket", "any update on IT-123?", "has anyone looked at my
    ticket", "is my incident closed yet". A request for a new ticket, or the status of
    something else ("status of the VPN outage", "status code 500"), is not one.
    """
    parts = clauses(text)
    whole = " ".join(parts)
    key = extract_ticket_key(text)
    if any(pattern.search(whole) for pattern in _STATUS_PATTERNS):
        return StatusQuestion(key)
    if _STATUS_UPDATE_ONLY.search(whole) and re.search(
        r"\b(my|our) (\w+ )?(ticket|incident|case|request|issue|report)s?\b", whole
    ):
        return StatusQuestion(key)
    if key and (
        _STATUS_UPDATE_ONLY.search(whole)
        or re.search(
            r"\b(status|updates?|progress|news|closed|resolved|open|eta|pick(ed)? up|look(ed)? "
            r"at|assigned|fixed|done|when|anyone|someone|happen\w*|going)\b",
            whole,
        )
        or re.fullmatch(r"\s*(what about|and|how about)?\s*\S+\s*\?\s*", text.lower())
    ):
        return StatusQuestion(key)
    return None
