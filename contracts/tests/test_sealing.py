"""Sealing raw content (contracts/sealing.py): round trips, what refuses to open, rotation, and
the settings that configure the key ring."""

from __future__ import annotations

import base64

import pytest
from pydantic import SecretStr

from contracts.events import MessageReceived, SealedEvent
from contracts.sealing import (
    BrokenSeal,
    KeyRing,
    SealKeyMissing,
    UnknownSealKey,
    development_key_ring,
    key_ring_of,
    new_key_entry,
    open_event,
    seal_event,
)
from contracts.settings import ServiceSettings

SECRET = b"my password is Gr3en-Marmot-77"


def ring(*ids: str) -> KeyRing:
    return KeyRing.parse(",".join(new_key_entry(key_id) for key_id in ids))


def message(text: str = SECRET.decode()) -> MessageReceived:
    return MessageReceived(
        correlation_id="t-1", conversation_id="c-1", user_id="anon:b-1", text=text, reply_to="r"
    )


def test_a_sealed_value_opens_to_what_was_sealed_and_does_not_show_it() -> None:
    keys = ring("k1")
    sealed = keys.seal(SECRET, b"event-1")

    assert sealed.startswith("k1:")
    assert b"Marmot" not in sealed.encode()
    assert base64.b64encode(SECRET)[:12] not in sealed.encode()
    assert keys.open(sealed, b"event-1") == SECRET
    assert keys.seal(SECRET, b"event-1") != sealed  # a fresh nonce every time


def test_an_altered_blob_does_not_open() -> None:
    keys = ring("k1")
    sealed = keys.seal(SECRET, b"event-1")
    key_id, _, encoded = sealed.partition(":")
    blob = bytearray(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    blob[20] ^= 0x01
    tampered = f"{key_id}:{base64.urlsafe_b64encode(bytes(blob)).decode()}"

    with pytest.raises(BrokenSeal, match="does not open"):
        keys.open(tampered, b"event-1")
    with pytest.raises(BrokenSeal, match="truncated"):
        keys.open("k1:AAAA", b"event-1")
    with pytest.raises(BrokenSeal, match="no key id"):
        keys.open("plain text", b"event-1")


def test_a_blob_moved_to_another_event_does_not_open() -> None:
    keys = ring("k1")
    with pytest.raises(BrokenSeal, match="sealed for another event"):
        keys.open(keys.seal(SECRET, b"event-1"), b"event-2")


def test_rotation_the_first_key_seals_and_every_key_opens() -> None:
    old_entry = new_key_entry("2026-05")
    before = KeyRing.parse(old_entry)
    pending = before.seal(SECRET, b"event-1")  # sealed before the rotation, still in a stream

    after = KeyRing.parse(f"{new_key_entry('2026-11')},{old_entry}")

    assert after.sealing_key_id == "2026-11"
    assert after.seal(SECRET, b"event-2").startswith("2026-11:")
    assert after.open(pending, b"event-1") == SECRET  # nothing pending is lost


def test_an_unknown_key_id_is_named_and_the_content_is_not() -> None:
    sealed = ring("old").seal(SECRET, b"event-1")

    with pytest.raises(UnknownSealKey) as raised:
        ring("new").open(sealed, b"event-1")

    message = str(raised.value)
    assert "'old'" in message
    assert "new" in message
    assert "Marmot" not in message


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("", "no key"),
        ("k1", "<id>:<base64 key>"),
        ("k1:not base64!", "not base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "it must be 32"),
        ("bad id:" + base64.b64encode(bytes(32)).decode(), "key id"),
        (f"{new_key_entry('k1')},{new_key_entry('k1')}", "used twice"),
    ],
    # Fixed ids: a random key in a test's id would differ between pytest-xdist workers.
    ids=["empty", "no-key", "not-base64", "short-key", "bad-id", "id-twice"],
)
def test_a_bad_key_ring_is_refused_with_what_is_wrong(value: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint) as raised:
        KeyRing.parse(value)
    if ":" in value:
        assert value.split(":", 1)[1].split(",")[0] not in str(raised.value)  # never the key


def test_url_safe_and_unpadded_keys_are_accepted() -> None:
    key = bytes(range(32))
    for encoded in (
        base64.b64encode(key).decode(),
        base64.urlsafe_b64encode(key).decode().rstrip("="),
    ):
        keys = KeyRing.parse(f"k1:{encoded}")
        assert keys.open(keys.seal(SECRET, b"e"), b"e") == SECRET


def test_an_event_is_sealed_whole_but_its_envelope() -> None:
    keys = ring("k1")
    event = message()

    sealed = seal_event(event, keys)
    wire = sealed.model_dump_json()

    assert "Marmot" not in wire
    assert "anon:b-1" not in wire  # the user id is inside too
    assert (sealed.event_id, sealed.correlation_id, sealed.conversation_id) == (
        event.event_id,
        "t-1",
        "c-1",
    )
    assert open_event(SealedEvent.model_validate_json(wire), MessageReceived, keys) == event


def test_a_sealed_event_under_another_events_envelope_does_not_open() -> None:
    keys = ring("k1")
    first, second = seal_event(message(), keys), seal_event(message("other"), keys)
    swapped = second.model_copy(update={"sealed": first.sealed})

    with pytest.raises(BrokenSeal):
        open_event(swapped, MessageReceived, keys)


def test_production_needs_the_key_and_development_makes_its_own() -> None:
    with pytest.raises(SealKeyMissing, match="DESKPILOT_SEAL_KEYS must be set in production"):
        key_ring_of(None, "production")
    with pytest.raises(SealKeyMissing):
        key_ring_of(SecretStr("  "), "production")
    assert key_ring_of(None, "development") is development_key_ring()  # one per process
    configured = key_ring_of(SecretStr(new_key_entry("k7")), "production")
    assert configured.sealing_key_id == "k7"


def test_the_setting_is_read_from_the_shared_variable_and_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DESKPILOT_SEAL_KEYS", f"{new_key_entry('a')},{new_key_entry('b')}")
    assert ServiceSettings().key_ring().key_ids == ["a", "b"]

    monkeypatch.setenv("DESKPILOT_SEAL_KEYS", "a:c2hvcnQ=")
    with pytest.raises(ValueError, match="DESKPILOT_SEAL_KEYS: key 'a' is 5 bytes") as raised:
        ServiceSettings().key_ring()
    assert "c2hvcnQ" not in str(raised.value)  # the value is a secret: not echoed
