"""``deskpilot sources list`` and ``deskpilot sources sync NAME``: the knowledge sources the
indexer syncs (Confluence, SharePoint), and a sync on demand.

``sync`` puts a request on ``source.sync.requested`` (one indexer replica runs it) and waits for
its ``source.sync.completed`` event, then prints the run's summary; it exits 0 when the run went
to the end, 1 when it stopped early (the error is printed; the next run resumes where it
stopped) or did not end within ``--timeout``, 2 when the name is not a configured source or
Redis cannot be reached. A name is checked against the catalogue the indexer keeps, so nothing
is sent for a name no indexer announced.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from deploy.cli.stackaccess import add_data_dir_argument


def add_parser(commands: Any) -> None:
    sources = commands.add_parser("sources", help="knowledge sources: list them, sync one now")
    actions = sources.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="configured sources and their last sync")
    sync = actions.add_parser("sync", help="sync a source now and wait for its summary")
    sync.add_argument("name", help="the source's configured name")
    sync.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
    sync.add_argument("--no-wait", action="store_true", help="queue the sync and return")
    for parser in (listing, sync):
        parser.add_argument("--redis-url", default=None)
        add_data_dir_argument(parser)


def run_sources(args: argparse.Namespace) -> int:
    return asyncio.run(_list(args) if args.action == "list" else _sync(args))


async def _list(args: argparse.Namespace) -> int:
    import redis.asyncio as aioredis

    from contracts.sources import read_catalogue
    from deploy.cli.dlq import resolve_redis_url

    client = aioredis.from_url(resolve_redis_url(args))
    try:
        statuses = await read_catalogue(client)
    except OSError as exc:
        print(f"deskpilot sources: cannot reach Redis: {exc}", file=sys.stderr)
        return 2
    finally:
        await client.aclose()
    if not statuses:
        print("no sources configured (INDEXER_SOURCES), or no indexer has started yet")
    for status in statuses:
        last = status.last_summary
        counts = (
            f"{last.new} new, {last.changed} changed, {last.unchanged} unchanged, "
            f"{last.deleted} deleted, {last.failed} failed in {last.duration_s:.1f} s"
            if last
            else "never synced"
        )
        finished = status.last_finished_at.isoformat() if status.last_finished_at else "-"
        error = f"; stopped: {status.last_error}" if status.last_error else ""
        if status.removal_due_at is not None:
            error += (
                "; no longer configured: answered no more, removed "
                f"{status.removal_due_at.isoformat(timespec='seconds')}"
            )
        print(
            f"{status.name} ({status.kind}): {status.state}, {status.documents} documents, "
            f"last sync {finished}: {counts}{error}"
        )
    return 0


async def _sync(args: argparse.Namespace) -> int:
    import redis.asyncio as aioredis

    from contracts.bus import Bus, decode_entry
    from contracts.events import SourceSyncCompleted, SourceSyncRequested, new_id
    from contracts.settings import ServiceSettings
    from contracts.sources import SOURCES_CONVERSATION, is_source_name, read_source
    from contracts.topics import Topic
    from deploy.cli.dlq import resolve_redis_url

    name: str = args.name
    if not is_source_name(name):
        print(
            f"deskpilot sources: {name[:64]!a} is not a source name (lower-case letters, "
            "digits, - and _); nothing was sent",
            file=sys.stderr,
        )
        return 2
    redis_url = resolve_redis_url(args)
    bus = Bus(ServiceSettings(redis_url=redis_url), "sources-cli")
    client = aioredis.from_url(redis_url)
    try:
        status = await read_source(client, name)
        if status is not None and status.taken_out:
            print(
                f"deskpilot sources: {name} is no longer configured (INDEXER_SOURCES): its "
                "documents are hidden and will be removed; nothing was sent",
                file=sys.stderr,
            )
            return 2
        if status is None:
            print(
                f"deskpilot sources: no source named {name} is configured (see deskpilot "
                "sources list); nothing was sent",
                file=sys.stderr,
            )
            return 2
        await bus.start()
        last: Any = await client.xrevrange(Topic.SOURCE_SYNC_COMPLETED, count=1)
        cursor = last[0][0].decode() if last else "0-0"
        request = SourceSyncRequested(
            correlation_id=new_id(),
            conversation_id=SOURCES_CONVERSATION,
            source=name,
            requested_by="cli",
        )
        await bus.publish(Topic.SOURCE_SYNC_REQUESTED, request)
        if args.no_wait:
            print(f"sync of {name} queued ({request.correlation_id})")
            return 0
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            batches: Any = await client.xread(
                {Topic.SOURCE_SYNC_COMPLETED: cursor}, block=1000, count=100
            )
            for _, entries in batches or []:
                for entry_id, fields in entries:
                    cursor = entry_id.decode()
                    try:
                        done = decode_entry(fields, SourceSyncCompleted)
                    except (KeyError, ValueError):
                        continue
                    if done.correlation_id == request.correlation_id:
                        return _report(done)
    except OSError as exc:
        print(f"deskpilot sources: cannot reach Redis at {redis_url}: {exc}", file=sys.stderr)
        return 2
    finally:
        await bus.stop()
        await client.aclose()
    print(
        f"sync of {name} requested; it did not end within {args.timeout:.0f} s (it goes on: "
        "deskpilot sources list shows it when it ends)",
        file=sys.stderr,
    )
    return 1


def _report(done: Any) -> int:
    s = done.summary
    print(
        f"{done.source}: {s.total} documents: {s.new} new, {s.changed} changed, {s.unchanged} "
        f"unchanged, {s.deleted} deleted, {s.failed} failed in {s.duration_s:.1f} s"
    )
    for failure in done.failures:
        print(f"  failed: {failure}")
    if done.error:
        print(f"stopped early: {done.error} (the next sync resumes there)", file=sys.stderr)
        return 1
    return 0
