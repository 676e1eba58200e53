"""Keys, tokens and credentials pasted into chat: every fake of each kind is found and replaced;
random-looking values that are not secrets (hashes, UUIDs, versions, image data) are left alone.

The fixtures are made up here, in the vendors' documented formats; none is a real credential.
"""

from __future__ import annotations

import pytest

from redactor.recognizers import SECRET_ENTITIES
from redactor.service import Redactor

# (message, the secret it carries, the entity type expected)
SECRETS = [
    ("the deploy uses AKIAZ7QW3ERT5YUI9OPL now", "AKIAZ7QW3ERT5YUI9OPL", "AWS_ACCESS_KEY"),
    ("temporary creds ASIAQ2W3E4R5T6Y7U8I9 expired", "ASIAQ2W3E4R5T6Y7U8I9", "AWS_ACCESS_KEY"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz9AmPL3K1",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz9AmPL3K1",
        "AWS_SECRET_KEY",
    ),
    (
        "git push fails with ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5 as the token",
        "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5",
        "GITHUB_TOKEN",
    ),
    (
        "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",
        "GITHUB_TOKEN",
    ),
    (
        "the bot token xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx stopped",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "SLACK_TOKEN",
    ),
    (
        "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY is rejected",
        "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
        "GOOGLE_API_KEY",
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=nwlogs;"
        "AccountKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4MTIzNA==;"
        "EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4MTIzNA==",
        "AZURE_KEY",
    ),
    (
        "the token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U is refused",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        "JWT",
    ),
    (
        "curl -H 'Authorization: Bearer 9f8e7d6c5b4aQ1w2E3r4T5y6U7i8' fails",
        "9f8e7d6c5b4aQ1w2E3r4T5y6U7i8",
        "BEARER_TOKEN",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
        "4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo",
        "PRIVATE_KEY",
    ),
    (
        "my key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        "PRIVATE_KEY",
    ),
    (
        "connect with postgres://app_rw:Wh1teRabb1t@db01.corp.internal:5432/crm please",
        "Wh1teRabb1t",
        "CREDENTIAL_URL",
    ),
    (
        "proxy is http://jdoe:S3cure!pass@proxy.northwind.example:8080",
        "S3cure!pass",
        "CREDENTIAL_URL",
    ),
    (
        "set api_key=sk_live_51HxQ2eK8yZ3vB7nP0qR in the app",
        "sk_live_51HxQ2eK8yZ3vB7nP0qR",
        "STRIPE_KEY",
    ),
    ("client secret: Q8s~fT3kL9mN2pR7vX4zA6cE1hJ5", "Q8s~fT3kL9mN2pR7vX4zA6cE1hJ5", None),
]

NEAR_MISSES = [
    "fixed in commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f yesterday",
    "the request id is 123e4567-e89b-12d3-a456-426614174000",
    "the installer checksum is e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "we run agent version 4.18.2-rc1 on build 20261122.3",
    "the logo is data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "my token expired yesterday, can you reset it?",
    "the api key field is empty in the settings page",
    "error 0x80070005 from Windows Update KB5034441",
    "the secret santa list is on the intranet",
    "see https://it.northwind.example/vpn/setup for the steps",
    "the ticket INC0012345 mentions the MAC 00:1A:2B:3C:4D:5E",
    "token: abcdefabcdefabcdef",  # hex-ish, no digits: an identifier, not a key
]


@pytest.mark.parametrize(
    ("text", "secret", "kind"), SECRETS, ids=[s[2] or "secret" for s in SECRETS]
)
def test_every_kind_of_secret_is_replaced(
    redactor: Redactor, text: str, secret: str, kind: str | None
) -> None:
    result = redactor.redact(text)
    assert secret not in result.text
    types = {entity.entity_type for entity in result.entities}
    assert types & SECRET_ENTITIES, result.text
    if kind is not None:
        assert kind in types, result.text


def test_near_misses_are_not_taken_for_secrets(redactor: Redactor) -> None:
    flagged = {
        text: [
            e.entity_type
            for e in redactor.redact(text).entities
            if e.entity_type in SECRET_ENTITIES
        ]
        for text in NEAR_MISSES
    }
    assert {text: kinds for text, kinds in flagged.items() if kinds} == {}


def test_the_words_around_a_secret_stay(redactor: Redactor) -> None:
    result = redactor.redact("nor the key AKIAZ7QW3ERT5YUI9OPL, and the token is gone")
    assert result.text == "nor the key <AWS_ACCESS_KEY_1>, and the token is gone"
