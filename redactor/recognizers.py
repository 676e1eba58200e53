"""The recognizers the redactor runs, built so that none of them touches the network.

Presidio's default registry loads dozens of country-specific recognizers and an e-mail recognizer
that, on first use, downloads the public-suffix list. The redactor instead builds an explicit,
small registry: the generic PII recognizers it needs, an offline e-mail recognizer, spaCy NER for
people and places, and Deskpilot's own secret detectors.

To add a secret detector, append a recognizer to :func:`secret_recognizers`; its entity type is
then redacted like any other and, because it is a secret, it is exempt from the allow-list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import tldextract
from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    SpacyRecognizer,
    UrlRecognizer,
    UsLicenseRecognizer,
    UsSsnRecognizer,
)

from redactor.addresses import StreetAddressRecognizer
from redactor.names import NameLists
from redactor.people import PersonCueRecognizer
from redactor.secrets import SECRET_KEY_ENTITIES, key_recognizers

PASSWORD = "PASSWORD"  # noqa: S105 - the entity type's name, not a credential

# Entity types whose values are secrets: never allow-listed, never echoed back (ARCHITECTURE.md).
SECRET_ENTITIES: frozenset[str] = frozenset({PASSWORD, *SECRET_KEY_ENTITIES})

# The entity types spaCy's NER contributes; everything else comes from patterns.
NER_ENTITIES: tuple[str, ...] = ("PERSON", "LOCATION")


class OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer, validating domains against tldextract's bundled snapshot.

    The stock recognizer calls the module-level ``tldextract.extract``, whose extractor fetches the
    public-suffix list from publicsuffix.org on first use and caches it under ``~/.cache``. That is
    a run-time download (forbidden: "offline by construction") and a disk write from a service that
    should be stateless. ``suffix_list_urls=()`` disables the fetch, ``cache_dir=None`` the cache,
    and the snapshot shipped inside the tldextract wheel is used instead. Each recognizer owns its
    extractor, so nothing global in tldextract or Presidio is patched.

    In presidio-analyzer 2.2.366 this is the only place tldextract is used (the URL recognizer is a
    pure regex). Re-check ``grep -rn tldextract presidio_analyzer`` when upgrading.
    """

    def __init__(self, supported_language: str = "en") -> None:
        # Set before the base constructor, which calls load().
        self._extract_domain = tldextract.TLDExtract(
            cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True
        )
        super().__init__(supported_language=supported_language)

    def load(self) -> None:
        """Parse the suffix snapshot now, so the first message does not pay for it."""
        self._extract_domain("example.com")

    def validate_result(self, pattern_text: str) -> bool:
        """Accept a public address, and also one on an internal or reserved domain.

        Company mail often lives on domains that are no public suffix (``.local``, ``.corp``,
        ``.internal``, ``.example``); an address there is just as personal, so a well-formed
        domain with an alphabetic top level is enough.
        """
        if self._extract_domain(pattern_text).fqdn != "":
            return True
        domain = pattern_text.rsplit("@", 1)[-1]
        labels = domain.split(".")
        return len(labels) >= 2 and labels[-1].isalpha() and len(labels[-1]) >= 2


class ContextualSecretRecognizer(PatternRecognizer):
    """A pattern recognizer for secrets that are only recognisable by the words in front of them.

    The patterns match the secret value alone (the keyword sits in a look-behind), so the
    redacted text keeps "my password is" and only the value becomes a placeholder. Matches that
    are ordinary words describing the secret ("my password is expired") are discarded, because
    in an IT-support chat those sentences are far more common than passwords.
    """

    # Words that follow "password is" when a user describes a problem rather than a secret.
    NOT_SECRETS: frozenset[str] = frozenset(
        {
            "a", "an", "the", "my", "not", "no", "too", "very", "also", "still", "now",
            "being", "been", "set", "reset", "changed", "expired", "expiring", "expires",
            "wrong", "incorrect", "invalid", "correct", "right", "fine", "ok", "okay",
            "locked", "blocked", "disabled", "working", "broken", "rejected", "accepted",
            "required", "missing", "empty", "blank", "same", "different", "weak", "strong",
            "short", "long", "old", "new", "saved", "stored", "unknown", "forgotten",
        }
    )  # fmt: skip

    def __init__(
        self,
        supported_entity: str,
        patterns: list[Pattern],
        supported_language: str = "en",
    ) -> None:
        super().__init__(
            supported_entity=supported_entity,
            patterns=patterns,
            supported_language=supported_language,
            name=f"Contextual{supported_entity.title().replace('_', '')}Recognizer",
        )

    def invalidate_result(self, pattern_text: str) -> bool:
        """Discard a match that is an ordinary descriptive word instead of a secret."""
        return pattern_text.strip("\"'`.,;:!?").casefold() in self.NOT_SECRETS


# A secret value: a quoted string (spaces allowed) or one whitespace-delimited token. Trailing
# punctuation is kept inside the token on purpose: a password may end in "." or "!", and
# swallowing a sentence's full stop is a cheaper mistake than leaking a character of a secret.
_VALUE_AFTER_KEYWORD = r"""(?:"[^"\n]{1,200}"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|[^\s"'`]{1,200})"""

# Presidio compiles these with the `regex` module (variable-width look-behind) and IGNORECASE.
PASSWORD_PATTERNS: list[Pattern] = [
    # "password: X", "pw: X", "pass=X", "pwd = X"
    Pattern(
        "password_assignment",
        r"(?<=\b(?:password|passwd|passphrase|passcode|pwd|pw|pass)\s*[:=]\s*)"
        + _VALUE_AFTER_KEYWORD,
        0.8,
    ),
    # "my password is hunter2", "the new passphrase is now X", "password was: X"
    Pattern(
        "password_is",
        r"(?<=\b(?:password|passwd|passphrase|passcode|pwd)\s+(?:is|was)"
        r"(?:\s+(?:now|still|currently|actually))?\s*:?\s+)" + _VALUE_AFTER_KEYWORD,
        0.7,
    ),
]


class CaseInsensitiveIbanRecognizer(IbanRecognizer):
    """Presidio's IBAN recogniser, also for account numbers typed in lower case."""

    def analyze(
        self,
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
        regex_flags: int | None = None,
    ) -> list[RecognizerResult]:
        upper = text.upper()
        # Offsets must stay valid: upper-casing "ß" to "SS" would shift them.
        results: list[RecognizerResult] = super().analyze(
            upper if len(upper) == len(text) else text,
            entities,
            nlp_artifacts,  # type: ignore[arg-type]  # Presidio's own default is None
            regex_flags,  # type: ignore[arg-type]
        )
        return results


def secret_recognizers(language: str) -> list[EntityRecognizer]:
    """Deskpilot's own detectors for secrets typed into chat; extend this list for new kinds."""
    return [
        ContextualSecretRecognizer(PASSWORD, PASSWORD_PATTERNS, supported_language=language),
        *key_recognizers(language),
    ]


class VocabularyCheckedSpacyRecognizer(SpacyRecognizer):
    """spaCy's PERSON and LOCATION, less what lower-case IT jargon the small model mistakes
    for them.

    In lower-case text ("please log queue", "wireless mouse", "va la si") the small model tags
    ordinary words and abbreviations as people and places. A lower-case PERSON made only of
    English words and short tokens, none a given name, is dropped, and so is a lower-case
    LOCATION of tokens of three letters or fewer ("va", "po", "us"). A span of English words
    around a number ("Floor 2", "Building 4") names a room or a model, and is dropped too.
    Spans with any other word ("frankfurt", "cohen", "Peter Miller") are kept.
    """

    def __init__(self, names: NameLists, supported_language: str = "en") -> None:
        self._names = names
        super().__init__(
            supported_language=supported_language, supported_entities=list(NER_ENTITIES)
        )

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        results: list[RecognizerResult] = super().analyze(text, entities, nlp_artifacts)
        return [r for r in results if not self.jargon(r.entity_type, text[r.start : r.end])]

    def jargon(self, entity_type: str, value: str) -> bool:
        """True for a lower-case span of English words or short tokens (see the class)."""
        words = re.findall(r"[^\W_]+", value)
        if not words:
            return False
        if not all(word.islower() for word in words):
            return self._product_words(words)
        if entity_type == "LOCATION":
            return all(len(word) <= 3 for word in words)
        return all(
            len(word) <= 2
            or (self._names.is_ordinary_word(word) and not self._names.is_given_name(word))
            or (len(word) <= 3 and not self._names.is_given_name(word))
            for word in words
        )

    def _product_words(self, words: Sequence[str]) -> bool:
        """A model or a room number with English words around it ("Floor 2", "Surface Pro 9")."""
        numbered = False
        for word in words:
            if any(char.isdigit() for char in word):
                numbered = True
            elif not self._names.is_ordinary_word(word):
                return False
        return numbered


def pii_recognizers(language: str, names: NameLists | None = None) -> list[EntityRecognizer]:
    """Presidio's generic PII recognizers that matter in IT-support chats, all offline."""
    return [
        OfflineEmailRecognizer(supported_language=language),
        PhoneRecognizer(supported_language=language),
        CreditCardRecognizer(supported_language=language),
        CaseInsensitiveIbanRecognizer(supported_language=language),
        IpRecognizer(supported_language=language),
        UrlRecognizer(supported_language=language),
        UsSsnRecognizer(supported_language=language),
        UsLicenseRecognizer(supported_language=language),
        # Reads the entities the spaCy pipeline already produced; ORG, DATE_TIME and NRP are
        # left out: in this domain they are mostly product names and dates, not personal data.
        SpacyRecognizer(supported_language=language, supported_entities=list(NER_ENTITIES))
        if names is None
        else VocabularyCheckedSpacyRecognizer(names, supported_language=language),
    ]


# Phone numbers as people write them in any country's style ("467 3395", "(37) 788-063",
# "+44 7700 921 916"), which the library's validating recognizer rejects when the number is not
# a real, allocated one. The shape alone is too weak (dates, build numbers, ticket numbers have
# it too): its score stays under the threshold unless a word like "phone" or "call" is near.
LOOSE_PHONE_PATTERNS = [
    Pattern(
        "digit_groups",
        r"(?<![\w.+/-])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?|\(0\)\s?)?"
        r"\d{2,4}(?:[\s.-]\d{2,4}){1,4}(?:\s?x\d{1,5})?(?![\w/]|[.-]\d)",
        0.2,
    ),
    Pattern("ten_digits", r"(?<![\w.+-])\+?\d{10,12}(?![\w.]|-\d)", 0.15),
]
PHONE_CONTEXT = [
    "phone", "telephone", "tel", "mobile", "cell", "call", "desk", "office", "fax", "reach",
    "answering", "number", "contact", "ext", "whatsapp", "sms", "text", "registered",
]  # fmt: skip


class _LuhnNumberRecognizer(PatternRecognizer):
    """A card number of any scheme and length (12 to 19 digits: Maestro, JCB, 19-digit Visa...)
    that passes the Luhn check. Long numbers are common in IT text (order, serial and build
    numbers), and one in ten passes Luhn by chance, so the score needs a word like "card" near."""

    def invalidate_result(self, pattern_text: str) -> bool:
        digits = [int(char) for char in pattern_text if char.isdigit()]
        if not 12 <= len(digits) <= 19:
            return True
        total = 0
        for index, digit in enumerate(reversed(digits)):
            if index % 2:
                digit = digit * 2 - 9 if digit > 4 else digit * 2
            total += digit
        return total % 10 != 0


CARD_PATTERNS = [
    Pattern("digits", r"(?<![\w.+-])\d(?:[ -]?\d){11,18}(?![\w.-]|[.-]\d)", 0.3),
]
CARD_CONTEXT = [
    "card", "credit", "debit", "visa", "mastercard", "maestro", "amex", "jcb", "payment", "pay",
    "cc", "billing", "expires", "expiry", "cvv",
]  # fmt: skip


class _LoosePhoneRecognizer(PatternRecognizer):
    """Seven to fifteen digits, as phone numbers have: "error 404 500" near "phone" is not one.

    The phone words are looked for here, in the raw text, as well as by Presidio's context
    enhancer: the enhancer skips spaCy's stop words, and "call" is one ("call me on 450 0840"),
    and it compares lemmas of whole tokens, which misses "788-063-Office".
    """

    CONTEXT_SCORE = 0.45  # over the threshold, under numbers whose own recognizer is sure
    _WORDS_BEFORE = re.compile(
        r"(?i:\b(?:" + "|".join(PHONE_CONTEXT) + r"|dial|ring)(?:s|ed|ing)?\b\W+"
        r"(?:\w+\W+){0,4}$)"
    )
    _WORDS_AFTER = re.compile(r"(?i:^\W{0,3}(?:\w+\W+)?(?:" + "|".join(PHONE_CONTEXT) + r")\b)")

    def invalidate_result(self, pattern_text: str) -> bool:
        digits = sum(char.isdigit() for char in pattern_text)
        return not 7 <= digits <= 15

    def analyze(
        self,
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
        regex_flags: int | None = None,
    ) -> list[RecognizerResult]:
        results: list[RecognizerResult] = super().analyze(
            text, entities, nlp_artifacts, regex_flags
        )
        for result in results:
            before = text[max(0, result.start - 60) : result.start]
            after = text[result.end : result.end + 25]
            if self._WORDS_BEFORE.search(before) or self._WORDS_AFTER.search(after):
                result.score = max(result.score, self.CONTEXT_SCORE)
        return results


LOOSE_EMAIL_PATTERNS = [
    # Anything shaped like local@domain, valid top-level domain or not: internal addresses
    # ("jdoe@corp") and addresses OCR misread ("jdoe@northwindcom", a dot lost) are still
    # someone's address. The full validating recognizer scores the well-formed ones higher.
    Pattern(
        "address_without_valid_domain",
        r"(?<![\w.+-])[A-Za-z0-9][\w.+-]{0,63}@[A-Za-z0-9][A-Za-z0-9-]{1,62}(?:\.[A-Za-z0-9-]+)*\b",
        0.6,
    ),
]
MAC_PATTERNS = [
    Pattern("mac_colon_or_dash", r"\b(?:[0-9A-F]{2}[:-]){5}[0-9A-F]{2}\b", 0.8),
    Pattern("mac_dotted", r"\b(?:[0-9A-F]{4}\.){2}[0-9A-F]{4}\b", 0.6),
]


def identifier_recognizers(
    language: str, employee_ids: Sequence[str] = (), hostnames: Sequence[str] = ()
) -> list[EntityRecognizer]:
    """Device addresses, and the company's own employee ids and internal host names (patterns
    from settings)."""
    recognizers: list[EntityRecognizer] = [
        PatternRecognizer("MAC_ADDRESS", patterns=MAC_PATTERNS, supported_language=language),
        PatternRecognizer(
            "EMAIL_ADDRESS",
            patterns=LOOSE_EMAIL_PATTERNS,
            supported_language=language,
            name="LooseEmailRecognizer",
        ),
        _LuhnNumberRecognizer(
            "CREDIT_CARD",
            patterns=CARD_PATTERNS,
            context=CARD_CONTEXT,
            supported_language=language,
            name="AnyCardRecognizer",
        ),
        _LoosePhoneRecognizer(
            "PHONE_NUMBER",
            patterns=LOOSE_PHONE_PATTERNS,
            context=PHONE_CONTEXT,
            supported_language=language,
            name="LoosePhoneRecognizer",
        ),
    ]
    for entity, regexes in (("EMPLOYEE_ID", employee_ids), ("HOSTNAME", hostnames)):
        if regexes:
            patterns = [Pattern(f"{entity.lower()}_{i}", r, 0.8) for i, r in enumerate(regexes)]
            recognizers.append(
                PatternRecognizer(entity, patterns=patterns, supported_language=language)
            )
    return recognizers


def context_recognizers(
    language: str, names: NameLists, allowed_words: Sequence[str] = ()
) -> list[EntityRecognizer]:
    """People and postal addresses found from word lists, cue words and address layout, which
    the small spaCy model misses (see :mod:`redactor.people` and :mod:`redactor.addresses`)."""
    return [
        PersonCueRecognizer(names, allowed_words, supported_language=language),
        StreetAddressRecognizer(names, allowed_words, supported_language=language),
    ]


def build_recognizers(
    language: str,
    employee_ids: Sequence[str] = (),
    hostnames: Sequence[str] = (),
    names: NameLists | None = None,
    allowed_words: Sequence[str] = (),
) -> list[EntityRecognizer]:
    """Every recognizer the redactor registers, in one list. Without ``names`` (the model's
    vocabulary and the name gazetteer, :func:`redactor.names.name_lists`) the person and address
    recognizers are left out."""
    return [
        *pii_recognizers(language, names),
        *secret_recognizers(language),
        *identifier_recognizers(language, employee_ids, hostnames),
        *(context_recognizers(language, names, allowed_words) if names is not None else []),
    ]
