"""Password reset, the trigger: when a (redacted) message asks for the user's own account
password to be reset (:func:`detect_password_reset`)."""

from __future__ import annotations

import re

from orchestrator.sentiment import clauses, word_set

# Spellings of the word, normalised first ("pass word", "passwd", "pwd", "pw").
PASSWORD_WORD = re.compile(r"\bpass words?\b|\bpasswd\b|\bpwd\b|\bpw\b")
_IS_PASSWORD = frozenset({"password", "passwords"})
_DETERMINERS = word_set("my the our a an this that your his her their its any new")
# Words that end the modifiers walked back from "password": verbs and function words of the
# phrases matched below, and adjectives the rules read ("expired", "new").
_STOP = word_set(
    """
    i me you we it is am are was were be been has have had do does did not never no and or to
    for of on in at with reset resetting change changing changed renew renewing recover
    recovering replace replacing update updating forgot forgotten forget forgetting remember
    recall know lost misplaced find need needs want wants like please can could would will
    should must may help get give send set expired expiring old new current temporary default
    what which when how where why whats if my the our a an this that your his her their its
    any
    """
)
# What the webhook resets: the directory account ("Your Northwind account password signs you
# in to your laptop, email, Teams and most internal apps").
_OWN_WORDS = word_set(
    """
    account accounts northwind login logon log sign signin windows network domain ad active
    directory sso single company work corporate computer laptop pc desktop email e-mail mail
    outlook office 365 microsoft m365 teams user main normal usual own entra azure okta me
    myself
    """
)
# Other credentials, which the webhook does not reset ("Your VPN password is a separate
# credential"), and passwords of things rather than of the user.
_FOREIGN_WORDS = word_set(
    """
    vpn wifi wi-fi wi fi wireless guest hotspot router modem bios uefi bitlocker voicemail
    voice phone mobile iphone android sim pin keychain zip pdf excel word file files document
    documents spreadsheet database db sql admin administrator root local service shared
    printer github gitlab aws personal private gmail yahoo hotmail facebook linkedin instagram
    amazon netflix bank banking apple icloud bitwarden vault master ssh key keys server wlan
    encryption
    """
)
# Someone else's password: the webhook resets only the signed-in user's own.
_OTHER_OWNERS = word_set(
    """
    his her their him them someone somebody someones somebodys colleague colleagues coworker
    coworkers co-worker co-workers manager managers boss bosses employee employees intern
    interns team wife husband son sons daughter daughters mom moms dad dads mother mothers
    father fathers friend friends starter starters hire hires contractor contractors customer
    customers client clients assistant assistants users
    """
)
_PLACEHOLDER = re.compile(r"^<[a-z_]+\d*>s?$")
_POST_PREPOSITIONS = frozenset({"for", "of", "to", "on"})
# After these, only the account's own names keep the password the user's ("the password for
# the guest wifi", "for the coffee machine"); after "to" and "on" only another credential or
# owner makes it someone else's ("the password to log in", "reset it on the portal").
_STRICT_PREPOSITIONS = frozenset({"for", "of"})

_OWN = "pwdown"
_OTHER = "pwdother"

NEGATION = re.compile(r"\b(not|never|no need|no|without|stop|cancel|nobody|neither)\b")
_TROUBLE = re.compile(
    r"\b(can not|could not|unable to|not able to|fail|failed|fails|failing|trouble|problem|"
    r"problems|issue|issues|help|not let me|will not let me|does not let me|error|stuck)\b"
)
_HOW_TO = re.compile(
    r"\b(how (do|can|should|would|could|does|did|to|is|are)|steps to|way to|ways to|"
    r"where (do|can|should|would) (i|we)|instructions|guide|explain|tutorial|show me how|"
    r"tell me how|what is the (process|procedure)|process for|procedure for)\b"
)
_HYPOTHETICAL = re.compile(
    r"\b(if|in case|whenever|what happens|what should i do|what do i do|what to do|"
    r"suppose|supposing)\b"
)
_ADVICE = re.compile(
    r"\b(should (i|we)|do (i|we) (need|have) to|must (i|we)|is it (necessary|required|"
    r"mandatory|a good idea|worth|safe)|how often|how frequently|when (should|do|must|will) "
    r"(i|we)|why (do|should|must) (i|we)|how long until)\b"
)
_RULES = re.compile(
    r"\b(rules?|requirements?|required|policy|policies|complexity|criteria|length|how long|"
    r"characters?|symbols?|letters?|digits?|special|uppercase|lowercase|upper case|lower case|"
    r"strong|stronger|secure|weak|reuse|re use|history|expiry|expiration|passphrase|"
    r"choose|choosing|pick|picking|come up with|ideas?|tips?|allowed|valid|minimum|maximum|"
    r"blocked list|generator|manager)\b"
)
_REQUESTING_SUBJECTS = word_set("you u someone somebody anyone anybody ya yall please one")
# The user already did it: "I reset my password and now Outlook keeps asking".
_DONE_ALREADY = re.compile(
    r"\bi (?:(?:have|had|just|already|recently|also|then|successfully|finally) )*"
    r"(reset|changed|renewed|updated|recovered|replaced)\b"
)
_VERB = (
    r"(?:reset|resetting|change|changing|renew|renewing|recover|recovering|replace|"
    r"replacing|update|updating|regenerate)"
)
_VERB_REQUEST = re.compile(rf"\b{_VERB}\b(?: [\w<>\-]+){{0,2}}? {_OWN}\b")
_VERB_IT = re.compile(rf"\b{_VERB} (it|that|this|one|this one|that one)\b")
_FORGOT = re.compile(
    r"\b(forgot|forgotten|forget|forgetting|can not remember|do not remember|can not recall|"
    r"do not recall|do not know|no idea what|lost|misplaced|can not find|locked out of)"
    rf"(?: [\w<>\-]+){{0,2}}? {_OWN}\b"
)
_EXPIRED = re.compile(
    rf"\b{_OWN} (?:<[a-z_]+\d*> )?(?:(?:has|had|is|was|just|already|now|apparently|seems to|"
    rf"have) )*(expired|run out|ran out)\b|\bexpired {_OWN}\b"
)
_NOUN_REQUEST = re.compile(rf"\b{_OWN} (reset|change|changed|renewal|renewed|recovery|resets)\b")
_NEW_PASSWORD = re.compile(rf"\bnew {_OWN}\b")
_NEED = re.compile(
    r"\b(need|needs|want|would like|request|requesting|requested|get|please|help|give me|"
    r"send me|issue me|asap|urgent|urgently|quick|quickly)\b"
)
_FILLER = word_set("hi hello hey please thanks thank you ok okay urgent asap now for me a my the")


def _password_mentions(words: list[str]) -> list[str]:
    """The clause's words with each mention of a password replaced by a marker saying whose
    (the user's own account password, or another credential's or person's), the modifiers and
    the prepositional phrase that decided it folded in."""
    out = list(words)
    index = 0
    while index < len(out):
        if out[index] not in _IS_PASSWORD:
            index += 1
            continue
        start = index
        while start > 0 and index - start < 3 and out[start - 1] not in _STOP:
            start -= 1
        modifiers = out[start:index]
        owner = out[start - 1] if start > 0 else ""
        foreign = out[index] == "passwords"  # passwords in general, not the user's own
        if any(
            word in _FOREIGN_WORDS or word in _OTHER_OWNERS or _PLACEHOLDER.match(word)
            for word in modifiers
        ):
            foreign = True
        if owner in {"his", "her", "their"} or (
            modifiers and modifiers[-1].endswith("s") and modifiers[-1] not in _OWN_WORDS
        ):
            foreign = True  # "<person_1>'s password", "his password", "a colleague's password"
        end = index + 1
        if end < len(out) and out[end] in _POST_PREPOSITIONS:
            cursor = end + 1
            while cursor < len(out) and out[cursor] in _DETERMINERS:
                cursor += 1
            if out[end] not in _STRICT_PREPOSITIONS:
                following = out[cursor : cursor + 4]
                if any(w in _FOREIGN_WORDS or w in _OTHER_OWNERS for w in following):
                    foreign = True
            elif cursor < len(out):
                if out[cursor] not in _OWN_WORDS:
                    foreign = True
                end = cursor + 1
        out[start:end] = [_OTHER if foreign else _OWN]
        index = start + 1
    return out


_MODALS = word_set("can could will would does do did may might shall")
_STATEMENT_SUBJECTS = word_set("i we you someone somebody")
_SUBJECT_FILLERS = word_set("not please just maybe somehow quickly kindly")


def _modal_subject_ok(before: str) -> bool:
    """A modal shortly before the verb asks the assistant or "someone" ("can you reset"), or
    states the user's need ("I can't reset", "I would like to reset"); "can my manager reset",
    "who can reset" and "can I change it from my phone?" (a question about what is possible)
    are not requests."""
    words = before.split()
    if "possible to" in before:
        return True  # "would it be possible to reset my password"
    for back in range(1, min(5, len(words)) + 1):
        if words[-back] not in _MODALS:
            continue
        if len(words) > back and words[-back - 1] in _STATEMENT_SUBJECTS:
            return True  # a statement: "I can't reset", "I would like to reset"
        between = [w for w in words[len(words) - back + 1 :] if w not in _SUBJECT_FILLERS]
        return bool(between) and between[0] in _REQUESTING_SUBJECTS
    return True


def _request_ok(clause: str, at: int, verb: bool = True) -> bool:
    """A request to reset is a request unless negated, a how-to, advice, a hypothesis, about
    someone else doing it, or already done; "I can't reset my password" is one (trouble)."""
    before = clause[:at]
    if _HOW_TO.search(before) or _ADVICE.search(before) or _HYPOTHETICAL.search(before):
        return False
    done = _DONE_ALREADY.search(clause)
    if done is not None and done.start(1) == at:
        preceding = clause[: done.start()].split()
        if not preceding or preceding[-1] not in _MODALS:
            return False
    if NEGATION.search(before) and not _TROUBLE.search(before):
        return False
    return not verb or _modal_subject_ok(before)  # "can I get a password reset" asks for one


def detect_password_reset(text: str) -> str | None:
    """Why the (redacted) message asks for the user's own account password to be reset
    (``request``, ``forgot``, ``expired``, ``trouble``), or ``None``.

    A need triggers it: an explicit request ("reset my password", "I need a password reset",
    "can you reset it" after naming the password), a forgotten password, an expired one, or a
    failed attempt ("I can't reset my password"). How-to questions ("how do I reset my
    password?", "can I change it from my phone?"), advice and hypotheses ("should I change
    it?", "what if I forget it?") and questions about the password rules are answered from the
    knowledge base instead (its article has the self-service steps the user asked for); other
    credentials (VPN, Wi-Fi, a PIN, a token), other people's passwords and passwords of things
    ("the password for the coffee machine") never trigger it.
    """
    text = PASSWORD_WORD.sub("password", text.lower())
    kind: str | None = None
    last_mention: str | None = None
    for raw in clauses(text):
        words = _password_mentions(raw.split())
        clause = " ".join(words)
        found = _clause_kind(clause, last_mention)
        for word in words:
            if word in {_OWN, _OTHER}:
                last_mention = word
        if found is not None and kind is None:
            kind = found
    return kind


def _clause_kind(clause: str, last_mention: str | None) -> str | None:
    if _RULES.search(clause) and not (_FORGOT.search(clause) or _EXPIRED.search(clause)):
        return None
    match = _FORGOT.search(clause)
    if match is not None:
        before = clause[: match.start()]
        if not (
            NEGATION.search(before)
            or _HYPOTHETICAL.search(before)
            or _HOW_TO.search(before)
            or _ADVICE.search(before)
        ):
            return "forgot"
    match = _EXPIRED.search(clause)
    if match is not None:
        before = clause[: match.start()]
        if not (_HYPOTHETICAL.search(before) or _ADVICE.search(before) or _HOW_TO.search(before)):
            return "expired"
    for pattern in (_VERB_REQUEST, _VERB_IT):
        match = pattern.search(clause)
        if match is None:
            continue
        if pattern is _VERB_IT and (last_mention != _OWN or _OWN in clause or _OTHER in clause):
            continue
        if _request_ok(clause, match.start()):
            before = clause[: match.start()]
            return "trouble" if _TROUBLE.search(before) else "request"
    for pattern in (_NOUN_REQUEST, _NEW_PASSWORD):
        match = pattern.search(clause)
        if match is None:
            continue
        rest = [w for w in clause.split() if w not in _FILLER and w != _OWN]
        noun = {"reset", "change", "renewal", "recovery", "resets", "new"}
        if (_NEED.search(clause) or set(rest) <= noun) and _request_ok(
            clause, match.start(), verb=False
        ):
            return "request"
    return None
