"""How angry or fed up the user is: a score from 0 (calm) to 1 (furious), and why.

The score combines what the message says with how the conversation has gone. Each piece of
evidence is a probability-like weight, and the weights are joined as independent evidence
(``1 - prod(1 - w)``): one clue moves the score a little, several clues together move it a lot,
and no single mildly negative word can carry it past an escalation threshold.

From the message:

- **VADER** (the lexicon-and-rules sentiment model, package ``vadersentiment``): only a clearly
  negative compound score counts (below ``-0.5``). Words that describe a fault rather than a
  feeling ("error", "broken", "failed", "denied", "locked") are neutral here, because in an IT
  help desk they are the subject matter: "the printer is broken" is a report, not anger.
- **Profanity**, strong or mild.
- **Shouting**: most of the message's long words in capitals (known acronyms aside).
- **Repeated punctuation**: ``!!``, ``???``, ``?!``.
- **Frustration phrases**: "still doesn't work", "useless", "fed up", "not helping", "how many
  times", "again".

Hedges ("a bit", "slightly", "kind of") soften the message's part.

From the conversation (:class:`Trajectory`): checklist steps that failed, the same question asked
again, and the clarification cap reached. They make an already unhappy message cross the line
sooner; on their own they stay below the default threshold.

Everything here is pure and deterministic: no I/O after the VADER lexicon is read at
construction, so build one :class:`AngerScorer` per process and share it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# Normalising: lower case, curly quotes straight, contractions and chat spellings expanded, so
# the rules here and in escalation/human_request.py match "dont", "don't" and "do not" alike.
_CONTRACTIONS: tuple[tuple[str, str], ...] = (
    (r"\bcan'?t\b", "can not"),
    (r"\bcannot\b", "can not"),
    (r"\bwon'?t\b", "will not"),
    (r"\bain'?t\b", "is not"),
    (r"\bshan'?t\b", "shall not"),
    (r"\b(do|does|did|is|are|was|were|have|has|had|would|could|should|must|need)n'?t\b", r"\1 not"),
    (r"\bi'?m\b", "i am"),
    (r"\bi'?ve\b", "i have"),
    (r"\bi'?ll\b", "i will"),
    (r"\bi'd\b", "i would"),
    (r"^id (?=like|love|rather|prefer)", "i would "),
    (r"\b(you|we|they)'re\b", r"\1 are"),
    (r"\b(you|we|they)'ve\b", r"\1 have"),
    (r"\b(you|we|they)'ll\b", r"\1 will"),
    (r"\b(you|we|they)'d\b", r"\1 would"),
    (r"\b(it|that|what|there|here|who|where|how)'s\b", r"\1 is"),
    (r"\blet'?s\b", "let us"),
    (r"\bwanna\b", "want to"),
    (r"\bgonna\b", "going to"),
    (r"\bgotta\b", "got to"),
    (r"\bgimme\b", "give me"),
    (r"\blemme\b", "let me"),
    (r"\b(pls|plz|plse|pleas|pleaze|pleasee+)\b", "please"),
    (r"\bu\b", "you"),
    (r"\bur\b", "your"),
    (r"\br\b", "are"),
    (r"\bppl\b", "people"),
    (r"\btix\b", "tickets"),
    (r"\b(thx|thnx|thanx|ty)\b", "thanks"),
)


def word_set(text: str) -> frozenset[str]:
    """The words of a space-separated list: word lists read better as text."""
    return frozenset(text.split())


_CONTRACTION_RULES = [(re.compile(p), r) for p, r in _CONTRACTIONS]
_CLAUSE_BREAK = re.compile(r"[.,;:!?()\[\]\n]+|\s(?:but|however|though|although)\s|\.\.+|\s-\s")
_NON_WORD = re.compile(r"[^a-z0-9_<>\-\s]")


def normalize(text: str) -> str:
    """Lower case with contractions and chat spellings expanded; punctuation kept."""
    lowered = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    lowered = " ".join(lowered.split())
    for pattern, replacement in _CONTRACTION_RULES:
        lowered = pattern.sub(replacement, lowered)
    return lowered


def clauses(text: str) -> list[str]:
    """The normalised text cut at punctuation and at "but": words only, one space apart.

    Negation and intent are read clause by clause, so "no, I want a person" and "I don't need
    the manual but I want a person" are understood.
    """
    parts = _CLAUSE_BREAK.split(f" {normalize(text)} ")
    words = (" ".join(_NON_WORD.sub(" ", part.replace("'", "")).split()) for part in parts)
    return [part for part in words if part]


@dataclass(frozen=True)
class Trajectory:
    """How the conversation has gone so far, as the orchestrator's memory knows it."""

    failed_steps: int = 0
    """Checklist steps the user reported as not fixing it."""
    previous_questions: tuple[str, ...] = ()
    """The user's earlier messages of this conversation (redacted text), oldest first."""
    clarify_cap_reached: bool = False
    """The assistant has already asked as many clarifying rounds as it may for this topic."""
    answering_step: bool = False
    """The message answers a checklist step ("done, still broken"): its "still not working" is
    the answer the step asked for, not frustration (the failed steps count on their own)."""


EMPTY_TRAJECTORY = Trajectory()
PERSISTENCE_REASON = "still not working"


@dataclass(frozen=True)
class AngerScore:
    """The score and the evidence behind it, each reason a short phrase for logs and tickets."""

    score: float
    reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AngerWeights:
    """How much each kind of evidence weighs (0..1, joined as independent evidence)."""

    vader: float = 0.45
    """At a VADER compound of -0.9 or lower; nothing above -0.5, linear in between."""
    profanity_strong: float = 0.45
    profanity_mild: float = 0.3
    shouting: float = 0.45
    """At every long word in capitals; from half of them, linear."""
    repeated_punctuation: float = 0.15
    insult: float = 0.35
    """Calling the help or the thing useless, ridiculous, a joke."""
    emotion: float = 0.4
    """Saying so: frustrated, fed up, angry, sick of it."""
    persistence: float = 0.3
    """Still not working, nothing works."""
    not_helping: float = 0.35
    repetition: float = 0.2
    """Again, once more, every time."""
    repetition_strong: float = 0.4
    """How many times, for the third time."""
    waiting: float = 0.25
    failed_step: float = 0.1
    """Per failed checklist step, at most three counted."""
    repeated_question: float = 0.35
    clarify_cap: float = 0.25
    hedge_factor: float = 0.6
    """Multiplies the message's evidence when it is hedged ("a bit", "slightly")."""


# Fault words: in an IT help desk these describe the problem, not the user's feelings.
_FAULT_WORDS = word_set(
    "error errors broken break breaks fail failed fails failing failure fault faulty "
    "denied deny lost lose loses problem problems issue issues crash crashed crashes "
    "crashing kill killed kills attack attacked virus blocked block blocks stuck locked "
    "lock bug bugs bugged wrong missing unable warning fatal critical abort aborted "
    "reject rejected rejects dead trouble delete deleted bad disconnect disconnected drop "
    "dropped dropping slow hang hangs hung freeze frozen freezes corrupt corrupted damage "
    "damaged spam phishing malware threat suspicious expired forbidden invalid "
    "unauthorized unauthorised urgent emergency help no not alone leak leaking"
)

_PROFANITY_STRONG = re.compile(
    r"\b(f+u+c+k+\w*|fck\w*|fuk\w*|fking|effing|motherf\w+|sh+i+t+\w*|bull ?shit\w*|wtf|ffs|"
    r"stfu|bastards?|bitch\w*|dickhead|asshole|arsehole|piece of (shit|crap|junk|garbage))\b"
    r"|\bf[*#@$!]{1,4}(k|ck|in|ing)?\w*|\bs[h*#@$!][*#@$!]{1,3}t?\w*|[@#$%&*]{4,}",
)
_PROFANITY_MILD = re.compile(
    r"\b(damn\w*|dammit|goddam\w*|crap\w*|hell|bloody|pissed|piss\w*|sucks?|sucked|screw (this|it|"
    r"you|that)|freaking|frigging|friggin|bs|omfg|jeez|geez|ugh+|argh+)\b"
)
_INSULT = re.compile(
    r"\b(useless|pointless|hopeless|worthless|waste of (my )?time|ridiculous|unacceptable|absurd|"
    r"pathetic|joke|nonsense|garbage|rubbish|terrible|horrible|awful|the worst|"
    r"incompetent|stupid|dumb|idiot\w*|moronic|lame|trash|shambles|disgrace\w*|insane|"
    r"unbelievable|outrageous|clueless|dreadful|abysmal)\b"
)
_EMOTION = re.compile(
    r"\b(fed up|sick (and tired )?of|tired of|had enough|enough is enough|frustrat\w+|furious|"
    r"angry|annoyed|irritated|pissed off|livid|mad at|fuming|exasperated|infuriat\w+|"
    r"losing my (mind|patience|temper)|lost my patience|at my wits end|hate (this|it|you|that)|"
    r"i hate|fed to the teeth|done with (this|you)|upset|outraged)\b"
)
_PERSISTENCE = re.compile(
    r"\b(still (not|does not|do not|did not|is not|are not|can not|will not|no|broken|fails?|"
    r"failing|the same|same|nothing|having|getting|doing|down|dead|offline|frozen|crashing|"
    r"stuck|missing|locked|waiting)|nothing (\w+ ){0,3}?(works|worked|has worked|helps|"
    r"helped|is working|happens)|(never|ever) (works?|worked|helps?|helped)|none of (this|"
    r"that|these|it|them|your \w+) (works?|worked|helps?|helped)|not working (at all|again|"
    r"still)|keeps? (failing|happening|crashing|breaking|dropping|doing)|same (problem|issue|"
    r"error) (again|still))\b"
)
_NOT_HELPING = re.compile(
    r"\b(not|no) help(ing|ful)?\b|\b(did|does|is) not help\b|\bnot what i (asked|said|meant)\b|"
    r"\byou (do not|can not|never) (understand|listen|help)\b|\bare you (even )?(listening|"
    r"reading)\b|\b(read|listen to) what i (wrote|said)\b|\bthat is not (it|what i)\b|"
    r"\bstop (asking|sending)\b|\bno use\b|\b(you are|this is) no help\b"
)
_REPETITION_STRONG = re.compile(
    r"\b(how many (more )?times|for the (second|third|fourth|fifth|tenth|nth|umpteenth|\d+(st|"
    r"nd|rd|th)) time|(three|four|five|several|many|multiple|\d+) times( already| now| today)?|"
    r"i (already|have already) (told|said|asked|explained|tried)|as i (said|told you|already "
    r"said|mentioned))\b"
)
_REPETITION = re.compile(
    r"\b(again|once more|every (single )?time|yet again|always|over and over)\b"
)
_WAITING = re.compile(
    r"\b(waiting|waited|been down|been broken|been trying) (for )?(hours|days|weeks|ages|forever|"
    r"all (day|morning|week|afternoon)|since \w+)\b|\b(hours|days|weeks) (now|already)\b|"
    r"\bstill waiting\b"
)
_HEDGE = re.compile(
    r"\b(a (little |tiny )?bit|slightly|a little|kind of|kinda|sort of|somewhat|a tad|mildly|"
    r"not too|not that|not very|a touch)\b"
)
_REPEATED_PUNCTUATION = re.compile(r"[!?]{2,}")
_LONG_WORD = re.compile(r"\b[A-Za-z]{4,}\b")
# Acronyms written in capitals by everyone, not shouted.
_ACRONYMS = word_set(
    "ASAP HTTP HTTPS DHCP SMTP IMAP LDAP SAML JSON HTML VLAN SSID BIOS UEFI WIFI OKTA "
    "OAUTH CSV XLSX DOCX TCPIP NTFS EXFAT RDP SFTP SSHD AZURE CISCO ZOOM JIRA EXCEL NULL "
    "TODO FYI WLAN ADFS MSDN NTLM RADIUS IPSEC IPV4 IPV6 HDMI USBC ISBN PDF"
)
_WORDS = re.compile(r"[a-z0-9']+")


@functools.lru_cache(maxsize=4096)
def _content_words(text: str) -> tuple[str, ...]:
    """The message's content words (3+ letters), in order. Remembered: every turn compares its
    message with the conversation's earlier ones, which would be read again each time."""
    return tuple(w for w in _WORDS.findall(normalize(text)) if len(w) > 2)


def _ratio_similar(a: str, b: str) -> float:
    """Jaccard overlap of the two messages' word sets (content words of 3+ letters)."""
    first, second = set(_content_words(a)), set(_content_words(b))
    if not first or not second:
        return 0.0
    return len(first & second) / len(first | second)


def repeated_question(text: str, previous: Sequence[str], threshold: float = 0.6) -> bool:
    """The message asks what an earlier message of the conversation already asked.

    Word-set overlap of at least ``threshold`` (Jaccard), so a rephrasing with the same words in
    another order counts, and a follow-up that shares only the topic ("and on Linux?") does not.
    Very short messages ("yes", "still broken") never count: they repeat words, not questions.
    """
    if len(_content_words(text)) < 3:
        return False
    return any(_ratio_similar(text, earlier) >= threshold for earlier in previous)


def shouting_ratio(text: str) -> float:
    """Share of the long words (4+ letters) written in capitals; 0 with fewer than two of them."""
    words = _LONG_WORD.findall(text)
    shouted = [w for w in words if w.isupper() and w not in _ACRONYMS]
    if len(shouted) < 2:
        return 0.0
    considered = [w for w in words if w not in _ACRONYMS or not w.isupper()]
    return len(shouted) / len(considered) if considered else 0.0


def _join(weights: Sequence[float]) -> float:
    remaining = 1.0
    for weight in weights:
        remaining *= 1.0 - max(0.0, min(1.0, weight))
    return 1.0 - remaining


class AngerScorer:
    """Scores messages; build once (it reads VADER's lexicon) and share."""

    def __init__(self, weights: AngerWeights | None = None) -> None:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        self.weights = weights or AngerWeights()
        self._vader: Any = SentimentIntensityAnalyzer()
        for word in _FAULT_WORDS:
            if word in self._vader.lexicon:
                self._vader.lexicon[word] = 0.0

    def vader_compound(self, text: str) -> float:
        """VADER's compound score with fault words neutral, -1 (negative) to 1 (positive)."""
        return float(self._vader.polarity_scores(text)["compound"])

    def message_evidence(self, text: str) -> list[tuple[str, float]]:
        """What the message alone shows: (reason, weight) pairs, hedging applied."""
        w = self.weights
        lowered = " ".join(_NON_WORD.sub(" ", normalize(text).replace("'", "")).split())
        found: list[tuple[str, float]] = []
        compound = self.vader_compound(text)
        if compound < -0.5:
            strength = min(1.0, (-compound - 0.5) / 0.4)
            found.append((f"negative wording (VADER {compound:.2f})", w.vader * strength))
        if _PROFANITY_STRONG.search(normalize(text)):
            found.append(("profanity", w.profanity_strong))
        elif _PROFANITY_MILD.search(lowered):
            found.append(("mild profanity", w.profanity_mild))
        ratio = shouting_ratio(text)
        if ratio >= 0.5:
            found.append((f"shouting ({ratio:.0%} of long words in capitals)", w.shouting * ratio))
        if _REPEATED_PUNCTUATION.search(text):
            found.append(("repeated punctuation", w.repeated_punctuation))
        if _INSULT.search(lowered):
            found.append(("calls it useless or worse", w.insult))
        if _EMOTION.search(lowered):
            found.append(("says they are frustrated or angry", w.emotion))
        if _PERSISTENCE.search(lowered):
            found.append((PERSISTENCE_REASON, w.persistence))
        if _NOT_HELPING.search(lowered):
            found.append(("says the help is not helping", w.not_helping))
        if _REPETITION_STRONG.search(lowered):
            found.append(("has said or asked it several times", w.repetition_strong))
        elif _REPETITION.search(lowered):
            found.append(("again", w.repetition))
        if _WAITING.search(lowered):
            found.append(("has been waiting long", w.waiting))
        if found and _HEDGE.search(lowered):
            found = [(f"{reason}, hedged", weight * w.hedge_factor) for reason, weight in found]
        return found

    def trajectory_evidence(self, text: str, trajectory: Trajectory) -> list[tuple[str, float]]:
        """What the conversation's course shows: (reason, weight) pairs."""
        w = self.weights
        found: list[tuple[str, float]] = []
        if trajectory.failed_steps > 0:
            steps = min(trajectory.failed_steps, 3)
            found.append(
                (f"{trajectory.failed_steps} checklist step(s) failed", w.failed_step * steps)
            )
        if repeated_question(text, trajectory.previous_questions):
            found.append(("asked the same question again", w.repeated_question))
        if trajectory.clarify_cap_reached:
            found.append(("clarification cap reached", w.clarify_cap))
        return found

    def score(self, text: str, trajectory: Trajectory = EMPTY_TRAJECTORY) -> AngerScore:
        """The anger score of ``text`` in the conversation so far, with its reasons."""
        evidence = self.message_evidence(text) + self.trajectory_evidence(text, trajectory)
        if trajectory.answering_step:
            evidence = [
                (r, weight) for r, weight in evidence if not r.startswith(PERSISTENCE_REASON)
            ]
        return AngerScore(
            score=round(_join([weight for _, weight in evidence]), 4),
            reasons=[reason for reason, _ in evidence],
        )
