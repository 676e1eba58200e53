"""``deskpilot dlq``: see why messages were dead-lettered, and put them back once fixed."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import redis.asyncio as aioredis

from contracts.bus import RAW_FIELD, dlq_entry_fields
from contracts.topics import dead_letter_stream
from deploy.runner import RunnerSettings, read_runtime


def resolve_redis_url(args: argparse.Namespace) -> str:
    if args.redis_url:
        return str(args.redis_url)
    overrides: dict[str, Any] = {"data_dir": args.data_dir} if args.data_dir else {}
    settings = RunnerSettings(**overrides)
    if "redis_url" in settings.model_fields_set:
        return settings.redis_url
    runtime = read_runtime(settings.data_dir.expanduser().resolve())
    if runtime:
        return str(runtime["redis_url"])
    return settings.redis_url


async def list_entries(client: aioredis.Redis, topic: str, count: int) -> list[dict[str, Any]]:
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrevrange(  # type: ignore[assignment]
        dead_letter_stream(topic), count=count
    )
    return [{"id": entry_id.decode(), **dlq_entry_fields(fields)} for entry_id, fields in entries]


async def replay(client: aioredis.Redis, topic: str, entry_ids: list[str] | None) -> int:
    """Append dead-lettered messages to their topic again and remove them from the DLQ.

    The original entry (FastStream's envelope with headers and body) is re-added unchanged, so
    handlers see the same event id and stay idempotent.
    """
    stream = dead_letter_stream(topic)
    entries: list[tuple[bytes, dict[bytes, bytes]]] = []
    ranges = [(wanted, wanted) for wanted in entry_ids] if entry_ids else [("-", "+")]
    for low, high in ranges:
        found: Any = await client.xrange(stream, min=low, max=high)
        entries.extend(found)
    replayed = 0
    for dead_id, fields in entries:
        if RAW_FIELD not in fields:
            continue  # raw content, withheld: nothing to replay (the user is asked to resend)
        await client.xadd(topic, {RAW_FIELD: fields[RAW_FIELD]})
        await client.xdel(stream, dead_id)
        replayed += 1
    return replayed


async def run_dlq(args: argparse.Namespace) -> int:
    client = aioredis.from_url(resolve_redis_url(args))
    try:
        if args.action == "list":
            entries = await list_entries(client, args.topic, args.count)
            if not entries:
                print(f"{dead_letter_stream(args.topic)} is empty")
            for entry in entries:
                print(
                    f"{entry['id']}  original={entry.get('original_id')} "
                    f"group={entry.get('group')} deliveries={entry.get('deliveries')} "
                    f"failed_at={entry.get('failed_at')}\n    error: {entry.get('error')}"
                )
            return 0
        count = await replay(client, args.topic, args.entry_ids)
        print(f"replayed {count} message(s) to {args.topic}")
        return 0
    except OSError as exc:
        print(f"deskpilot dlq: cannot reach Redis: {exc}", file=sys.stderr)
        return 2
    finally:
        await client.aclose()
