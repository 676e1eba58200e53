"""Placeholders that hold across a conversation's messages, on real valkey."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr, ValidationError

from redactor.config import RedactorSettings
from redactor.placeholders import KEY_PREFIX, ConversationPlaceholders
from redactor.service import Redactor


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    connection = aioredis.from_url(redis_url)
    try:
        yield connection
    finally:
        await connection.aclose()


def conversation() -> str:
    return uuid.uuid4().hex


async def test_the_same_value_keeps_its_placeholder_across_messages(
    client: aioredis.Redis, redactor: Redactor
) -> None:
    placeholders = ConversationPlaceholders(client, b"test-key-0123456789", ttl_s=600)
    talk = conversation()

    async def redact(text: str) -> str:
        found = redactor.find(text)
        numbers = await placeholders.numbers(talk, [f.key for f in found])
        return redactor.replace(text, found, numbers).text

    first = await redact("Please mail anna.berg@fastmail.com about the VPN")
    second = await redact("Also cc jonas.ek@fastmail.com and ANNA.BERG@fastmail.com")
    other = await placeholders.numbers(conversation(), [("EMAIL_ADDRESS", "jonas.ek@fastmail.com")])

    assert first == "Please mail <EMAIL_ADDRESS_1> about the VPN"
    assert second == "Also cc <EMAIL_ADDRESS_2> and <EMAIL_ADDRESS_1>"
    assert list(other.values()) == [1]  # another conversation counts on its own


async def test_redis_holds_keyed_hashes_only_and_forgets_them(client: aioredis.Redis) -> None:
    placeholders = ConversationPlaceholders(client, b"test-key-0123456789", ttl_s=600)
    talk = conversation()
    await placeholders.numbers(talk, [("PERSON", "anna berg"), ("PASSWORD", "Hunter-77x")])

    stored = await client.hgetall(KEY_PREFIX + talk)
    flat = b" ".join(k + b" " + v for k, v in stored.items()).lower()
    assert b"anna" not in flat
    assert b"hunter" not in flat
    assert stored[b"n:PERSON"] == b"1"
    assert 0 < await client.ttl(KEY_PREFIX + talk) <= 600
    # Another key gives other hashes: without the key the fields say nothing.
    other = ConversationPlaceholders(client, b"another-key-987654321", ttl_s=600)
    assert other.digest("PERSON", "anna berg") != placeholders.digest("PERSON", "anna berg")


async def test_replicas_assigning_at_once_agree(client: aioredis.Redis) -> None:
    talk = conversation()
    replicas = [ConversationPlaceholders(client, b"test-key-0123456789", 600) for _ in range(4)]
    values = [("PERSON", f"person {n}") for n in range(20)]
    results = await asyncio.gather(
        *(
            replica.numbers(talk, values[i::2] + values[: 10 - i])
            for i, replica in enumerate(replicas)
        )
    )
    merged: dict[tuple[str, str], int] = {}
    for result in results:
        for value, number in result.items():
            assert merged.setdefault(value, number) == number  # everyone sees the same number
    assert sorted(merged.values()) == list(range(1, len(merged) + 1))  # no gaps, no repeats


def test_production_needs_a_real_placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESKPILOT_ENV", "production")
    monkeypatch.setenv("DESKPILOT_ADMIN_TOKEN", "a-real-admin-token-123")
    with pytest.raises(ValidationError, match="REDACTOR_PLACEHOLDER_KEY"):
        RedactorSettings()
    settings = RedactorSettings(placeholder_key=SecretStr("a-real-secret-of-some-length"))
    assert settings.environment == "production"
