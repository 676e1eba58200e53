"""Sealing raw user content for its trip over the bus (AES-256-GCM, ``cryptography``).

Raw, un-redacted content (the topics in :data:`contracts.topics.RAW_TOPICS`) is deleted from its
stream once handled, but Redis's append-only file, its replicas and its backups keep every write.
So a raw event never reaches Redis in clear: :class:`contracts.bus.Bus` seals it on publish and
opens it on delivery, with the key ring in ``DESKPILOT_SEAL_KEYS``. On the wire only the envelope
(ids, time, trace context) is readable; the rest is a :class:`contracts.events.SealedEvent`.

What a caller can rely on:

* A key ring holds one or more AES-256 keys, each with an id. The first seals, every one opens,
  so rotating means putting a new key first and keeping the old one until nothing it sealed is
  pending any more: nothing in flight is lost.
* The event id is the associated data: a sealed blob moved to another event (or altered by one
  bit) does not open.
* Opening fails with :class:`SealError` (an unknown key id, a blob that does not open), whose
  message names key ids and never content; the bus dead-letters such an entry without its
  content instead of retrying it.
* ``DESKPILOT_SEAL_KEYS`` is ``<id>:<base64 of 32 random bytes>``, several separated by commas,
  e.g. ``2026-11:$(openssl rand -base64 32)``. Production refuses to start a service that
  carries raw content without it; in development a process without one seals with a key of its
  own (``deskpilot up`` gives every service one shared key instead).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import SecretStr

from contracts.events import Event, SealedEvent

E = TypeVar("E", bound=Event)

log = logging.getLogger("deskpilot.sealing")

KEY_BYTES = 32
"""AES-256."""
NONCE_BYTES = 12
"""GCM's standard nonce, random per seal (2^32 seals per key stay far from a collision)."""
SETTING = "DESKPILOT_SEAL_KEYS"
_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,40}")


class SealError(Exception):
    """Sealed content that cannot be opened; the message never quotes the content."""


class UnknownSealKey(SealError):
    """Sealed with a key this process does not hold."""


class BrokenSeal(SealError):
    """Malformed, altered, or sealed for another event: it does not open."""


class SealKeyMissing(RuntimeError):
    """Production without ``DESKPILOT_SEAL_KEYS`` in a service that carries raw content."""


@dataclass(frozen=True)
class SealKey:
    key_id: str
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not _KEY_ID.fullmatch(self.key_id):
            raise ValueError(
                f"{SETTING}: a key id is 1 to 40 letters, digits, '.', '_' or '-' "
                f"(got {self.key_id[:40]!r})"
            )
        if len(self.key) != KEY_BYTES:
            raise ValueError(
                f"{SETTING}: key {self.key_id!r} is {len(self.key)} bytes; it must be "
                f"{KEY_BYTES} (base64 of 32 random bytes: openssl rand -base64 32)"
            )


class KeyRing:
    """AES-256-GCM keys by id: the first seals, all open."""

    def __init__(self, keys: Sequence[SealKey]) -> None:
        if not keys:
            raise ValueError(f"{SETTING}: no key")
        ids = [key.key_id for key in keys]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{SETTING}: a key id is used twice ({', '.join(ids)})")
        self._ciphers = {key.key_id: AESGCM(key.key) for key in keys}
        self.sealing_key_id = ids[0]

    @property
    def key_ids(self) -> list[str]:
        return list(self._ciphers)

    @classmethod
    def parse(cls, value: str) -> KeyRing:
        """A ring from ``id:base64key[,id:base64key...]``; ``ValueError`` naming what is wrong
        (never the key itself)."""
        keys = []
        for entry in (part.strip() for part in value.split(",")):
            if not entry:
                continue
            key_id, colon, encoded = entry.partition(":")
            if not colon:
                raise ValueError(f"{SETTING}: write each key as <id>:<base64 key>")
            keys.append(SealKey(key_id.strip(), _decode_key(key_id.strip(), encoded.strip())))
        return cls(keys)

    @classmethod
    def generate(cls, key_id: str | None = None) -> KeyRing:
        """A ring of one new random key."""
        return cls([SealKey(key_id or new_key_id(), AESGCM.generate_key(bit_length=256))])

    def seal(self, plaintext: bytes, associated_data: bytes) -> str:
        """``<key id>:<base64url(nonce + ciphertext + tag)>`` with the first key."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.sealing_key_id].encrypt(nonce, plaintext, associated_data)
        encoded = base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode()
        return f"{self.sealing_key_id}:{encoded}"

    def open(self, sealed: str, associated_data: bytes) -> bytes:
        """The plaintext of ``sealed``; :class:`SealError` when it cannot be had."""
        key_id, colon, encoded = sealed.partition(":")
        if not colon:
            raise BrokenSeal("not sealed content (no key id)")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownSealKey(
                f"sealed with key {key_id[:40]!r}, which is not in {SETTING} "
                f"(this process holds {', '.join(self._ciphers)})"
            )
        try:
            blob = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except (binascii.Error, ValueError):
            raise BrokenSeal(f"sealed content under key {key_id!r} is not base64") from None
        if len(blob) <= NONCE_BYTES:
            raise BrokenSeal(f"sealed content under key {key_id!r} is truncated")
        try:
            return cipher.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated_data)
        except InvalidTag:
            raise BrokenSeal(
                f"sealed content under key {key_id!r} does not open: altered, or sealed for "
                "another event"
            ) from None


def new_key_id() -> str:
    return "k" + secrets.token_hex(4)


def new_key_entry(key_id: str | None = None) -> str:
    """A fresh ``<id>:<base64 key>`` entry for ``DESKPILOT_SEAL_KEYS``."""
    key = AESGCM.generate_key(bit_length=256)
    entry = f"{key_id or new_key_id()}:{base64.b64encode(key).decode()}"
    SealKey(entry.partition(":")[0], key)  # the id is valid
    return entry


def _decode_key(key_id: str, encoded: str) -> bytes:
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        if "-" in encoded or "_" in encoded:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{SETTING}: key {key_id!r} is not base64") from None


@cache
def development_key_ring() -> KeyRing:
    """This process's own key, for development without ``DESKPILOT_SEAL_KEYS``: what it seals
    only it can open (tests in one process, a service alone)."""
    log.warning(
        "no %s: raw content is sealed with a key of this process only; give every service "
        "the same key to let them read each other's raw events",
        SETTING,
    )
    return KeyRing.generate("dev-" + secrets.token_hex(4))


def key_ring_of(keys: SecretStr | None, environment: str) -> KeyRing:
    """The ring ``DESKPILOT_SEAL_KEYS`` configures; without it, :class:`SealKeyMissing` in
    production and :func:`development_key_ring` in development."""
    if keys is not None and keys.get_secret_value().strip():
        return KeyRing.parse(keys.get_secret_value())
    if environment == "production":
        raise SealKeyMissing(
            f"{SETTING} must be set in production: raw user content is sealed on the bus "
            "(<id>:<base64 of 32 random bytes>, e.g. k1:$(openssl rand -base64 32))"
        )
    return development_key_ring()


def seal_event(event: Event, ring: KeyRing) -> SealedEvent:
    """``event`` as it travels on a raw topic: its envelope in clear, all of it sealed."""
    return SealedEvent(
        event_id=event.event_id,
        schema_version=event.schema_version,
        correlation_id=event.correlation_id,
        conversation_id=event.conversation_id,
        occurred_at=event.occurred_at,
        traceparent=event.traceparent,
        tracestate=event.tracestate,
        sealed=ring.seal(event.model_dump_json().encode(), event.event_id.encode()),
    )


def open_event(sealed: SealedEvent, model: type[E], ring: KeyRing) -> E:
    """The event inside ``sealed``; :class:`SealError` when it does not open, pydantic's
    ``ValidationError`` when what it holds is not a ``model``."""
    event = model.model_validate_json(ring.open(sealed.sealed, sealed.event_id.encode()))
    if event.event_id != sealed.event_id:
        raise BrokenSeal("the sealed event's id differs from its envelope's")
    return event
