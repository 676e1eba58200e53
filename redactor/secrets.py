"""Detectors for passwords, PINs, keys, tokens and credentials, in the forms people paste them.

Three sources, each a Presidio recogniser (the README says which rules are whose):

* **Vendor formats** (:data:`PATTERNS`, Deskpilot's own regexes): a value recognisable by its
  shape alone, from the vendors' documented prefixes and lengths (AWS, GitHub, GitLab, Slack,
  Google, Stripe, npm, Twilio, OpenAI, SendGrid, Hugging Face, Vault...), a JWT, a PEM/OpenSSH
  private-key block, a URL or connection string with a password in it.
* **Words in front of the value** (:class:`CredentialRecognizer`, Deskpilot's own): the forms
  people write in chats, config files, logs and shell history. ``DB_PASSWORD=x``,
  ``db_password: x``, ``"password": "x"``, ``X-Api-Key: x``; "my password is x", "pw is x",
  "the password I use is x", "my password's x", "p/w: x", "password x" with no verb when x looks
  like a password, a plain word given bare after its word where the sentence says whose it is,
  that it was used or that it failed ("with my password x I cannot log in", "my password x
  doesn't work"), "Kennwort: x" and the password words of other common languages; a remark
  between the word and its verb ("my password, if needed, is x"); a passphrase of several words
  (after "passphrase", the rest of its clause: "the passphrase: my cat likes warm milk"), a
  password spaced out letter by letter, one described ("the word tulip then 1987"); a user and
  password after "login" or "creds" (``admin/x``, ``admin:x``); PINs, passcodes and one-time
  codes, also written in groups ("482 913"); ``Authorization: Basic x``; and the shell's ways
  of passing one (``curl -u user:x``, ``mysql -px``, ``sshpass -p x``, ``--password=x``...).
* **detect-secrets** (:class:`DetectSecretsRecognizer`, Yelp's library): its keyword detector,
  its high-entropy string detectors and its vendor formats, run inside the redactor on the text
  only, never with its settings, filters, baseline files or verification (which would read
  files or call the vendors' APIs). Which of its plugins run is a setting
  (``REDACTOR_SECRET_PLUGINS``); the default keeps those that measured better on the
  development set.

Every kind is a secret: always redacted, never allow-listed. A keyword rule never begins with
``\\b`` (a prefix joined by ``_``, as in ``DB_PASSWORD``, must match), and the value's end is
found so that the text around it survives ("my password is X, please reset it" keeps its
comma).

What must not match (and is tested): git commit hashes, UUIDs, checksums, version strings, KB
numbers, error codes, ticket keys and base64 image data, which look random but carry nothing
secret; sentences about a password ("my password is expired", "password: see the
screenshot"); references instead of values (``${DB_PASSWORD}``, ``********``, ``<set in vault>``).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from redactor.credential_words import (
    ASIDE_WORDS,
    CHANGE_FILLERS,
    CHANGE_VERBS,
    CODE_SOURCE_VERBS,
    CODE_SOURCES,
    COMPOUND_CUE_ENDINGS,
    CONTEXT_WORDS,
    DEFAULT_PASSWORDS,
    DEFAULT_USERS,
    FILLERS,
    FOREIGN_CHANGE_BEFORE,
    FOREIGN_CHANGE_TO,
    FOREIGN_CHANGES,
    FOREIGN_VERBS,
    ONE_TIME_CODE_WORDS,
    PASSWORD_WORDS,
    PIN_WORDS,
    SECURITY_ANSWER_WORDS,
    SECURITY_QUESTION_WORDS,
    SECURITY_TOPIC_WORDS,
    SPELLED_OUT_CUE,
    STATE_WORDS,
    VERBS,
    WIFI_AND_DISK_KEY_WORDS,
)

PASSWORD = "PASSWORD"  # noqa: S105 - entity type names, not credentials  # nosec B105
PIN = "PIN"
BASIC_AUTH = "BASIC_AUTH"
AWS_ACCESS_KEY = "AWS_ACCESS_KEY"
AWS_SECRET_KEY = "AWS_SECRET_KEY"  # noqa: S105  # nosec B105 # an entity name
GITHUB_TOKEN = "GITHUB_TOKEN"  # noqa: S105  # nosec B105 # an entity name
GITLAB_TOKEN = "GITLAB_TOKEN"  # noqa: S105  # nosec B105 # an entity name
SLACK_TOKEN = "SLACK_TOKEN"  # noqa: S105  # nosec B105 # an entity name
GOOGLE_API_KEY = "GOOGLE_API_KEY"
AZURE_KEY = "AZURE_KEY"
STRIPE_KEY = "STRIPE_KEY"
NPM_TOKEN = "NPM_TOKEN"  # noqa: S105  # nosec B105 # an entity name
TWILIO_KEY = "TWILIO_KEY"
OPENAI_KEY = "OPENAI_KEY"
JWT = "JWT"
BEARER_TOKEN = "BEARER_TOKEN"  # noqa: S105  # nosec B105 # an entity name
PRIVATE_KEY = "PRIVATE_KEY"
CREDENTIAL_URL = "CREDENTIAL_URL"
API_KEY = "API_KEY"

_KEY_WORDS = (
    r"api[_\- ]?key|apikey|api[_\- ]?token|access[_\- ]?token|auth[_\- ]?token|token|secret|"
    r"client[_\- ]?secret|secret[_\- ]?key|access[_\- ]?key|private[_\- ]?token|credentials?"
)
# Not preceded by a letter or digit; an underscore may come before ("DB_PASSWORD", "MY_TOKEN").
_START = r"(?<![^\W_])"

PATTERNS: dict[str, list[Pattern]] = {
    AWS_ACCESS_KEY: [
        Pattern("aws_access_key_id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", 0.95)
    ],
    AWS_SECRET_KEY: [
        Pattern(
            "aws_secret_access_key",
            rf"(?<={_START}aws[_\- ]?secret[_\- ]?(?:access[_\- ]?)?key\s*(?:[:=]|is)\s*[\"']?)"
            r"[A-Za-z0-9/+=]{40}\b",
            0.95,
        )
    ],
    GITHUB_TOKEN: [
        Pattern("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", 0.95),
        Pattern("github_fine_grained", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", 0.95),
    ],
    GITLAB_TOKEN: [
        # Personal, deploy, feed, runner, OAuth, trigger, CI job and incoming-mail tokens.
        Pattern(
            "gitlab_token",
            r"(?<![\w-])(?:glpat|gldt|glft|glsoat|glrt|gloas|glptt|glagent|glimt|glcbt)-"
            r"[A-Za-z0-9_\-]{20,64}(?![\w-])",
            0.95,
        ),
        Pattern("gitlab_runner_registration", r"\bGR1348941[A-Za-z0-9_\-]{20,50}(?![\w-])", 0.95),
    ],
    SLACK_TOKEN: [
        Pattern("slack_token", r"\bxox[abposre]-[A-Za-z0-9\-]{10,250}", 0.95),
        Pattern(
            "slack_webhook",
            r"https://hooks\.slack\.com/(?:services|workflows)/T[A-Za-z0-9]+/[A-Za-z0-9/]+",
            0.95,
        ),
    ],
    GOOGLE_API_KEY: [
        Pattern("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", 0.95)
    ],
    AZURE_KEY: [
        Pattern("azure_account_key", r"(?<=\bAccountKey=)[A-Za-z0-9+/]{40,}={0,2}", 0.95),
        Pattern(
            "azure_shared_access_key", r"(?<=\bSharedAccessKey=)[A-Za-z0-9+/]{30,}={0,2}", 0.95
        ),
        Pattern("azure_sas_signature", r"(?<=[?&]sig=)[A-Za-z0-9%+/=]{20,}", 0.9),
    ],
    STRIPE_KEY: [
        # Secret and restricted keys, live or test, and webhook signing secrets; publishable
        # keys (pk_) are public by design.
        Pattern("stripe_key", r"(?<![\w-])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,247}\b", 0.95),
        Pattern("stripe_webhook_secret", r"(?<![\w-])whsec_[0-9A-Za-z]{20,}\b", 0.95),
    ],
    NPM_TOKEN: [Pattern("npm_token", r"(?<![\w-])npm_[A-Za-z0-9]{36}\b", 0.95)],
    TWILIO_KEY: [
        # Account and API-key ids: 32 hex digits after AC or SK.
        Pattern("twilio_sid", r"\b(?:AC|SK)[0-9a-f]{32}\b", 0.9),
    ],
    OPENAI_KEY: [
        Pattern(
            "openai_key",
            r"(?<![\w-])sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,200}"
            r"(?![\w-])",
            0.9,
        ),
    ],
    JWT: [
        Pattern(
            "jwt",
            r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{10,}",
            0.95,
        )
    ],
    BEARER_TOKEN: [Pattern("bearer", r"(?<=\bbearer\s{1,5})[A-Za-z0-9\-._~+/]{16,}=*", 0.9)],
    PRIVATE_KEY: [
        # To the END line, or to the end of the text when the paste was cut short.
        Pattern(
            "private_key_block",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            1.0,
        )
    ],
    CREDENTIAL_URL: [
        # scheme://user:password@host... (databases, brokers, git remotes, proxies); the user
        # may be empty ("redis://:password@host").
        Pattern(
            "url_with_password",
            r"\b[a-z][a-z0-9+.\-]{1,30}://[^\s:/@\"'<>]*:[^\s@/\"'<>]+@[^\s\"'<>]+",
            0.95,
        )
    ],
    API_KEY: [
        Pattern(
            "key_after_keyword",
            rf"(?<={_START}(?:{_KEY_WORDS})(?![^\W_])\s*(?:[:=]|is)\s*[\"']?)"
            r"[A-Za-z0-9_\-/+=.~]{16,200}",
            0.6,
        ),
    ],
}
# Tokens recognised by their shape alone (a vendor's prefix and length, a product key's
# groups): API keys, with no randomness check.
VENDOR_TOKEN_PATTERNS: list[Pattern] = [
    # Other vendors' prefixed tokens: SendGrid, Hugging Face, Anthropic, Vault, SonarQube,
    # PyPI, Sentry, Shopify, Databricks, DigitalOcean, Doppler, Linear, Postman, Atlassian.
    Pattern(
        "vendor_prefixed_token",
        r"(?<![\w-])(?:SG\.[\w-]{16,32}\.[\w-]{20,64}|hf_[A-Za-z0-9]{30,}|"
        r"sk-ant-[A-Za-z0-9_\-]{20,200}|hv[sbr]\.[A-Za-z0-9_\-]{20,200}|"
        r"sq[upa]_[0-9a-f]{40}|pypi-AgE[A-Za-z0-9_\-]{50,}|sntry[su]_[A-Za-z0-9_=+/\-]{30,}|"
        r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}|dapi[0-9a-f]{32}|do[opr]_v1_[0-9a-f]{64}|"
        r"dp\.(?:st|sa|ct|scim|audit)\.[A-Za-z0-9_\-]{20,}|lin_api_[A-Za-z0-9]{40}|"
        r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}|ATATT3[A-Za-z0-9_\-=]{50,})(?![\w-])",
        0.9,
    ),
    # More vendors: Docker Hub, Grafana, New Relic, Google OAuth, Tailscale, Mailgun,
    # Bitbucket, age, Pulumi, Supabase, Figma, Groq, Replicate, Perplexity, xAI, NuGet,
    # RubyGems, PlanetScale, Dynatrace, Terraform Cloud, Mapbox secret, Notion, Airtable,
    # JFrog, Heroku, Azure AD client secrets ("xxx8Q~...").
    Pattern(
        "more_vendor_tokens",
        r"(?<![\w-])(?:dckr_pat_[\w-]{27,}|glc_[A-Za-z0-9+/=_-]{32,400}|glsa_\w{32}_[0-9a-f]{8}"
        r"|NR(?:AK|JS|II)-[A-Z0-9]{27}|GOCSPX-[\w-]{28}|ya29\.[\w-]{20,}|1//0[\w-]{40,}|"
        r"tskey-(?:api|auth|client|webhook)-[\w-]{10,}|key-[0-9a-f]{32}|ATBB[A-Za-z0-9_=.-]{32,}"
        r"|AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}|pul-[0-9a-f]{40}|"
        r"sbp_[0-9a-f]{40}|figd_[\w-]{40,}|gsk_[A-Za-z0-9]{48,}|r8_[A-Za-z0-9]{37}|"
        r"pplx-[0-9a-f]{48}|xai-[A-Za-z0-9]{64,}|oy2[a-z0-9]{43}|rubygems_[0-9a-f]{48}|"
        r"pscale_(?:tkn|pw|oauth)_[\w.-]{32,64}|dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}|"
        r"[A-Za-z0-9]{14}\.atlasv1\.[\w=-]{60,70}|sk\.eyJ[\w-]{20,}\.[\w-]{20,}|"
        r"secret_[A-Za-z0-9]{43}|ntn_\d{11}[A-Za-z0-9]{35}|pat[A-Za-z0-9]{14}\.[0-9a-f]{64}|"
        r"AKCp[A-Za-z0-9]{69}|HRKU-[\w-]{36,}|[\w~.-]{3}\dQ~[\w~.-]{31,34})(?![\w~-])",
        0.9,
    ),
    # A Windows or Office product key: five groups of five letters and digits.
    Pattern(
        "product_key",
        r"(?<![\w-])(?=(?:[A-Z-]{0,28}\d){3})(?=(?:[0-9-]{0,28}[A-Z]){3})"
        r"[A-Z0-9]{5}(?:-[A-Z0-9]{5}){4}(?![\w-])",
        0.85,
    ),
]

SECRET_KEY_ENTITIES: frozenset[str] = frozenset({*PATTERNS, PASSWORD, PIN, BASIC_AUTH})


def entropy_bits(value: str) -> float:
    """Shannon entropy per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


class _RandomLookingValue(PatternRecognizer):
    """A value after a key word counts only when it looks random: letters and digits mixed, high
    entropy, and not a hex digest or a UUID (those identify things, they unlock nothing). The
    vendor-prefixed tokens of the same entity type are recognised by their prefix alone."""

    _PREFIXED = re.compile(r"^(?:SG\.|hf_|sk-ant-|hv[sbr]\.|sq[upa]_|pypi-|sntry|shp|dapi|do[opr]_|"
                           r"dp\.|lin_api_|PMAK-|ATATT3)")  # fmt: skip

    def invalidate_result(self, pattern_text: str) -> bool:
        value = pattern_text.strip("\"'.,;")
        if self._PREFIXED.match(value):
            return False
        if len(value) < 16:
            return True
        has_letter = any(c.isalpha() for c in value)
        has_digit = any(c.isdigit() for c in value)
        hexish = all(c in "0123456789abcdefABCDEF-" for c in value)
        return not (has_letter and has_digit) or hexish or entropy_bits(value) < 3.5


def key_recognizers(language: str) -> list[EntityRecognizer]:
    """One pattern recogniser per vendor-format entity type (:data:`PATTERNS`)."""
    recognizers: list[EntityRecognizer] = []
    for entity, patterns in PATTERNS.items():
        kind = _RandomLookingValue if entity == API_KEY else PatternRecognizer
        recognizers.append(
            kind(
                supported_entity=entity,
                patterns=patterns,
                supported_language=language,
                name=f"{entity.title().replace('_', '')}Recognizer",
            )
        )
    recognizers.append(
        PatternRecognizer(
            supported_entity=API_KEY,
            patterns=VENDOR_TOKEN_PATTERNS,
            supported_language=language,
            name="VendorTokenRecognizer",
        )
    )
    return recognizers


# ------------------------------------------------------------------------------------------------
# Values after words: config assignments, chat sentences, PINs, headers and shell commands


# The password words of every language in :mod:`redactor.credential_words`, the keys that are
# passwords (Wi-Fi and recovery keys), and "password" spelled out letter by letter.
KEY_WORDS_OF_PASSWORDS = "|".join(
    [*PASSWORD_WORDS.values(), WIFI_AND_DISK_KEY_WORDS, SECURITY_ANSWER_WORDS, SPELLED_OUT_CUE]
)
# After these a value needs no verb ("password Hunter2x!") when it looks like a password.
_NO_VERB_WORDS = re.compile(
    rf"{PASSWORD_WORDS['en']}|kennwort|passwort|mot\s+de\s+passe|mdp|contrase[ñn]a|senha|"
    r"wachtwoord|l[öo]senord|salasana|has[łl]o|heslo|jelsz[óo]|passord|[şs]ifre|пароль|psk|"
    rf"{SPELLED_OUT_CUE}",
    re.IGNORECASE,
)
# Verbs between the words and the value, in the languages above.
_VERBS = "|".join([r"is\s+called|was\s+called|is\s+named|was\s+named", *VERBS.values()])
_FOREIGN_VERBS = FOREIGN_VERBS
# Nouns that make the password word part of another thing ("password policy", "key ID").
_COMPOUND_NOUNS: frozenset[str] = frozenset(
    {
        "id", "identifier", "policy", "policies", "hint", "hints", "manager", "field", "reset",
        "expiry", "expiration", "length", "requirements", "rules", "change", "prompt", "page",
        "portal", "history", "complexity", "strength", "vault", "file", "protected", "box",
        "screen", "dialog", "window", "form", "attempts", "age", "setting", "settings",
        "question", "questions",
        # what a message about a password is about ("my password problem is back", "password
        # sync failed", "my password reset link"): never the password itself
        "problem", "problems", "issue", "issues", "trouble", "troubles", "request", "requests",
        "ticket", "tickets", "situation", "thing", "things", "stuff", "mess", "nightmare",
        "hell", "saga", "drama", "hassle", "headache", "complaint", "complaints", "query",
        "queries", "concern", "enquiry", "inquiry", "sync", "writeback", "recovery", "reminder",
        "reminders", "update", "updates", "notice", "notices", "email", "emails", "mail",
        "message", "messages", "letter", "link", "links", "error", "errors", "warning",
        "warnings", "alert", "alerts", "tool", "tools", "app", "apps", "generator", "checker",
        "meter", "requirement", "rule", "login", "logon", "entry", "entries", "status", "check",
        "checks", "list", "sheet", "spreadsheet", "document", "note", "notes", "book", "keeper",
        "store", "storage", "database", "cache", "keychain", "wallet", "card", "feature",
        "function", "option", "options", "button", "section", "tab", "menu", "prompts", "popup",
        "pop-up", "boxes", "text", "input", "label", "format", "limit", "limits", "count",
        "counter", "lifetime", "cycle", "process", "procedure", "flow", "wizard", "service",
        "server", "system", "site", "website", "account", "accounts", "user", "users", "access",
        "help", "support", "team", "desk", "helpdesk", "guide", "instructions", "steps",
        "article", "video", "training", "course", "audit", "report", "spray", "dump", "leak",
        "breach", "attack", "crack", "cracker", "crackers", "encryption", "auth", "mfa", "sso",
        "reuse", "lock", "lockout", "lockouts", "retry", "retries", "timeout", "business",
        "game", "rotation", "sharing", "type", "types", "hygiene", "strategy", "approach",
        "advice", "practice", "habit", "knowledge", "memory", "fatigue", "chaos", "crisis",
        "disaster", "tip", "trick", "clue", "idea",
    }
)  # fmt: skip
# Words that link the password word to what it is for: "the password for the portal is X",
# "la clave del portal es X" (the noun after them is no compound: "password portal is down").
_LINKING_WORDS: frozenset[str] = frozenset(
    {
        "for", "of", "to", "on", "at", "in", "into", "del", "de", "du", "des", "da", "do", "dos",
        "das", "di", "della", "dello", "für", "zum", "zur", "vom", "van", "voor", "het", "per",
        "pour", "para", "na", "no", "po", "till", "til", "för", "på",
    }
)  # fmt: skip
_ADVERBS = rf"(?:{FILLERS})"
# Articles, which like the linking words say where a secret is for without adding to how far
# its verb is ("la clave de la impresora de la planta de Bilbao es X").
_ARTICLES: frozenset[str] = frozenset(
    {"the", "a", "an", "la", "le", "les", "el", "los", "las", "der", "die", "dem", "den", "il",
     "lo", "gli", "o", "os", "as", "een", "my", "mi", "mon", "ma", "mein", "meine", "mijn"}
)  # fmt: skip


def _content_words(between: str) -> int:
    """How many words of ``between`` are neither linking words nor articles."""
    return sum(
        word.casefold() not in _LINKING_WORDS and word.casefold() not in _ARTICLES
        for word in between.split()
    )


# The word starts a token, or follows "_", "-", a quote or a bracket ("DB_PASSWORD",
# "--password", '"password"') or an escaped line break in a logged string ("\npassword"), never
# a symbol inside a value ("R3gistry!Pass"). The password words of German, Dutch and the
# Nordic languages also end compounds ("Gerätepasswort", "adminwachtwoord").
_ESCAPED_BREAK = r"(?<=\\[nrt])"
_ESCAPED_LINE_BREAK = re.compile(r"\\[nrt]")
_PASSWORD_CUE = re.compile(
    rf"(?:(?<![^\s\"'`(\[{{<,;>_*=-])|{_ESCAPED_BREAK})(?P<kw>{KEY_WORDS_OF_PASSWORDS})(?!\w)"
    rf"|(?<=[^\W\d_])(?P<compound>{COMPOUND_CUE_ENDINGS})(?!\w)",
    re.IGNORECASE,
)
# "key" alone, in a sentence about a Wi-Fi network: "WLAN für Besucher: SSID ACME-Guest,
# Schlüssel Gast-WLAN-2024!", "guest wifi, key: Sunny-Meadow-42".
_WIFI_KEY_CUE = re.compile(
    r"(?<![^\W_])(?P<kw>key|passkey|schl[üu]ssel|cl[ée]|clave|sleutel|chiave|nyckel|n[øo]gle)"
    r"(?![^\W_])",
    re.IGNORECASE,
)
_WIFI_WORDS = re.compile(r"wi-?fi|wlan|ssid|wpa|wireless|hotspot|guest\s+network", re.IGNORECASE)
# A key or token after its word with no verb, when it is long and random ("the auth token
# 4e7d1a9c...", "secret_access_key Zp4n..." in a command line), and an environment entry
# written as a name and a value on two lines.
_KEY_CUE = re.compile(
    r"(?<![^\W_]|\$)(?:api[_\s-]?key|api[_\s-]?token|auth[_\s-]?token|access[_\s-]?token|"
    r"access[_\s-]?key|secret[_\s-]?key|client[_\s-]?secret|token|secret)(?!\w)"
    r"(?:\s+(?:is|was))?[ \t]+(?P<value>[^\s\"'`]{16,200})",
    re.IGNORECASE,
)
_NAME_THEN_VALUE = re.compile(
    r"\bname:[ \t]*[\"']?(?P<name>[\w.\-]{2,80})[\"']?[ \t]*\r?\n[ \t]*value:[ \t]*",
)
_VERB_AT = re.compile(
    rf"(?:^|(?<=\s))(?P<verb>{_VERBS})(?:\s+{_ADVERBS}){{0,3}}(?=\s|$)\s*:?"
    r"|(?P<sign>[:=])",
    re.IGNORECASE,
)
# "login: jsmith / Welcome123", "creds for the test box are admin / Adm!n2024"
_USER_SLASH_PASSWORD = re.compile(
    r"\b(?:login|logon|user(?:name)?|account|creds?|credentials|log(?:ging)?\s+in|"
    r"sign(?:ing)?\s+in|logged\s+in)\b[^\n/]{0,40}?[\s:]"
    # a slash with a space on both sides or on neither: "jdoe /persistent:yes" is a switch
    r"(?P<user>[\w.@\\-]{2,40})(?:/|\s/\s)(?P<value>[^\s/]{4,64})",
    re.IGNORECASE,
)
# "using default credentials admin:Cam3ra99", "creds root:Toor2024!": a user name with a letter in
# it, a colon, the password. Not "user@host:path" (a copy target), not "jdoe:1001:1001:..." (a
# passwd line) nor "aa:bb:cc" (a MAC address): no "@" in the user, no ":" after the value.
_USER_COLON_PASSWORD = re.compile(
    r"\b(?:login|logon|user(?:name)?|account|creds?|credentials)\b[^\n:/;&|]{0,40}?\s"
    r"(?P<user>(?=[\w.\\-]*[^\W\d_])[\w.\\-]{1,40}):(?P<value>[^\s:/@]{4,64})(?![:/@])",
    re.IGNORECASE,
)
# A factory account and its default password, with no word before them: "the Ricoh still has
# admin / admin", "the switch answers to cisco:cisco on telnet". A word of logging in must be
# near; an owner and group ("chown root:root") or a container's user ("-u root:root") is none.
_DEFAULT_PAIR = re.compile(
    r"(?<![\w@/:.\\-])(?P<user>[A-Za-z][\w.-]{1,30})[ \t]?[:/][ \t]?"
    r"(?P<value>[^\s:/@,;'\"()]{2,30})(?![\w:/@\\.-])"
)
_DEFAULT_PAIR_CONTEXT = re.compile(
    r"\b(?:telnet|ssh|log(?:ged)?[\s-]?(?:in|on)|login|logon|sign[\s-]?in|web\s?(?:ui|interface|"
    r"page|login|admin)|default|factory|credentials?|creds|answers\s+to|password|passwort|"
    r"console|username|account|rdp|ftp|snmp|accepts?)\b",
    re.IGNORECASE,
)
_OWNER_OR_CONTAINER_USER = re.compile(
    r"\b(?:chown|chgrp|install|rsync|tar)\b[^\n]*$|(?:^|\s)(?:-u|--user|--chown|user:)\s*=?\s*$",
    re.IGNORECASE,
)
_IMAGE_TAG = re.compile(r"v?\d+(?:\.\d+)+[\w.-]*", re.IGNORECASE)
# "tried Passw0rd! and P@ssw0rd1": values tried, when a password word is near.
_TRIED = re.compile(
    r"\b(?P<verb>tried|try|typed?|entered|enter|used|use|using|keyed|put)(?:\s+in)?\s+(?:with\s+)?"
    r"(?P<values>[^\s,]{4,64}"
    r"(?:(?:,\s*|\s+(?:and|or)\s+)[^\s,]{4,64})*)",
    re.IGNORECASE,
)
_PASSWORD_NEAR = re.compile(r"pass\s?word|passwd|\bpwd?\b|\bp/w\b", re.IGNORECASE)
_POSSESSIVE_S = re.compile(r"['’]s(?=\s)", re.IGNORECASE)
_ASIDE_THEN_SIGN = re.compile(r"\s*\([^()\n]{1,40}\)\s*[:=]", re.IGNORECASE)
# A remark between the word and its verb: "my password, if needed, is X", "the password (new
# one) is X", "my password - just in case - is X".
_ASIDE_THEN_VERB = re.compile(
    r"(?:\s*,[ \t]*[^,\n]{1,40}?,|[ \t]+[-–—]{1,2}[ \t]+[^\n]{1,40}?[ \t]+[-–—]{1,2}|"
    r"\s*\([^()\n]{1,40}\))"
    r"(?=[ \t]+(?:is|was|ist|lautet|war|est|es|era|é|è|är|var|er|je|jest)[ \t])",
    re.IGNORECASE,
)
# A negation between the word and its verb: "the password is not", "password never was".
_NEGATION = re.compile(
    r"\b(?:not|n't|never|no|nicht|kein|pas|jamais|nunca|niet|geen|non|nie)\b|[=]", re.IGNORECASE
)
# After the password word, a remark that may hold commas, then a colon or a dash and a space, on
# the same line and in the same sentence.
_LATE_SIGN = re.compile(r"(?P<remark>[^\n.!?:=]{1,80}?)(?:\s?:|\s[-–])[ \t]+(?=\S)")
_DASH_SIGN = re.compile(r"\s+[-–]\s+(?=\S)")
_GLUED_DASH = re.compile(r"[-–](?=[^\W_]{2})")  # not "P-A-S-S-W-O-R-D"

# "the word tulip then 1987", "the letters abc then the numbers 4455", "orange followed by 2468"
_DESCRIBED = re.compile(
    r"(?:the\s+)?(?:word|letters?|numbers?|digits?|year)\s+"
    r"(?P<first>[^\s,.;]+)(?P<rest>(?:\s+(?:then|followed\s+by|and\s+then|plus|and|with(?:\s+an?)?)"
    r"\s+(?:the\s+)?(?:word|letters?|numbers?|digits?|year|number)?\s*[^\s,.;]+)+)?",
    re.IGNORECASE,
)
_FOLLOWED_BY = re.compile(r"\s+(?:then|followed\s+by|and\s+then|plus)\s+(?P<next>[^\s,.;]+)",
                          re.IGNORECASE)  # fmt: skip

# Config and code: NAME = value, NAME: value, "NAME": "value", NAME := value, NAME => value.
_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z_][\w.\-]{0,80}?)(?P<quote>[\"']?)[ \t]*(?P<op>:=|=>|==|=|:)(?!//)[ \t]*"
)
_XML_ELEMENT = re.compile(
    r"<(?P<name>[A-Za-z_][\w.\-]{0,60})>(?P<value>[^<>\n]{1,200})</(?P=name)>"
)
_XML_KEY_VALUE = re.compile(
    r"""\b(?:key|name)\s*=\s*["'](?P<name>[^"'\n]{1,80})["']\s+value\s*=\s*"""
    r"""(?P<q>["'])(?P<value>[^"'\n]{0,200})(?P=q)""",
    re.IGNORECASE,
)
# Configuration directives that take a password after a space: Redis' requirepass and
# masterauth, kickstart's rootpw, keepalived's auth_pass, Cisco IOS' enable secret, username ...
# password/secret, SNMP community, pre-shared and TACACS/RADIUS keys. At the start of a line.
_DIRECTIVE = re.compile(
    r"^[ \t]*(?:requirepass|masterauth|rootpw(?:[ \t]+--plaintext)?|auth_pass|"
    r"enable[ \t]+(?:secret|password)|username[ \t]+\S+(?:[ \t]+privilege[ \t]+\d+)?[ \t]+"
    r"(?:password|secret)|snmp-server[ \t]+community|(?:ikev[12][ \t]+)?pre-shared-key"
    r"(?:[ \t]+(?:local|remote|address[ \t]+\S+))?|crypto[ \t]+isakmp[ \t]+key|"
    r"(?:tacacs|radius)-server[ \t]+key|key-string)(?:[ \t]+[0-9])?[ \t]+(?P<value>(?!--)\S+)",
    re.IGNORECASE | re.MULTILINE,
)
# A quoted name, then its value, in code: define('DB_PASSWORD', 'x'), $cfg['password'] = 'x',
# os.environ["API_TOKEN"] = "x", ENV['SECRET'] = 'x', props.put("password", "x").
_QUOTED_NAME_VALUE: tuple[re.Pattern[str], ...] = (
    # a call's first two arguments: define('DB_PASSWORD', 'x'), setenv("TOKEN", "x")
    re.compile(
        r"""\(\s*(?P<q1>["'])(?P<name>[A-Za-z_][\w.\-]{0,80})(?P=q1)\s*,\s*"""
        r"""(?P<q2>["'])(?P<value>[^"'\n]{1,200})(?P=q2)"""
    ),
    # an index or an arrow: $cfg['password'] = 'x', ENV["API_TOKEN"] = "x", 'password' => 'x'
    re.compile(
        r"""(?P<q1>["'])(?P<name>[A-Za-z_][\w.\-]{0,80})(?P=q1)\s*(?:\]\s*=|=>)\s*"""
        r"""(?P<q2>["'])(?P<value>[^"'\n]{1,200})(?P=q2)"""
    ),
)
# An element named like a secret whose value is in a child element, as Windows answer files
# and some exports write it: <AdministratorPassword><Value>X</Value>...
_XML_VALUE_CHILD = re.compile(
    r"<(?P<name>[A-Za-z_][\w.\-]{0,60})(?:\s[^<>]{0,200})?>\s*"
    r"<(?P<child>Value|value|Text|text|Content|content|Data|data|String|string)>"
    r"(?P<value>[^<>\n]{1,200})</(?P=child)>"
)
# Delimited text with a column named like a secret: a cheap test before reading its lines.
_SECRET_COLUMN_HINT = re.compile(r"pass|pwd|secret|token|key|pin\b", re.IGNORECASE)
_COLUMN_NAME = re.compile(r"[A-Za-z_][\w .\-]{0,40}")
_CSV_CELL = {
    delimiter: re.compile(rf'[ \t]*"(?P<quoted>(?:[^"]|"")*)"[ \t]*|(?P<plain>[^{delimiter}]*)')
    for delimiter in ",;\t|"
}


def _csv_cells(line: str, delimiter: str, offset: int) -> list[tuple[int, int]]:
    """Where each cell of a delimited ``line`` is (its value, inside quotes), as offsets into
    the text the line starts at ``offset`` of."""
    cells: list[tuple[int, int]] = []
    position = 0
    while True:
        cell = _CSV_CELL[delimiter].match(line, position)
        if cell is None:  # pragma: no cover - the plain alternative matches the empty string
            return cells
        group = "quoted" if cell.group("quoted") is not None else "plain"
        start, end = cell.start(group), cell.end(group)
        while group == "plain" and end > start and line[end - 1] in " \t":
            end -= 1
        while group == "plain" and start < end and line[start] in " \t":
            start += 1
        cells.append((offset + start, offset + end))
        position = cell.end()
        if position >= len(line) or line[position] != delimiter:
            return cells
        position += 1


# A line of a PostgreSQL password file: host:port:database:user:password.
_PGPASS_LINE = re.compile(
    r"^[ \t]*[\w.*-]+:(?:\d{1,5}|\*):[\w.*-]+:[\w.*@-]+:(?P<value>[^\s:][^\s]*)[ \t]*$",
    re.MULTILINE,
)
_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

_PASSWORD_NAME_WORDS: frozenset[str] = frozenset(
    {
        "password", "passwd", "pwd", "pw", "pass", "passphrase", "pword", "pwrd", "kennwort",
        "passwort", "contrasena", "senha", "wachtwoord", "losenord", "salasana", "haslo",
        "psk", "pswd", "psw", "passcode", "keymaterial", "masterauth", "requirepass",
    }
)  # fmt: skip
_PASSWORD_NAME_ENDINGS = ("password", "passwd", "passphrase", "pass_phrase", "keymaterial")
# Names of a key whose value is a password ("keyMaterial" of a Wi-Fi profile, "pre_shared_key").
_PASSWORD_NAME_PAIRS: frozenset[str] = frozenset(
    {"key material", "shared key", "wifi key", "wpa key", "wlan key", "network key"}
)
# Names of a session cookie or an HTTP authentication value: their value is a credential when
# it looks random ("sessionid=8f2k...", "_auth = ZGVw...", "connect.sid=s%3A...").
_SESSION_NAME_ENDINGS = ("sessionid", "sessid", "session", "session_id", "_auth", "basic_auth",
                         "http_auth", "proxy_auth", "authkey", "auth_key")  # fmt: skip
_KEY_NAME_WORDS: frozenset[str] = frozenset({"token", "secret", "apikey", "credential", "creds"})
_KEY_NAME_PAIRS: frozenset[str] = frozenset(
    {
        "api key", "secret key", "access key", "private key", "account key", "auth key",
        "client key", "encryption key", "signing key", "master key", "app key", "shared key",
        "service key", "subscription key", "license key", "crypt key", "hmac key", "jwt key",
        "session key", "webhook key", "access id",
    }
)  # fmt: skip
# Words that may follow the secret word at the end of a name ("SECRET_KEY_BASE").
_NAME_TAILS: frozenset[str] = frozenset({"base", "value", "b64", "hex", "plain", "raw", "str"})
_PIN_NAME_WORDS: frozenset[str] = frozenset({"pin", "passcode", "pincode"})
# The words before "key" in the names of keys that unlock nothing: a table's, a cache's, a
# translation's, a public key, a key's id or file.
_NOT_SECRET_KEY_WORDS: frozenset[str] = frozenset(
    {
        "public", "pub", "primary", "foreign", "sort", "partition", "cache", "idempotency",
        "routing", "lookup", "translation", "i18n", "message", "dedup", "dedupe", "unique",
        "composite", "object", "map", "dict", "hash", "registry", "hot", "short", "shortcut",
        "sequence", "index", "field", "column", "row", "group", "event", "tag", "label", "name",
        "id", "file", "path", "fingerprint", "ssh", "gpg", "pgp", "host", "known", "dns",
        "verify", "verification", "range", "s3", "bucket", "redis", "kv",
    }
)  # fmt: skip

# PINs, passcodes and one-time codes: the words (any language, see
# :mod:`redactor.credential_words`), then their verb or sign, then digits. Four kinds of cue:
# a PIN's words ("pin", "door code", "SIM-PIN", "pincode"), a one-time code's ("verification
# code", "OTP", "Bestätigungscode", "code de vérification"), "the code for the X", and "the
# code" alone, which also names errors and so needs more (see ``CredentialRecognizer._pins``).
_PIN_CUE = re.compile(
    rf"(?:{_START}|{_ESCAPED_BREAK})(?P<kw>(?P<pin>{PIN_WORDS})|"
    rf"(?P<otp>{ONE_TIME_CODE_WORDS})|"
    r"(?P<app>authenticator(?:\s+app)?|(?:mfa|2fa|totp)(?:\s+token)?)|"
    r"(?P<forcode>code\s+(?:for|to|of)\s+(?:the\s+|my\s+)?[\w-]+(?:\s+(?!(?:is|was|are|were)\b)[\w-]+)?)|"
    r"(?P<bare>(?:(?<=\bthe\s)|(?<=\bmy\s)|(?<=\byour\s)|(?<=\bthis\s)|(?<=\bthat\s)|"
    r"(?<=\ba\s)|(?<=\bnew\s)|(?<=\buse\s)|(?<=\benter\s)|(?<=\btype\s)|"
    r"(?<=\binput\s)|(?<=[,;]\s))codes?))(?![^\W_])",
    re.IGNORECASE,
)
# What may stand between a PIN's word and its digits: a sign, "no.", "number", "#".
_CODE_SIGN = re.compile(
    r"(?:[ \t]+(?:no\.?|nr\.?|number|num|#))?[ \t]*(?:[:=#]|[-–](?=[ \t]))?[ \t]*", re.IGNORECASE
)
# A relative clause or an apposition after the word: "my PIN, which is 2580", "the PIN, 2580,
# doesn't work", "my password, which is Hunter2!, fails".
_WHICH_IS = re.compile(
    rf"[ \t]*,[ \t]*(?:which|that|it|and\s+it)(?:[ \t]+(?:is|was)|'s|’s)"
    rf"(?:[ \t]+(?:{FILLERS}))?[ \t]+",
    re.IGNORECASE,
)
_APPOSITION = re.compile(r"[ \t]*,[ \t]*(?=\S)")
# An app, a device or a message that shows a code: "the authenticator shows 305 718", "the sms I
# got has 5512 03 in it".
_CODE_SOURCE = re.compile(
    rf"{_START}(?:{CODE_SOURCES})(?P<words>(?:[ \t]+[^\s\d.,;:!?]+){{0,3}}?)[ \t]+"
    rf"(?:{CODE_SOURCE_VERBS})(?!\w)(?:[ \t]+(?:me|now|just|still|only))?[ \t]*:?[ \t]*",
    re.IGNORECASE,
)
# A code: digits in groups ("482 913", "48-29-13"), digits spaced out one by one ("4 8 2 9",
# "4 - 8 - 2 - 1"), or one run of digits; recovery codes also of letters and digits
# ("8h3k-29dm"). Never the start of a longer number, a date or a version.
_CODE_VALUE = re.compile(
    r"(?P<value>\d{2,5}(?P<sep>[ -])\d{2,5}(?:(?P=sep)\d{1,5}){0,2}(?![ -]?\d)|"
    r"\d(?:[ ]?[-.][ ]?\d|[ ]\d){3,9}(?!\d)|\d{3,10}\#?)"
    r"(?![\w.,/:-]\d|[\w/-])"
)
# A PIN spelled in number words: "four four one nine", "eight-one-four-two".
# The number words of English, German, French, Spanish, Dutch, Italian and Portuguese.
_NUMBER_WORD = (
    r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|null|eins|zwei|drei|vier|f[üu]nf|"
    r"sechs|sieben|acht|neun|z[ée]ro|un|deux|trois|quatre|cinq|sept|huit|neuf|cero|uno|dos|tres|"
    r"cuatro|cinco|seis|siete|ocho|nueve|nul|een|twee|vijf|zes|zeven|negen|due|tre|quattro|"
    r"cinque|sei|sette|otto|nove|um|dois|tr[êe]s|sete|oito)"
)
_WORD_CODE = re.compile(
    rf"(?P<value>{_NUMBER_WORD}(?:[ \t]*[-,]?[ \t]*{_NUMBER_WORD}){{3,9}})(?![\w-])", re.IGNORECASE
)
# Codes of letters and digits: in groups ("8h3k-29dm", "QX4T-88ZA-K2P9-7MMB-1RTC") or one run
# with two letters and two digits at least ("Fj82kq", a meeting's passcode).
_ALNUM_CODE = re.compile(
    r"(?P<value>(?=[a-z0-9-]*\d)(?=[a-z0-9-]*[a-z])"
    r"(?:[a-z0-9]{4,5}-[a-z0-9]{4,5}|[a-z0-9]{3,6}(?:-[a-z0-9]{3,6}){2,7}|"
    r"(?=(?:[a-z]{0,10}\d){2})(?=(?:\d{0,10}[a-z]){2})[a-z0-9]{5,12}))(?![\w-])",
    re.IGNORECASE,
)
# A code before the words that say it is one, as a text message puts it: "771 340 is your
# code", "482913 ist Ihr Bestätigungscode", "Fj82kq est votre code".
_VALUE_IS_YOUR_CODE = re.compile(
    r"(?<![\w-])(?P<value>\d[\d -]{2,10}\d|(?=[A-Za-z]{0,9}\d)[A-Za-z0-9]{5,10})[ \t]+"
    r"(?:is|ist|est|es|è|é|is\s+je|to\s+tw[óo]j|är\s+din|er\s+din)[ \t]+"
    r"(?:your|ihr|dein|votre|ton|tu|su|il\s+tuo|o\s+seu|je|uw)[ \t]+(?:[\w-]+[ \t]+){0,2}?"
    r"(?:code|passcode|pin|otp|codice|c[óo]digo|kod|koodi|token|tan)\b",
    re.IGNORECASE,
)
# Places and things a fixed code opens: "the safe is stuck, code 4-9-1-7-3".
_PHYSICAL_ACCESS = re.compile(
    r"\b(?:safe|door|gate|lock|locker|keypad|alarm|badge|vault|cabinet|garage|entrance|"
    r"tresor|t[üu]r|coffre|porte|caja\s+fuerte|puerta|kluis|deur|cassaforte|porta)\b",
    re.IGNORECASE,
)
_CODE_IN_BRACKETS = re.compile(r"[ \t]*\(")
# "my pin is 1357 or 1537": another code of the same length as an alternative.
_OR_ANOTHER = re.compile(
    r"[ \t]*(?:,[ \t]*)?(?:or|oder|ou|o|of|eller)[ \t]+(?:maybe[ \t]+|perhaps[ \t]+)?"
)
# "I enter 2468 to unlock it", "typing 0451 to get into the phone".
_ENTERED_TO_UNLOCK = re.compile(
    r"\b(?:enter|type|put\s+in|key\s+in|tap|use)(?:s|ed|ing)?\s+(?:in\s+)?(?P<value>\d{4,8})\s+"
    r"(?:to|for)\s+(?:unlock|open|get\s+in|get\s+into|sign\s+in|log\s+in|access|wake)",
    re.IGNORECASE,
)
# What a card, a letter or an app does with a code: "the PUK on the card says 58203391".
_CODE_SAYS = re.compile(
    r"(?:^|(?<=\s))(?:says|said|shows|showed|reads|displays|displayed|gives|gave)\b[ \t]*:?",
    re.IGNORECASE,
)
# "now it shows 119364" once an app or a code was named before.
_IT_SHOWS = re.compile(
    r"\b(?:and\s+|now\s+|then\s+)?it\s+(?:now\s+|then\s+)?(?:shows?|says|displays?|gives?|reads)"
    r"\b[ \t]*:?[ \t]*",
    re.IGNORECASE,
)
# Words of signing in with a second factor near "the code": "Okta Verify ... I can only see the
# code 730215".
_SECOND_FACTOR = re.compile(
    r"\b(?:okta|duo|verify|authenticator|mfa|2fa|otp|push|sign(?:ing)?[\s-]?in|log(?:ging)?[\s-]?in|"
    r"login|one[-\s]time|sms|texted|token|app)\b",
    re.IGNORECASE,
)
# More codes of a list after the first: "8342 1907, 5521 6038 and 7788 9900".
_NEXT_IN_LIST = re.compile(r"\s*(?:,|;|/|&|\band\b|\bor\b|\bund\b|\bet\b|\by\b|\ben\b)\s*",
                           re.IGNORECASE)  # fmt: skip
# Words after the digits that make them a count, not a code ("12 34 digits long", "3 tries").
_UNIT_AFTER = re.compile(
    r"\s*(?:digits?|characters?|chars?|letters?|numbers?|times?|tries|attempts?|minutes?|mins?|"
    r"hours?|days?|seconds?|secs?|%|ziffern|stellen|zeichen|versuchen?|chiffres|caract[èe]res|"
    r"d[íi]gitos|caracteres|cijfers|tekens|cifre|caratteri|cyfr|znak[óo]w)\b",
    re.IGNORECASE,
)
# Words near "the code" that say it is an error's or a program's, not a one-time code.
_ERROR_CONTEXT = re.compile(
    r"\b(?:error|errors|exit|exited|status|http|return(?:ed|s)?|fault|event|reason|result|"
    r"fail(?:s|ed|ure)?|abort(?:s|ed)?|"
    r"response|hresult|err|stop|bug|crash|fehler(?:code)?|erreur|fout(?:code)?|errore|erro|"
    r"b[łl][ąa]d|zip|postal|post|area|country|source|qr|bar|promo|discount|coupon)\b",
    re.IGNORECASE,
)
# Words near "the code" that say it was sent or shown for a sign-in.
_ONE_TIME_CONTEXT = re.compile(
    r"\b(?:sent|send|texted|text|sms|got|get|received|receive|gave|give|emailed|e-?mail|mail|"
    r"app|authenticator|phone|login|log\s+in|sign(?:ing)?[\s-]?in|verify|verification|"
    r"confirm|expired?|expires|timed\s+out|valid|mfa|2fa|otp|one[-\s]time|reçu|erhalten|"
    r"recibido|ontvangen|ricevuto|recebido)\b",
    re.IGNORECASE,
)
# "use code 552918", "enter the code 552918": the verb before the word.
_ENTER_BEFORE = re.compile(r"\b(?:use|enter|type|input)\s+(?:the\s+)?$", re.IGNORECASE)
# Eight digits starting "80", as Windows error codes are written without "0x" ("80070005").
_WINDOWS_ERROR = re.compile(r"80[0-9a-f]{6}", re.IGNORECASE)

# "the code is 404 503" names HTTP statuses, not a one-time code.
_HTTP_STATUS_CODES: frozenset[str] = frozenset(
    {
        "200", "201", "202", "204", "301", "302", "304", "307", "308", "400", "401", "403",
        "404", "405", "406", "408", "409", "410", "413", "415", "422", "429", "500", "501",
        "502", "503", "504",
    }
)  # fmt: skip

# The shell's ways of passing a password, each with the value in a group named "value".
_SHELL_VALUE = (
    r"""(?:'(?P<sq>[^'\n]{1,200})'|"(?P<dq>[^"\n]{1,200})"|(?P<value>[^\s'"|;&<>][^\s|;&<>]*))"""
)
# The rest of the command line up to the flag (bounded, so that a long line without the flag
# costs one pass, not one per position).
_THEN = r"[^\n|;&]{0,400}?\s"
_SHELL_RULES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(rule, re.IGNORECASE)
    for rule in (
        # curl/wget/http -u user:password, --user user:password, --user=user:password
        r"\b(?:curl|wget|http|https|httpie)\b[^\n|;&]{0,400}?\s(?:-u\s*|--user[=\s]\s*)"
        r"['\"]?[^\s:'\"]+:(?=[^\s'\"])" + _SHELL_VALUE,
        # httpie -a user:password, lftp -u user,password
        r"\b(?:http|https|httpie)\b" + _THEN + r"(?:-a|-A|--auth)[=\s]\s*['\"]?[^\s:'\"]+:"
        r"(?=[^\s'\"])" + _SHELL_VALUE,
        r"\blftp\b" + _THEN + r"-u\s*['\"]?[^\s,'\"]+,(?=[^\s'\"])" + _SHELL_VALUE,
        # mysql -pPASSWORD (only glued and lower-case: "-p dbname" prompts, "-P3306" is a port),
        # and 7-Zip's -pPASSWORD
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mariadb(?:-dump)?|7z[ar]?)\b"
        + _THEN
        + r"(?-i:-p)(?=[^\s])"
        + _SHELL_VALUE,
        # tools whose -p/-a takes the password as the next word
        r"\b(?:sshpass|mongo|mongosh|mongodump|mongorestore|(?:docker|podman|buildah|helm\s+"
        r"registry|oras|skopeo)\s+login|az\s+login|Connect-\w+|sqlcmd|bcp)\b"
        r"[^\n|;&]{0,400}?\s(?:-p|-P|--password|-Password)\s+" + _SHELL_VALUE,
        r"\b(?:rdesktop|psexec(?:64)?|paexec|cqlsh)\b" + _THEN + r"(?-i:-p)\s+(?!-)" + _SHELL_VALUE,
        r"\b(?:ipmitool|mosquitto_(?:pub|sub|rr)|zip|unzip|osql|isql)\b"
        + _THEN
        + r"(?-i:-P)\s+(?!-)"
        + _SHELL_VALUE,
        r"\b(?:plink|pscp|psftp|putty|kitty)\b" + _THEN + r"-pw\s+" + _SHELL_VALUE,
        r"\bredis-cli\b" + _THEN + r"-a\s+" + _SHELL_VALUE,
        r"\binflux\b" + _THEN + r"-password\s+" + _SHELL_VALUE,
        # the LDAP tools' -w (lower-case: -W prompts)
        r"\bldap(?:search|modify|add|delete|modrdn|compare|passwd|whoami|exop|url)\b"
        + _THEN
        + r"(?-i:-w)\s*"
        + _SHELL_VALUE,
        # SNMP community strings and v3 passphrases (not the default "public")
        r"\bsnmp(?:walk|get|getnext|set|bulkwalk|bulkget|trap|table|test|df|status)\b"
        + _THEN
        + r"(?-i:-[cAX])\s*(?!public\b)"
        + _SHELL_VALUE,
        # --password=x, --http-password x, --passphrase x (not --password-stdin, --password-file)
        r"(?<!\S)--(?:[a-z0-9]+-)*(?:password|passwd|pass|pwd|pw|passphrase)(?:=|\s+)"
        + _SHELL_VALUE,
        # PowerShell's -Password, -AccountPassword, -NewPassword x (a SecureString is read below)
        r"(?<!\S)-(?:\w*Password|Passphrase)\s+(?![(\-])" + _SHELL_VALUE,
        # Windows tools' /p:x, /pass:x, /password:x (FreeRDP, cmdkey, wmic, WinSCP) and /rp x
        r"(?<!\S)/(?:p|pass|password|pwd)[:=](?=[^\s])" + _SHELL_VALUE,
        r"\bschtasks\b" + _THEN + r"/rp\s+(?=[^\s/*])" + _SHELL_VALUE,
        # openssl -pass pass:x, -passin pass:x, -passout pass:x; keytool's -storepass x
        r"(?<!\S)-pass(?:in|out)?\s+pass:" + _SHELL_VALUE,
        r"(?<!\S)-(?:store|key|srcstore|deststore|srckey|destkey)pass\s+(?!:)" + _SHELL_VALUE,
        # Samba's -U user%password (smbclient, rpcclient, smbmap, net rpc...)
        r"(?<!\S)-U\s*['\"]?[^\s%'\"]+%" + _SHELL_VALUE,
        r"\bnet\s+use\b[^\n]{0,400}?/user:\S+\s+(?=[^\s/*])" + _SHELL_VALUE,
        # net use [drive] \\host\share password /user:...: the password before the user
        r"\bnet\s+use\s+(?:[A-Za-z]:\s+|\*\s+)?\\\\\S+\s+(?=[^\s/*])" + _SHELL_VALUE,
        r"\bnet\s+user\s+\S+\s+(?=[^\s/*])" + _SHELL_VALUE,
        r"\bhtpasswd\s+(?:-\w+\s+)*-[a-zA-Z]*b[a-zA-Z]*\s+(?:-\w+\s+)*\S+\s+\S+\s+" + _SHELL_VALUE,
        r"\becho\s+(?=\S)" + _SHELL_VALUE + r"\s*\|\s*sudo\b[^\n|]*\s-S\b",
        r"\becho\s+(?=\S)" + _SHELL_VALUE + r"\s*\|\s*(?:sudo\s+)?passwd\b[^\n|]*--stdin",
        r"\bConvertTo-SecureString\s+(?:-String\s+)?" + _SHELL_VALUE + r"\s+-AsPlainText",
        r"\bConvertTo-SecureString\s+(?:-AsPlainText\s+|-Force\s+)+(?:-String\s+)?" + _SHELL_VALUE,
        r"\bchpasswd\b.{0,400}?<<<\s*['\"]?[^\s:'\"]+:" + _SHELL_VALUE,
        # mysqladmin password x, rabbitmqctl add_user u x, nmcli ... password x,
        # wpa_passphrase ssid x, db2 connect to db user u using x
        r"\bmysqladmin\b" + _THEN + r"password\s+" + _SHELL_VALUE,
        r"\brabbitmqctl\s+(?:add_user|change_password)\s+\S+\s+" + _SHELL_VALUE,
        r"\bnmcli\b"
        + _THEN
        + r"(?:password|wifi-sec\.psk|802-11-wireless-security\.psk)\s+"
        + _SHELL_VALUE,
        r"\bwpa_passphrase\s+(?:'[^'\n]*'|\"[^\"\n]*\"|\S+)\s+" + _SHELL_VALUE,
        r"\bconnect\s+to\s+\S+\s+user\s+\S+\s+using\s+" + _SHELL_VALUE,
        # Oracle's user/password@database
        r"\b(?:sqlplus|sqlldr|expdp|impdp|rman)\s+(?:-\w+\s+)*['\"]?[\w$#.]+/"
        r"(?P<value>[^\s@/'\"]+)(?=@|\s|$|['\"])",
    )
)
# Flags that take a key or a token: the value counts when it looks random.
_SHELL_KEY_RULES: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"(?<!\S)--(?:[a-z0-9]+-)*(?:token|secret|api-?key|auth-?key|client-secret|access-key|"
        r"secret-key|private-token|access-token|auth-token|oauth2-bearer)(?:=|\s+)" + _SHELL_VALUE,
        re.IGNORECASE,
    ),
    re.compile(
        r"(?<!\S)-(?:Token|Secret|ApiKey|AccessToken|ClientSecret|AuthKey)\s+(?![(\-])"
        + _SHELL_VALUE
    ),
)
# Authorization headers and header-like fields.
_HEADER_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        BASIC_AUTH,
        re.compile(
            r"(?:\b|(?<=\\[nrt]))authorization['\"]?\s*[:=]\s*['\"]?basic\s+"
            r"(?P<value>[A-Za-z0-9+/_\-]{6,}={0,2})",
            re.IGNORECASE,
        ),
    ),
    (
        API_KEY,
        re.compile(
            r"(?:\b|(?<=\\[nrt]))authorization['\"]?\s*[:=]\s*['\"]?(?:token|apikey|api-key|key|"
            r"sso-key|ssws|"
            r"genieKey|splunk|digest)\s+(?P<value>[^\s'\"]{8,})",
            re.IGNORECASE,
        ),
    ),
)
# A password given before its word: "I use Mango&Kiwi55 as password", "Fl4sh!Gordon is my new
# password", "Kiwi!2024 ist mein Passwort", "Soleil#12 c'est mon mot de passe". The value starts
# its clause.
_SECRET_NOUN = (
    rf"(?:{PASSWORD_WORDS['en']}|{'|'.join(list(PASSWORD_WORDS.values())[1:])}|pin|passcode)"
)
_VALUE_BEFORE_WORD = re.compile(
    r"\b(?:use[sd]?|using|chose|set|typed?)\s+(?P<value>[^\s\"'`]{4,64})\s+as\s+(?:my\s+|the\s+"
    r"|a\s+)?(?:password|passphrase|passwd|pwd|pw|pin)\b",
    re.IGNORECASE,
)
# The same in the other languages: "j'ai mis X comme mot de passe", "puse X como contraseña",
# "ik gebruik X als wachtwoord", "ho messo X come password".
_VALUE_AS_ITS_WORD = re.compile(
    r"(?P<value>[^\s\"'`]{4,64})\s+(?:als|comme|como|come|jako|som)\s+(?:(?:mein|meine|mon|ma|le|"
    r"la|mi|el|mijn|het|de|il|o|a|nouveau|nouvelle|nuevo|nueva|neues|nieuw|nieuwe)\s+)*"
    rf"(?:{_SECRET_NOUN})(?!\w)",
    re.IGNORECASE,
)
_VALUE_THEN_ITS_WORD = re.compile(
    r"(?:^|(?<=[\n,;:.!?(]\s)|(?<=[\n(]))(?P<value>[^\s\"'`]{4,64})\s+"
    r"(?:is|was|=|would\s+be|will\s+be|ist|war|est|c'est|était|es|era|è|é|is|jest|to|är)\s+"
    r"(?:my|the|our|his|her|your|mein|meine|das|mon|ma|le|la|mi|il|o|a|mijn|het|de|moje)\s+"
    r"(?:(?:new|old|current|temporary|temp|default|real|actual|neues|neue|altes|alte|nouveau|"
    r"ancien|nueva|nuevo|vieja|nieuwe|oude|nuovo|nuova)\s+)?"
    rf"{_SECRET_NOUN}(?!\w)",
    re.IGNORECASE,
)
# A password given with a change verb: "changed it to X", "I reset my password this morning to
# X", "changed my password from X to Y", "I've set my PIN to 4471".
_CHANGED_TO = re.compile(
    rf"\b(?:{CHANGE_VERBS})\s+(?:it|(?:my|the|our|his|her|your|their|a)\s+(?:[\w-]+\s+)?"
    rf"{_SECRET_NOUN})(?!\w)(?:\s+{CHANGE_FILLERS}){{0,3}}"
    r"(?:\s+from\s+(?P<old>[^\s\"'`]{4,64}))?\s+(?:to|into|as)\s+(?P<value>[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# The same in other languages: "Passwort auf X geändert" (the verb after the value), "changé
# mon mot de passe en X", "cambié mi contraseña a X", "wachtwoord gewijzigd naar X".
_CHANGED_TO_ABROAD = (
    re.compile(
        rf"(?:{_SECRET_NOUN})\s+(?:\w+\s+){{0,2}}?auf\s+(?P<value>[^\s\"'`]{{4,64}})\s+"
        rf"{FOREIGN_CHANGES[0]}",
        re.IGNORECASE,
    ),
    re.compile(
        rf"\b(?:{FOREIGN_CHANGE_BEFORE})\s+(?:[\w']+\s+){{0,3}}?(?:{_SECRET_NOUN})\s+"
        rf"(?:[\w']+\s+){{0,2}}?(?:{FOREIGN_CHANGE_TO})\s+(?P<value>[^\s\"'`]{{4,64}})",
        re.IGNORECASE,
    ),
    re.compile(
        rf"(?:{_SECRET_NOUN})\s+(?:[\w']+\s+){{0,2}}?(?:{FOREIGN_CHANGE_BEFORE})\s+"
        rf"(?:{FOREIGN_CHANGE_TO})\s+(?P<value>[^\s\"'`]{{4,64}})",
        re.IGNORECASE,
    ),
)
_PIN_NOUN = re.compile(r"\b(?:pin|passcode|pincode|puk)\b", re.IGNORECASE)
# A file: an extension ("vpn.log", "Setup.EXE"), a rotated log's number after a name in small
# letters ("syslog.1"; "Blue.Fish.9", capitalised words, is a password's shape), or a path.
_FILE_NAME = re.compile(r"\.[a-zA-Z]{2,4}$|^[a-z0-9_.-]+\.\d$|[/\\]")
# "the new one is X", "the old one was X", "new one: X", "the last one I had was 0909", "then I
# tried the old one X"; "das neue X", "het oude was X", "la nueva es X": the adjective alone
# stands for the password in the other languages.
_THE_OTHER_ONE = re.compile(
    r"\b(?:(?:(?:the|my|and|a)\s+)?(?:new|old|current|previous|temporary|temp|default|initial|"
    r"other|second|first|right|correct|real|actual|original|latest|last|neue|alte|nouveau|ancien|"
    r"nuevo|nueva|nieuwe|oude)\s+(?:one|1|eins|un|uno)\b"
    r"|(?:das|die|der|den)\s+(?:neue|alte|aktuelle|richtige|vorherige)|het\s+(?:nieuwe|oude)|"
    r"(?:el|la)\s+(?:nuevo|nueva|viejo|vieja|antiguo|antigua|anterior)|"
    r"(?:le|la)\s+(?:nouveau|nouvelle|ancien|ancienne)|l['’](?:ancien|ancienne|actuel|actuelle)|"
    r"(?:o|a)\s+(?:novo|nova|antigo|antiga))"
    r"(?P<clause>\s+(?:i|we|you|she|he)\s+(?:had|have|used|use|set|chose|picked|typed|tried))?"
    r"(?P<verb>\s+(?:is|was|would\s+be|will\s+be|should\s+be|ist|war|est|es|era|[ée]tait|é|"
    r"c['’](?:est|[ée]tait))"
    r"(?:\s+now)?\s*:?|\s*[:=])?"
    r"[ \t]+(?P<value>[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# "it's X" once a password word was written ("I forgot my password, it's X", "... it was X"),
# or when the words after it say it is one ("it's X, the same one I use for the VPN", "its X all
# lowercase"). The value may be spelled out ("it's H a r b o u r l i g h t 7").
_ITS = re.compile(
    rf"(?:^|(?<=[\s,;.?!(]))(?:it'?s|it’s|it\s+is|it\s+was|that'?s|that\s+is|that\s+was)"
    rf"(?:\s+(?:{FILLERS}))?[ \t]+"
    r"(?P<value>(?:[^\s\"'`] ){5,}[^\s\"'`](?!\S)|[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
_SAME_ONE_AFTER = re.compile(
    r"^[,;]?\s*(?:(?:it'?s|the|my)\s+)?(?:same\s+(?:one|as|pw|password|pass)|usual\s+one|"
    r"one\s+I\s+(?:always\s+)?use|I\s+(?:always\s+)?use\s+(?:it\s+)?(?:for|everywhere|on))",
    re.IGNORECASE,
)
# What the letters of a value are, said right after it: "all lowercase", "with capital H",
# "case sensitive", "no spaces", "caps lock was on": the value was typed, so it is a secret.
_LETTERS_AFTER = re.compile(
    r"^[ \t]*[,(–—-]?[ \t]*"
    r"(?:all\s+(?:in\s+)?(?:lower|upper|small|capital)[\s-]?(?:case|letters|caps)?"
    r"|(?:with\s+)?(?:a\s+|an\s+)?(?:capital|uppercase|upper-case|lowercase|lower-case|small)"
    r"\s+(?:letter\s+)?\w\b|(?:it'?s\s+)?case[\s-]sensitive|no\s+spaces|(?:with\s+)?caps\s+lock)",
    re.IGNORECASE,
)
# The words of a message about signing in: a value typed or tried there is a password even
# with no password word ("locked after I typed Summer2024!!", "tried X, still says wrong
# credentials").
_SIGN_IN_WORDS = re.compile(
    r"pass\s?word|passwd|\bpwd?\b|\bp/w\b|\bcreds?\b|credentials?|"
    r"\blog(?:ged|ging)?[\s-]?(?:in|on)\b|\blog(?:in|on)\b|\bsign(?:ed|ing)?[\s-]?in\b|\blocked\b|"
    r"\block(?:ed)?[\s-]?out\b|\bunlock|\bcaps[\s-]?lock\b|case[\s-]sensitive|\bsso\b|\banmeld|"
    r"\beinlogg|\bgesperrt\b|\bconnexion\b|\binloggen\b|\biniciar\s+sesi[óo]n\b|\bkennwort|"
    r"\bpasswort|\bwachtwoord|\bcontrase|\bsenha\b|\bmot\s+de\s+passe\b|"
    # what the sign-in page answers
    r"\bwrong\b|\bincorrect\b|\binvalid\b|\brejected\b|\bdenied\b|\bnot\s+accepted\b",
    re.IGNORECASE,
)
# "X is what I typed", "X thats what I set on friday", "X was what she entered".
_WHAT_I_TYPED = re.compile(
    r"(?:^|(?<=[\s,;:.!?(]))(?P<value>[^\s\"'`]{4,64})\s*,?\s+"
    r"(?:is|was|that'?s|thats|that\s+is|that\s+was|=)\s+(?:exactly\s+|also\s+)?what\s+"
    r"(?:i|we|he|she|they)(?:'ve|\s+have|\s+had)?\s+(?:just\s+|always\s+|usually\s+)?"
    r"(?:typed?|set|use[sd]?|entered|enter|put\s+in|chose|picked|tried|gave)\b",
    re.IGNORECASE,
)
# "I just use the same for everything: X", "same one everywhere - X".
_SAME_EVERYWHERE = re.compile(
    r"\bsame(?:\s+(?:one|password|pw|pass))?\s+(?:for\s+(?:everything|all(?:\s+\w+)?|"
    r"every\s+\w+)|everywhere|on\s+all\s+\w+)[ \t]*[:,–—-][ \t]*(?P<value>[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# A password given in parts once a password word was written: "the first part is Blue and then
# 2021", "it starts with Sun and ends with 88, Sunshine88".
_IN_PARTS = re.compile(
    r"\b(?:(?:the\s+)?(?:first|1st)\s+(?:part|half|bit|word)\s+(?:is|was)|(?:starts|begins)\s+"
    r"with)\s+(?P<first>[^\s,.;]{2,40})(?:,?\s+(?:and\s+)?(?:then|(?:the\s+)?(?:second|last|other|"
    r"rest)(?:\s+(?:part|half|bit))?\s+(?:is|was)|ends?\s+with)\s+(?P<last>[^\s,.;]{1,40}))?"
    r"(?:,\s*(?P<whole>[^\s,;]{4,64}))?",
    re.IGNORECASE,
)
# A value said again after it was described: ", so Daisy2019", ", i.e. Daisy2019".
_RESTATED = re.compile(
    r"[^.!?\n]{0,80}?,[ \t]*(?:so|i\.e\.|that\s+is|also|donc|o\s+sea|dus|d\.h\.)[ \t]*[:,]?[ \t]*"
    r"(?P<value>(?=\S*\d)[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# What must stand before "starts with": the password, "it" or "mine", not an id or a name.
_PARTS_OF_A_SECRET = re.compile(
    rf"(?:\b(?:it|mine|one)|{PASSWORD_WORDS['en']}|pin|passcode|kennwort|passwort)[ \t]+"
    r"(?:(?:just|always|also|then)[ \t]+)?$|^\s*$|[.,;:!?][ \t]*(?:and[ \t]+)?(?:the[ \t]+)?$",
    re.IGNORECASE,
)
# "it's all lowercase: gardenparty", "case sensitive: Gardenparty".
_LETTERS_THEN_VALUE = re.compile(
    r"\b(?:all\s+(?:in\s+)?(?:lower|upper|small)[\s-]?case|no\s+(?:capitals|caps|spaces)|"
    r"case[\s-]sensitive)[ \t]*[:–—-][ \t]*(?P<value>[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# A user and password joined by a colon in a message about signing in, with no word before
# them: "jdoe:Pine2022 doesn't work on the portal".
_BARE_USER_COLON = re.compile(
    r"(?<![\w@/.:\\-])(?P<user>[a-z][\w.-]{1,30}):(?P<value>[^\s:/@\"'`]{4,64})(?![\w:/@])"
)
# "my credentials are jdoe and Raven33", "creds: jdoe, Raven33".
_CREDENTIALS_ARE = re.compile(
    r"\b(?:credentials|creds|login\s+details|log-?in)\s*(?:are|is|were|was|:)\s+(?P<user>[\w.@\\-]{2,40})"
    r"\s*(?:and|&|,|/)\s*(?:the\s+)?(?:password\s+|pw\s+|pass\s+)?(?P<value>[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# A token after a password word in the same sentence that only a password looks like: letters,
# digits and a symbol, or a digit between letters with a capital ("my password expired and the
# new one I was given, Tr0mb0ne!, fails").
_SENTENCE_AFTER_CUE = re.compile(r"(?:[^\n.!?]|\.{2,}|[.!?](?!\s)){0,150}")
# A value spelled out letter by letter with letters and digits, where a password is talked of:
# "it's like this: B l u e S k y 7".
_SPELLED_VALUE = re.compile(r"(?<![^\s:\"'(])(?:[^\W_][ ]){5,}[^\W_](?![^\s,.;:!?)\"'])")
# One-letter labels of a user and a password on one line: "u: mkhan p: Karachi#2020".
_USER_THEN_PASS_LABELS = re.compile(
    r"(?<![\w-])(?:u|usr|user(?:name)?|login|id)[ \t]*[:=][ \t]*[^\s,;|]{2,64}[ \t]*[,;|/]?[ \t]*"
    r"(?:p|pw|pwd|pass)[ \t]*[:=][ \t]*(?P<value>[^\s\"'`]{2,64})",
    re.IGNORECASE,
)
# "is Hunter2 a good password?", "would Maple#7 be a strong enough PIN": a value asked about.
_ASKED_ABOUT = re.compile(
    r"\b(?:is|would|could|are|isn't)\s+(?P<value>[^\s\"'`]{4,64})\s+(?:be\s+)?(?:an?\s+)?"
    r"(?:good|strong|safe|secure|ok|okay|valid|bad|weak|allowed|acceptable)(?:\s+enough)?"
    r"(?:\s+(?:password|passphrase|pin|pw|passcode)\b|\s*[?.!,]|\s*$)",
    re.IGNORECASE,
)
# "she set 1122", "I chose 4471" once a PIN word was written.
_SET_DIGITS = re.compile(
    r"\b(?:set|chose|picked|used|typed|entered|put\s+in)\s+(?:it\s+(?:to|as)\s+)?"
    r"(?P<value>\d{4,8})(?![\w.,:/-]\d|[\w/-])",
    re.IGNORECASE,
)
# What a security question asks about ("my first car", "Mädchenname der Mutter"), as a cue
# (the "compound" group never takes part), and the words of such a question near it.
_SECURITY_TOPIC = re.compile(
    rf"(?<![^\W_])(?P<kw>{SECURITY_TOPIC_WORDS})(?!\w)(?P<compound>(?!x)x)?", re.IGNORECASE
)
_SECURITY_QUESTION = re.compile(rf"(?<![^\W_])(?:{SECURITY_QUESTION_WORDS})(?!\w)", re.IGNORECASE)
# The answer given after the topic, in the same sentence: "..., I put Ó Briain with the accent",
# "and I typed rex2009": a run of capitalised words, or one word.
_ANSWER_GIVEN = re.compile(
    r"[^.!?\n]{0,60}?(?<![^\W_])(?:(?i:i|we|she|he)\s+(?i:put|typed|type|entered|enter|wrote|"
    r"gave|answered|said|used|use|chose|picked)(?:\s+(?i:in|down))?|"
    r"(?i:j['’]ai\s+(?:mis|tap[ée]|[ée]crit|saisi|r[ée]pondu)|puse|escrib[íi]|he\s+puesto|"
    r"ho\s+(?:messo|scritto)|coloquei|escrevi|ik\s+heb\s+(?:ingevuld|getypt)))\s+"
    r"(?P<value>[A-ZÀ-ÖØ-Þ][\w'’-]*(?:[ \t]+[A-ZÀ-ÖØ-Þ][\w'’-]*){0,3}|[^\s,.;:!?\"'`]{4,40})"
)
# The answer right after its topic: "first car was a red Fiat Panda 1998, that's the answer",
# "my first pet's name, it was Biscuit", "Geburtsort ist Oberhausen": a verb or a sign, an
# article, then words up to the end of the clause.
_ANSWER_AFTER = re.compile(
    r"(?:[ \t]*,?[ \t]*(?i:it|that)(?:'s|’s|[ \t]+(?i:is|was))|[ \t]+(?i:is|was|ist|war|est|"
    r"[ée]tait|es|era|é|è|to|is\s+called))?(?:[ \t]*[:=][ \t]*|[ \t]+)"
    r"(?:(?i:a|an|the|ein|eine|un|une|una|uno|een|de)[ \t]+)?"
    r"(?P<value>[^\s,;.!?\"'`()][^,;.!?\n\"`()]{0,60}?)"
    r"(?=[ \t]*(?:[,;.!?\n(]|$)|[ \t]+[-–—][ \t]|[ \t]+(?i:and|but|aber|mais|pero|or|with|so)\b)"
)
# A message about a credential: its words anywhere near a token (see CONTEXT_WORDS); the
# password words of every language are found by _PASSWORD_CUE already.
_CREDENTIAL_CONTEXT = re.compile(
    rf"(?<![^\W_])(?:{'|'.join(CONTEXT_WORDS.values())})(?!\w)", re.IGNORECASE
)
# How far from such a word a token shaped like a password is taken for one.
_CONTEXT_REACH = 150
# A whole token worth shaping: six to 66 characters with a digit (a cheap first test: every
# shape secret_shaped accepts has one).
_SHAPE_CANDIDATE = re.compile(r"(?<![^\s\"'`])(?=[^\s\"'`\d]{0,65}\d)[^\s\"'`]{6,66}(?![^\s\"'`])")
# Words joined by "-", "_" or "." with digits: "Tmp-4417-Otter", "Fern_Gate_4".
_JOINED_PARTS = re.compile(r"[-_.]")
# A value spelled out with one separator between its characters: "s-n-o-w-1-9", "B l u e 7".
_SPELLED_ANY = re.compile(
    r"(?<![^\s:\"'(])[^\W_](?P<sep>[ .\-])[^\W_](?:(?P=sep)[^\W_]){4,}(?![^\s,.;:!?)\"'])"
)
# Symbols of a password that versions, paths, host and model names do not have.
_STRONG_SYMBOLS = set("!@#$%^&*_+=~?|\\€£§")


# A time, an ordinal, a size or an amount: "it was 10am", "that's 2nd", "it's 12GB".
_A_TIME_OR_AMOUNT = re.compile(
    r"\d{1,2}(?::\d{2})?(?:am|pm|h|uhr)|\d+(?:st|nd|rd|th)|"
    r"\d+(?:[.,]\d+)?(?:gb|mb|kb|tb|gib|mib|ms|s|sec|secs|min|mins|h|hrs|k|x|px|p|%|eur|usd)",
    re.IGNORECASE,
)


def _decoded_login(token: str) -> tuple[str, str] | None:
    """The user and password that ``token`` holds in base64 ("YWRtaW46..." is "admin:..."),
    or None: the decoded text must be printable ASCII with no space, a user name, a colon and
    a password."""
    if len(token.rstrip("=")) < 8:
        return None
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
        plain = decoded.decode("ascii")
    except (binascii.Error, ValueError):
        return None
    pair = _USER_AND_PASSWORD.fullmatch(plain)
    if pair is None:
        return None
    return pair.group("user"), pair.group("password")


def _digit_count(code: str) -> int:
    """How many digits a code has, written in figures or in number words."""
    figures = sum(char.isdigit() for char in code)
    return figures or len(re.findall(_NUMBER_WORD, code, re.IGNORECASE))


def _default_login(user: str, value: str, separator: str = "/") -> bool:
    """A factory password beside its account: the same word twice ("admin / admin",
    "cisco:cisco"; not a service's user and group, "root:root", "postgres:postgres"), or a
    default password that is not itself an account name ("root:toor", not "admin/root")."""
    folded = value.casefold()
    if folded == user.casefold():
        return folded.isalnum() and (separator != ":" or folded not in _USER_GROUPS)
    return folded in DEFAULT_PASSWORDS and folded not in DEFAULT_USERS


# Accounts that are also their own group ("chown postgres:postgres", "--user root:root").
_USER_GROUPS: frozenset[str] = frozenset(
    {"root", "postgres", "mysql", "oracle", "vagrant", "user", "users", "www-data", "nginx"}
)


def _said_to_be_typed(text: str, end: int) -> bool:
    """The words after a value say it is a password: "..., same as my email one", "all
    lowercase", "with capital H"."""
    after = text[end : end + 60]
    return bool(_SAME_ONE_AFTER.match(after) or _LETTERS_AFTER.match(after))


# Products named with their version, which a sign-in message may name next to "typed" or
# "using": "Office365", "Win11", "Server2019", "iPhone15".
_PRODUCTS = (
    r"office|windows|win|server|sql|exchange|sharepoint|outlook|teams|iphone|ipad|ios|android|"
    r"galaxy|pixel|surface|macos|ubuntu|debian|rhel|centos|fedora|chrome|firefox|edge|java|jdk|"
    r"python|node|dotnet|net|vs|visual|studio|excel|word|acrobat|reader|xbox|thinkpad|latitude|"
    r"elitebook|optiplex|precision|probook|vpn|build|version|release|room|floor"
)
_PRODUCT_WITH_VERSION = re.compile(rf"(?:{_PRODUCTS})[\s_-]?v?\d{{1,4}}", re.IGNORECASE)


def _unmistakable_password(value: str) -> bool:
    """A token only a password looks like, even among other words: letters, digits and a
    symbol no address, path, version or key=value has ("Tr0mb0ne!", "Summ3r#24"), or a digit
    between letters beside capitals and small letters ("Summ3r2024")."""
    if len(value) < 6 or len(value) > 64 or re.search(r"[@/\\=:]|://|^[#$%&*]", value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    symbols = set(value) & (_STRONG_SYMBOLS - {"_", "\\", "|"})
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    leet = re.search(r"[^\W\d_]\d+[^\W\d_]", value) is not None
    return (
        letters
        and digits
        and ((bool(symbols) and mixed) or (leet and mixed))
        and not _DATE_OR_PATH.search(value)
        and not _FILE_NAME.search(value)
        and not _ticket_or_error_number(value)
    )


def secret_shaped(value: str) -> bool:
    """A token only a password looks like, wherever it stands (the caller wants a word of
    signing in or of a secret near it): small letters with a symbol and a digit or capital
    ("Harbour#07", "Spring2024!"); words joined by "-", "_" or "." with a capitalised word and
    digits ("Tmp-4417-Otter", "Fern_Gate_4"); a capitalised word and a year ("Spring2024");
    a digit between letters with capitals ("Summ3r"); a camel-case word with digits
    ("ihcoM7"). Never a product with its version, a host, a path, a file, a date, a ticket or
    an error number, nor a token without small letters (asset tags, host names)."""
    if not 6 <= len(value) <= 64 or not any(c.islower() for c in value):
        return False
    if (
        re.search(r"[@/\\=:]|^[-#$%&*+]", value)
        or _PRODUCT_WITH_VERSION.fullmatch(value)
        or _HOST_LIKE.match(value)
        or _DATE_OR_PATH.search(value)
        or _FILE_NAME.search(value)
        or _IMAGE_TAG.fullmatch(value)
        or _ticket_or_error_number(value)
    ):
        return False
    if _unmistakable_password(value):
        return True
    digits = any(c.isdigit() for c in value)
    if not digits:
        return False
    if _STRONG_SYMBOLS - {"_", "\\", "|"} & set(value):
        return True  # "harbour#07": a symbol no identifier has, with letters and digits
    parts = [part for part in _JOINED_PARTS.split(value) if part]
    capitalised = [p for p in parts if p[0].isupper() and p[1:].islower() and len(p) >= 3]
    words = [p for p in parts if p.isalpha()]
    # two words and a number, or a word and a number joined by "_" (a model is "Latitude-5440")
    if capitalised and any(p.isdigit() for p in parts) and (len(words) >= 2 or "_" in value):
        return True
    # "Spring2024", "ihcoM7"
    return (
        re.fullmatch(r"[A-Z][a-z]{3,}\d{2,4}|[a-z]{4,}[A-Z][A-Za-z]*\d+[A-Za-z\d]*", value)
        is not None
    )


def _ticket_or_error_number(value: str) -> bool:
    """A ticket, a change or an error number ("INC0012345", "CHG-4471", "0x8007"): no password."""
    return re.fullmatch(r"[A-Z]{2,6}-?\d+|0x[0-9a-fA-F]+|[Kk][Bb]\d+", value) is not None


def _typed_password(value: str) -> bool:
    """What was typed into a sign-in page, when a message says so: a password shape (see
    :func:`_password_without_its_word`), or a word of four letters or more with two digits or
    more ("Rainbow55", "Hazelnut12"), not a product with its version ("Office365")."""
    core = value.rstrip(".!?")
    letters = sum(c.isalpha() for c in core)
    digits = sum(c.isdigit() for c in core)
    return _password_without_its_word(core) or (
        looks_like_password(core)
        and letters >= 4
        and digits >= 2
        and any(c.islower() for c in core)
        and not _PRODUCT_WITH_VERSION.fullmatch(core)
        and not _HOST_LIKE.match(core)
        and not _FILE_NAME.search(core)
    )


def _password_without_its_word(value: str) -> bool:
    """What a password looks like with no word to say it is one: letters with a symbol and
    digits or capitals inside ("Lisbon#1990", "Pancake$Sunday"), or a word and a year
    ("Summer2025", "kettle2019"); no version, model, path, date or file name."""
    value = value.rstrip(".!?")
    letters = sum(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    inner_capital = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    symbol = bool(_STRONG_SYMBOLS & set(value))
    # a digit between letters, as in "Summ3r2024", "P4ssw0rd"
    leet = re.search(r"[^\W\d_]\d+[^\W\d_]", value) is not None and any(c.isupper() for c in value)
    return (
        looks_like_password(value)
        and letters > 0
        and (
            (symbol and (digits or inner_capital))
            or (leet and letters >= 4)
            or (letters >= 4 and re.search(r"[^\W\d_]{3}\d{4}|\d{4}[^\W\d_]{3}", value) is not None)
        )
        and not _DATE_OR_PATH.search(value)
        and not _FILE_NAME.search(value)
        and not _IMAGE_TAG.fullmatch(value)
    )


_ANOTHER_FIELD = re.compile(r"^[A-Za-z_][\w.-]*[=:]")
_DATE_OR_PATH = re.compile(r"^\d{1,4}[/.-]\d{1,2}|^https?:|^[\w.-]+\.(?:com|org|net|exe|txt)$")
_VALUE_SEPARATOR = re.compile(r"[;&,](?=\s*[A-Za-z_][\w.\-]*\s*=)|,(?=\s*[\"'{])")
_QUOTES = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»", "„": "“"}
_SPACED_LETTERS = re.compile(r"(?:\S )+\S(?!\S)")
# A password spelled with commas: "B, l, u, e, 4, 2".
# A letter may carry its case: "capital P, a, s, t, a, 9, 9".
_CASE_WORD = r"(?:(?:capital|small|big|upper(?:[ -]?case)?|lower(?:[ -]?case)?)[ ]+)?"
_COMMA_LETTERS = re.compile(
    rf"(?:{_CASE_WORD}[^\s,],[ ]?){{3,}}{_CASE_WORD}[^\s,](?![^\s,.;!?])", re.IGNORECASE
)
# A password described by its pieces: "my dog's name Biscuit then 1987", "Falcon with 77 at the
# end", "the word Tulip plus 12". A capitalised word, a joining word, then digits.
_NAMED_THEN_DIGITS = re.compile(
    r"(?:(?:my|the|his|her|our)\s+[^\W\d_]+(?:['’]s)?\s+(?:name|word|nickname)\s*[,:(]?\s*)?"
    r"(?P<first>[A-Z][^\W\d_]{2,})\)?\s*,?\s+(?:then|followed\s+by|and\s+then|plus|with|\+)\s+"
    r"(?:an?\s+)?(?:the\s+(?:number|year|digits?)\s+)?(?P<last>\d{1,8})(?![\w.])"
)
# The same with a description first, anywhere in the clause: "the name of my cat, Whiskers,
# plus 2019".
_DESCRIBED_NAME = re.compile(
    r"(?P<first>[A-Z][^\W\d_]{2,})\)?,?\s+(?:then|followed\s+by|and\s+then|plus|with|and|\+)\s+"
    r"(?:an?\s+)?(?:the\s+(?:number|year|digits?)\s+)?(?P<last>\d{1,8})(?![\w.])"
)
_DETERMINER_BEFORE = re.compile(r"\b(?:le|la|el|the)[ \t]+$", re.IGNORECASE)
_DESCRIPTION_START = re.compile(
    r"(?:my|the|his|her|our|their|its|it's|it\s+is|der|die|das|mein|meine|le|la|mon|ma|el|mi|"
    r"de|het|mijn|il|o|a|minha|meu)\b",
    re.I,
)
# After a description of a password's pieces, the digits joined to them ("my street name then
# 42") or the whole value after a comma or colon ("my wife's name with my birth year, Anna1980").
_DIGITS_AFTER_DESCRIPTION = re.compile(
    r"(?:\b(?:then|followed\s+by|plus|and\s+then|with\s+an?)|\+)\s+(?:the\s+(?:number|year|digits?)\s+)?"
    r"(?P<digits>\d{1,8})(?![\w.])",
    re.IGNORECASE,
)
_GIVEN_AFTER_DESCRIPTION = re.compile(
    r"[\w)][ \t]*[,:][ \t]*(?:(?:so|also|donc|dus|o[ \t]+sea|ou[ \t]+seja|cio[èe]|es[ \t]+decir|"
    r"c'est-[àa]-dire|i\.e\.|e\.g\.|like|z\.b\.|d\.h\.)[ \t]*[,:]?[ \t]*)?"
    r"(?P<value>(?=[^\s,;]*\d)(?=[^\s,;]*[^\W\d_])[^\s\"'`,;]{4,64})",
    re.IGNORECASE,
)
# A PIN described, then given after a comma or colon: "the year I was born, 1987", "the same as
# my door code, 2580".
_CODE_AFTER_DESCRIPTION = re.compile(
    r"(?:my|the|his|her|our)\b[^.!?\n]{3,60}?[,:][ \t]*(?:so[ \t]+|i\.e\.[ \t]*|like[ \t]+)?"
    r"(?P<value>\d{4,8})(?![\d.,:/-]\d|[\w/-])",
    re.IGNORECASE,
)
# "the password has my son's name, Oliver, and 2012": a description after a verb of containing.
_CONTAINS_DESCRIPTION = re.compile(
    r"[ \t]+(?:has|contains|includes|is\s+made\s+(?:up\s+)?of|consists\s+of|uses)[ \t]+"
    r"(?=(?:my|the|his|her|our|their)\b)",
    re.IGNORECASE,
)
# Digits given with what they are: "my birthday 0412", "my birth year 1987", "the house number
# (42)". The digits are the secret (or its end).
_DESCRIBED_DIGITS = re.compile(
    r"(?:my|the|his|her|our|their)\s+(?:[\w'’]+\s+){0,3}?(?:birthday|birth\s*year|"
    r"year\s+of\s+birth|birth\s*date|date\s+of\s+birth|anniversary|wedding\s+day|"
    r"house\s+number|door\s+number|street\s+number|postcode|zip(?:\s*code)?|"
    r"phone\s+number|year)[ \t]*[,:(]?[ \t]*(?P<digits>\d{2,8}(?:[./-]\d{1,4}){0,2})(?![\w.])",
    re.IGNORECASE,
)
# An account's password given with a change verb and no password word: "please set the local
# admin on all kiosk PCs to 'W1nd0ws!Adm1n'", "reset the root account to Toor#2024".
_ACCOUNT_SET_TO = re.compile(
    rf"\b(?:{CHANGE_VERBS})\s+(?:the\s+|my\s+|our\s+|a\s+|its\s+|their\s+)?"
    r"(?:local\s+|default\s+|built-?in\s+|domain\s+|shared\s+|service\s+|kiosk\s+)?"
    r"(?:admin(?:istrator)?s?|root|accounts?|users?|logins?)\b(?:[ \t]+(?!to\b)[\w'-]+){0,6}?"
    r"[ \t]+to[ \t]+(?P<value>'[^'\n]{4,64}'|\"[^\"\n]{4,64}\"|[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# An AWS secret key beside its access key id: "AKIA.../juDlg...", "AKIA..., juDlg...".
_AWS_KEY_PAIR = re.compile(
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}(?:[ \t]*[/,;|:][ \t]*|[ \t]+)"
    r"(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
)
# Base64 that may hide "user:password" (a registry's "auth", an "echo ... | base64 -d").
_BASE64_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{8,}={0,2}")
_LONGEST_ENCODED_LOGIN = 400
_USER_AND_PASSWORD = re.compile(r"(?P<user>[A-Za-z][\w.@\\-]{0,63}):(?P<password>[!-~]{1,128})")
# A password described by its pieces, then given after a colon: "it's the name of the street I
# grew up on plus my house number: Dorpsstraat41".
_DESCRIBED_THEN_VALUE = re.compile(
    r"\b(?:it'?s|it\s+is|it\s+was)\s+(?:the|my)\s+[^.:\n]{3,100}?\b(?:plus|and|then|followed\s+by|"
    r"with)\s+(?:my|the|his|her|our|a)\s+[^.:,\n]{2,40}?[:,][ \t]*(?P<value>[^\s\"'`]{4,64})",
    re.IGNORECASE,
)
# A BitLocker recovery key: eight groups of six digits.
_RECOVERY_KEY = re.compile(r"(?<![\d-])\d{6}(?:[- ]\d{6}){7}(?![\d-])")
_TOKEN = re.compile(r"[^\s\"'`]+")
_TRAILING = ",;:"
_REFERENCE = re.compile(
    r"^(?:\$|%|\{\{|\{%|<|\[|!(?:vault|ref|sub|getatt|secret|env_var|include|join|base64)\b|"
    r"env\(|os\.environ|process\.env|vault:|secret:|ref\+|@Microsoft|"
    r"(?:ConvertTo|ConvertFrom|Get|Read)-\w+|[A-Za-z_][\w.]*\()",
    re.IGNORECASE,
)
_HOST_LIKE = re.compile(r"^[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}/?$")
_MASKED = re.compile(r"^(?:\*+|x{3,}|\.{3,}|•+|#+|-+|_+)$", re.IGNORECASE)
_PLACEHOLDER_WORDS: frozenset[str] = frozenset(
    {
        "null", "none", "nil", "undefined", "true", "false", "empty", "blank", "redacted",
        "hidden", "masked", "removed", "omitted", "yes", "no", "n/a", "na", "tbd", "todo",
        "required", "optional", "string", "str", "int", "bool", "text", "value", "secret",
        "password", "token", "prompt",
    }
)  # fmt: skip
# Words that follow "password is" when a user describes a problem rather than a secret.
NOT_SECRETS: frozenset[str] = frozenset(
    {
        "a", "an", "the", "my", "not", "no", "too", "very", "also", "still", "now",
        "being", "been", "set", "reset", "changed", "expired", "expiring", "expires",
        "wrong", "incorrect", "invalid", "correct", "right", "fine", "ok", "okay",
        "locked", "blocked", "disabled", "working", "broken", "rejected", "accepted",
        "required", "missing", "empty", "blank", "same", "different", "weak", "strong",
        "short", "long", "old", "new", "saved", "stored", "unknown", "forgotten", "it",
        "this", "that", "there", "here", "what", "which", "who", "in", "on", "at", "for",
        "from", "with", "by", "and", "or", "but", "so", "because", "if", "when", "please",
        "case", "sensitive", "managed", "supposed", "needed", "needs", "going", "about",
        "like", "one", "mine", "yours", "his", "her", "their", "our", "your", "its",
    }
)  # fmt: skip
# Words that describe a password rather than being one, in every language of
# :mod:`redactor.credential_words` ("expired", "abgelaufen", "incorrect", "verlopen").
_DESCRIBING: frozenset[str] = NOT_SECRETS | STATE_WORDS
# Words that end a passphrase: what follows the secret in a sentence.
_PHRASE_STOPS: frozenset[str] = frozenset(
    {
        "and", "but", "or", "so", "because", "since", "which", "that", "when", "if", "then",
        "please", "pls", "plz", "thanks", "thank", "it", "i", "i'm", "im", "you", "we", "they",
        "he", "she", "is", "was", "does", "doesn't", "did", "didn't", "do", "don't", "can",
        "can't", "cannot", "could", "won't", "will", "would", "should", "for", "on", "in",
        "at", "to", "from", "with", "by", "of", "as", "not", "no", "all", "though",
        "anymore", "again", "now", "right", "apparently", "today", "yesterday", "lol", "btw",
        "the", "a", "an", "my", "your", "has", "have", "had", "keeps", "still", "works",
        "worked", "fails", "failed", "says", "said", "gets", "got", "isn't", "wasn't",
    }
)  # fmt: skip
# A passphrase after its word ("the passphrase: my cat likes warm milk") runs to the end of its
# clause: the line's or the sentence's end, a semicolon or colon, a comma before a word that goes
# on with the sentence, or one of these words (or "and"/"or"/"so"/"then" before one of them).
_CLAUSE_BREAKS: frozenset[str] = frozenset(
    {
        "but", "because", "since", "though", "although", "which", "whereas", "unless", "while",
        "when", "if", "please", "pls", "plz", "thanks", "thank", "btw", "lol", "fyi", "is",
        "was", "isn't", "wasn't", "does", "doesn't", "did", "didn't", "don't", "won't",
        "can't", "cannot", "can", "could", "would", "should", "will", "works", "worked",
        "fails", "failed", "keeps", "says", "said", "gets", "got", "has", "had", "still",
        "anymore", "again", "apparently", "today", "yesterday", "it", "i", "i'm", "im", "you",
        "we", "they", "he", "she", "me", "us", "them", "ok", "okay", "right",
        # the same words in the other languages of the cue words ("... es 2468 pero no imprime")
        "aber", "weil", "doch", "mais", "car", "parce", "puisque", "pero", "porque", "aunque",
        "ma", "perché", "però", "mas", "maar", "omdat", "want", "ale", "bo", "men", "fordi",
        "mutta", "koska", "ist", "est", "es",
        "funktioniert", "marche", "funciona", "funziona", "werkt", "działa",
    }
)  # fmt: skip
_CLAUSE_JOINS: frozenset[str] = frozenset({"and", "or", "so", "then"})
# Words that make the clause a sentence about the passphrase, not the passphrase ("the
# passphrase is the same as the old one", "passphrase: four random words at least").
_PASSPHRASE_PROSE: frozenset[str] = frozenset(
    {
        "not", "no", "never", "same", "usual", "one", "default", "expired", "wrong",
        "incorrect", "invalid", "correct", "locked", "stored", "saved", "written", "kept",
        "sent", "shared", "attached", "see", "check", "ask", "wiki", "vault", "keepass",
        "manager", "email", "mail", "ticket", "screenshot", "too", "being", "been", "required",
        "missing", "empty", "needed", "supposed", "forgot", "forgotten", "remember", "known",
        "unknown", "something", "nothing", "anything", "what", "name", "words", "word",
        "characters", "letters", "digits", "numbers", "long", "longer", "short", "shorter",
        "random", "length", "minimum", "least", "policy", "rules", "enough", "different",
        "also", "now", "very", "really", "case", "sensitive", "there", "here", "like", "as",
        "sentence", "phrase", "quote", "favourite", "favorite", "birthday", "pet", "backwards",
        "reversed", "combination", "lowercase", "uppercase", "spaces",
    }
)  # fmt: skip
_DETERMINERS: frozenset[str] = frozenset(
    {
        "my", "the", "a", "an", "our", "your", "his", "her", "their", "this", "that",
        # articles and possessives of the other languages ("le chat dort sur le tapis")
        "le", "la", "les", "un", "une", "mon", "ma", "der", "die", "das", "ein", "eine", "mein",
        "el", "los", "las", "uno", "una", "mi", "il", "lo", "de", "het", "een", "mijn", "o",
    }
)  # fmt: skip
_PLAIN_WORD = re.compile(r"[a-zà-ÿ][a-zà-ÿ'’-]*|\d{1,8}")
_PASSPHRASE_WORDS = re.compile(
    r"pass[\s-]?phrase|phrase\s+\S+(?:\s+passe)?|frase\s+.+|wachtzin", re.IGNORECASE
)
_SECRET_SYMBOLS = set("!@#$%^&*_+=~?<>|/\\.,;:-()[]{}'\"`€£§")


_PROSE = -1  # what _passphrase_clause returns for a sentence about a passphrase
_CLAUSE_WORD = re.compile(r"[^\s,;:.!?()\[\]{}<>\"`]+")


def _skip_blanks(text: str, position: int) -> int:
    """The position after the spaces and tabs at ``position`` (a line break is not skipped)."""
    while position < len(text) and text[position] in " \t":
        position += 1
    return position


def _goes_on_phrase(word: str) -> bool:
    """Whether ``word``, after "and" or a comma, can still be part of a passphrase of plain
    words ("salt and pepper"), not the start of the sentence's next part ("and it fails")."""
    folded = word.casefold()
    return (
        bool(_PLAIN_WORD.fullmatch(word))
        and folded not in _CLAUSE_BREAKS
        and folded not in _CLAUSE_JOINS
        and folded not in _PHRASE_STOPS
    )


# The function words of English sentences; text with hardly any of them had its stop words
# removed (as some ticket exports do) or is a list of keywords.
_FUNCTION_WORDS: frozenset[str] = frozenset(
    {
        "the", "a", "an", "is", "are", "was", "were", "be", "been", "am", "my", "your", "our",
        "his", "her", "their", "i", "you", "he", "she", "we", "they", "it", "this", "that", "to",
        "of", "in", "on", "at", "for", "and", "or", "with", "from", "me", "by", "as", "it's",
        "i'm", "don't", "can't",
        # and of the other languages people write to the service desk in: a Spanish or German
        # sentence is no list of keywords
        "der", "die", "das", "ein", "eine", "ist", "und", "mein", "meine", "ich", "nicht", "le",
        "la", "les", "un", "une", "est", "et", "mon", "ma", "je", "pas", "el", "los", "las",
        "es", "y", "mi", "de", "del", "no", "il", "di", "che", "è", "het", "een", "mijn",
        "niet", "o", "os", "um", "uma", "não", "jest", "nie", "och", "är", "og", "er",
    }
)  # fmt: skip


def _telegraphic(text: str) -> bool:
    """Twelve words or more, fewer than one in eight of them a function word."""
    words = re.findall(r"[A-Za-z']+", text)
    if len(words) < 12:
        return False
    function_words = sum(word.casefold() in _FUNCTION_WORDS for word in words)
    return function_words / len(words) < 0.125


# A plain word given bare after a password word: "with my password dispatch I still cannot log
# in", "my new password summer is not accepted", "tried password monkey". Whose password it is
# or that it was used stands before the word ("my (new) password", "with/using/tried (the)
# password"), up to two words between ("my work password"); or the sentence says right after the
# word that it failed ("the password monkey doesn't work"). Not after "pass" alone ("my bus pass").
_OWNED_OR_USED = re.compile(
    r"(?<![^\W_])(?:my|our|your|his|her|their|(?:with|using|use|used|tried|try|trying|typed?|"
    r"typing|entered|enter|entering|input|put\s+in|keyed\s+in)(?:[^\S\r\n]+(?:my|our|your|his|"
    r"her|their|the|this|that|a|an))?)(?P<between>(?:[^\S\r\n]+[^\W\d_][\w'-]*){0,2}?)"
    r"[^\S\r\n]+$",
    re.IGNORECASE,
)
_NOT_A_BARE_CUE = re.compile(r"p[a@4][s$5]{1,2}|p[ .\-]a[ .\-]s[ .\-]s", re.IGNORECASE)
# The word: letters only (a value with digits or symbols is found by its shape), not the start
# of a longer token ("dispatch.example.com", "monkey-2", "summer's").
_BARE_WORD = re.compile(
    r"(?:[^\S\r\n]+|[^\S\r\n]*[:=][^\S\r\n]*)(?P<open>[(\[\"'`«“‘„])?"
    r"(?P<word>[^\W\d_]{4,64})(?![\w@/\\=:+&#%$~^|-]|[.'’](?=\w))"
)
# Emoji and other symbols between the word and what follows it ("dispatch 😭 doesn't work").
_SYMBOLS = re.compile(r"[^\S\r\n]*(?:[^\w\s,.;:!?()\[\]\"'’`–—-]+[^\S\r\n]*)*")
# What a message says of a password that failed, right after it.
_FAILED = re.compile(
    r"(?:(?:still|just|now|also|again|suddenly|apparently)[ \t]+)?"
    r"(?:(?:does|did|do|will|wo|would|is|was|are|were|has|have|had|can|ca|could|keeps?|kept)"
    r"(?:n['’]?t|[ \t]*not|[ \t]+never)?[ \t]+)?(?:(?:not|never|no[ \t]+longer)[ \t]+)?"
    r"(?:(?:been|being|getting|get|gets|got)[ \t]+)?"
    r"(?:work(?:s|ing|ed)?|fail(?:s|ed|ing)?|let(?:s|ting)?[ \t]+me[ \t]+in|accepted|rejected|"
    r"refused|denied|declined|wrong|incorrect|invalid|valid|recogni[sz]ed|locked|blocked)(?!\w)",
    re.IGNORECASE,
)
# Nouns of other secrets ("my password pin", "password hash"), besides the password words.
_OTHER_SECRET_NOUNS: frozenset[str] = frozenset(
    {"key", "keys", "token", "tokens", "secret", "secrets", "hash", "hashes", "salt", "code",
     "codes", "phrase", "credential", "credentials", "creds", "apikey", "pin", "passcode"}
)  # fmt: skip
# Endings of nouns that name a process or a quality, never a password picked as a word
# ("password authentication failed", "password complexity", "password management").
_ABSTRACT_NOUN = re.compile(r"\w{3,}(?:tion|sion|ment|ments|ness|ity|ance|ence|ency)")
# The words a password given bare is never: what a sentence about a password says after its
# word (states, function words, compounds, fillers, other secrets).
_NEVER_BARE: frozenset[str] = frozenset(
    {*_DESCRIBING, *_PHRASE_STOPS, *_CLAUSE_BREAKS, *_CLAUSE_JOINS, *_COMPOUND_NOUNS,
     *_LINKING_WORDS, *_ARTICLES, *_DETERMINERS, *_FUNCTION_WORDS, *_PLACEHOLDER_WORDS,
     *_PASSPHRASE_PROSE, *ASIDE_WORDS, *DEFAULT_USERS, *_OTHER_SECRET_NOUNS}
)  # fmt: skip
# The services a password is for, named after its word ("my password okta doesn't work").
_SERVICES = (
    r"citrix|okta|duo|azure|entra|intune|google|gmail|zoom|slack|webex|jira|confluence|sap|"
    r"salesforce|workday|servicenow|github|gitlab|aws|onedrive|dropbox|icloud|microsoft|adobe|"
    r"docker|kerberos|ldap|radius|wifi|wlan|domain|network|intranet|m365|o365"
)
_NOT_BARE_PATTERNS = re.compile(
    rf"{FILLERS}|{CHANGE_FILLERS}|{'|'.join(CONTEXT_WORDS.values())}|{_PRODUCTS}|{_SERVICES}|"
    rf"{_SECRET_NOUN}",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Span:
    entity_type: str
    start: int
    end: int
    score: float


def _split_name(name: str) -> list[str]:
    """The words of an identifier: "DB_PASSWORD", "adminPassword", "x-api-key", "_authToken"."""
    return [part.casefold() for part in _NAME_PARTS.findall(name)]


def _name_kind(name: str) -> str | None:
    """PASSWORD, PIN or API_KEY when the identifier names a secret (by how it ends), else None.

    A name must end with the secret word: ``password_min_length``, ``token_endpoint`` and
    ``secret_name`` describe a secret without holding one.
    """
    lowered = name.casefold().strip("\"'")
    parts = _split_name(name)
    while len(parts) > 1 and parts[-1] in _NAME_TAILS:
        parts = parts[:-1]
    if not parts:
        return None
    last = parts[-1]
    if last in _PASSWORD_NAME_WORDS or lowered.endswith(_PASSWORD_NAME_ENDINGS):
        return PASSWORD
    if len(parts) >= 2 and f"{parts[-2]} {last}" in _PASSWORD_NAME_PAIRS:
        return PASSWORD
    if lowered.endswith(_SESSION_NAME_ENDINGS) or (len(parts) >= 2 and last == "sid"):
        return API_KEY
    if last in _PIN_NAME_WORDS:
        return PIN
    if last in _KEY_NAME_WORDS or lowered.endswith(("token", "secret", "apikey")):
        return API_KEY
    if len(parts) >= 2 and f"{parts[-2]} {last}" in _KEY_NAME_PAIRS:
        return API_KEY
    if _generic_key_name(parts):
        return API_KEY
    return None


def _generic_key_name(parts: list[str]) -> bool:
    """A name that ends with "key" and is not a key of a table, a cache, a translation or a
    public key ("LABELS_STORAGE_KEY", "key" of a query string; not "public_key", "sort_key"):
    its value is a secret only when :func:`strong_key` says so."""
    return parts[-1:] == ["key"] and not (set(parts[:-1]) & _NOT_SECRET_KEY_WORDS)


_A_LETTER = re.compile(r"[^\W\d_]")
_A_DIGIT = re.compile(r"\d")
_HEX = re.compile(r"[0-9a-fA-F]+")


def strong_key(value: str) -> bool:
    """A value only a key or a token looks like: sixteen characters or more, letters and
    digits, no spaces, high entropy; a hex string from 32 characters on. Not a dotted name,
    a path or a URL."""
    value = value.strip("\"'")
    # The cheap tests first, by patterns: a run of assignments with no digit ("KEY=KEY=KEY=...")
    # reads a value as long as the rest of the run at each of its cues.
    if len(value) < 16 or not _A_LETTER.search(value) or not _A_DIGIT.search(value):
        return False
    if re.search(r"\s|://|^[./~]|\.\w+\.", value):
        return False
    hexish = _HEX.fullmatch(value) is not None
    return len(value) >= 32 if hexish else entropy_bits(value) >= 3.5


def looks_like_password(value: str) -> bool:
    """A single word with a letter and a digit or a symbol inside, or capitals inside
    ("Hunter2x!", "pl4ntpot", "HELLOworld"): what a password looks like without a verb."""
    core = value.rstrip(".!?")
    if len(core) < 4 or len(core) > 128 or core[0] in "($<{[":
        return False
    letters = sum(c.isalpha() for c in core)
    digits = sum(c.isdigit() for c in core)
    symbols = sum(c in _SECRET_SYMBOLS for c in core)
    if not letters:
        return False
    if re.fullmatch(r"v?\d+(?:\.\d+)+\w*|[A-Z]{2,6}-\d+|0x[0-9a-f]+|KB\d+", core, re.IGNORECASE):
        return False  # a version, a ticket key, an error code, a KB number
    if _HOST_LIKE.match(core):
        return False  # a host name: "registry.northwind.example"
    inner_capital = any(c.isupper() for c in core[1:]) and any(c.islower() for c in core)
    return digits > 0 or symbols > 0 or inner_capital


def looks_random(value: str) -> bool:
    """A key or token: eight characters or more with letters and digits or symbols, or twenty
    with mixed case; not a number, a version or a word."""
    if len(value) < 8 or value.isdigit():
        return False
    if re.fullmatch(r"v?\d+(?:\.\d+)+[\w.-]*", value) or _HOST_LIKE.match(value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    symbols = any(c in _SECRET_SYMBOLS for c in value)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return letters and (digits or symbols or (mixed and len(value) >= 20))


class CredentialRecognizer(EntityRecognizer):
    """Passwords, PINs, keys and tokens recognised by the words written in front of them.

    The words stay in the text; only the value becomes a placeholder. ``ordinary`` says whether
    a word is an ordinary English word (the redactor passes the spaCy model's vocabulary), so
    that "password: see the screenshot" is read as a sentence, not as the password "see".
    """

    ENTITIES = (PASSWORD, PIN, API_KEY, BASIC_AUTH, AWS_SECRET_KEY)
    PASSWORD_SCORE = 0.85
    KEY_SCORE = 0.8
    PIN_SCORE = 0.8

    def __init__(
        self,
        ordinary: Callable[[str], bool] | None = None,
        stop_words: frozenset[str] = frozenset(),
        supported_language: str = "en",
    ) -> None:
        self._ordinary = ordinary or (lambda word: word.casefold() in _PHRASE_STOPS)
        self._phrase_stops = _PHRASE_STOPS | stop_words
        super().__init__(
            supported_entities=list(self.ENTITIES),
            supported_language=supported_language,
            name="CredentialRecognizer",
        )

    def load(self) -> None:
        """Nothing to load: the rules are compiled at import."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        spans = [
            *self._assignments(text),
            *self._password_sentences(text),
            *self._pins(text),
            *self._shell(text),
            *self._headers(text),
            *self._pairs_and_encodings(text),
        ]
        if _telegraphic(text):
            # Text stripped of its stop words ("change password hello please assist"): a value
            # of plain words there is the next words of the text, not a password.
            spans = [
                span
                for span in spans
                if span.entity_type != PASSWORD or looks_like_password(text[span.start : span.end])
            ]
        # Recognised by their shape, so also in a tool's terse output (manage-bde's listing).
        spans += [
            _Span(PASSWORD, m.start(), m.end(), self.PASSWORD_SCORE)
            for m in _RECOVERY_KEY.finditer(text)
        ]
        wanted = set(entities) if entities else set(self.ENTITIES)
        seen: set[tuple[str, int, int]] = set()
        results = []
        for span in spans:
            key = (span.entity_type, span.start, span.end)
            if span.entity_type in wanted and key not in seen and span.end > span.start:
                seen.add(key)
                results.append(RecognizerResult(span.entity_type, span.start, span.end, span.score))
        return results

    # -- config files, code, logs -----------------------------------------------------------

    def _assignments(self, text: str) -> Iterator[_Span]:
        for match in _ASSIGNMENT.finditer(text):
            name = match.group("name")
            inside_a_word = match.start() > 0 and text[match.start() - 1].isalnum()
            if inside_a_word and not _ESCAPED_LINE_BREAK.search(
                text, max(0, match.start() - 2), match.start()
            ):
                continue  # inside a word, unless after an escaped break ("\npassword=")
            kind = _name_kind(name)
            if kind is None:
                continue
            if match.group("op") == "==" and kind != PASSWORD:
                continue
            value = self._read_value(text, match.end(), phrase=False)
            if value is None:
                continue
            if _generic_key_name(_split_name(name)) and not strong_key(text[value[0] : value[1]]):
                continue  # "key: app.title.main"
            yield from self._accept_assigned(text, kind, *value)
        for match in _NAME_THEN_VALUE.finditer(text):
            kind = _name_kind(match.group("name"))
            value = self._read_value(text, match.end(), phrase=False) if kind else None
            if kind is not None and value is not None:
                yield from self._accept_assigned(text, kind, *value)
        for match in _KEY_CUE.finditer(text):
            start, end = self._trim(text, match.start("value"), match.end("value"))
            if looks_random(text[start:end]) and not self._is_reference(text[start:end]):
                yield _Span(API_KEY, start, end, self.KEY_SCORE)
        yield from self._csv_columns(text)
        for match in _XML_VALUE_CHILD.finditer(text):
            # <AdministratorPassword><Value>X</Value>...: the secret is the element's value
            kind = _name_kind(match.group("name"))
            if kind is not None:
                yield from self._accept_assigned(
                    text, kind, match.start("value"), match.end("value")
                )
        for match in _XML_ELEMENT.finditer(text):
            kind = _name_kind(match.group("name"))
            if kind is not None:
                yield from self._accept_assigned(
                    text, kind, match.start("value"), match.end("value")
                )
        for rule in _QUOTED_NAME_VALUE:
            for match in rule.finditer(text):
                kind = _name_kind(match.group("name"))
                if kind is not None:
                    yield from self._accept_assigned(
                        text, kind, match.start("value"), match.end("value")
                    )
        for rule in (_DIRECTIVE, _PGPASS_LINE):
            for match in rule.finditer(text):
                start, end = self._trim(text, match.start("value"), match.end("value"))
                yield from self._accept_assigned(text, PASSWORD, start, end)
        for match in _XML_KEY_VALUE.finditer(text):
            kind = _name_kind(match.group("name"))
            if kind is not None and match.group("value"):
                yield from self._accept_assigned(
                    text, kind, match.start("value"), match.end("value")
                )

    def _csv_columns(self, text: str) -> Iterator[_Span]:
        """The cells under a column named like a secret in delimited text: a header line of
        names ("Title,URL,Username,Password,Notes"), then rows with as many cells, as password
        managers and spreadsheets export them (a quoted cell may hold the delimiter)."""
        if "\n" not in text or not _SECRET_COLUMN_HINT.search(text):
            return
        lines = list(re.finditer(r"[^\n]*(?:\n|$)", text))
        for number, header in enumerate(lines):
            line = header.group(0).rstrip("\r\n")
            if not _SECRET_COLUMN_HINT.search(line):
                continue
            for delimiter in ",;\t|":
                names = [cell.strip().strip('"') for cell in line.split(delimiter)]
                if len(names) < 2 or not all(_COLUMN_NAME.fullmatch(n) for n in names):
                    continue
                columns = {i: k for i, n in enumerate(names) if (k := _name_kind(n)) is not None}
                if not columns:
                    continue
                for row in lines[number + 1 :]:
                    cells = _csv_cells(row.group(0).rstrip("\r\n"), delimiter, row.start())
                    if len(cells) != len(names):
                        break
                    for column, kind in columns.items():
                        start, end = cells[column]
                        if end > start:
                            yield from self._accept_assigned(text, kind, start, end)
                break

    def _accept_assigned(self, text: str, kind: str, start: int, end: int) -> Iterator[_Span]:
        value = text[start:end]
        if self._is_reference(value) or self._is_prose(text, start, end):
            return
        if kind == PASSWORD:
            yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        elif kind == PIN:
            if value.rstrip("#").isdigit() and 3 <= len(value.rstrip("#")) <= 10:
                yield _Span(PIN, start, end, self.PIN_SCORE)
            elif looks_like_password(value):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        elif looks_random(value):
            yield _Span(API_KEY, start, end, self.KEY_SCORE)

    def _pairs_and_encodings(self, text: str) -> Iterator[_Span]:
        """An AWS secret key beside its access key id, base64 that decodes to "user:password"
        (BASIC_AUTH), and that decoded pair where the text shows it too ("echo '...' |
        base64 -d" and its output)."""
        for match in _AWS_KEY_PAIR.finditer(text):
            if looks_random(match.group("value")):
                yield _Span(
                    AWS_SECRET_KEY, match.start("value"), match.end("value"), self.KEY_SCORE
                )
        for match in _BASE64_TOKEN.finditer(text):
            if len(match.group(0)) > _LONGEST_ENCODED_LOGIN:
                continue  # a blob, an image: no login is that long
            pair = _decoded_login(match.group(0))
            if pair is None:
                continue
            yield _Span(BASIC_AUTH, match.start(), match.end(), self.KEY_SCORE)
            user, password = pair
            for shown in re.finditer(re.escape(f"{user}:{password}"), text):
                start = shown.start() + len(user) + 1
                yield _Span(PASSWORD, start, shown.end(), self.PASSWORD_SCORE)

    # -- chats and e-mails --------------------------------------------------------------------

    def _password_sentences(self, text: str) -> Iterator[_Span]:
        cue_starts = []
        for cue in _PASSWORD_CUE.finditer(text):
            cue_starts.append(cue.start())
            found = self._after_password_word(text, cue) or self._bare_word(text, cue)
            if found is not None:
                yield found
            # "... was Daisy then the year, so Daisy2019": the value said again in full
            again = _RESTATED.match(text, found.end if found is not None else cue.end())
            if again:
                start, end = self._trim_sentence(text, again.start("value"), again.end("value"))
                if looks_like_password(text[start:end]) and not self._is_reference(text[start:end]):
                    yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for cue in _WIFI_KEY_CUE.finditer(text):
            if not _WIFI_WORDS.search(text, max(0, cue.start() - 80), cue.start()):
                continue  # "my key stopped working on the office door"
            found = self._after_password_word(text, cue) or self._value_without_verb(
                text, cue.end()
            )
            if found is not None and looks_like_password(text[found.start : found.end]):
                cue_starts.append(cue.start())
                yield found
        for topic in _SECURITY_TOPIC.finditer(text):
            reach = max(0, topic.start() - _CONTEXT_REACH), topic.end() + _CONTEXT_REACH
            if not _SECURITY_QUESTION.search(text, *reach):
                continue  # "my first car was a Golf": no security question near
            cue_starts.append(topic.start())
            found = self._answer_after(text, topic.end()) or self._answer_given(text, topic.end())
            if found is not None:
                yield found
        # The rules around a password or PIN word run only when one was written.
        named = bool(cue_starts) or _PIN_NOUN.search(text) is not None
        rules = (
            *(
                (_VALUE_BEFORE_WORD, _VALUE_AS_ITS_WORD, _VALUE_THEN_ITS_WORD, *_CHANGED_TO_ABROAD)
                if named
                else ()
            ),
            _CHANGED_TO, _USER_SLASH_PASSWORD, _USER_COLON_PASSWORD,
        )  # fmt: skip
        for rule in rules:
            for match in rule.finditer(text):
                groups = ("old", "value") if "old" in rule.groupindex else ("value",)
                for group in groups:
                    if match.group(group) is None:
                        continue
                    start, end = self._trim(text, match.start(group), match.end(group))
                    value = text[start:end]
                    if rule is _CHANGED_TO and match.group(0).casefold().split()[1] == "it":
                        window = text[max(0, match.start() - 80) : match.end() + 80]
                        if not _PASSWORD_NEAR.search(window):
                            continue
                    if rule is _USER_COLON_PASSWORD and (
                        _IMAGE_TAG.fullmatch(value)
                        or _HOST_LIKE.match(match.group("user"))
                        or re.search(r"[=,]", value)
                    ):
                        continue  # "nginx:1.25-alpine", "redis-02.corp.local:6379,ssl=false"
                    if (
                        value.isdigit()
                        and 4 <= len(value) <= 10
                        and _PIN_NOUN.search(match.group(0))
                    ):
                        yield _Span(PIN, start, end, self.PIN_SCORE)  # "set my PIN to 4471"
                    elif (looks_like_password(value) and not _DATE_OR_PATH.search(value)) or (
                        "user" in rule.groupindex
                        and _default_login(
                            match.group("user"), value, ":" if rule is _USER_COLON_PASSWORD else "/"
                        )
                    ):
                        yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _DEFAULT_PAIR.finditer(text):
            line_start = text.rfind("\n", 0, match.start()) + 1
            if (
                _default_login(
                    match.group("user"),
                    match.group("value"),
                    text[match.end("user") : match.start("value")].strip(),
                )
                and match.group("user").casefold() in DEFAULT_USERS
                and _DEFAULT_PAIR_CONTEXT.search(text, max(0, match.start() - 80), match.end() + 80)
                and not _OWNER_OR_CONTAINER_USER.search(text, line_start, match.start())
            ):
                yield _Span(PASSWORD, match.start("value"), match.end("value"), self.PASSWORD_SCORE)
        yield from self._by_reference(text, cue_starts)
        yield from self._shaped_in_context(text, cue_starts)
        for match in _TRIED.finditer(text):
            window = text[max(0, match.start() - 100) : match.end() + 100]
            password_near = _PASSWORD_NEAR.search(window) is not None
            # a value typed or tried in a message about signing in ("locked after I typed X")
            signing_in = (
                match.group("verb")
                .casefold()
                .startswith(("tri", "typ", "ent", "key", "usi", "put"))
                and _SIGN_IN_WORDS.search(window) is not None
            )
            offset = match.start("values")
            for tried in re.finditer(r"[^\s,]+", match.group("values")):
                start, end = self._trim_sentence(text, offset + tried.start(), offset + tried.end())
                word = text[start:end]
                if (
                    word.casefold() in {"and", "or"}
                    or word.startswith("-")  # "Using --password via the CLI is insecure"
                    or not looks_like_password(word)
                    or _PRODUCT_WITH_VERSION.fullmatch(word)  # "using Windows11"
                ):
                    continue
                said = _said_to_be_typed(text, end)
                if password_near or said or (signing_in and _typed_password(word)):
                    yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)

    def _answer_after(self, text: str, position: int) -> _Span | None:
        """The answer to a security question right after its topic (:data:`_ANSWER_AFTER`), of
        six words at most, not a sentence about it ("... is wrong", "... was a question")."""
        answer = _ANSWER_AFTER.match(text, position)
        if answer is None:
            return None
        start, end = self._trim_sentence(text, answer.start("value"), answer.end("value"))
        while start < end and text[start] in "-–— \t":
            start += 1  # "my favourite food - lasagne - ..."
        while end > start and text[end - 1] in "-–— \t":
            end -= 1
        words = text[start:end].split()
        if not 1 <= len(words) <= 6 or self._is_reference(text[start:end]):
            return None
        folded = {word.casefold() for word in words}
        if folded & (STATE_WORDS | _CLAUSE_BREAKS) or (
            len(words) == 1 and words[0].islower() and self._ordinary(words[0])
        ):
            return None  # "my first pet's name is wrong", "birthplace is required"
        return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)

    def _answer_given(self, text: str, position: int) -> _Span | None:
        """The answer to a security question said to be given after its topic, in the same
        sentence: "my mother's maiden name, I put Ó Briain with and without the accent"."""
        given = _ANSWER_GIVEN.match(text, position)
        if given is None:
            return None
        start, end = self._trim_sentence(text, given.start("value"), given.end("value"))
        value = text[start:end]
        if value.casefold() in _PHRASE_STOPS or self._is_reference(value) or self._ordinary(value):
            return None  # "I put it in", "I put the wrong one"
        return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)

    def _shaped_in_context(self, text: str, cue_starts: list[int]) -> Iterator[_Span]:
        """Tokens shaped like a password (:func:`secret_shaped`), or spelled out character by
        character with letters and digits, within :data:`_CONTEXT_REACH` characters of a word
        of signing in, typing or describing a secret, in any language (:data:`CONTEXT_WORDS`),
        or of a password word: the way people give a password without a word right before it
        ("locked after two tries: first Harbour#07 then Harbour#08", "I typed it... Fern_Gate_4",
        "Kennwort geändert auf Alster-Moor-12", "it's s-n-o-w-1-9, all lowercase")."""
        cues = [*cue_starts, *(m.start() for m in _CREDENTIAL_CONTEXT.finditer(text))]
        if not cues:
            return

        def near(start: int) -> bool:
            return any(abs(start - cue) <= _CONTEXT_REACH for cue in cues)

        for token in _SHAPE_CANDIDATE.finditer(text):
            start, end = self._trim_sentence(text, token.start(), token.end())
            while end > start and text[end - 1] in ")]},;:!?." and text[start] in "([{":
                start, end = start + 1, end - 1  # "(Tmp-4417-Otter)."
            while end > start and text[end - 1] in ")]},;:":
                end -= 1
            if text[start : start + 1] in ("(", "["):
                start += 1
            value = text[start:end]
            if secret_shaped(value) and near(start) and not self._is_reference(value):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _SPELLED_ANY.finditer(text):
            value = match.group(0)
            if (
                any(c.isalpha() for c in value)
                and any(c.isdigit() for c in value)
                and near(match.start())
            ):
                yield _Span(PASSWORD, match.start(), match.end(), self.PASSWORD_SCORE)

    def _by_reference(self, text: str, cue_starts: list[int]) -> Iterator[_Span]:
        """A password named by what it replaces or by "it": "... and the new one is X", "my
        password? it's X", "the old one was Lisbon#1990", "das neue X", "the last one I had was
        0909" (a PIN); "it's X" with words after it that say it is one ("it's X, the same one I
        use for the VPN", "its X all lowercase"); "X is what I typed"; "the same for
        everything: X"; "she set 1122" after a PIN word. Without a password word before it,
        the value must look like a password on its own (letters, digits and a symbol or a
        year)."""
        for match in _THE_OTHER_ONE.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            value = text[start:end]
            before = max(0, match.start() - 150)
            if re.fullmatch(r"\d{4,8}", value):
                if match.group("verb") and _PIN_NOUN.search(text, before, match.start()):
                    yield _Span(PIN, start, end, self.PIN_SCORE)  # "the last one I had was 0909"
                continue
            if not looks_like_password(value) or _DATE_OR_PATH.search(value):
                continue
            named = any(s < match.start() for s in cue_starts)
            if (named and match.group("verb")) or (
                _password_without_its_word(value)
                and (
                    named
                    or match.group("verb")
                    or _SIGN_IN_WORDS.search(text, before, match.end() + 100)
                )
            ):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _ITS.finditer(text):
            start, end = self._trim(text, match.start("value"), match.end("value"))
            code = _CODE_VALUE.fullmatch(text[start:end].rstrip(".!?"))
            if code is not None and 4 <= _digit_count(code.group(0)) <= 8:
                end = start + len(code.group(0))
            if re.fullmatch(r"[\d -]{4,20}", text[start:end]) and _PIN_NOUN.search(
                text, max(0, match.start() - 100), match.start()
            ):
                yield _Span(PIN, start, end, self.PIN_SCORE)  # "what's my PIN? it's 4471"
                continue
            value = text[start:end].rstrip(".!?")
            end = start + len(value)
            joined = value.replace(" ", "")
            if not (
                looks_like_password(joined)
                and any(c.islower() for c in joined)
                and any(c.isdigit() for c in joined)
                and not _DATE_OR_PATH.search(joined)
                and not _FILE_NAME.search(joined)
                and not _A_TIME_OR_AMOUNT.fullmatch(joined)
            ):
                continue
            cue_before = any(0 <= match.start() - s < 150 for s in cue_starts)
            if cue_before or _said_to_be_typed(text, end):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for rule in (_WHAT_I_TYPED, _SAME_EVERYWHERE):
            for match in rule.finditer(text):
                start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
                if _password_without_its_word(text[start:end]):
                    yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _SET_DIGITS.finditer(text):
            if _PIN_NOUN.search(text, max(0, match.start() - 120), match.start()) and not (
                _UNIT_AFTER.match(text, match.end())
            ):
                yield _Span(PIN, match.start("value"), match.end("value"), self.PIN_SCORE)
        named = bool(cue_starts)
        for match in _IN_PARTS.finditer(text) if named else ():
            if not _PARTS_OF_A_SECRET.search(text, max(0, match.start() - 40), match.start()):
                continue  # "key ID starts with 4A7C1E02"
            for group in ("first", "last", "whole"):
                if match.group(group) is None:
                    continue
                start, end = self._trim_sentence(text, match.start(group), match.end(group))
                value = text[start:end]
                if group == "whole" and not looks_like_password(value):
                    continue
                if self._is_reference(value) or value.casefold() in _DESCRIBING:
                    continue
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _SPELLED_VALUE.finditer(text):
            value = match.group(0)
            window = text[max(0, match.start() - 150) : match.start()]
            if (
                any(c.isalpha() for c in value)
                and any(c.isdigit() for c in value)
                and (named or _SIGN_IN_WORDS.search(window) or _ITS.search(window[-40:]))
            ):
                yield _Span(PASSWORD, match.start(), match.end(), self.PASSWORD_SCORE)
        for match in _LETTERS_THEN_VALUE.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            if not self._is_reference(text[start:end]) and not self._is_prose(text, start, end):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _BARE_USER_COLON.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            window = text[max(0, match.start() - 100) : match.end() + 100]
            value = text[start:end]
            if (
                _password_without_its_word(value)
                and not re.search(r"[=,]", value)  # "host:6379,ssl=false": options
                and not _HOST_LIKE.match(match.group("user"))
                and _SIGN_IN_WORDS.search(window)
            ):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _USER_THEN_PASS_LABELS.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            if not self._is_reference(text[start:end]):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _ASKED_ABOUT.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            value = text[start:end]
            window = text[max(0, match.start() - 60) : match.end() + 60]
            if looks_like_password(value) and (
                _PASSWORD_NEAR.search(window) or _PIN_NOUN.search(window)
            ):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _CREDENTIALS_ARE.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            if looks_like_password(text[start:end]):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for cue_start in cue_starts:
            sentence = _SENTENCE_AFTER_CUE.match(text, cue_start)
            if sentence is None:
                continue
            for token in _TOKEN.finditer(text, cue_start, sentence.end()):
                start, end = self._trim_sentence(text, token.start(), token.end())
                value = text[start:end].strip("()[]")
                if value and _unmistakable_password(value):
                    offset = text.index(value, start)
                    yield _Span(PASSWORD, offset, offset + len(value), self.PASSWORD_SCORE)
        for match in _ACCOUNT_SET_TO.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            value = text[start:end]
            if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) >= 2:
                start, end = start + 1, end - 1
                if looks_like_password(text[start:end]) and not self._is_reference(text[start:end]):
                    yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
            elif _password_without_its_word(value):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _DESCRIBED_THEN_VALUE.finditer(text):
            start, end = self._trim_sentence(text, match.start("value"), match.end("value"))
            value = text[start:end]
            if looks_like_password(value) and any(c.isdigit() for c in value):
                yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)

    def _after_password_word(self, text: str, cue: re.Match[str]) -> _Span | None:
        position = cue.end()
        keyword = cue.group("kw") or cue.group("compound")
        passphrase = bool(_PASSPHRASE_WORDS.search(keyword))
        # "password (case sensitive): X"
        aside = _ASIDE_THEN_SIGN.match(text, position)
        if aside:
            return self._password_value(text, aside.end(), phrase=True, passphrase=passphrase)
        # "my password, which is X, ...", "my password, Hunter2!, does not work"
        which = _WHICH_IS.match(text, position)
        if which:
            found = self._password_value(text, which.end(), phrase=False)
            if found is not None and looks_like_password(text[found.start : found.end]):
                return found
        apposition = _APPOSITION.match(text, position)
        if apposition:
            token = _TOKEN.match(text, apposition.end())
            if token and token.group(0).endswith(","):
                start, end = token.start(), token.end() - 1
                if looks_like_password(text[start:end]) and not self._is_reference(text[start:end]):
                    return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        # "my password, if needed, is X": the verb is looked for after the remark.
        remark = _ASIDE_THEN_VERB.match(text, position)
        if remark and looks_like_password(remark.group(0).strip(" \t,()-–—")):
            remark = None  # "my password (Castle#909) is rejected": the value, not a remark
        if remark:
            position = remark.end()
        glued = _GLUED_DASH.match(text, position)
        if glued:  # "pw-Sunflower22"
            token = _TOKEN.match(text, glued.end())
            if token:
                start, end = self._trim_sentence(text, token.start(), token.end())
                if looks_like_password(text[start:end]) and not self._is_reference(text[start:end]):
                    return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        possessive = None if remark else _POSSESSIVE_S.match(text, position)
        if possessive:
            return self._password_value(text, possessive.end(), phrase=True, passphrase=passphrase)
        dash = None if remark else _DASH_SIGN.match(text, position)
        if dash:
            return self._password_value(text, dash.end(), phrase=passphrase, passphrase=passphrase)
        contains = _CONTAINS_DESCRIPTION.match(text, position)
        if contains:
            found = self._password_value(text, contains.end(), phrase=False)
            if found is not None and _DESCRIPTION_START.match(text, contains.end()):
                described = text[found.start : found.end]
                if any(c.isdigit() for c in described) or looks_like_password(described):
                    return found
        # The verb or sign, directly or after a few words: "my password for the vpn is X".
        window_end = self._clause_end(text, position, limit=80)
        written_after = [w.strip(":=,") for w in text[position:window_end].split()[:2]]
        words_after = [w.casefold() for w in written_after]
        if words_after and (
            words_after[0] in _COMPOUND_NOUNS
            or (
                len(words_after) == 2
                and words_after[1] in _COMPOUND_NOUNS
                and words_after[0] not in _LINKING_WORDS
                and not looks_like_password(written_after[0])  # "pw Pine#22 login fails"
            )
        ):
            return None  # "password policy is ...", "the password admin portal is down"
        for verb in _VERB_AT.finditer(text, position, window_end):
            between = text[position : verb.start()]
            if _content_words(between) > 8 or _NEGATION.search(between) or "://" in between:
                break
            word = (verb.group("verb") or "").casefold()
            if word in _FOREIGN_VERBS and not re.match(
                _FOREIGN_VERBS[word], keyword, re.IGNORECASE
            ):
                continue
            if (
                verb.group("sign") == "="
                and between.strip()
                and not (text[verb.start() - 1 : verb.start()].isspace())
            ):
                continue  # "method=password mfa=push" ("the pass i set = X" stays)
            if (
                verb.group("sign") == ":"
                and between.strip()
                and not text[verb.end() : verb.end() + 1].isspace()
            ):
                continue
            found = self._password_value(text, verb.end(), phrase=True, passphrase=passphrase)
            if found is not None and word.endswith(" to"):
                value = text[found.start : found.end]
                if value.islower() and value.isalpha() and self._ordinary(value):
                    found = None  # "my password was changed to comply"
            if found is not None:
                return found
            if between.strip() == "":
                # "pw = same as before: X": a remark after the verb, then the value
                late_sign = _LATE_SIGN.match(text, verb.end())
                if late_sign and not _NEGATION.search(late_sign.group("remark")):
                    found = self._password_value(text, late_sign.end(), phrase=False)
                    if found is not None and looks_like_password(text[found.start : found.end]):
                        return found
                # "password: <prose>" or "password is <prose>": nothing further along
                break
        # "my password (Castle#909) is rejected", "the password you gave me (Init!al-99)"
        paren = re.compile(r"\((?P<value>[^\s()]{4,64})\)").search(text, position, window_end)
        if paren and looks_like_password(paren.group("value")):
            return _Span(PASSWORD, paren.start("value"), paren.end("value"), self.PASSWORD_SCORE)
        # A remark with commas, then a colon: "le mot de passe du compte, au cas où : X". The
        # value must look like a password, the remark has no sentence end and no negation.
        late_sign = _LATE_SIGN.match(text, position)
        if late_sign and not _NEGATION.search(late_sign.group("remark")):
            found = self._password_value(text, late_sign.end(), phrase=False)
            if found is not None and looks_like_password(text[found.start : found.end]):
                return found
        # No verb: "with my password Hunter2x! and", "pwd Kx!8844mm", "pass 'Nordsee#24'".
        if _NO_VERB_WORDS.fullmatch(keyword):
            return self._value_without_verb(text, position)
        return None

    def _bare_word(self, text: str, cue: re.Match[str]) -> _Span | None:
        """A plain word right after a password word, given as the password (:data:`_BARE_WORD`):
        "with my password dispatch I still cannot log in", "my password sunshine doesn't work",
        "the password monkey is rejected". Whose password it is or that it was used is said
        before it (:data:`_OWNED_OR_USED`) and its clause ends after it, or the sentence says
        right after it that it failed (:data:`_FAILED`). The word is none of the words a
        sentence about a password goes on with (:meth:`_goes_on_sentence`): "my password
        expired", "my password manager", "my password problem is back", "my password and
        username" stay."""
        keyword = cue.group("kw") or cue.group("compound")
        if not _NO_VERB_WORDS.fullmatch(keyword) or _NOT_A_BARE_CUE.fullmatch(keyword):
            return None
        bare = _BARE_WORD.match(text, cue.end())
        if bare is None or self._goes_on_sentence(bare.group("word")):
            return None
        after = bare.end()
        opening = bare.group("open")
        if opening:  # "(monkey)", "«monkey»": the closing mark must follow
            closing = _QUOTES.get(opening, {"(": ")", "[": "]"}.get(opening, opening))
            if not text.startswith(closing, after):
                return None
            after += len(closing)
        symbols = _SYMBOLS.match(text, after)
        after = symbols.end() if symbols else after
        if _FAILED.match(text, after) is None:
            line_start = text.rfind("\n", 0, cue.start()) + 1
            owned = _OWNED_OR_USED.search(text, max(line_start, cue.start() - 80), cue.start())
            if owned is None or any(
                word.casefold() in self._phrase_stops
                or word.casefold() in _CLAUSE_BREAKS
                or word.casefold() in _CLAUSE_JOINS
                for word in owned.group("between").split()
            ):
                return None  # "the password monkey", "my laptop and password monkey"
            if not self._ends_bare_word(text, after):
                return None  # "my password monkey business is over"
        return _Span(PASSWORD, bare.start("word"), bare.end("word"), self.PASSWORD_SCORE)

    def _goes_on_sentence(self, word: str) -> bool:
        """Whether ``word``, right after a password word, goes on with a sentence about the
        password instead of being it: a state, a function word, a filler, an adverb, a verb's
        form, a compound noun ("reset", "manager", "policy"), a word of signing in, a product,
        another secret's noun, a noun of a process or a quality ("authentication")."""
        folded = word.casefold()
        if folded in _NEVER_BARE or folded in self._phrase_stops:
            return True
        if _NOT_BARE_PATTERNS.fullmatch(folded) or _ABSTRACT_NOUN.fullmatch(folded):
            return True
        # "my password stopped working", "my password expiring", "my password suddenly
        # stopped", "my password works", "my password expires", "password settings" (a plural)
        return (
            self._inflected(folded, "ing")
            or self._inflected(folded, "ed")
            or self._inflected(folded, "ly")
            or (not folded.endswith(("ss", "us", "is")) and self._inflected(folded, "s"))
        )

    def _inflected(self, folded: str, suffix: str) -> bool:
        """``folded`` is an ordinary word with ``suffix`` added ("stopped", "expiring",
        "suddenly", "works"), not a word that merely ends so ("spring", "hundred")."""
        if len(folded) < len(suffix) + 3 or not folded.endswith(suffix):
            return False
        stem = folded[: -len(suffix)]
        stems = [stem, stem + "e", stem[:-1] + "y" if stem.endswith("i") else stem]
        if stem[-1] == stem[-2]:
            stems.append(stem[:-1])  # "stopped"
        if suffix == "s" and stem.endswith("e"):
            stems.append(stem[:-1])  # "fixes"
        return any(len(word) >= 3 and self._ordinary(word) for word in stems)

    def _ends_bare_word(self, text: str, position: int) -> bool:
        """Nothing after a bare word at ``position`` goes on with its noun phrase: the text's,
        line's or clause's end, or a word that starts the sentence's next part ("I", "and",
        "still", "again", "please")."""
        if position >= len(text) or text[position] in ",.;:!?)(\r\n–—\"'’`":
            return True
        following = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?").match(text, position)
        if following is None:
            return text.startswith("- ", position)
        folded = following.group(0).casefold()
        return (
            folded in self._phrase_stops
            or folded in _CLAUSE_BREAKS
            or folded in _CLAUSE_JOINS
            or folded in ASIDE_WORDS
            or _NOT_BARE_PATTERNS.fullmatch(folded) is not None
        )

    def _value_without_verb(self, text: str, position: int) -> _Span | None:
        """The value right after a password word with no verb: quoted (any value that is no
        reference), a word that looks like a password, or a factory default ("password admin",
        "pass guest") at the end of its clause."""
        gap = re.compile(r"[ \t]+").match(text, position)
        if not gap:
            return None
        if gap.end() < len(text) and text[gap.end()] in "\"'`":
            quoted = self._read_value(text, gap.end(), phrase=False)
            if quoted is not None:
                start, end = quoted
                value = text[start:end]
                if not self._is_reference(value) and not (
                    value.casefold() in _DESCRIBING and " " not in value
                ):
                    return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
            return None
        token = _TOKEN.match(text, gap.end())
        if not token:
            return None
        start, end = self._trim(text, token.start(), token.end())
        value = text[start:end]
        if self._is_reference(value) or _ANOTHER_FIELD.match(value):
            return None
        if looks_like_password(value):
            return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        if value.casefold() in DEFAULT_PASSWORDS and self._ends_clause(text, end):
            return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        return None

    def _ends_clause(self, text: str, end: int) -> bool:
        """Nothing after ``end`` but punctuation, the end, or a word that starts a new part of
        the sentence ("... password admin on the lab vm", "... pass guest, try it")."""
        rest = text[end:].lstrip(" \t")
        if not rest or rest[0] in ",.;:!?)(\r\n/–—" or rest.startswith("- "):
            return True  # "password 12345678 (factory default)", "pass guest - try it"
        following = re.match(r"[^\W\d_]+(?:'[^\W\d_]+)?", rest)
        return following is not None and following.group(0).casefold() in self._phrase_stops

    def _password_value(
        self, text: str, position: int, *, phrase: bool, passphrase: bool = False
    ) -> _Span | None:
        gap = re.compile(r"[ \t]*").match(text, position)
        start = gap.end() if gap else position
        if passphrase:
            clause_end = self._passphrase_clause(text, start)
            if clause_end == _PROSE:
                return None  # "the passphrase is four random words at least"
            if clause_end is not None:
                return _Span(PASSWORD, start, clause_end, self.PASSWORD_SCORE)
        named = _NAMED_THEN_DIGITS.match(text, start)
        if named:
            return _Span(PASSWORD, named.start("first"), named.end("last"), self.PASSWORD_SCORE)
        describing = _DESCRIPTION_START.match(text, start) is not None or bool(
            _DETERMINER_BEFORE.search(text, max(0, start - 8), start)
        )  # "c'est le nom de mon chat ...": the verb's filler took the article
        if describing:
            sentence_end = re.compile(r"[.!?;\n](?:\s|$)").search(text, start, start + 120)
            end_of_search = max(
                self._clause_end(text, start, limit=100),
                sentence_end.start() if sentence_end else min(len(text), start + 120),
            )
            described = _DESCRIBED_NAME.search(text, start, end_of_search)
            if described:
                return _Span(
                    PASSWORD, described.start("first"), described.end("last"), self.PASSWORD_SCORE
                )
            digits = _DESCRIBED_DIGITS.match(text, start)
            if digits:
                return _Span(
                    PASSWORD, digits.start("digits"), digits.end("digits"), self.PASSWORD_SCORE
                )
        described = _DESCRIBED.match(text, start)
        if described and described.group("rest"):
            return _Span(PASSWORD, described.start("first"), described.end(), self.PASSWORD_SCORE)
        if describing:
            given = _GIVEN_AFTER_DESCRIPTION.search(text, start, end_of_search)
            if (
                given
                and looks_like_password(given.group("value"))
                and not _ticket_or_error_number(given.group("value"))
            ):
                # "the name of my first pet, so: Rex1990", "my wife's name with my birth year,
                # Anna1980"
                return _Span(
                    PASSWORD, given.start("value"), given.end("value"), self.PASSWORD_SCORE
                )
            joined = _DIGITS_AFTER_DESCRIPTION.search(text, start, end_of_search)
            if joined:  # "my street name then 42", "the name of my first pet plus 123"
                return _Span(
                    PASSWORD, joined.start("digits"), joined.end("digits"), self.PASSWORD_SCORE
                )
        value = self._read_value(text, position, phrase=phrase)
        if value is None:
            return None
        start, end = value
        if self._is_reference(text[start:end]) or self._is_prose(text, start, end):
            return None
        # "tulip followed by 2468"
        more = _FOLLOWED_BY.match(text, end)
        while more:
            end = more.end()
            more = _FOLLOWED_BY.match(text, end)
        return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)

    # -- PINs, headers, shell -----------------------------------------------------------------

    def _pins(self, text: str) -> Iterator[_Span]:
        for match in _PIN_CUE.finditer(text):
            found = self._code_after(text, match)
            if found is None:
                continue
            value_start, value_end, link = found
            digits = text[value_start:value_end].rstrip("#")
            count = _digit_count(digits)
            keyword = match.group("kw").casefold()
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", digits) or _UNIT_AFTER.match(text, value_end):
                continue  # a date, "12 34 digits long"
            if _ALNUM_CODE.fullmatch(digits) and match.group("bare") is None:
                # letters and digits after a PIN's or a code's own word: its shape says enough
                if not _ticket_or_error_number(digits) and not _PRODUCT_WITH_VERSION.match(digits):
                    yield _Span(PIN, value_start, value_end, self.PIN_SCORE)
                    if keyword.endswith("codes") or link.rstrip().endswith(":"):
                        yield from self._more_codes(text, value_end)
                continue
            if match.group("pin") is not None:
                short = keyword.startswith(("cvv", "cvc", "security"))
                if not ((3 if short else 4) <= count <= (4 if short else 10)):
                    continue
            elif match.group("otp") is not None:
                if not 4 <= count <= 10:
                    continue
            elif match.group("app") is not None:
                # "authenticator", "mfa": six to eight digits ("Authenticator 2024 update" stays).
                if not 6 <= count <= 8:
                    continue
            elif match.group("forcode") is not None:
                if not 3 <= count <= 10:
                    continue
            elif not self._one_time_code(text, match, digits, link):
                continue
            yield _Span(PIN, value_start, value_end, self.PIN_SCORE)
            other = _OR_ANOTHER.match(text, value_end)
            alternative = _CODE_VALUE.match(text, other.end()) if other else None
            if alternative is not None and _digit_count(alternative.group("value")) == count:
                # "my pin is 1357 or 1537"
                yield _Span(
                    PIN, alternative.start("value"), alternative.end("value"), self.PIN_SCORE
                )
            listed = len(link.split()) > 1 and link.rstrip().endswith(":")
            if keyword.endswith("codes") or listed:
                yield from self._more_codes(text, value_end)
        for source in _CODE_SOURCE.finditer(text):
            value = _CODE_VALUE.match(text, source.end())
            if value is None:
                continue
            count = sum(char.isdigit() for char in value.group("value"))
            if 6 <= count <= 8 and not _UNIT_AFTER.match(text, value.end()):
                yield _Span(PIN, value.start("value"), value.end("value"), self.PIN_SCORE)
        for given in _VALUE_IS_YOUR_CODE.finditer(text):
            code = given.group("value").strip()
            start = given.start("value")
            if 4 <= sum(c.isalnum() for c in code) <= 10 and not _ticket_or_error_number(code):
                yield _Span(PIN, start, start + len(code), self.PIN_SCORE)
        for entered in _ENTERED_TO_UNLOCK.finditer(text):
            yield _Span(PIN, entered.start("value"), entered.end("value"), self.PIN_SCORE)
        for shows in _IT_SHOWS.finditer(text):
            value = _CODE_VALUE.match(text, shows.end())
            if value is None or _UNIT_AFTER.match(text, value.end()):
                continue
            count = sum(char.isdigit() for char in value.group("value"))
            before = text[max(0, shows.start() - 150) : shows.start()]
            if 6 <= count <= 8 and (_CODE_SOURCE.search(before) or _PIN_CUE.search(before)):
                yield _Span(PIN, value.start("value"), value.end("value"), self.PIN_SCORE)

    def _code_after(self, text: str, cue: re.Match[str]) -> tuple[int, int, str] | None:
        """Where the code after a PIN or code word is, and the words that link them: right
        after it ("PIN 0931", "OTP: 48 29 13"), or after its verb or sign a few words on ("the
        PIN for the printer on floor 2 is 7731", "el PIN de la impresora es 2468", "the code
        they sent me is 604 118")."""
        position = cue.end()
        sign = _CODE_SIGN.match(text, position)
        start = sign.end() if sign else position
        value = _CODE_VALUE.match(text, start) or _ALNUM_CODE.match(text, start)
        if value is not None and start > position:
            return value.start("value"), value.end("value"), text[position:start]
        # "the PIN (4492) stopped working", "my PIN's 5512"
        bracket = _CODE_IN_BRACKETS.match(text, position) or _POSSESSIVE_S.match(text, position)
        if bracket is not None:
            after = _skip_blanks(text, bracket.end())
            value = _CODE_VALUE.match(text, after)
            if value is not None and (
                bracket.re is _POSSESSIVE_S or text.startswith(")", _skip_blanks(text, value.end()))
            ):
                return value.start("value"), value.end("value"), bracket.group(0)
        aside = _WHICH_IS.match(text, position) or _APPOSITION.match(text, position)
        if aside:
            value = _CODE_VALUE.match(text, aside.end())
            if value is not None and (
                aside.re is _WHICH_IS or text.startswith(",", _skip_blanks(text, value.end()))
            ):
                return value.start("value"), value.end("value"), aside.group(0)
        window_end = self._clause_end(text, position, limit=90)
        keyword = cue.group("kw")
        words_after = text[position:window_end].split()
        if (
            words_after
            and words_after[0].casefold().strip(":=") in _COMPOUND_NOUNS
            and words_after[1:2] != ["to"]  # "passcode reset to 80226": a verb
        ):
            return None  # "PIN reset fails with 0x801c044f", "the PIN pad on floor 3"
        for verb in _VERB_AT.finditer(text, position, window_end):
            between = text[position : verb.start()]
            if _content_words(between) > 10 or _NEGATION.search(between):
                break
            word = (verb.group("verb") or "").casefold().split()[0] if verb.group("verb") else ""
            if word in _FOREIGN_VERBS and not re.search(
                _FOREIGN_VERBS[word], keyword, re.IGNORECASE
            ):
                continue
            if (
                verb.group("sign")
                and between.strip()
                and not text[verb.end() : verb.end() + 1].isspace()
            ):
                continue  # "login db01:5432", "the code for room B:12"
            after = _skip_blanks(text, verb.end())
            value = (
                _CODE_VALUE.match(text, after)
                or _ALNUM_CODE.match(text, after)
                or _WORD_CODE.match(text, after)
            )
            if value is not None:
                return value.start("value"), value.end("value"), text[position:after]
            described = _DESCRIBED_DIGITS.match(text, after) or _CODE_AFTER_DESCRIPTION.match(
                text, after
            )
            if described is not None:  # "my PIN is my birth year 1987", "the year I was born, 1987"
                group = "digits" if "digits" in described.re.groupindex else "value"
                return described.start(group), described.end(group), text[position:after]
        for verb in _CODE_SAYS.finditer(text, position, window_end):
            between = text[position : verb.start()]
            if len(between.split()) > 6 or _NEGATION.search(between):
                break
            after = _skip_blanks(text, verb.end())
            value = _CODE_VALUE.match(text, after) or _ALNUM_CODE.match(text, after)
            if value is not None:  # "the PUK on the card says 58203391"
                return value.start("value"), value.end("value"), text[position:after]
        # A remark with commas, then a colon and a list: "the backup codes I printed, in case
        # you need them: 8391 2047, 5520 1178", "a recovery code, I still have these two: ...".
        late_sign = _LATE_SIGN.match(text, position)
        if late_sign and not _NEGATION.search(late_sign.group("remark")):
            value = _CODE_VALUE.match(text, late_sign.end()) or _ALNUM_CODE.match(
                text, late_sign.end()
            )
            if value is not None and text[late_sign.end("remark") :].lstrip().startswith(":"):
                return value.start("value"), value.end("value"), text[position : late_sign.end()]
        if keyword.casefold().endswith("codes"):
            # A list of codes after a colon, a sentence or two on: "the backup codes again, I
            # lost the paper. the ones I kept: 38104-72215, 90372-11846".
            colon = re.compile(r":[ \t]*").search(text, position, position + 160)
            if colon and "\n\n" not in text[position : colon.start()]:
                value = _CODE_VALUE.match(text, colon.end()) or _ALNUM_CODE.match(text, colon.end())
                if value is not None:
                    return value.start("value"), value.end("value"), text[position : colon.end()]
        return None

    @staticmethod
    def _one_time_code(text: str, cue: re.Match[str], digits: str, link: str) -> bool:
        """Whether digits after "the code" are a one-time code: four to ten digits, after its
        verb or sign; with more words between, words of a code that was sent or shown ("the
        code it texted me is 482 913"); never an error's code ("the code from the error is
        80070005", "the code is 404 503"), nor a Windows error written without "0x"."""
        count = sum(char.isdigit() for char in digits)
        words = link.split()
        before = text[max(0, cue.start() - 40) : cue.start()]
        if not words and _ENTER_BEFORE.search(before):
            words = ["enter"]  # "use code 552918 to sign in": the verb stands before the word
        if not words and 6 <= count <= 8 and _SECOND_FACTOR.search(text, max(0, cue.start() - 150)):
            words = ["shown"]  # "Okta Verify isn't pushing, I can only see the code 730215"
        if not words and _PHYSICAL_ACCESS.search(text, max(0, cue.start() - 150), cue.start()):
            words = ["opens"]  # "the safe in room 2 is stuck, code 4-9-1-7-3"
        if (
            not 4 <= count <= 10
            or not words
            or (any(c.isalpha() for c in digits) and "-" not in digits)  # "KB5034441"
            or set(re.split(r"[ -]", digits)) <= _HTTP_STATUS_CODES
            or _WINDOWS_ERROR.fullmatch(digits)
            or _ERROR_CONTEXT.search(link)
            or _ERROR_CONTEXT.search(before)
        ):
            return False
        return len(words) <= 2 or bool(_ONE_TIME_CONTEXT.search(link))

    def _more_codes(self, text: str, position: int) -> Iterator[_Span]:
        """The codes after the first in a list of backup or recovery codes."""
        while True:
            joint = _NEXT_IN_LIST.match(text, position)
            if joint is None:
                return
            value = _CODE_VALUE.match(text, joint.end()) or _ALNUM_CODE.match(text, joint.end())
            if value is None or _UNIT_AFTER.match(text, value.end()):
                return
            yield _Span(PIN, value.start("value"), value.end("value"), self.PIN_SCORE)
            position = value.end()

    def _shell(self, text: str) -> Iterator[_Span]:
        for rules, entity in ((_SHELL_RULES, PASSWORD), (_SHELL_KEY_RULES, API_KEY)):
            for rule in rules:
                for match in rule.finditer(text):
                    groups = match.groupdict()
                    group = next(g for g in ("sq", "dq", "value") if groups.get(g) is not None)
                    start, end = match.start(group), match.end(group)
                    if group == "value":
                        start, end = self._trim(text, start, end)
                    value = text[start:end]
                    if end <= start or self._is_reference(value):
                        continue
                    if entity == API_KEY and not looks_random(value):
                        continue
                    if (
                        group == "value"
                        and value.isalpha()
                        and value.islower()
                        and self._is_prose(text, start, end)
                    ):
                        continue  # "Using --password via the CLI is insecure"
                    score = self.PASSWORD_SCORE if entity == PASSWORD else self.KEY_SCORE
                    yield _Span(entity, start, end, score)

    def _headers(self, text: str) -> Iterator[_Span]:
        for entity, rule in _HEADER_RULES:
            for match in rule.finditer(text):
                start, end = self._trim(text, match.start("value"), match.end("value"))
                yield _Span(entity, start, end, self.KEY_SCORE)

    # -- reading a value ----------------------------------------------------------------------

    def _read_value(self, text: str, position: int, *, phrase: bool) -> tuple[int, int] | None:
        """Where the value after ``position`` starts and ends: a quoted string, a word in
        brackets, letters spaced out, a passphrase (``phrase``) or one word, without the
        sentence's comma or semicolon after it."""
        gap = re.compile(r"[ \t]*").match(text, position)
        start = gap.end() if gap else position
        if start >= len(text) or text[start] in "\r\n":
            return None
        first = text[start]
        if first in _QUOTES:
            close = text.find(_QUOTES[first], start + 1)
            inner = text[start + 1 : close]
            if close > start + 1 and "\n" not in inner and len(inner) <= 200:
                return start + 1, close
            return None
        if first in "([":
            closing = ")" if first == "(" else "]"
            bracket = re.compile(rf"\{first}(?P<value>[^\s()\[\]]{{1,64}})\{closing}").match(
                text, start
            )
            if bracket:
                return bracket.start("value"), bracket.end("value")
        commas = _COMMA_LETTERS.match(text, start)
        if commas:
            return start, commas.end()
        spaced = _SPACED_LETTERS.match(text, start)
        if spaced and len(spaced.group(0).split()) >= 4:
            return start, spaced.end()
        token = _TOKEN.match(text, start)
        if token is None:
            return None
        token_start, token_end = self._trim(text, token.start(), token.end())
        separator = _VALUE_SEPARATOR.search(text, token_start, token_end)
        if separator and separator.start() > token_start:
            token_end = separator.start()
        escaped_break = _ESCAPED_LINE_BREAK.search(text, token_start, token_end)
        if escaped_break and escaped_break.start() > token_start:
            token_end = escaped_break.start()  # a logged string: "password=x\r\n"
        if token_end <= token_start:
            return None
        if phrase:
            return token_start, self._phrase_end(text, token_start, token_end)
        return token_start, token_end

    def _phrase_end(self, text: str, start: int, end: int) -> int:
        """The end of a passphrase that starts with the word ``text[start:end]``: further words
        up to punctuation or a word that goes on with the sentence ("and", "but", "please")."""
        first = text[start:end]
        if not re.fullmatch(r"[^\W_][\w'-]*", first) or first.casefold() in _PHRASE_STOPS:
            return end
        words = [end]
        for word in re.finditer(r"[ ](?P<w>[^\s,;.!?()\"']+)", text[end:]):
            if word.start() != (words[-1] - end) or len(words) >= 6:
                break
            token = word.group("w")
            if token.casefold() in self._phrase_stops or not re.fullmatch(r"[\w'-]+", token):
                break
            words.append(end + word.end())
        if len(words) >= 3:  # a phrase of three words or more
            return words[-1]
        if len(words) == 2 and re.fullmatch(r"\d{1,8}", text[words[0] : words[1]].strip()):
            return words[1]  # a word and a number: "Winter 2024"
        return end

    @staticmethod
    def _passphrase_clause(text: str, start: int) -> int | None:
        """The end of a passphrase of plain lower-case words that starts at ``start`` and runs to
        the end of its clause ("my cat likes warm milk, and it fails" ends before the comma), or
        None when the clause is not one: fewer than three words (four after "my", "the"...) or
        a word no passphrase of plain words has ("Hunter2!", "Outlook"); :data:`_PROSE` when
        its words make a sentence about the passphrase (:data:`_PASSPHRASE_PROSE`: "is the
        same as before")."""
        words: list[str] = []
        end = position = start
        while len(words) <= 10:
            word = _CLAUSE_WORD.match(text, position)
            if word is None:
                break
            folded = word.group(0).casefold()
            if words and folded in _CLAUSE_BREAKS:
                break
            if words and folded in _CLAUSE_JOINS:
                following = _CLAUSE_WORD.match(text, _skip_blanks(text, word.end()))
                if following is None or not _goes_on_phrase(following.group(0)):
                    break
            if not _PLAIN_WORD.fullmatch(word.group(0)):
                return None
            words.append(folded)
            end = word.end()
            if text.startswith(",", end):
                following = _CLAUSE_WORD.match(text, _skip_blanks(text, end + 1))
                if following is None or not _goes_on_phrase(following.group(0)):
                    break
                position = following.start()
                continue
            position = _skip_blanks(text, end)
            if position == end:
                break  # the line's end, a sentence's end, a colon, a bracket or a quote
        if len(words) < 3 or len(words) > 10 or all(word.isdigit() for word in words):
            return None
        first = words[0]
        if first in _DETERMINERS:
            if len(words) < 4:
                return None
        elif first in _DESCRIBING or first in _PHRASE_STOPS:
            return None
        if len(first) >= 5 and first.endswith(("ed", "ing")):
            return None  # "is printed on the router", "is missing"
        if any(word in _PASSPHRASE_PROSE for word in words):
            return _PROSE
        return end

    @staticmethod
    def _trim(text: str, start: int, end: int) -> tuple[int, int]:
        """Drop the sentence's punctuation after a value: a comma, a semicolon or a colon, and a
        closing bracket or quote that was not opened inside it."""
        while end > start:
            last = text[end - 1]
            value = text[start:end]
            if (
                last in _TRAILING
                or (
                    last in ")]}"
                    and value.count({")": "(", "]": "[", "}": "{"}[last]) < value.count(last)
                )
                or (last in "\"'`" and value.count(last) % 2 == 1)
            ):
                end -= 1
            else:
                break
        return start, end

    def _trim_sentence(self, text: str, start: int, end: int) -> tuple[int, int]:
        """:meth:`_trim`, and a full stop or question mark that ends the sentence after the
        value ("... for everything: Pancake$Sunday. can you ...")."""
        start, end = self._trim(text, start, end)
        while end > start and text[end - 1] in ".?" and (end == len(text) or text[end].isspace()):
            end -= 1
        return start, end

    @staticmethod
    def _clause_end(text: str, position: int, limit: int) -> int:
        """Where the clause after ``position`` ends, at most ``limit`` characters on."""
        stop = re.compile(r"[\n]|[.!?;,](?:\s|$)").search(text, position, position + limit)
        return stop.start() if stop else min(len(text), position + limit)

    @staticmethod
    def _is_reference(value: str) -> bool:
        """A reference to a secret instead of one: ``${DB_PASSWORD}``, ``<set in vault>``,
        ``********``, ``null``."""
        stripped = value.strip()
        return (
            not stripped
            or bool(_REFERENCE.match(stripped))
            or bool(_MASKED.match(stripped))
            or stripped.casefold() in _PLACEHOLDER_WORDS
        )

    def _is_prose(self, text: str, start: int, end: int) -> bool:
        """The value is a word of a sentence about the secret, not the secret: a descriptive
        word ("expired", "correct"), or an ordinary word with more words after it ("see the
        screenshot"), unless they make a passphrase of three words or more."""
        value = text[start:end]
        words = value.split()
        first = words[0].strip("\"'`.,;:!?") if words else ""
        if not first:
            return True
        folded = first.casefold()
        if len(words) >= 3 and folded not in _PHRASE_STOPS and folded not in STATE_WORDS:
            return False  # a passphrase
        if len(words) == 1 and folded in _DESCRIBING and end == self._word_end(text, start):
            following = text[end : end + 1]
            if not following or following in " \t\r\n,.;:!?)":
                return True
        if not re.fullmatch(r"[^\W\d_]+(?:'[^\W\d_]+)?", first):
            return False
        if folded in _DESCRIBING or folded in _PHRASE_STOPS:
            return True
        if (
            len(words) == 1
            and folded.endswith("ed")
            and first.islower()
            and self._ordinary(first)
            and end == self._word_end(text, start)
        ):
            return True  # "... before your mailbox is closed"
        after = re.compile(r"[ \t]+(?P<word>[^\W\d_]+)").match(text, end)
        if after and first[0].isupper() and after.group("word").casefold() in _CLAUSE_BREAKS:
            return False  # "my security answer was Biscuit but the portal says wrong"
        return bool(after) and self._ordinary(first)

    @staticmethod
    def _word_end(text: str, start: int) -> int:
        match = _TOKEN.match(text, start)
        return match.end() if match else start


# ------------------------------------------------------------------------------------------------
# detect-secrets


# Plugin class name -> (module, the entity type its findings get).
DETECT_SECRETS_PLUGINS: dict[str, tuple[str, str]] = {
    "KeywordDetector": ("keyword", API_KEY),
    "Base64HighEntropyString": ("high_entropy_strings", API_KEY),
    "HexHighEntropyString": ("high_entropy_strings", API_KEY),
    "AWSKeyDetector": ("aws", AWS_ACCESS_KEY),
    "ArtifactoryDetector": ("artifactory", API_KEY),
    "AzureStorageKeyDetector": ("azure_storage_key", AZURE_KEY),
    "BasicAuthDetector": ("basic_auth", CREDENTIAL_URL),
    "CloudantDetector": ("cloudant", API_KEY),
    "DiscordBotTokenDetector": ("discord", API_KEY),
    "GitHubTokenDetector": ("github_token", GITHUB_TOKEN),
    "GitLabTokenDetector": ("gitlab_token", GITLAB_TOKEN),
    "IbmCloudIamDetector": ("ibm_cloud_iam", API_KEY),
    "IbmCosHmacDetector": ("ibm_cos_hmac", API_KEY),
    "JwtTokenDetector": ("jwt", JWT),
    "MailchimpDetector": ("mailchimp", API_KEY),
    "NpmDetector": ("npm", NPM_TOKEN),
    "OpenAIDetector": ("openai", OPENAI_KEY),
    "PrivateKeyDetector": ("private_key", PRIVATE_KEY),
    "PypiTokenDetector": ("pypi_token", API_KEY),
    "SendGridDetector": ("sendgrid", API_KEY),
    "SlackDetector": ("slack", SLACK_TOKEN),
    "SoftlayerDetector": ("softlayer", API_KEY),
    "SquareOAuthDetector": ("square_oauth", API_KEY),
    "StripeDetector": ("stripe", STRIPE_KEY),
    "TelegramBotTokenDetector": ("telegram_token", API_KEY),
    "TwilioKeyDetector": ("twilio", TWILIO_KEY),
}


class DetectSecretsRecognizer(EntityRecognizer):
    """detect-secrets' plugins as one Presidio recogniser, offline and without its settings.

    Each plugin is built directly and asked for the secret values in the text
    (``analyze_string``); the values are then located in the text. Nothing else of the library
    runs: not its settings (``get_settings``), filters or baseline files, which read the disk,
    and not ``analyze_line``, which would call ``verify`` and with it the vendors' APIs. The
    keyword detector uses its config-file rules (``password = x``, ``api_key: x``), and the
    high-entropy detectors keep their own limits and look only at quoted strings, as the library
    does by default. Findings score :data:`SCORE`, under Deskpilot's own rules, so that where
    both find a value the more specific entity type names it.
    """

    SCORE = 0.5

    def __init__(self, plugins: Sequence[str], supported_language: str = "en") -> None:
        unknown = sorted(set(plugins) - set(DETECT_SECRETS_PLUGINS))
        if unknown:
            raise ValueError(f"unknown detect-secrets plugins: {unknown}")
        self._plugin_names = list(dict.fromkeys(plugins))
        self._plugins: list[tuple[Any, str]] = []
        self._keyword_rules: dict[Any, int] = {}
        super().__init__(
            supported_entities=sorted({DETECT_SECRETS_PLUGINS[p][1] for p in self._plugin_names}),
            supported_language=supported_language,
            name="DetectSecretsRecognizer",
        )

    def load(self) -> None:
        """Build the plugins (imports detect-secrets; reads no file)."""
        import importlib

        from detect_secrets.plugins import keyword

        self._keyword_rules = dict(keyword.CONFIG_DENYLIST_REGEX_TO_GROUP)
        for name in getattr(self, "_plugin_names", []):
            module_name, entity = DETECT_SECRETS_PLUGINS[name]
            module = importlib.import_module(f"detect_secrets.plugins.{module_name}")
            self._plugins.append((getattr(module, name)(), entity))

    @property
    def plugin_names(self) -> list[str]:
        return list(self._plugin_names)

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        results: list[RecognizerResult] = []
        for plugin, entity in self._plugins:
            if entities and entity not in entities:
                continue
            for line_start, line in _lines(text):
                for value in self._values(plugin, line):
                    for found in re.finditer(re.escape(value), line):
                        results.append(
                            RecognizerResult(
                                entity,
                                line_start + found.start(),
                                line_start + found.end(),
                                self.SCORE,
                            )
                        )
        return results

    def _values(self, plugin: Any, line: str) -> Iterator[str]:
        name = type(plugin).__name__
        if name == "KeywordDetector":
            values = plugin.analyze_string(line, denylist_regex_to_group=self._keyword_rules)
        else:
            values = plugin.analyze_string(line)
        for value in values:
            if not isinstance(value, str) or not value.strip():
                continue
            if hasattr(plugin, "entropy_limit") and (
                plugin.calculate_shannon_entropy(value) <= plugin.entropy_limit
            ):
                continue
            yield value


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line of ``text`` with its offset (detect-secrets scans line by line)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        yield offset, line.rstrip("\r\n")
        offset += len(line)
