"""``deskpilot purge --conversation ID``: delete everything the stack keeps of a conversation.

The request goes out on ``conversation.purged``; the gateway (turns, answers, ratings,
attachment records), the redactor (placeholder numbers), the orchestrator (memory, turn
states, attachment text) and the indexer (questions kept for knowledge-gap proposals) each delete
their part and write a ``purge`` record on the audit stream. The command waits for those
records and says which service has not confirmed in time. Tickets are not purged: they belong
to the technicians' system.

An id that is not a conversation id (``contracts.ids``: the pattern every entry point accepts) is
refused before anything is sent, with exit code 2: no service would find such a conversation,
and the command would only wait for confirmations that purge nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from deploy.cli.stackaccess import add_data_dir_argument

PURGING_SERVICES = ("gateway", "redactor", "orchestrator", "indexer")


def add_parser(commands: Any) -> None:
    purge = commands.add_parser(
        "purge", help="delete a conversation's data in every service (not its tickets)"
    )
    purge.add_argument("--conversation", required=True, help="the conversation id")
    purge.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for services")
    purge.add_argument("--redis-url", default=None)
    add_data_dir_argument(purge)


def run_purge(args: argparse.Namespace) -> int:
    return asyncio.run(purge(args))


async def purge(args: argparse.Namespace) -> int:
    import redis.asyncio as aioredis

    from contracts.bus import Bus, decode_entry
    from contracts.events import AuditRecorded, ConversationPurged, new_id
    from contracts.ids import CONVERSATION_ID_MAX_LENGTH, is_conversation_id
    from contracts.settings import ServiceSettings
    from contracts.topics import Topic
    from deploy.cli.dlq import resolve_redis_url

    conversation_id: str = args.conversation
    if not is_conversation_id(conversation_id):
        shown = ascii(conversation_id[:CONVERSATION_ID_MAX_LENGTH])
        print(
            f"deskpilot purge: {shown} is not a conversation id (1 to "
            f"{CONVERSATION_ID_MAX_LENGTH} ASCII letters, digits and _ . : -, as the chat "
            "answers and the admin API show them); nothing was sent",
            file=sys.stderr,
        )
        return 2
    redis_url = resolve_redis_url(args)
    bus = Bus(ServiceSettings(redis_url=redis_url), "purge-cli")
    client = aioredis.from_url(redis_url)
    try:
        await bus.start()
        # Audit records of this request come after this id.
        last: Any = await client.xrevrange(Topic.AUDIT, count=1)
        cursor = last[0][0].decode() if last else "0-0"
        request = ConversationPurged(
            correlation_id=new_id(), conversation_id=conversation_id, requested_by="cli"
        )
        await bus.publish(Topic.CONVERSATION_PURGED, request)
        confirmed: set[str] = set()
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and len(confirmed) < len(PURGING_SERVICES):
            batches: Any = await client.xread({Topic.AUDIT: cursor}, block=500, count=100)
            for _, entries in batches or []:
                for entry_id, fields in entries:
                    cursor = entry_id.decode()
                    try:
                        record = decode_entry(fields, AuditRecorded)
                    except (KeyError, ValueError):
                        continue
                    if record.correlation_id == request.correlation_id:
                        confirmed.add(record.service)
    except OSError as exc:
        print(f"deskpilot purge: cannot reach Redis at {redis_url}: {exc}", file=sys.stderr)
        return 2
    finally:
        await bus.stop()
        await client.aclose()
    missing = [service for service in PURGING_SERVICES if service not in confirmed]
    if missing:
        print(
            f"purge of {conversation_id} requested; not confirmed within {args.timeout:.0f} s "
            f"by: {', '.join(missing)} (it runs when they are back)",
            file=sys.stderr,
        )
        return 1
    print(f"purged conversation {conversation_id} in {', '.join(PURGING_SERVICES)}")
    return 0
