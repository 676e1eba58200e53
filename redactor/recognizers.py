"""The recognizers the redactor runs, built so that none of them touches the network.

Presidio's default registry loads dozens of country-specific recognizers and an e-mail recognizer
that, on first use, downloads the public-suffix list. The redactor instead builds an explicit,
small registry: the generic PII recognizers it needs, an offline e-mail recognizer, spaCy NER for
people and places, dates of birth and passport numbers after the words that announce them, links
that ask for a password and lead off the company's and well-known services' hosts (phishing),
and the secret detectors of :mod:`redactor.secrets` (Deskpilot's own, and detect-secrets').

To add a secret detector, append a recognizer to :func:`secret_recognizers`; its entity type is
then redacted like any other and, because it is a secret, it is exempt from the allow-list.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import tldextract
from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    SpacyRecognizer,
    UrlRecognizer,
    UsLicenseRecognizer,
    UsSsnRecognizer,
)

from redactor.addresses import StreetAddressRecognizer
from redactor.documents import NumberAfterWordsRecognizer
from redactor.names import NAME_PARTICLES, TECHNICAL_WORDS, NameLists, words_of_no_name
from redactor.people import PersonCueRecognizer, label_or_parameter
from redactor.phones import DATE, VersionAwarePhoneRecognizer
from redactor.secrets import (
    NOT_SECRETS,
    PASSWORD,
    SECRET_KEY_ENTITIES,
    CredentialRecognizer,
    DetectSecretsRecognizer,
    key_recognizers,
)

PHISHING_LINK = "PHISHING_LINK"
DATE_OF_BIRTH = "DATE_OF_BIRTH"

# Entity types whose values are secrets: never allow-listed, never echoed back (ARCHITECTURE.md).
SECRET_ENTITIES: frozenset[str] = frozenset({PASSWORD, *SECRET_KEY_ENTITIES})
# Types no policy may keep or flag and no allow-list may spare: the secrets, and a link that
# asks for a password on an outside host (a technician must not get it as a link to click).
ALWAYS_REDACTED: frozenset[str] = frozenset({*SECRET_ENTITIES, PHISHING_LINK})

__all__ = ["NOT_SECRETS", "PASSWORD"]

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

    def analyze(
        self,
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
        regex_flags: int | None = None,
    ) -> list[RecognizerResult]:
        """Presidio's matches, less a command's login target (``ssh admin@host``)."""
        results: list[RecognizerResult] = super().analyze(
            text, entities, nlp_artifacts, regex_flags
        )
        return [r for r in results if not login_target(text, r.start)]

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


class RoutableIpRecognizer(IpRecognizer):
    """Presidio's IP address recogniser, less the addresses that name no machine of anyone's:
    loopback ("127.0.0.1", "::1") and unspecified ("0.0.0.0", "::")."""

    def invalidate_result(self, pattern_text: str) -> bool:
        if super().invalidate_result(pattern_text):
            return True
        address = ipaddress.ip_interface(pattern_text).ip
        return address.is_loopback or address.is_unspecified


# A command that logs in to another machine: what follows it as user@host is a login target,
# not an e-mail address ("ssh netadmin@core-sw01", "scp report.pdf jdoe@fs01:/tmp/").
_LOGIN_COMMAND = re.compile(
    r"\b(?:ssh|scp|sftp|rsync|ssh-copy-id|mosh|sshfs|telnet|plink|pscp|psftp|autossh)\b[^\n]*$"
)


def login_target(text: str, start: int) -> bool:
    """Whether the address at ``start`` follows a login command on its line."""
    line_start = text.rfind("\n", 0, start) + 1
    return bool(_LOGIN_COMMAND.search(text, line_start, start)) and (
        start == 0 or text[start - 1] in " \t\"'="
    )


class _NoLoginTargetEmails(PatternRecognizer):
    """An e-mail pattern recogniser that leaves out a command's login target."""

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
        return [r for r in results if not login_target(text, r.start)]


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


def secret_recognizers(
    language: str, names: NameLists | None = None, secret_plugins: Sequence[str] = ()
) -> list[EntityRecognizer]:
    """The detectors for secrets: Deskpilot's own (values after words, vendor formats) and the
    ``secret_plugins`` of detect-secrets; extend this list for new kinds."""
    recognizers: list[EntityRecognizer] = [
        CredentialRecognizer(
            names.is_ordinary_word if names is not None else None,
            names.stop_words if names is not None else frozenset(),
            supported_language=language,
        ),
        *key_recognizers(language),
    ]
    if secret_plugins:
        recognizers.append(DetectSecretsRecognizer(secret_plugins, supported_language=language))
    return recognizers


class _Domains:
    """Registered domains looked up offline (tldextract's bundled suffix snapshot)."""

    def __init__(self, domains: Sequence[str]) -> None:
        self._extract = tldextract.TLDExtract(
            cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True
        )
        self._domains = frozenset(d.strip().casefold().lstrip(".") for d in domains if d.strip())

    def covers(self, host: str) -> bool:
        """True when ``host`` is one of the domains or a host under one."""
        host = host.casefold().rstrip(".")
        registered = self._extract(host).top_domain_under_public_suffix if host else ""
        return bool(registered) and (registered in self._domains or host in self._domains)


# A run of this many characters with no space, quote, bracket, comma or semicolon is a blob
# (base64, a minified file), no host name or link: the URL and host-name patterns, slow on long
# dotted runs ("a.a.a.a..."), do not look inside one.
LONGEST_TOKEN = 2048
_LONG_RUN = re.compile(rf"[^\s\"'<>()\[\]{{}}|,;]{{{LONGEST_TOKEN + 1},}}")
# Sixteen dot-separated labels or more are no host name (DNS names have a handful); Presidio's
# scheme-less URL pattern tries its thousand top-level domains at every dot of such a run.
_DOTTED_RUN = re.compile(r"(?:[^\s.]{1,63}\.){16,}[^\s.]*")


def without_long_runs(text: str) -> str:
    """``text`` with every run longer than :data:`LONGEST_TOKEN` and every run of sixteen
    dotted labels or more blanked out (same length, so offsets stay valid)."""
    if len(text) > LONGEST_TOKEN:
        text = _LONG_RUN.sub(lambda run: " " * len(run.group(0)), text)
    if text.count(".") >= 16:
        text = _DOTTED_RUN.sub(lambda run: " " * len(run.group(0)), text)
    return text


class _HostNameRecognizer(PatternRecognizer):
    """The company's host-name patterns, kept out of long blobs (:func:`without_long_runs`)."""

    def analyze(
        self,
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
        regex_flags: int | None = None,
    ) -> list[RecognizerResult]:
        results: list[RecognizerResult] = super().analyze(
            without_long_runs(text), entities, nlp_artifacts, regex_flags
        )
        return results


class PublicHostUrlRecognizer(UrlRecognizer):
    """Presidio's URL recogniser, less bare host names of well-known public services.

    "cannot reach login.microsoftonline.com" names a service, not a person: a scheme and host
    alone on one of ``public_domains`` is kept. A URL with a path, a query or a user part is
    still replaced (it may carry an account name, a token or a document's title).
    """

    def __init__(self, public_domains: Sequence[str], supported_language: str = "en") -> None:
        self._public = _Domains(public_domains)
        super().__init__(supported_language=supported_language)

    # Top-level domains that bare host names of two labels are written with; a two-letter
    # country code is always one.
    HOST_TOP_LEVEL_DOMAINS: frozenset[str] = frozenset(
        {
            "com", "org", "net", "edu", "gov", "mil", "int", "info", "biz", "io", "ai", "app",
            "dev", "cloud", "online", "site", "tech", "xyz", "example", "local", "corp",
            "internal", "lan", "intra", "intranet", "test", "localhost", "home", "office",
            "email", "company", "global", "group", "systems", "network", "solutions",
        }
    )  # fmt: skip
    # File names whose extension is also a top-level domain ("backup.sh", "README.md").
    FILE_EXTENSIONS: frozenset[str] = frozenset(
        {"sh", "py", "pl", "md", "ps", "rs", "so", "cs", "ts", "js", "rb", "go", "in", "am", "mp"}
    )

    def analyze(
        self,
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
        regex_flags: int | None = None,
    ) -> list[RecognizerResult]:
        """Presidio's matches, less those without a scheme that stop inside a word that is no
        host name ("auth.cl" of "auth.client", "cert.pe" of "cert.pem") or that are a file
        name ("backup.sh")."""
        results: list[RecognizerResult] = super().analyze(
            without_long_runs(text),
            entities,
            nlp_artifacts,
            regex_flags,
        )
        kept = []
        for result in results:
            value = text[result.start : result.end]
            if "://" not in value and not self._host_name(text, result.start, result.end):
                continue
            kept.append(result)
        return kept

    def _host_name(self, text: str, start: int, end: int) -> bool:
        rest = re.match(r"[^\s\"'()<>\[\]{}|,;]*", text[end:])
        remainder = rest.group(0) if rest else ""
        if remainder and text[end].isalnum():
            # The top-level domain was the start of a longer label: a host only when more
            # labels follow ("pc-12.corp.no|rthwind.example"), not a word ("auth.cl|ient").
            return bool(re.match(r"[a-z0-9-]*(?:\.[a-z0-9-]+)+(?:[:/]\S*)?$", remainder, re.I))
        labels = text[start:end].split("/")[0].split(":")[0].split(".")
        if len(labels) == 2 and labels[-1].casefold() in self.FILE_EXTENSIONS:
            return False
        # Two labels ending in a long generic top-level domain are a logger's or a module's
        # name ("mail.delivery", "auth.service"), unless a path follows.
        top = labels[-1].casefold()
        return not (
            len(labels) == 2
            and "/" not in text[start:end]
            and len(top) > 2
            and top not in self.HOST_TOP_LEVEL_DOMAINS
        )

    def invalidate_result(self, pattern_text: str) -> bool:
        value = pattern_text.strip("\"'")
        parts = urlsplit(value if "://" in value else f"//{value}")
        if parts.path.strip("/") or parts.query or parts.fragment or "@" in parts.netloc:
            return False
        return self._public.covers(parts.hostname or "")


class PhishingLinkRecognizer(EntityRecognizer):
    """A link whose text asks for a password or an account's details and that leads to a host
    that is neither the company's (``hostnames``) nor a well-known service's (``trusted``).

    Markdown ``[text](url)``, Jira ``[text|url]`` and HTML ``<a href="url">text</a>`` links are
    read; the link's target becomes ``<PHISHING_LINK_n>`` and its text stays, so a technician
    sees what was offered without a link to click. Whatever the policy says of URLs.
    """

    ENTITY = PHISHING_LINK
    SCORE = 0.95
    _LINKS = (
        re.compile(r"\[(?P<text>[^\]\n]{1,200})\]\((?P<url>[^()\s]{4,2000})\)"),
        re.compile(r"\[(?P<text>[^|\]\n]{1,200})\|(?P<url>[a-z][a-z0-9+.-]*://[^\]\s|]{1,2000})\]",
                   re.IGNORECASE),
        re.compile(
            r"<a\s[^>]*?href\s*=\s*[\"'](?P<url>[^\"'\s]{4,2000})[\"'][^>]*>(?P<text>[^<]{1,200})</a>",
            re.IGNORECASE,
        ),
    )  # fmt: skip
    _ASKS_FOR_CREDENTIALS = re.compile(
        r"pass\s?words?|passcode|\bpin\b|sign[\s-]?in|log[\s-]?in|log\s+on|verify|confirm|"
        r"account|credential|mailbox|payment|billing|card|unlock|suspend|secur|mfa|2fa|"
        r"authenticat|reset|update\s+your|validate|re-?activate",
        re.IGNORECASE,
    )

    def __init__(
        self,
        trusted_domains: Sequence[str],
        hostnames: Sequence[str] = (),
        supported_language: str = "en",
    ) -> None:
        self._trusted = _Domains(trusted_domains)
        self._internal = [re.compile(pattern, re.IGNORECASE) for pattern in hostnames]
        super().__init__(
            supported_entities=[self.ENTITY],
            supported_language=supported_language,
            name="PhishingLinkRecognizer",
        )

    def load(self) -> None:
        """Nothing to load."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        if "](" not in text and "|" not in text and "href" not in text.casefold():
            return []
        results = []
        for rule in self._LINKS:
            for link in rule.finditer(text):
                if not self._ASKS_FOR_CREDENTIALS.search(link.group("text")):
                    continue
                host = urlsplit(link.group("url")).hostname or ""
                if not host or self._trusted.covers(host):
                    continue
                if any(pattern.fullmatch(host) for pattern in self._internal):
                    continue
                results.append(
                    RecognizerResult(self.ENTITY, link.start("url"), link.end("url"), self.SCORE)
                )
        return results


# A date of birth after the words that announce one (a date alone is an incident's, a
# meeting's or a log line's, and stays).
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|"
    # German, French, Spanish, Italian, Dutch, Portuguese
    r"januar|j[äa]nner|februar|m[äa]rz|mai|juni|juli|oktober|dezember|"
    r"janvier|f[ée]vrier|mars|avril|juin|juillet|ao[ûu]t|septembre|octobre|novembre|"
    r"d[ée]cembre|enero|febrero|marzo|abril|mayo|junio|julio|agosto|se(?:p)?tiembre|octubre|"
    r"noviembre|diciembre|gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|"
    r"dicembre|januari|februari|maart|mei|augustus|janeiro|fevereiro|mar[çc]o|maio|junho|"
    r"julho|setembro|outubro|dezembro)\.?"
)
_DATE = (
    r"(?:\d{1,2}[./-]\d{1,2}[./-](?:\d{4}|\d{2})|\d{4}[./-]\d{1,2}[./-]\d{1,2}|"
    rf"\d{{1,2}}(?:st|nd|rd|th|er|º|\.)?(?:\s+(?:of|de|di))?\s+{_MONTH},?(?:\s+(?:de|del))?"
    rf"\s+\d{{4}}|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}})"
)
_BIRTH_WORDS = (
    r"date\s+of\s+birth|birth\s*date|birthdate|d\.?o\.?b\.?|born(?:\s+on)?|birthday|"
    r"geburtsdatum|geburtstag|geb\.(?:\s+am)?|geboren(?:\s+am)?|date\s+de\s+naissance|"
    r"n[ée]e?\s+le|fecha\s+de\s+nacimiento|naci(?:d[oa])?\s+el|nac[íi]\s+el|"
    r"data\s+di\s+nascita|nat[oa]\s+il|data\s+de\s+nascimento|nascid[oa]\s+em|"
    r"geboortedatum|geboren\s+op|data\s+urodzenia|urodzon[ya]|f[øö]dd?(?:\s+den)?|"
    r"f[øö]dselsdato|f[öo]delsedatum|syntym[äa]aika|sz[üu]let[ée]si\s+d[áa]tum|"
    r"do[ğg]um\s+tarihi|дата\s+рождения"
)
# A date of birth after its words, also when a few words of the same sentence stand between
# ("my date of birth shows the wrong year, it should be 02/11/1975").
DATE_OF_BIRTH_PATTERNS = [
    Pattern(
        "date_after_birth_words",
        # A digit or a month first (cheap), then the words before it (bounded: a long run of
        # letters or symbols costs one pass).
        rf"(?=\d|{_MONTH})(?<=(?<![^\W_])(?:{_BIRTH_WORDS})"
        r"(?:[^\S\n]{1,5}[^\s\d.!?;:()]{1,30}){0,10}?[^\S\n]{0,5}[:\-,]?[^\S\n]{0,5}\(?)"
        rf"{_DATE}(?![\w/.-]\d)",
        0.85,
    )
]


class _AfterItsWords(PatternRecognizer):
    """A pattern recogniser whose value follows words of its own ("date of birth", "passport"):
    the pattern, whose look-behind is costly at every position, runs only on text that holds
    one of them."""

    def __init__(self, words: str, **kwargs: Any) -> None:
        self._words = re.compile(rf"(?<![^\W_])(?:{words})", re.IGNORECASE)
        super().__init__(**kwargs)

    def analyze(
        self,
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
        regex_flags: int | None = None,
    ) -> list[RecognizerResult]:
        if not self._words.search(text):
            return []
        results: list[RecognizerResult] = super().analyze(
            text, entities, nlp_artifacts, regex_flags
        )
        return results


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
        kept = []
        for result in results:
            pieces = self._lines_of(text, result.start, result.end)
            for start, end in pieces:
                if len(pieces) > 1 and (
                    text.startswith(":", end) or self._one_english_word(text[start:end])
                ):
                    continue  # the next line's label or department: "Address:", "Finance"
                if not self.jargon(result.entity_type, text[start:end]) and not (
                    self._inside_a_token(text, start, end)
                    or label_or_parameter(text, start, end, self._names)
                ):
                    kept.append(RecognizerResult(result.entity_type, start, end, result.score))
        return kept

    def _one_english_word(self, value: str) -> bool:
        return (
            re.fullmatch(r"[^\W\d_]+", value) is not None
            and self._names.is_ordinary_word(value)
            and not self._names.is_given_name(value)
        )

    @staticmethod
    def _lines_of(text: str, start: int, end: int) -> list[tuple[int, int]]:
        """A span that runs over line breaks ("lombardo\ngarcia-smith", "Zugang Buchhaltung\n")
        as one span per line, each judged on its own: no name runs over a line break."""
        pieces = []
        for line in re.finditer(r"[^\n]+", text[start:end]):
            value = line.group(0)
            left = len(value) - len(value.lstrip())
            right = len(value.rstrip())
            if right > left:
                pieces.append((start + line.start() + left, start + line.start() + right))
        return pieces

    @staticmethod
    def _inside_a_token(text: str, start: int, end: int) -> bool:
        """The span is part of a longer token: "json" of "application/json", "admin" of
        "svc.admin@", "Teams" of "Microsoft.Teams"."""
        before = text[start - 1] if start > 0 else ""
        after = text[end] if end < len(text) else ""
        following = text[end + 1] if end + 1 < len(text) else ""
        return (
            (before != "" and before in "/._@=\\")
            or (after != "" and after in "/_@=\\")
            or (after == "." and following.isalnum())
        )

    # What no name of a person or a place holds: a word of letters and digits ("db01"), "_",
    # "=", "/", "@", a backslash ("HF_TOKEN", "Id=", "/volume1"); a line break, a command-line
    # flag or "&&" ("git log --oneline -3", "ping -c 4 gw && traceroute"); a hyphen joined to a
    # lower-case or all-capital part ("grafana-admin", "NW-Guest", "HR-Portal", where
    # "Jean-Luc" and "Schäfer-Lindner" stay); the password words that the model reads as names
    # in other languages ("hasło", "mein Passwort"); a month's short form at the head of a log
    # line ("Jun 02 09:14:51").
    _NOT_A_NAME = re.compile(
        r"[_=/@\\{}<>\[\]#$%|]|[^\W\d_]\d|\d[^\W\d_]|\n|(?:^|\s)--?[A-Za-z0-9]|&&|"
        r"[^\W\d_]-(?:[a-z]|[A-Z]{2,}(?![a-z]))|\b[A-Z]{2,}-[^\W\d_]"
    )
    _PASSWORD_WORD = re.compile(
        r"(?:(?:my|mon|ma|mein|mi|mijn|min|moje?|la|le|el|das)\s+)?"
        r"(?:kennwort|passwort|mot\s+de\s+passe|contrase[ñn]a|contrasena|senha|wachtwoord|"
        r"l[öo]senord|salasana|has[łl]o|heslo|jelsz[óo]|passord|password|passwd|pwd|pw|pass|"
        r"passcode|pin|pincode|mdp|ww|kennw)",
        re.IGNORECASE,
    )
    _MONTH_ABBREVIATION = re.compile(r"(?:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)", re.I)

    def jargon(self, entity_type: str, value: str) -> bool:
        """True for a lower-case span of English words or short tokens (see the class), for a
        span no name could be (see ``_NOT_A_NAME``), and for words of another language that no
        name holds: their function words ("Meine", "mijn", "niet"), greetings and closings
        ("Viele Grüße", "Cheers"), German abstract nouns ("Freischaltung"), or several lower-case
        words none of which is a given name ("del wifi de invitados", "joindre au")."""
        if self._NOT_A_NAME.search(value.strip()):
            return True
        if not re.search(r"[^\W\d_]", value):
            return True  # "•••": no letter, no name
        if (
            entity_type == "PERSON"
            and any(char.isdigit() for char in value)
            and all(
                (word.isupper() and len(word) <= 4) or self._names.is_ordinary_word(word)
                for word in re.findall(r"[^\W\d_]+", value)
            )
        ):
            return True  # "EUR 1,512.00" ("Mwangi 2" keeps its name)
        if any(word.casefold() in TECHNICAL_WORDS for word in re.findall(r"[^\W_]+", value)):
            return True  # "Bearer", "Cookie", "GiB", "jdbc"
        if self._PASSWORD_WORD.fullmatch(value.strip()) or self._MONTH_ABBREVIATION.fullmatch(
            value.strip()
        ):
            return True
        words = re.findall(r"[^\W_]+", value)
        if not words:
            return False
        if words_of_no_name(words, self._names):
            return True
        if not all(word.islower() or word.isdigit() for word in words):
            return self._product_words(words) or (
                entity_type == "PERSON" and self._acronym_and_words(words)
            )
        if self._product_words(words):
            return True  # "floor 2"
        if entity_type == "LOCATION":
            # short tokens ("va", "po"), or a phrase after a particle ("del portátil")
            return all(len(word) <= 3 for word in words) or (
                len(words) >= 2 and words[0] in NAME_PARTICLES
            )
        words = [word for word in words if not word.isdigit()] or words
        if len(words) >= 2 and not any(
            len(word) > 2 and word not in NAME_PARTICLES and self._names.is_common_given_name(word)
            for word in words
        ):
            return True  # "joindre au", "van de gedeelde", "devez vérifier"
        return all(
            len(word) <= 2
            or (self._names.is_ordinary_word(word) and not self._names.is_given_name(word))
            or (len(word) <= 3 and not self._names.is_given_name(word))
            for word in words
        )

    def _acronym_and_words(self, words: Sequence[str]) -> bool:
        """An acronym beside ordinary or lower-case words ("npm ERR", "PHP Warning"), or an
        acronym alone ("TODO", "PW"): no given name among them."""
        acronyms = [w for w in words if w.isupper() and 2 <= len(w) <= 5]
        if not acronyms or any(self._names.is_given_name(w) for w in words):
            return False
        others = [w for w in words if w not in acronyms]
        return all(w.islower() or self._names.is_ordinary_word(w) for w in others)

    def _product_words(self, words: Sequence[str]) -> bool:
        """A model or a room number with English words around it ("Floor 2", "Surface Pro 9")."""
        numbered = False
        for word in words:
            if any(char.isdigit() for char in word):
                numbered = True
            elif not self._names.is_ordinary_word(word):
                return False
        return numbered


def pii_recognizers(
    language: str, names: NameLists | None = None, public_domains: Sequence[str] = ()
) -> list[EntityRecognizer]:
    """Presidio's generic PII recognizers that matter in IT-support chats, all offline, with
    dates of birth, and passport, identity-card and employee numbers after their words."""
    return [
        OfflineEmailRecognizer(supported_language=language),
        VersionAwarePhoneRecognizer(supported_language=language),
        CreditCardRecognizer(supported_language=language),
        CaseInsensitiveIbanRecognizer(supported_language=language),
        RoutableIpRecognizer(supported_language=language),
        PublicHostUrlRecognizer(public_domains, supported_language=language),
        _AfterItsWords(
            _BIRTH_WORDS,
            supported_entity=DATE_OF_BIRTH,
            patterns=DATE_OF_BIRTH_PATTERNS,
            supported_language=language,
            name="DateOfBirthRecognizer",
        ),
        NumberAfterWordsRecognizer(supported_language=language),
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
        r"\d{2,4}(?:[\s.-]\d{2,4}){0,3}[\s.-]\d{2,6}(?:\s?x\d{1,5})?(?![\w/]|[.-]\d)",
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
    """Seven to fifteen digits, as phone numbers have: "error 404 500" near "phone" is not one,
    nor is a date ("2024-10-11").

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
        return not 7 <= digits <= 15 or DATE.fullmatch(pattern_text.strip()) is not None

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
        r"(?<![\w.+-])[A-Za-z0-9][\w.+-]{0,63}@(?!(?:sha\d+|md5):)[A-Za-z0-9][A-Za-z0-9-]{1,62}"
        r"(?:\.[A-Za-z0-9-]+)*\b",
        0.6,
    ),
]
# Six bytes, not six of a longer run: a certificate's thumbprint ("3A:7F:12:...:13", twenty
# bytes) or a version ("24124.2311.2911.3341") is no MAC address.
MAC_PATTERNS = [
    Pattern(
        "mac_colon_or_dash",
        r"(?<![0-9A-F][:-])(?<![0-9A-F])(?:[0-9A-F]{2}[:-]){5}[0-9A-F]{2}(?![:-]?[0-9A-F])",
        0.8,
    ),
    Pattern("mac_dotted", r"(?<![\w.])(?:[0-9A-F]{4}\.){2}[0-9A-F]{4}(?![.\w])", 0.6),
]


def identifier_recognizers(
    language: str, employee_ids: Sequence[str] = (), hostnames: Sequence[str] = ()
) -> list[EntityRecognizer]:
    """Device addresses, and the company's own employee ids and internal host names (patterns
    from settings)."""
    recognizers: list[EntityRecognizer] = [
        PatternRecognizer("MAC_ADDRESS", patterns=MAC_PATTERNS, supported_language=language),
        _NoLoginTargetEmails(
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
            kind = _HostNameRecognizer if entity == "HOSTNAME" else PatternRecognizer
            recognizers.append(kind(entity, patterns=patterns, supported_language=language))
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
    secret_plugins: Sequence[str] = (),
    public_domains: Sequence[str] = (),
) -> list[EntityRecognizer]:
    """Every recognizer the redactor registers, in one list. Without ``names`` (the model's
    vocabulary and the name gazetteer, :func:`redactor.names.name_lists`) the person and address
    recognizers are left out. ``secret_plugins`` are the detect-secrets plugins to run;
    ``public_domains`` the well-known services whose bare host names stay and whose links are
    never phishing."""
    return [
        *pii_recognizers(language, names, public_domains),
        *secret_recognizers(language, names, secret_plugins),
        PhishingLinkRecognizer(public_domains, hostnames, supported_language=language),
        *identifier_recognizers(language, employee_ids, hostnames),
        *(context_recognizers(language, names, allowed_words) if names is not None else []),
    ]
