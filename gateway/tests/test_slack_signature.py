"""The Slack signature check on its own: what Slack signs passes, every forgery fails."""

from __future__ import annotations

import pytest

from gateway.channels.slack.signature import SignatureRefused, SlackSignature, sign

SECRET = b"8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_700_000_000
BODY = b'{"type":"event_callback","event":{"type":"app_mention","text":"hi"}}'


def check(headers: dict[str, str], body: bytes = BODY, now: float = NOW) -> int:
    return SlackSignature(SECRET, clock=lambda: now).verify(headers, body)


def signed(
    timestamp: int | str = NOW, body: bytes = BODY, secret: bytes = SECRET
) -> dict[str, str]:
    stamp = str(timestamp)
    return {
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": sign(secret, stamp, body),
    }


def refusal(headers: dict[str, str], body: bytes = BODY, now: float = NOW) -> str:
    with pytest.raises(SignatureRefused) as refused:
        check(headers, body, now)
    return refused.value.reason


def test_a_request_signed_with_the_secret_passes_and_gives_its_timestamp() -> None:
    assert check(signed()) == NOW
    # Slack's own documented example format: "v0=" and 64 hex digits.
    assert signed()["x-slack-signature"].startswith("v0=")
    assert len(signed()["x-slack-signature"]) == 3 + 64


def test_the_timestamp_may_be_up_to_five_minutes_off_either_way() -> None:
    assert check(signed(NOW - 300)) == NOW - 300
    assert check(signed(NOW + 300)) == NOW + 300
    assert refusal(signed(NOW - 301)) == "stale"
    assert refusal(signed(NOW + 301)) == "stale"


def test_another_secret_or_an_edited_body_is_refused() -> None:
    assert refusal(signed(secret=b"another-secret")) == "signature"
    assert refusal(signed(), body=BODY.replace(b"hi", b"ho")) == "signature"
    assert refusal(signed(), body=BODY + b" ") == "signature"


def test_the_timestamp_is_part_of_what_is_signed() -> None:
    headers = signed()
    headers["x-slack-request-timestamp"] = str(NOW + 1)
    assert refusal(headers) == "signature"


@pytest.mark.parametrize("stamp", ["+1700000000", " 1700000000", "1_700_000_000", "1.7e9", "١٧٠٠"])
def test_a_timestamp_that_is_not_plain_digits_is_malformed(stamp: str) -> None:
    headers = {"x-slack-request-timestamp": stamp, "x-slack-signature": sign(SECRET, stamp, BODY)}
    assert refusal(headers) == "malformed"


def test_a_huge_timestamp_is_malformed_not_an_overflow() -> None:
    stamp = "9" * 40
    headers = {"x-slack-request-timestamp": stamp, "x-slack-signature": sign(SECRET, stamp, BODY)}
    assert refusal(headers) == "malformed"


@pytest.mark.parametrize(
    "signature",
    [
        "",
        "v0=",
        "v1=" + "0" * 64,
        "deadbeef",
        "v0=" + "0" * 64,
        "V0=" + sign(SECRET, str(NOW), BODY)[3:],
        sign(SECRET, str(NOW), BODY)[:-1],
        sign(SECRET, str(NOW), BODY).upper(),
        sign(SECRET, str(NOW), BODY) + "0",
        "v0=ä" * 30,
    ],
)
def test_anything_but_the_exact_signature_is_refused(signature: str) -> None:
    headers = {"x-slack-request-timestamp": str(NOW), "x-slack-signature": signature}
    assert refusal(headers) in {"missing", "signature"}


def test_missing_headers_are_refused() -> None:
    assert refusal({}) == "missing"
    assert refusal({"x-slack-signature": signed()["x-slack-signature"]}) == "missing"
    assert refusal({"x-slack-request-timestamp": str(NOW)}) == "missing"


def test_a_verifier_without_a_secret_cannot_be_made() -> None:
    with pytest.raises(ValueError, match="signing secret"):
        SlackSignature(b"")
