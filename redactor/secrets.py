"""Detectors for keys, tokens and credentials that people paste into support chats.

Each kind has a pattern that matches the value itself: the vendors' documented prefixes and
lengths (AWS access key ids, GitHub, Slack and Google keys), the structure of a JWT or a PEM/OpenSSH
private-key block, a URL or connection string with a password in it, and, for keys without a
recognisable shape, a long random-looking value right after a word such as ``api_key`` or
``secret``. Every kind is a secret: always redacted, never allow-listed.

What must not match (and is tested): git commit hashes, UUIDs, checksums, version strings and
base64 image data, which look random but carry nothing secret and help diagnose the problem.
"""

from __future__ import annotations

import math
from collections import Counter

from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer

AWS_ACCESS_KEY = "AWS_ACCESS_KEY"
AWS_SECRET_KEY = "AWS_SECRET_KEY"  # noqa: S105 - entity type names, not credentials
GITHUB_TOKEN = "GITHUB_TOKEN"  # noqa: S105
SLACK_TOKEN = "SLACK_TOKEN"  # noqa: S105
GOOGLE_API_KEY = "GOOGLE_API_KEY"
AZURE_KEY = "AZURE_KEY"
JWT = "JWT"
BEARER_TOKEN = "BEARER_TOKEN"  # noqa: S105
PRIVATE_KEY = "PRIVATE_KEY"
CREDENTIAL_URL = "CREDENTIAL_URL"
API_KEY = "API_KEY"

_KEY_WORDS = (
    r"api[_\- ]?key|apikey|api[_\- ]?token|access[_\- ]?token|auth[_\- ]?token|token|secret|"
    r"client[_\- ]?secret|secret[_\- ]?key|access[_\- ]?key|private[_\- ]?token|credentials?"
)

PATTERNS: dict[str, list[Pattern]] = {
    AWS_ACCESS_KEY: [
        Pattern("aws_access_key_id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", 0.95)
    ],
    AWS_SECRET_KEY: [
        Pattern(
            "aws_secret_access_key",
            r"(?<=\baws[_\- ]?secret[_\- ]?(?:access[_\- ]?)?key\s*(?:[:=]|is)\s*[\"']?)"
            r"[A-Za-z0-9/+=]{40}\b",
            0.95,
        )
    ],
    GITHUB_TOKEN: [
        Pattern("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", 0.95),
        Pattern("github_fine_grained", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b", 0.95),
    ],
    SLACK_TOKEN: [
        Pattern("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,250}", 0.95),
        Pattern(
            "slack_webhook",
            r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
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
    JWT: [
        Pattern(
            "jwt",
            r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{10,}",
            0.95,
        )
    ],
    BEARER_TOKEN: [Pattern("bearer", r"(?<=\bbearer\s+)[A-Za-z0-9\-._~+/]{16,}=*", 0.9)],
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
        # scheme://user:password@host... (databases, brokers, git remotes, proxies)
        Pattern(
            "url_with_password",
            r"\b[a-z][a-z0-9+.\-]{1,30}://[^\s:/@\"'<>]+:[^\s@/\"'<>]+@[^\s\"'<>]+",
            0.95,
        )
    ],
    API_KEY: [
        Pattern(
            "key_after_keyword",
            rf"(?<=\b(?:{_KEY_WORDS})\b\s*(?:[:=]|is)\s*[\"']?)[A-Za-z0-9_\-/+=.~]{{16,200}}",
            0.6,
        )
    ],
}

SECRET_KEY_ENTITIES: frozenset[str] = frozenset(PATTERNS)


def entropy_bits(value: str) -> float:
    """Shannon entropy per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


class _RandomLookingValue(PatternRecognizer):
    """A value after a key word counts only when it looks random: letters and digits mixed, high
    entropy, and not a hex digest or a UUID (those identify things, they unlock nothing)."""

    def invalidate_result(self, pattern_text: str) -> bool:
        value = pattern_text.strip("\"'.,;")
        if len(value) < 16:
            return True
        has_letter = any(c.isalpha() for c in value)
        has_digit = any(c.isdigit() for c in value)
        hexish = all(c in "0123456789abcdefABCDEF-" for c in value)
        return not (has_letter and has_digit) or hexish or entropy_bits(value) < 3.5


def key_recognizers(language: str) -> list[EntityRecognizer]:
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
