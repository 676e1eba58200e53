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
  like a password, "Kennwort: x" and the password words of other common languages; a remark
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

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

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
    ],
}

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
    return recognizers


# ------------------------------------------------------------------------------------------------
# Values after words: config assignments, chat sentences, PINs, headers and shell commands


# The password words of English (with the abbreviations people type) and of other common
# languages. Longest first where one is the start of another.
KEY_WORDS_OF_PASSWORDS = (
    r"pass\s?words?|pass-word|passwd|pass[\s-]?phrase|phrase\s+(?:secr[èe]te|de\s+passe)|"
    r"frase\s+(?:secreta|de\s+contrase[ñn]a|de\s+paso)|wachtzin|"
    r"pwrd|pword|pwd|pw|p/word|p/w|p\.w\.|"
    r"p\sa\ss\ss\sw\so\sr\sd|pass|kennwort|passwort|mot\s+de\s+passe|mdp|"
    r"contrase[ñn]a|clave|senha|wachtwoord|l[öo]senord|salasana|has[łl]o|"
    r"parola(?:\s+d'ordine)?|heslo|jelsz[óo]|adgangskode|passord|пароль|"
    r"(?:wi-?fi|wlan|wpa2?|wep|network|bitlocker|recovery)\s+key"
)
# After these a value needs no verb ("password Hunter2x!") when it looks like a password;
# "pass" is left out ("pass 2 of 3", "pass the ticket").
_NO_VERB_WORDS = re.compile(
    r"pass\s?words?|passwd|pwrd|pword|pwd|pw|p/w|p\.w\.|p/word|kennwort|passwort|"
    r"contrase[ñn]a|senha|wachtwoord|l[öo]senord|salasana|has[łl]o|heslo|jelsz[óo]|passord|"
    r"pass|пароль",
    re.IGNORECASE,
)
# Verbs between the words and the value, in the languages above.
_VERBS = (
    r"is\s+set\s+to|was\s+set\s+to|changed\s+to|reset\s+to|is|was|ist|lautet|war|est|"
    r"était|es|era|é|è|on|oli|är|var|er|je|jest|to"
)
# Verbs that are other words in English ("password on the laptop", "pass to"): only after the
# word of their own language.
_FOREIGN_VERBS: dict[str, str] = {
    "on": "salasana", "oli": "salasana", "es": "contrase|clave|frase",
    "era": "contrase|clave|senha|frase",
    "war": "passwort|kennwort", "var": "l[öo]senord", "er": "passord|adgangskode",
    "je": "heslo", "to": "has[łl]o", "é": "senha|password", "è": "password|parola",
    "est": "mot|mdp|phrase", "était": "mot|mdp|phrase",
}  # fmt: skip
# Nouns that make the password word part of another thing ("password policy", "key ID").
_COMPOUND_NOUNS: frozenset[str] = frozenset(
    {
        "id", "identifier", "policy", "policies", "hint", "hints", "manager", "field", "reset",
        "expiry", "expiration", "length", "requirements", "rules", "change", "prompt", "page",
        "portal", "history", "complexity", "strength", "vault", "file", "protected", "box",
        "screen", "dialog", "window", "form", "attempts", "age", "setting", "settings",
    }
)  # fmt: skip
_ADVERBS = r"(?:now|still|currently|actually|just|also|then|simply|literally|again)"

# The word starts a token, or follows "_", "-", a quote or a bracket ("DB_PASSWORD",
# "--password", '"password"'), never a symbol inside a value ("R3gistry!Pass").
_PASSWORD_CUE = re.compile(
    rf"(?<![^\s\"'`(\[{{<,;>_*=-])(?P<kw>{KEY_WORDS_OF_PASSWORDS})(?!\w)", re.IGNORECASE
)
# A key or token after its word with no verb, when it is long and random ("the auth token
# 4e7d1a9c..."), and an environment entry written as a name and a value on two lines.
_KEY_CUE = re.compile(
    r"(?<![\w$])(?:api[_\s-]?key|api[_\s-]?token|auth[_\s-]?token|access[_\s-]?token|"
    r"access[_\s-]?key|secret[_\s-]?key|client[_\s-]?secret|token|secret)(?!\w)"
    r"(?:\s+(?:is|was))?[ \t]+(?P<value>[^\s\"'`]{16,200})",
    re.IGNORECASE,
)
_NAME_THEN_VALUE = re.compile(
    r"\bname:[ \t]*[\"']?(?P<name>[\w.\-]{2,80})[\"']?[ \t]*\r?\n[ \t]*value:[ \t]*",
)
_VERB_AT = re.compile(
    rf"(?:^|(?<=\s))(?P<verb>{_VERBS})(?:\s+{_ADVERBS})?(?=\s|$)\s*:?"
    r"|(?P<sign>[:=])",
    re.IGNORECASE,
)
# "login: jsmith / Welcome123", "creds for the test box are admin / Adm!n2024"
_USER_SLASH_PASSWORD = re.compile(
    r"\b(?:login|logon|user(?:name)?|account|creds?|credentials)\b[^\n/]{0,40}?[\s:]"
    r"(?P<user>[\w.@\\-]{2,40})\s?/\s?(?P<value>[^\s/]{4,64})",
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
_IMAGE_TAG = re.compile(r"v?\d+(?:\.\d+)+[\w.-]*", re.IGNORECASE)
# "tried Passw0rd! and P@ssw0rd1": values tried, when a password word is near.
_TRIED = re.compile(
    r"\b(?:tried|try|typed?|entered|enter|used|use)\s+(?:with\s+)?(?P<values>[^\s,]{4,64}"
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
_DASH_SIGN = re.compile(r"\s+[-–]\s+(?=\S)")

# "the word tulip then 1987", "the letters abc then the numbers 4455", "orange followed by 2468"
_DESCRIBED = re.compile(
    r"(?:the\s+)?(?:word|letters?|numbers?|digits?|year)\s+"
    r"(?P<first>[^\s,.;]+)(?P<rest>(?:\s+(?:then|followed\s+by|and\s+then|plus|and)\s+"
    r"(?:the\s+)?(?:word|letters?|numbers?|digits?|year|number)?\s*[^\s,.;]+)+)?",
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
_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

_PASSWORD_NAME_WORDS: frozenset[str] = frozenset(
    {
        "password", "passwd", "pwd", "pw", "pass", "passphrase", "pword", "pwrd", "kennwort",
        "passwort", "contrasena", "senha", "wachtwoord", "losenord", "salasana", "haslo",
    }
)  # fmt: skip
_PASSWORD_NAME_ENDINGS = ("password", "passwd", "passphrase")
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

# PINs, passcodes and one-time codes: the words, then digits.
_PIN_CUE = re.compile(
    rf"{_START}(?P<kw>(?:sim\s+|voicemail\s+|windows\s+hello\s+|card\s+|door\s+)?"
    r"pin(?:\s?code)?|passcode|pass\s+code|puk|door\s+code|alarm\s+code|access\s+code|"
    r"entry\s+code|unlock\s+code|gate\s+code|lock\s+code|safe\s+code|verification\s+code|"
    r"confirmation\s+code|one[-\s]time\s+(?:code|password|passcode|pin)|otp|"
    r"(?:mfa|2fa|sms|auth|authenticator|login|sign-in)\s+code|security\s+code|cvv2?|cvc|"
    r"(?P<otp>authenticator(?:\s+app)?|(?:mfa|2fa|totp)(?:\s+token)?)|"
    r"code\s+(?:for|to|of)\s+(?:the\s+|my\s+)?[\w-]+(?:\s+[\w-]+)?|"
    r"(?P<bare>(?:(?<=\bthe\s)|(?<=\bmy\s)|(?<=\byour\s)|(?<=\bthis\s)|(?<=\bthat\s)|"
    r"(?<=\ba\s)|(?<=\bnew\s))code))(?![^\W_])"
    r"(?P<link>(?:\s+[^\s\d:=]+){1,4}?\s+(?:is|was)\s+(?:now\s+)?|(?:\s+[^\s\d:=]+){1,3}?:\s*|"
    r"\s*(?:(?:is|was|:|=|-)\s*(?:now\s+)?)?)"
    # A code in groups ("482 913", "48-29-13", "4829 1375"), or one run of digits.
    r"(?P<value>\d{2,4}(?P<sep>[ -])\d{2,4}(?:(?P=sep)\d{2,4}){0,2}(?![ -]?\d)|\d{3,10}#?)"
    r"(?![\w.,/:-]\d|[\w/-])",
    re.IGNORECASE,
)

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
_SHELL_RULES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(rule, re.IGNORECASE)
    for rule in (
        # curl/wget/http -u user:password, --user user:password, --user=user:password
        r"\b(?:curl|wget|http|https|httpie)\b[^\n|;&]*?\s(?:-u\s*|--user[=\s]\s*)"
        r"['\"]?[^\s:'\"]+:(?=[^\s'\"])" + _SHELL_VALUE,
        # mysql -pPASSWORD (only glued: "-p dbname" prompts and names a database)
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mariadb(?:-dump)?)\b"
        r"[^\n|;&]*?\s-p(?=[^\s])" + _SHELL_VALUE,
        # tools whose -p/-a takes the password as the next word
        r"\b(?:sshpass|mongo|mongosh|mongodump|mongorestore|(?:docker|podman|buildah|helm\s+"
        r"registry|oras|skopeo)\s+login|az\s+login|Connect-\w+|sqlcmd|bcp)\b"
        r"[^\n|;&]*?\s(?:-p|-P|--password|-Password)\s+" + _SHELL_VALUE,
        r"\bredis-cli\b[^\n|;&]*?\s-a\s+" + _SHELL_VALUE,
        # --password=x, --password x, --pass x, --passwd=x (not --password-stdin / --password-file)
        r"(?<!\S)--(?:password|passwd|pass|pwd|pw|db-password|admin-password)(?:=|\s+)"
        + _SHELL_VALUE,
        # openssl -pass pass:x, -passin pass:x, -passout pass:x, -k x
        r"(?<!\S)-pass(?:in|out)?\s+pass:" + _SHELL_VALUE,
        r"\bsmbclient\b[^\n]*?\s-U\s*[^\s%]+%" + _SHELL_VALUE,
        r"\bnet\s+use\b[^\n]*?/user:\S+\s+(?=[^\s/*])" + _SHELL_VALUE,
        r"\bnet\s+user\s+\S+\s+(?=[^\s/*])" + _SHELL_VALUE,
        r"\bhtpasswd\s+(?:-\w+\s+)*-[a-zA-Z]*b[a-zA-Z]*\s+(?:-\w+\s+)*\S+\s+\S+\s+" + _SHELL_VALUE,
        r"\becho\s+(?=\S)" + _SHELL_VALUE + r"\s*\|\s*sudo\b[^\n|]*\s-S\b",
        r"\bConvertTo-SecureString\s+(?:-String\s+)?" + _SHELL_VALUE + r"\s+-AsPlainText",
        r"\bchpasswd\b.*?<<<\s*['\"]?[^\s:'\"]+:" + _SHELL_VALUE,
    )
)
# Authorization headers and header-like fields.
_HEADER_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        BASIC_AUTH,
        re.compile(
            r"\bauthorization['\"]?\s*[:=]\s*['\"]?basic\s+(?P<value>[A-Za-z0-9+/_\-]{6,}={0,2})",
            re.IGNORECASE,
        ),
    ),
    (
        API_KEY,
        re.compile(
            r"\bauthorization['\"]?\s*[:=]\s*['\"]?(?:token|apikey|api-key|key|sso-key|ssws|"
            r"genieKey|splunk|digest)\s+(?P<value>[^\s'\"]{8,})",
            re.IGNORECASE,
        ),
    ),
)
# A password given before its word: "I use Mango&Kiwi55 as password", "changed it to X".
_VALUE_BEFORE_WORD = re.compile(
    r"\b(?:use[sd]?|using|chose|set|typed?)\s+(?P<value>[^\s\"'`]{4,64})\s+as\s+(?:my\s+|the\s+"
    r"|a\s+)?(?:password|passphrase|passwd|pwd|pw|pin)\b",
    re.IGNORECASE,
)
_CHANGED_TO = re.compile(
    r"\b(?:changed|set|reset|updated)\s+(?:it|my\s+password|the\s+password|my\s+pw|my\s+pwd|"
    r"the\s+pw|my\s+pin)\s+to\s+(?P<value>[^\s\"'`]{4,64})",
    re.IGNORECASE,
)

_ANOTHER_FIELD = re.compile(r"^[A-Za-z_][\w.-]*[=:]")
_DATE_OR_PATH = re.compile(r"^\d{1,4}[/.-]\d{1,2}|^https?:|^[\w.-]+\.(?:com|org|net|exe|txt)$")
_VALUE_SEPARATOR = re.compile(r"[;&,](?=\s*[A-Za-z_][\w.\-]*\s*=)|,(?=\s*[\"'{])")
_QUOTES = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»", "„": "“"}
_SPACED_LETTERS = re.compile(r"(?:\S )+\S(?!\S)")
_TOKEN = re.compile(r"[^\s\"'`]+")
_TRAILING = ",;:"
_REFERENCE = re.compile(
    r"^(?:\$|%|\{\{|\{%|<|\[|env\(|os\.environ|process\.env|vault:|secret:|ref\+|@Microsoft|"
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
    {"my", "the", "a", "an", "our", "your", "his", "her", "their", "this", "that"}
)
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
    if last in _PIN_NAME_WORDS:
        return PIN
    if last in _KEY_NAME_WORDS or lowered.endswith(("token", "secret", "apikey")):
        return API_KEY
    if len(parts) >= 2 and f"{parts[-2]} {last}" in _KEY_NAME_PAIRS:
        return API_KEY
    return None


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

    ENTITIES = (PASSWORD, PIN, API_KEY, BASIC_AUTH)
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
            if match.start() > 0 and (text[match.start() - 1].isalnum()):
                continue
            kind = _name_kind(name)
            if kind is None:
                continue
            if match.group("op") == "==" and kind != PASSWORD:
                continue
            value = self._read_value(text, match.end(), phrase=False)
            if value is None:
                continue
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
        for match in _XML_ELEMENT.finditer(text):
            kind = _name_kind(match.group("name"))
            if kind is not None:
                yield from self._accept_assigned(
                    text, kind, match.start("value"), match.end("value")
                )
        for match in _XML_KEY_VALUE.finditer(text):
            kind = _name_kind(match.group("name"))
            if kind is not None and match.group("value"):
                yield from self._accept_assigned(
                    text, kind, match.start("value"), match.end("value")
                )

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

    # -- chats and e-mails --------------------------------------------------------------------

    def _password_sentences(self, text: str) -> Iterator[_Span]:
        for cue in _PASSWORD_CUE.finditer(text):
            found = self._after_password_word(text, cue)
            if found is not None:
                yield found
        for rule in (_VALUE_BEFORE_WORD, _CHANGED_TO, _USER_SLASH_PASSWORD, _USER_COLON_PASSWORD):
            for match in rule.finditer(text):
                start, end = self._trim(text, match.start("value"), match.end("value"))
                value = text[start:end]
                if rule is _CHANGED_TO and match.group(0).casefold().split()[1] == "it":
                    window = text[max(0, match.start() - 80) : match.end() + 80]
                    if not _PASSWORD_NEAR.search(window):
                        continue
                if rule is _USER_COLON_PASSWORD and _IMAGE_TAG.fullmatch(value):
                    continue  # "login ... && docker pull nginx:1.25-alpine"
                if looks_like_password(value) and not _DATE_OR_PATH.search(value):
                    yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        for match in _TRIED.finditer(text):
            window = text[max(0, match.start() - 100) : match.end() + 100]
            if not _PASSWORD_NEAR.search(window):
                continue
            offset = match.start("values")
            for tried in re.finditer(r"[^\s,]+", match.group("values")):
                start, end = self._trim(text, offset + tried.start(), offset + tried.end())
                word = text[start:end]
                if word.casefold() not in {"and", "or"} and looks_like_password(word):
                    yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)

    def _after_password_word(self, text: str, cue: re.Match[str]) -> _Span | None:
        position = cue.end()
        keyword = cue.group("kw")
        passphrase = bool(_PASSPHRASE_WORDS.fullmatch(keyword))
        # "password (case sensitive): X"
        aside = _ASIDE_THEN_SIGN.match(text, position)
        if aside:
            return self._password_value(text, aside.end(), phrase=True, passphrase=passphrase)
        # "my password, if needed, is X": the verb is looked for after the remark.
        remark = _ASIDE_THEN_VERB.match(text, position)
        if remark and looks_like_password(remark.group(0).strip(" \t,()-–—")):
            remark = None  # "my password (Castle#909) is rejected": the value, not a remark
        if remark:
            position = remark.end()
        possessive = None if remark else _POSSESSIVE_S.match(text, position)
        if possessive:
            return self._password_value(text, possessive.end(), phrase=True, passphrase=passphrase)
        dash = None if remark else _DASH_SIGN.match(text, position)
        if dash:
            return self._password_value(text, dash.end(), phrase=passphrase, passphrase=passphrase)
        # The verb or sign, directly or after a few words: "my password for the vpn is X".
        window_end = self._clause_end(text, position, limit=60)
        words_after = text[position:window_end].split()
        if words_after and words_after[0].casefold().strip(":=") in _COMPOUND_NOUNS:
            return None  # "password policy is ...", "recovery key ID is ..."
        for verb in _VERB_AT.finditer(text, position, window_end):
            between = text[position : verb.start()]
            if len(between.split()) > 6 or re.search(
                r"\b(?:not|n't|never|no)\b|[=]", between, re.IGNORECASE
            ):
                break
            word = (verb.group("verb") or "").casefold()
            if word in _FOREIGN_VERBS and not re.match(
                _FOREIGN_VERBS[word], keyword, re.IGNORECASE
            ):
                continue
            if verb.group("sign") == "=" and between.strip():
                continue  # "method=password mfa=push": another field's sign
            if (
                verb.group("sign") == ":"
                and between.strip()
                and not text[verb.end() : verb.end() + 1].isspace()
            ):
                continue
            found = self._password_value(text, verb.end(), phrase=True, passphrase=passphrase)
            if found is not None:
                return found
            if between.strip() == "":
                # "password: <prose>" or "password is <prose>": nothing further along
                break
        # "my password (Castle#909) is rejected", "the password you gave me (Init!al-99)"
        paren = re.compile(r"\((?P<value>[^\s()]{4,64})\)").search(text, position, window_end)
        if paren and looks_like_password(paren.group("value")):
            return _Span(PASSWORD, paren.start("value"), paren.end("value"), self.PASSWORD_SCORE)
        # No verb: "with my password Hunter2x! and", "pwd Kx!8844mm".
        if _NO_VERB_WORDS.fullmatch(keyword):
            gap = re.compile(r"[ \t]+").match(text, position)
            if gap:
                token = _TOKEN.match(text, gap.end())
                if token:
                    start, end = self._trim(text, token.start(), token.end())
                    if (
                        looks_like_password(text[start:end])
                        and not self._is_reference(text[start:end])
                        and not _ANOTHER_FIELD.match(text[start:end])
                    ):
                        return _Span(PASSWORD, start, end, self.PASSWORD_SCORE)
        return None

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
        described = _DESCRIBED.match(text, start)
        if described and described.group("rest"):
            return _Span(PASSWORD, described.start("first"), described.end(), self.PASSWORD_SCORE)
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
            digits = match.group("value").rstrip("#")
            keyword = match.group("kw").casefold()
            short = keyword.startswith(("cvv", "cvc", "security"))
            if any(match.group(g) is not None for g in ("sep", "bare", "otp")):
                # A one-time code: six to eight digits, in groups or not; "the code" only with
                # its verb or sign right after it ("the code 80070005 appears", "the code from
                # the error is 80070005" name an error). Not a date written 2024-05-13.
                count = sum(char.isdigit() for char in digits)
                link = match.group("link").split()
                if (
                    short
                    or not 6 <= count <= 8
                    or re.fullmatch(r"\d{4}-\d{2}-\d{2}", digits)
                    or (
                        match.group("bare")
                        and (
                            not link
                            or len(link) > 2
                            or set(re.split(r"[ -]", digits)) <= _HTTP_STATUS_CODES
                        )
                    )
                ):
                    continue
                yield _Span(PIN, match.start("value"), match.end("value"), self.PIN_SCORE)
            elif (3 if short else 4) <= len(digits) <= (4 if short else 10):
                yield _Span(PIN, match.start("value"), match.end("value"), self.PIN_SCORE)

    def _shell(self, text: str) -> Iterator[_Span]:
        for rule in _SHELL_RULES:
            for match in rule.finditer(text):
                group = next(g for g in ("sq", "dq", "value") if match.group(g) is not None)
                start, end = match.start(group), match.end(group)
                if group == "value":
                    start, end = self._trim(text, start, end)
                if end > start and not self._is_reference(text[start:end]):
                    yield _Span(PASSWORD, start, end, self.PASSWORD_SCORE)

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
        elif first in NOT_SECRETS or first in _PHRASE_STOPS:
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
        if len(words) >= 3 and folded not in _PHRASE_STOPS:
            return False  # a passphrase
        if len(words) == 1 and folded in NOT_SECRETS and end == self._word_end(text, start):
            following = text[end : end + 1]
            if not following or following in " \t\r\n,.;:!?)":
                return True
        if not re.fullmatch(r"[^\W\d_]+(?:'[^\W\d_]+)?", first):
            return False
        if folded in NOT_SECRETS or folded in _PHRASE_STOPS:
            return True
        after = re.compile(r"[ \t]+[^\W\d_]").match(text, end)
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
