"""``deskpilot crawl``: run one crawl job through the crawler fleet and print what it read.

By default the command starts ``--workers`` crawler processes of its own (``python -m crawler``,
the same program the stack runs) on a fresh ``CRAWLER_NAMESPACE``, so the job is isolated: it
takes nothing from the orchestrator, its pages are not indexed, and its streams and keys are
deleted afterwards. Redis is the running stack's (or ``--redis-url`` / ``REDIS_URL``), else a
private ``valkey-server`` in a temporary directory. ``--use-running-fleet`` instead hands the job
to the stack's own crawler workers (their settings apply, and the stack's indexer indexes the
pages, as it would for a user's question).

Without ``--question`` the job is breadth-first. With it, the link planner orders the frontier
(best first: relevance of anchor, URL and surrounding words to the question, novelty, depth); the
command has no retrieval to judge when the answer is in hand, as the orchestrator does, so the job
runs the planner's order until ``--max-pages``, ``--deadline`` or an empty frontier. Ctrl-C stops
it early (``crawl.stop``) and prints what was read; a second Ctrl-C gives up waiting.

The SSRF guard of the workers refuses private, loopback, link-local and other non-public
addresses. Before starting its own workers, the command checks the seeds the way the guard will:
when it would refuse every seed, the command stops at once and says which address it refused and
which ``--allow-network`` exempts it. URLs refused during the job are listed with their addresses
after it (``refused`` in ``--json``).

Exit codes: 0 the job finished (whatever it found), 1 it did not (workers died, no result), 2 it
could not start (a bad URL or option, every seed refused by the SSRF guard, no Chromium, Redis
unreachable).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import sys
from typing import TYPE_CHECKING, Any

from deploy.cli.crawlfleet import CrawlSetupError
from deploy.cli.stackaccess import add_data_dir_argument

if TYPE_CHECKING:
    from crawler.config import IPNetwork

RESULT_GRACE_S = 30.0
"""How long after the job's deadline the command still waits for its ``crawl.finished``."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``crawl`` to ``deskpilot``'s sub-commands."""
    from contracts.events import CrawlBudget

    budget = CrawlBudget()
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "crawl",
        help="crawl sites through the crawler fleet and print the pages read",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("urls", nargs="+", metavar="URL", help="seed URLs (http or https)")
    parser.add_argument(
        "--allow",
        nargs="+",
        action="extend",
        default=[],
        metavar="DOMAIN",
        help="hosts the job may fetch, each with its subdomains (default: the seeds' own hosts)",
    )
    parser.add_argument("--max-pages", type=int, default=budget.max_pages)
    parser.add_argument("--max-depth", type=int, default=budget.max_depth)
    parser.add_argument("--question", default="", help="order links by relevance to this")
    parser.add_argument(
        "--workers", type=int, default=None, help="crawler processes to start (default 2)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="pages fetched at once, fleet-wide (default: 2 per worker; 4 on a running fleet)",
    )
    parser.add_argument(
        "--deadline", type=float, default=budget.deadline_s, help="seconds the job may take"
    )
    parser.add_argument(
        "--allow-network",
        action="append",
        default=[],
        metavar="CIDR",
        help="exempt addresses from the SSRF guard, e.g. 127.0.0.0/8 for a site on this host",
    )
    parser.add_argument(
        "--use-running-fleet",
        action="store_true",
        help="hand the job to the running stack's crawler workers instead of starting any",
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument(
        "--redis-url",
        default=None,
        help="Redis to crawl through (default: the running stack's, else $REDIS_URL, else a "
        "private valkey-server)",
    )
    add_data_dir_argument(parser)
    return parser


def run_crawl(args: argparse.Namespace) -> int:
    from deploy.cli.crawlfleet import reporting_errors

    def body() -> int:
        seeds = _seeds(args.urls)
        _check_options(args)
        return asyncio.run(_crawl(args, seeds))

    return reporting_errors("deskpilot crawl", body)


def _seeds(urls: list[str]) -> list[str]:
    from crawler.urls import normalise

    seeds = []
    for url in urls:
        normalised = normalise(url)
        if normalised is None or "://" not in url:
            raise CrawlSetupError(f"not a crawlable URL: {url!r} (http or https, with a host)")
        seeds.append(normalised)
    return seeds


def _check_options(args: argparse.Namespace) -> None:
    for name in ("max_pages", "workers", "concurrency"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise CrawlSetupError(f"--{name.replace('_', '-')} must be at least 1")
    if args.max_depth < 0:
        raise CrawlSetupError("--max-depth must be 0 or more")
    if args.deadline <= 0:
        raise CrawlSetupError("--deadline must be more than 0 seconds")
    if args.use_running_fleet and (args.workers is not None or args.allow_network):
        raise CrawlSetupError(
            "--workers and --allow-network configure the command's own workers; with "
            "--use-running-fleet the running workers' settings apply"
        )
    _networks(args.allow_network)


def _networks(cidrs: list[str]) -> list[IPNetwork]:
    networks: list[IPNetwork] = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError:
            raise CrawlSetupError(f"--allow-network {cidr!r} is not an IP network (CIDR)") from None
    return networks


def exemption(addresses: list[str]) -> str:
    """The ``--allow-network`` options that would exempt ``addresses``."""
    cidrs = [ipaddress.ip_network(address.split("%")[0]) for address in addresses]
    return " ".join(f"--allow-network {cidr}" for cidr in dict.fromkeys(cidrs))


async def _check_seeds(seeds: list[str], allow_networks: list[str]) -> None:
    """Refuse to start when the workers' SSRF guard would refuse every seed; warn about some."""
    from crawler.guard import AddressGuard, AddressRefused

    guard = AddressGuard(_networks(allow_networks))
    refused: list[str] = []
    for seed in seeds:
        try:
            await guard.check(seed)
        except AddressRefused as exc:
            addresses = [str(address) for address, _ in exc.refused]
            hint = f"; {exemption(addresses)} exempts it" if addresses else ""
            refused.append(f"  {seed}: {exc}{hint}")
    if refused and len(refused) == len(seeds):
        raise CrawlSetupError(
            "the SSRF guard refuses every seed (it crawls public addresses only):\n"
            + "\n".join(refused)
        )
    for line in refused:
        print(f"deskpilot crawl: the SSRF guard refuses a seed:\n{line}", file=sys.stderr)


async def _crawl(args: argparse.Namespace, seeds: list[str]) -> int:
    from deploy.cli.crawlfleet import redis_for

    if not args.use_running_fleet:
        from deploy.cli.crawlfleet import check_browser

        check_browser()
    with redis_for(args.redis_url, args.data_dir) as target:
        if args.use_running_fleet:
            result = await _on_running_fleet(args, seeds, target.url, target.private)
        else:
            result = await _on_own_fleet(args, seeds, target.url)
    _print(result, args.json, args.use_running_fleet)
    return 0


async def _on_own_fleet(args: argparse.Namespace, seeds: list[str], redis_url: str) -> Any:
    from deploy.cli.crawlfleet import Fleet, FleetOptions, JobClient, new_namespace, with_interrupt

    workers = args.workers or 2
    contexts = 2
    options = FleetOptions(
        workers=workers,
        contexts=contexts,
        embeddings=bool(args.question),
        allow_networks=list(args.allow_network),
    )
    namespace = new_namespace("cli")
    concurrency = args.concurrency or workers * contexts
    await _check_seeds(seeds, list(args.allow_network))

    async def body(interrupted: asyncio.Event) -> Any:
        with Fleet(redis_url, namespace, options) as fleet:
            async with JobClient(redis_url, namespace, source="cli") as client:
                reply_to = f"{namespace}.reply"
                try:
                    _say(args, f"starting {workers} crawler workers ...")
                    await fleet.wait_ready(client.redis)
                    return await _run_job(
                        client, args, seeds, concurrency, reply_to, interrupted, fleet.check_alive
                    )
                finally:
                    await client.forget_namespace(reply_to)

    return await with_interrupt(body)


async def _on_running_fleet(
    args: argparse.Namespace, seeds: list[str], redis_url: str, private: bool
) -> Any:
    from deploy.cli.crawlfleet import JobClient, live_workers, with_interrupt

    if private or not await live_workers(redis_url):
        raise CrawlSetupError(
            "--use-running-fleet: no crawler worker is running "
            + ("(no stack runs on the data directory)" if private else f"on {redis_url}")
        )
    concurrency = args.concurrency or 4

    async def body(interrupted: asyncio.Event) -> Any:
        async with JobClient(redis_url, "", source="cli") as client:
            from contracts.events import new_id

            reply_to = f"cli.reply.{new_id()[:12]}"
            try:
                return await _run_job(client, args, seeds, concurrency, reply_to, interrupted)
            finally:
                await client.forget(reply_to)

    return await with_interrupt(body)


async def _run_job(
    client: Any,
    args: argparse.Namespace,
    seeds: list[str],
    concurrency: int,
    reply_to: str,
    interrupted: asyncio.Event,
    alive: Any = None,
) -> Any:
    request = client.request(
        seeds,
        allowed=list(args.allow),
        question=args.question,
        max_pages=args.max_pages,
        max_depth=args.max_depth,
        deadline_s=args.deadline,
        concurrency=concurrency,
        reply_to=reply_to,
    )
    return await client.run(
        request,
        timeout_s=args.deadline + RESULT_GRACE_S,
        progress=None if args.json else _progress,
        interrupted=interrupted,
        alive=alive,
    )


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.json:
        print(text, file=sys.stderr, flush=True)


def _progress(detail: str) -> None:
    print(f"  crawled {detail}", file=sys.stderr, flush=True)


def result_json(outcome: Any) -> dict[str, Any]:
    """The command's JSON: the job's ``crawl.finished`` summary, with its id and why it ended,
    and the URLs the SSRF guard refused with the addresses it refused."""
    finished = outcome.finished
    return {
        "job_id": finished.job_id,
        "reason": finished.reason,
        "pages": [page.model_dump() for page in finished.pages],
        "pages_per_s": finished.pages_per_s,
        "duration_s": finished.duration_s,
        "skipped": finished.skipped,
        "refused": [
            {"url": url, "detail": why["detail"], "addresses": why["addresses"]}
            for url, why in sorted(outcome.refused.items())
        ],
    }


def _refusal_lines(result: dict[str, Any], running_fleet: bool) -> list[str]:
    """Which URLs the SSRF guard refused, which addresses, and what would exempt them."""
    if not result["skipped"].get("blocked"):
        return []
    lines = ["refused by the SSRF guard (it crawls public addresses only):"]
    addresses: list[str] = []
    for item in result["refused"]:
        lines.append(f"  {item['url']}: {item['detail']}")
        addresses += item["addresses"]
    if not result["refused"]:
        lines.append("  (the workers kept no detail)")
    if addresses and running_fleet:
        lines.append(
            "the running crawler workers' CRAWLER_ALLOW_NETWORKS exempts addresses; here: "
            + ", ".join(dict.fromkeys(addresses))
        )
    elif addresses:
        lines.append(f"to crawl them anyway pass {exemption(addresses)}")
    return lines


def _print(outcome: Any, as_json: bool, running_fleet: bool = False) -> None:
    result = result_json(outcome)
    refusals = _refusal_lines(result, running_fleet)
    if as_json:
        print(json.dumps(result))
        if refusals:
            print("\n".join(refusals), file=sys.stderr)
        return
    pages = result["pages"]
    print(
        f"{len(pages)} pages in {result['duration_s']:.2f} s ({result['pages_per_s']:.2f} "
        f"pages/s); ended: {result['reason']}"
        + (" (stopped with Ctrl-C)" if outcome.stopped_by_user else "")
    )
    if pages:
        print(f"{'#':>3}  {'status':>6}  {'depth':>5}  {'ms':>6}  {'bytes':>8}  title / url")
        for n, page in enumerate(pages, 1):
            print(
                f"{n:>3}  {page['status']:>6}  {page['depth']:>5}  {page['ms']:>6}  "
                f"{page['bytes']:>8}  {page['title'] or '(untitled)'}\n"
                f"{'':>38}{page['url']}"
            )
    skipped = ", ".join(f"{cause} {count}" for cause, count in result["skipped"].items())
    print(f"skipped: {skipped}")
    for line in refusals:
        print(line)
