"""What the user is told when the redactor removed something from their message.

The notice names the kind of thing removed, never the value, and says what to do about it:
a secret should not be shared at all (and, if it was real, changed or revoked); personal details
are simply kept out of what is stored. Built from the redactor's counts per entity type
(``QueryReceived.redactions``); entity types this module does not know count as secrets, the
safe reading.
"""

from __future__ import annotations

from collections.abc import Iterable

from contracts.events import RedactionCount

PASSWORDS = frozenset({"PASSWORD"})
# Keys, tokens and credentials: the user should revoke or rotate them.
KEYS = frozenset(
    {
        "AWS_ACCESS_KEY",
        "AWS_SECRET_KEY",
        "GITHUB_TOKEN",
        "SLACK_TOKEN",
        "GOOGLE_API_KEY",
        "AZURE_KEY",
        "JWT",
        "BEARER_TOKEN",
        "API_KEY",
        "PRIVATE_KEY",
        "CREDENTIAL_URL",
    }
)
# Personal data and identifiers: removed before storing, nothing for the user to do.
PERSONAL: dict[str, str] = {
    "PERSON": "a name",
    "EMAIL_ADDRESS": "an e-mail address",
    "PHONE_NUMBER": "a phone number",
    "CREDIT_CARD": "a card number",
    "IBAN_CODE": "a bank account number",
    "IP_ADDRESS": "an IP address",
    "LOCATION": "a place",
    "URL": "a link",
    "US_SSN": "a social security number",
    "US_DRIVER_LICENSE": "a driver's licence number",
    "MAC_ADDRESS": "a device address",
    "EMPLOYEE_ID": "an employee id",
    "HOSTNAME": "a host name",
}


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def redaction_notice(redactions: Iterable[RedactionCount]) -> str | None:
    """The sentence to show with the answer, or None when nothing was removed."""
    kinds = {r.entity_type for r in redactions if r.count > 0}
    if not kinds:
        return None
    sentences: list[str] = []
    if kinds & PASSWORDS:
        sentences.append(
            "I removed a password from your message — please never share passwords, even with "
            "IT. If it was your real one, change it."
        )
    secrets = kinds - PASSWORDS - PERSONAL.keys()  # unknown kinds count as secrets
    if secrets:
        sentences.append(
            "I removed a key or token from your message — please never share keys, tokens or "
            "connection strings in chat. If it was real, revoke or rotate it."
        )
    personal = [phrase for kind, phrase in PERSONAL.items() if kind in kinds]
    if personal:
        sentences.append(
            f"I kept {_listing(personal)} out of what is stored; you don't need to share "
            "personal details here."
        )
    return " ".join(sentences)
