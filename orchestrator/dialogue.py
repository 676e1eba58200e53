"""Reading a message in the context of its conversation.

Facts the user states (operating system, error codes), whether a message follows up on the active
topic ("im on linux" after "how do I find my mac address"), whether it reports on a checklist
step, whether it is too vague to search, and how technical the user is. These are extraction
rules over the user's words, not intent classification (that is learned, see ``intent.py``).
"""

from __future__ import annotations

import re
from typing import Literal

from orchestrator.memory import Conversation

OS_PATTERNS: dict[str, re.Pattern[str]] = {
    "windows": re.compile(r"\b(windows|win ?1[01]|win ?7|win ?8|pc)\b", re.IGNORECASE),
    # "my MAC address" is a network question, not a Mac.
    "macos": re.compile(
        r"\b(mac ?os|os ?x|macbook|imac|mac mini|(my|a|on (a )?) mac)\b(?!\s*address)", re.I
    ),
    "linux": re.compile(r"\b(linux|ubuntu|fedora|debian|mint|arch|red ?hat|rhel|gnome)\b", re.I),
}
OS_NAMES = {"windows": "Windows", "macos": "macOS", "linux": "Linux"}

ERROR_CODE = re.compile(
    r"\b(0x[0-9a-f]{4,8}|error\s*(code)?\s*[:#]?\s*\d{2,}|e\d{3,}|\d{3} (error|forbidden))\b",
    re.IGNORECASE,
)
FOLLOW_UP_START = re.compile(
    r"^\s*(and|also|but|what about|how about|same for|same on|what if|i'?m on|im on|i am on|"
    r"i'?m using|im using|i use|using|on|for|with|it'?s|its|it is)\b",
    re.IGNORECASE,
)
WORD = re.compile(r"[a-z0-9][a-z0-9'+.#-]*", re.IGNORECASE)

# Words that carry no subject: a message made only of these says something is wrong, not what.
GENERIC = frozenset(
    """
    a an the it its it's is are was be been this that these those my me i i'm im you your we
    our and or but so to of in on at for with from up down out please pls help helpme hi
    hello hey not no dont don't doesnt doesn't isnt isn't wont won't cant can't cannot didnt
    didn't working work works worked broken broke problem problems issue issues error errors
    wrong fix fixed something anything everything again still anymore any some need needs
    urgent asap stopped stop stops going weird strange just now today there here what why
    how when do does did am has have had get got keep keeps thing stuff all same really very
    """.split()  # noqa: SIM905 - a word list reads better as text
)

STRONG_TECH = re.compile(
    r"(`[^`]+`|\b0x[0-9a-f]{4,}\b|\b(ipconfig|ifconfig|nmcli|netsh|nslookup|dig|traceroute|"
    r"tracert|ping|sudo|systemctl|journalctl|powershell|regedit|gpupdate|kinit|ssh|curl|"
    r"stack ?trace|errno|dhcp|dns|tcp|udp|subnet|mtu|kerberos|ldap|certificate chain|tls|"
    r"ssid|802\.1x|mac address|ip address|kernel|driver version|registry)\b)",
    re.IGNORECASE,
)

FIXED = re.compile(
    r"\b(that|this|it)\s+(fixed|solved|worked|did it|helped)\b|\bfixed it\b|\bworks now\b|"
    r"\b(it'?s|its|it is) (working|fixed|fine) now\b|\bproblem solved\b|\ball good( now)?\b|"
    r"\bresolved\b|\bworking again\b",
    re.IGNORECASE,
)
FAILED = re.compile(
    r"\bstill (broken|not working|doesn'?t work|fails|failing|the same|no|nothing|an issue)\b|"
    r"\b(didn'?t|did not|doesn'?t|does not|won'?t) (work|help|fix)\b|\bno luck\b|"
    r"\bsame (problem|issue|error)\b|\bnot fixed\b|\bdone,? (but )?still\b|\bnext step\b",
    re.IGNORECASE,
)
GREETING = re.compile(
    r"^\s*(hi|hello|hey|hiya|good (morning|afternoon|evening)|thanks?|thank you|thx|cheers|"
    r"bye|goodbye|see you)\b[\s!.,]*(there|deskpilot|again|so much|a lot)?[\s!.,]*$",
    re.IGNORECASE,
)


def detect_os(text: str) -> str | None:
    """The operating system a message names, if exactly one."""
    found = [name for name, pattern in OS_PATTERNS.items() if pattern.search(text)]
    return found[0] if len(found) == 1 else None


def detect_facts(text: str) -> dict[str, str]:
    """Facts stated in a message that later turns should not ask for again."""
    facts: dict[str, str] = {}
    if os_name := detect_os(text):
        facts["os"] = os_name
    if match := ERROR_CODE.search(text):
        facts["error"] = match.group(0)
    return facts


# The redactor's placeholders: <PERSON_1>, <EMAIL_ADDRESS_2>, ...
PLACEHOLDER = re.compile(r"<[A-Z][A-Z_]*_\d+>")


def subject_words(text: str) -> list[str]:
    """The words that say what the message is about (not that something is wrong, nor the OS)."""
    for pattern in OS_PATTERNS.values():
        text = pattern.sub(" ", text)
    text = PLACEHOLDER.sub(" ", text)  # what the redactor removed says nothing about the problem
    words = (word.lower().strip(".'") for word in WORD.findall(text))
    return [word for word in words if word and word not in GENERIC]


def is_vague(text: str) -> bool:
    """True when a message says something is wrong without saying what ("it's not working")."""
    return not subject_words(text) and not detect_facts(text).get("error")


def is_follow_up(text: str, conversation: Conversation) -> bool:
    """True when a message only makes sense with the active topic."""
    if not conversation.topic:
        return False
    if FOLLOW_UP_START.search(text):
        return True
    subject = subject_words(text)
    return len(subject) <= 2 and (bool(detect_facts(text)) or len(text.split()) <= 4)


def search_text(text: str, conversation: Conversation) -> str:
    """What to search for: a follow-up is searched together with the active topic."""
    if is_follow_up(text, conversation) and conversation.topic:
        return f"{conversation.topic} {text}"
    return text


def is_technical(text: str) -> bool:
    """Whether the user writes like someone comfortable with commands and jargon."""
    return len(STRONG_TECH.findall(text)) >= 1


def checklist_feedback(text: str) -> Literal["fixed", "failed"] | None:
    """How a message reports on the current checklist step, if it does."""
    if FAILED.search(text):
        return "failed"
    if FIXED.search(text):
        return "fixed"
    return None


def is_greeting(text: str) -> bool:
    return bool(GREETING.match(text))


PLACEHOLDER = re.compile(r"<([A-Z][A-Z_]*?)_\d+>")
PLACEHOLDER_WORDS = {
    "PERSON": "someone",
    "LOCATION": "a place",
    "EMAIL_ADDRESS": "an email address",
    "PHONE_NUMBER": "a phone number",
    "URL": "a web address",
    "IP_ADDRESS": "an IP address",
    "PASSWORD": "a password",  # nosec B105 # how a placeholder reads to the user
    "PIN": "a PIN",
    "PHISHING_LINK": "a suspicious link",
    "DATE_OF_BIRTH": "a date of birth",
    "PASSPORT": "a passport number",
    "CREDIT_CARD": "a card number",
    "IBAN_CODE": "a bank account number",
    "US_SSN": "a social security number",
    "HOSTNAME": "a computer name",
    "EMPLOYEE_ID": "an employee number",
}
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL")
"""A placeholder whose type ends in one of these (``GITHUB_TOKEN``, ``AWS_SECRET_KEY``) is a
secret of some service: it reads as "a secret"."""


def _placeholder_word(entity: str) -> str:
    if entity in PLACEHOLDER_WORDS:
        return PLACEHOLDER_WORDS[entity]
    return "a secret" if entity.endswith(SECRET_WORDS) else "something"


def readable(text: str) -> str:
    """The redacted text with placeholders read as plain words, for the models.

    The classifier and the embedding model learned from ordinary sentences; "<LOCATION_1>" means
    nothing to them, "a place" does.
    """
    return PLACEHOLDER.sub(lambda m: _placeholder_word(m.group(1)), text)
