"""``deskpilot purge --conversation ID`` on a real Redis: a well-formed id goes out on
``conversation.purged`` and the command waits for every service's confirmation; anything else
is refused before a byte is sent."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio as aioredis

from contracts.bus import Bus, decode_entry
from contracts.events import ConversationPurged, new_id
from contracts.settings import ServiceSettings
from contracts.topics import Topic
from deploy.cli.main import main
from deploy.cli.purge import PURGING_SERVICES


def purge_requests(redis_url: str) -> list[ConversationPurged]:
    client = redis.Redis.from_url(redis_url)
    try:
        entries = client.xrange(Topic.CONVERSATION_PURGED)
    finally:
        client.close()
    return [decode_entry(fields, ConversationPurged) for _, fields in entries]


@pytest.mark.parametrize(
    "conversation_id",
    [
        "",
        "conv 42",
        "conv-42\n",
        "../conv-42",
        "conv/42",
        "kévin-42",
        "c" * 129,
        "conv-42;FLUSHALL",
    ],
    ids=[
        "empty",
        "space",
        "trailing-newline",
        "dot-dot-slash",
        "slash",
        "non-ascii",
        "too-long",
        "semicolon",
    ],
)
def test_an_id_that_is_not_a_conversation_id_is_refused_and_nothing_is_sent(
    fresh_redis_url: str, conversation_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["purge", "--conversation", conversation_id, "--redis-url", fresh_redis_url]

    code = main([*argv, "--timeout", "5"])

    assert code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "is not a conversation id" in err
    assert "nothing was sent" in err
    assert purge_requests(fresh_redis_url) == []


@pytest.mark.parametrize(
    "conversation_id",
    ["5b0e6f1d8c2a4e7f9a3b1c0d2e4f6a8b", "conv-42", "teams:19.a_b-c"],
    ids=["issued", "prefixed", "channel"],  # fixed: xdist workers must collect the same ids
)
def test_a_conversation_id_is_sent_and_waited_for(
    fresh_redis_url: str, conversation_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def confirm_as_every_service() -> None:
        """What the services do on ``conversation.purged``: an audit record each."""
        client = aioredis.from_url(fresh_redis_url)
        bus = Bus(ServiceSettings(redis_url=fresh_redis_url), "purging-services")
        await bus.start()
        try:
            while True:
                read = await client.xread({Topic.CONVERSATION_PURGED: "0-0"}, block=100, count=1)
                if read:
                    break
            [(_, [(_, fields)])] = read
            request = decode_entry(fields, ConversationPurged)
            for service in PURGING_SERVICES:
                await bus.publish(Topic.AUDIT, request.confirmation(service, keys=1))
        finally:
            await bus.stop()
            await client.aclose()

    async def run() -> int:
        services = asyncio.create_task(confirm_as_every_service())
        argv = ["purge", "--conversation", conversation_id, "--redis-url", fresh_redis_url]
        code = await asyncio.to_thread(main, [*argv, "--timeout", "30"])
        await asyncio.wait_for(services, 5)
        return code

    assert asyncio.run(run()) == 0
    [request] = purge_requests(fresh_redis_url)
    assert (request.conversation_id, request.requested_by) == (conversation_id, "cli")
    assert f"purged conversation {conversation_id} in " in capsys.readouterr().out


def test_an_unconfirmed_purge_names_the_services_that_did_not_answer(
    fresh_redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    conversation_id = new_id()
    argv = ["purge", "--conversation", conversation_id, "--redis-url", fresh_redis_url]

    assert main([*argv, "--timeout", "0.5"]) == 1

    [request] = purge_requests(fresh_redis_url)
    assert request.conversation_id == conversation_id
    assert "not confirmed within" in (err := capsys.readouterr().err)
    assert all(service in err for service in PURGING_SERVICES)
