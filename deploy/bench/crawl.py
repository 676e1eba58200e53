"""``deskpilot bench crawl``: the crawler fleet against crawl4ai on a static site served here.

One run:

1. serves ``--site`` on loopback the way GitHub Pages serves a static build (``/a/b`` is
   ``a/b.html`` or ``a/b/index.html``; a folder without its slash redirects), on a threaded server;
2. starts ``--workers`` crawler processes (as ``deskpilot crawl`` does: own namespace, private
   valkey unless ``--redis-url``) with the politeness limits lifted (per-host rate and
   concurrency), and crawls the whole site from ``--seed`` breadth-first, ``--concurrency`` pages
   at once; with ``--fetches N`` it crawls the site again with fresh jobs until N page fetches;
3. samples the memory of each worker's process tree (the worker, its Playwright driver and
   Chromium; RSS summed as ``ps`` shows it, and PSS, which splits shared pages) with psutil all
   along: the peak, and once idle after the first crawl (warmed up) and after the last, for the
   drift;
4. crawls the same site with the baseline at the same concurrency in a process of its own
   (:mod:`deploy.bench.crawl_baseline`: crawl4ai's BFS deep crawl when crawl4ai is installed, else a
   plain Playwright BFS, labelled as such) and samples its memory the same way;
5. measures extraction coverage: for every page read, the share of the words of a direct
   HTML-to-text pass of the served file (BeautifulSoup ``get_text``) found in the extracted
   text (for the fleet, the indexer's extraction of the published page: what the knowledge base
   gets), once for the whole page and once for its content (see :func:`reference_texts`).

What a page's content is, for the extractor and for this reference alike: ``<main>`` (else the
body) less navigation, by one rule (:func:`indexer.extract.html.drop_navigation`), so neither
side is judged by a definition of its own:

* navigation is what the page marks as its chrome (``nav``, ``header`` other than an article's
  title block, ``footer``, ``aside`` and their ARIA roles), tables of contents (elements classed
  ``toc`` or ``table-of-contents``, such as Docusaurus' "On this page" box and button, and lists
  of links into the page itself) and lists of bare links to other pages (breadcrumbs, tag lists,
  "see also" titles), which repeat headings or other pages' titles;
* content is everything else a reader reads to act: text, steps, tables, code, and the link
  cards of index pages (a link with a short description of the page it leads to), which the
  extractor keeps as a list.

Nothing else is left out of the reference but what a browser does not show (scripts, styles,
templates, ``<noscript>``): words the extractor drops otherwise (a heading with only a
screenshot under it, say) count as lost. A page whose content holds no words outside its
headings (a title with nothing under it, like a category page whose cards only JavaScript
draws) has nothing to cover: it is reported as empty (n/a), apart from the mean and the minimum,
as the indexer files no document for it.

With ``--question`` the crawl is planned for it (the embedding model loaded, as in the stack), and
``--target PATH`` reports after how many pages the page at PATH was read (``--sitemaps off``
crawls without the sites' sitemaps, for comparison; ``--sitemap-host HOST`` maps a host the
sitemap names, such as the production host of a copied site, onto the served one).

Throughput counts *distinct pages of the site* (served files) per second, so a crawler that reads
``/a`` and ``/a.html`` separately is not credited twice; fetches per second counts every document
fetched and rendered. Page time is the crawler's own per-page time (fetch, render, extract).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from deploy.bench.chat import percentile

MB = 1024 * 1024
BASELINES = ("auto", "crawl4ai", "playwright", "none")
BASELINE_TIMEOUT_S = 1800.0
TARGET_RATIO = 1.5
TARGET_DRIFT = 0.20
TARGET_COVERAGE = 0.95


def add_parser(bench_kinds: Any) -> argparse.ArgumentParser:
    """Add ``crawl`` to ``deskpilot bench``'s kinds."""
    parser: argparse.ArgumentParser = bench_kinds.add_parser(
        "crawl",
        help="crawler fleet throughput, memory and extraction against crawl4ai",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--site", type=Path, required=True, help="folder of a static site")
    parser.add_argument("--seed", default="/", help="path of the first page (default /)")
    parser.add_argument("--workers", type=int, default=2, help="crawler processes")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="pages at once, fleet-wide and for the baseline (default: 2 per worker)",
    )
    parser.add_argument("--pages", type=int, default=2000, help="pages per crawl at most")
    parser.add_argument("--max-depth", type=int, default=50)
    parser.add_argument(
        "--fetches",
        type=int,
        default=0,
        help="crawl again with fresh jobs until this many page fetches (memory drift)",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=300.0,
        help="seconds one crawl may take before the fleet ends it (its reason is then deadline)",
    )
    parser.add_argument(
        "--render",
        choices=("auto", "always"),
        default="auto",
        help="the fleet's CRAWLER_RENDER: render only pages whose HTML lacks the content "
        "(auto, the default) or every page (always)",
    )
    parser.add_argument("--question", default="", help="plan the crawl for this question")
    parser.add_argument(
        "--target", default=None, metavar="PATH", help="report after how many pages PATH was read"
    )
    parser.add_argument(
        "--sitemaps",
        choices=("on", "off"),
        default="on",
        help="the fleet's CRAWLER_SITEMAPS (default on)",
    )
    parser.add_argument(
        "--sitemap-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a host the site's sitemap names, read from the served site instead "
        "(CRAWLER_SITEMAP_HOST_MAP); repeatable",
    )
    parser.add_argument("--baseline", choices=BASELINES, default="auto")
    parser.add_argument("--redis-url", default=None, help="default: a private valkey-server")
    parser.add_argument("--json", action="store_true")
    return parser


# -- the site ------------------------------------------------------------------------------------


def site_file(root: Path, url_path: str) -> Path | None:
    """The file a static host serves for ``url_path``: as is, ``.html`` added, or the folder's
    ``index.html``; None outside ``root`` or when there is none."""
    root = root.resolve()
    relative = unquote(url_path).lstrip("/")
    for candidate in (relative, f"{relative}.html", f"{relative.rstrip('/')}/index.html"):
        path = (root / candidate.lstrip("/")).resolve()
        if path.is_file() and path.is_relative_to(root):
            return path
    return None


class _StaticHandler(SimpleHTTPRequestHandler):
    """Serves files as :func:`site_file` finds them; a folder without its slash redirects to it
    (as the standard handler does) only when no ``.html`` file of its name exists; a folder
    without ``index.html`` is not found (never listed)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as a real static host

    def translate_path(self, path: str) -> str:
        local = super().translate_path(path)
        wants_folder = path.split("?", 1)[0].endswith("/")
        if not wants_folder and not os.path.isfile(local) and os.path.isfile(f"{local}.html"):
            return f"{local}.html"
        return local

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(404, "Not found")
        return None

    def log_message(self, format: str, *args: Any) -> None:
        return


class StaticSite:
    """``root`` on a loopback port, on a thread per connection."""

    def __init__(self, root: Path) -> None:
        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256  # browsers open many connections at once

            def handle_error(self, request: Any, client_address: Any) -> None:
                return  # a client that hung up mid-response (a crawler giving up a page)

        self.root = root.resolve()
        self._httpd = Server(("127.0.0.1", 0), partial(_StaticHandler, directory=str(self.root)))
        self._thread = threading.Thread(  # shut down within 50 ms, not the default 500
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def url(self, path: str = "/") -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}{path}"

    def __enter__(self) -> StaticSite:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# -- memory --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """Resident memory of a process tree: RSS summed (what ``ps`` shows, counting pages that
    Chromium's processes share once per process) and PSS (shared pages split among sharers)."""

    rss: int = 0
    pss: int = 0

    def max(self, other: Memory) -> Memory:
        return Memory(max(self.rss, other.rss), max(self.pss, other.pss))


def tree_memory(pid: int) -> Memory:
    """Memory of a process and all its descendants (a worker, its Playwright driver, Chromium)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return Memory()
    rss = pss = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            info = process.memory_full_info()
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
    return Memory(rss, pss)


class MemorySampler:
    """Samples the tree memory of some processes every ``interval_s`` on a thread; keeps the
    peak of each."""

    def __init__(self, pids: Sequence[int], interval_s: float = 0.5) -> None:
        self.pids = list(pids)
        self.interval_s = interval_s
        self.peak = {pid: Memory() for pid in self.pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def snapshot(self) -> dict[int, Memory]:
        now = {pid: tree_memory(pid) for pid in self.pids}
        for pid, memory in now.items():
            self.peak[pid] = self.peak[pid].max(memory)
        return now

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.snapshot()

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# -- extraction coverage -------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_INVISIBLE = ("script", "style", "noscript", "template", "svg", "head")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


def words(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower()))


@dataclass(frozen=True)
class Reference:
    """Direct HTML-to-text passes (BeautifulSoup ``get_text``) of a served page."""

    whole: str
    """The whole body."""
    content: str
    """``<main>`` (else the body) less navigation."""
    empty: bool
    """Nothing in the content but headings: a title with no text under it."""


def reference_texts(html: str) -> Reference:
    """The page's words as a reader sees them, and its content: ``<main>`` (else the body)
    without navigation, by the rule the indexer's extractor drops it with
    (:func:`indexer.extract.html.drop_navigation`: what the page marks as its chrome, tables of
    contents, lists of bare links); link cards that describe other pages stay in both."""
    from bs4 import BeautifulSoup

    from indexer.extract.html import drop_navigation

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(list(_INVISIBLE)):
        tag.decompose()
    whole = (soup.body or soup).get_text(" ")
    content = soup.find("main") or soup.body or soup
    drop_navigation(content)
    text = content.get_text(" ")
    for heading in content(list(_HEADINGS)):
        heading.decompose()
    return Reference(whole, text, empty=not _WORD.search(content.get_text(" ")))


def covered(reference: Counter[str], extracted: Counter[str]) -> float:
    """Share of the reference's words (with repeats) that the extracted text has too."""
    total = sum(reference.values())
    if not total:
        return 1.0
    return sum(min(count, extracted[word]) for word, count in reference.items()) / total


@dataclass
class Coverage:
    """Coverage of each page read; an empty page (:attr:`Reference.empty`) has none to
    measure: it is listed apart, in no mean or minimum."""

    page: list[float] = field(default_factory=list)
    content: list[float] = field(default_factory=list)
    worst: tuple[float, str] = (2.0, "")
    empty: list[str] = field(default_factory=list)

    def add(self, reference_html: str, extracted: str, url: str) -> None:
        reference = reference_texts(reference_html)
        if reference.empty:
            self.empty.append(url)
            return
        text = words(extracted)
        self.page.append(covered(words(reference.whole), text))
        share = covered(words(reference.content), text)
        self.content.append(share)
        self.worst = min(self.worst, (share, url))

    def summary(self) -> dict[str, Any]:
        if not self.content:
            return {"pages": 0, "empty_pages": self.empty}
        return {
            "pages": len(self.content),
            "empty_pages": self.empty,
            "content_mean": round(statistics.fmean(self.content), 4),
            "content_min": round(min(self.content), 4),
            "content_pages_at_target": sum(share >= TARGET_COVERAGE for share in self.content),
            "page_mean": round(statistics.fmean(self.page), 4),
            "page_min": round(min(self.page), 4),
            "worst_content_page": self.worst[1],
        }


def indexed_text(page: Any) -> str:
    """The text the knowledge base gets from a crawled page: the indexer's extraction of it."""
    from indexer.crawled import page_document

    doc = page_document(page)
    return doc.text if doc is not None else ""


def coverage_of(root: Path, pages: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Coverage of ``(url, extracted text)`` pairs against the files ``root`` serves for them."""
    result = Coverage()
    for url, text in pages:
        path = site_file(root, urlsplit(url).path)
        if path is not None and path.suffix == ".html":
            result.add(path.read_text(errors="replace"), text, url)
    return result.summary()


def distinct_files(root: Path, urls: Sequence[str]) -> int:
    return len({site_file(root, urlsplit(url).path) for url in urls} - {None})


# -- the fleet's run -----------------------------------------------------------------------------


@dataclass
class FleetRun:
    render: str = "auto"
    """The fleet's CRAWLER_RENDER."""
    jobs: list[Any] = field(default_factory=list)
    """``crawl.finished`` of every job, the first one the full crawl that is compared."""
    first_pages: list[tuple[str, str]] = field(default_factory=list)
    peak: list[Memory] = field(default_factory=list)
    warm: list[Memory] = field(default_factory=list)
    """Each worker's memory when idle after the first crawl (browser and caches warmed up)."""
    end: list[Memory] = field(default_factory=list)
    """... and when idle after the last crawl."""
    worker_logs: str | None = None
    """Kept when a crawl ran into its deadline."""


def fetches_of(finished: Any) -> int:
    """Documents a job fetched and rendered: published pages, duplicates and failed pages."""
    skipped = finished.skipped
    return int(len(finished.pages) + skipped.get("duplicate", 0) + skipped.get("error", 0))


async def run_fleet(
    seed: str, workers: int, concurrency: int, args: argparse.Namespace, say: Any
) -> FleetRun:
    from deploy.cli.crawlfleet import Fleet, FleetOptions, JobClient, new_namespace, redis_for

    served = urlsplit(seed).netloc
    options = FleetOptions(
        workers=workers,
        contexts=max(1, math.ceil(concurrency / workers)),
        embeddings=bool(args.question),
        allow_networks=["127.0.0.0/8"],
        env={
            "CRAWLER_DOMAIN_REQUESTS_PER_S": "1000",
            "CRAWLER_DOMAIN_CONCURRENCY": str(max(16, concurrency * 2)),
            "CRAWLER_RENDER": args.render,
            "CRAWLER_FRESHNESS_S": "0",  # every crawl reads the whole site again
            "CRAWLER_SITEMAPS": "true" if args.sitemaps == "on" else "false",
            "CRAWLER_SITEMAP_HOST_MAP": json.dumps(dict.fromkeys(args.sitemap_host, served)),
        },
    )
    namespace = new_namespace("bench")
    with (
        redis_for(args.redis_url, None, private=True) as target,
        Fleet(target.url, namespace, options) as fleet,
    ):
        async with JobClient(target.url, namespace, source="bench") as client:
            try:
                await fleet.wait_ready(client.redis)
                return await crawl_until(client, fleet, seed, concurrency, args, say)
            finally:
                await client.forget_namespace()


async def crawl_until(
    client: Any, fleet: Any, seed: str, concurrency: int, args: argparse.Namespace, say: Any
) -> FleetRun:
    """Crawl the site once, then again with fresh jobs until ``args.fetches`` page fetches."""
    run = FleetRun(render=args.render)
    total = 0
    with MemorySampler(fleet.pids) as sampler:
        while not run.jobs or total < args.fetches:
            request = client.request(
                [seed],
                allowed=[],
                question=args.question,
                max_pages=args.pages,
                max_depth=args.max_depth,
                deadline_s=args.deadline,
                concurrency=concurrency,
            )
            outcome = await client.run(
                request, timeout_s=args.deadline + 60, alive=fleet.check_alive
            )
            finished = outcome.finished
            run.jobs.append(finished)
            total += fetches_of(finished)
            idle = sampler.snapshot()
            if len(run.jobs) == 1:
                run.warm = [idle[pid] for pid in fleet.pids]
                pages = await client.pages(finished.job_id)
                run.first_pages = [(page.url, indexed_text(page)) for page in pages]
            run.end = [idle[pid] for pid in fleet.pids]
            say(
                f"  crawl {len(run.jobs)}: {len(finished.pages)} pages in "
                f"{finished.duration_s:.1f} s ({finished.reason}), {total} fetches so far"
            )
            if finished.reason == "deadline":
                fleet.keep_logs = True  # a page that never completed: keep what the workers said
                run.worker_logs = str(fleet.log_dir)
            if not finished.pages:
                break  # nothing to crawl: more jobs would never add fetches
        run.peak = [sampler.peak[pid] for pid in fleet.pids]
    return run


# -- the baseline's run --------------------------------------------------------------------------


def baseline_kind(choice: str) -> str | None:
    if choice != "auto":
        return None if choice == "none" else choice
    import importlib.util

    return "crawl4ai" if importlib.util.find_spec("crawl4ai") is not None else "playwright"


def run_baseline(
    kind: str, seed: str, concurrency: int, args: argparse.Namespace
) -> tuple[dict[str, Any], Memory]:
    """Run :mod:`deploy.bench.crawl_baseline` in its own process; its output, peak tree memory."""
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as folder:
        out = Path(folder) / "result.json"
        env = {
            **os.environ,
            # crawl4ai keeps a database and caches in ~/.crawl4ai; its LLM client would fetch a
            # price list from the network when imported.
            "CRAWL4_AI_BASE_DIRECTORY": folder,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        command = [
            sys.executable,
            "-m",
            "deploy.bench.crawl_baseline",
            kind,
            "--url",
            seed,
            "--concurrency",
            str(concurrency),
            "--max-pages",
            str(args.pages),
            "--max-depth",
            str(args.max_depth),
            "--out",
            str(out),
        ]
        log_path = Path(folder) / "baseline.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(  # nosec B603 # our own services, argv list, no shell
                command,
                cwd=Path(__file__).resolve().parents[1],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        with MemorySampler([process.pid]) as sampler:
            try:
                code = process.wait(timeout=BASELINE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
                code = -9
        if code != 0 or not out.exists():
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the {kind} baseline failed (exit {code}):\n{tail}")
        result: dict[str, Any] = json.loads(out.read_text())
        return result, sampler.peak[process.pid]


# -- the report ----------------------------------------------------------------------------------


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 3) if seconds > 0 else 0.0


def _mb(size: int) -> float:
    return round(size / MB, 1)


def _change(before: int, after: int) -> float:
    return (after - before) / before if before else 0.0


def target_figures(first: Any, target: str) -> dict[str, Any]:
    """After how many pages of the first crawl the page at ``target`` was read (None: never)."""
    paths = [urlsplit(page.url).path for page in first.pages]
    wanted = target.rstrip("/") or "/"
    at = next((i + 1 for i, path in enumerate(paths) if (path.rstrip("/") or "/") == wanted), None)
    return {"path": target, "read_as_page": at, "pages_read": len(paths)}


def fleet_figures(root: Path, run: FleetRun, target: str | None = None) -> dict[str, Any]:
    first = run.jobs[0]
    times = [page.ms for page in first.pages]
    distinct = distinct_files(root, [page.url for page in first.pages])
    figures: dict[str, Any] = {
        "pages": distinct,
        "fetches": fetches_of(first),
        "render": run.render,
        "rendered": sum(page.rendered for page in first.pages),
        "duration_s": first.duration_s,
        "pages_per_s": _rate(distinct, first.duration_s),
        "fetches_per_s": _rate(fetches_of(first), first.duration_s),
        "p50_ms": percentile(times, 50) if times else None,
        "p95_ms": percentile(times, 95) if times else None,
        "skipped": first.skipped,
        "reason": first.reason,
        "peak_rss_mb_per_worker": [_mb(memory.rss) for memory in run.peak],
        "peak_pss_mb_per_worker": [_mb(memory.pss) for memory in run.peak],
        "jobs": len(run.jobs),
        "jobs_pages_per_s": [job.pages_per_s for job in run.jobs],
        "jobs_reasons": [job.reason for job in run.jobs],
        "worker_logs": run.worker_logs,
        "total_fetches": sum(fetches_of(job) for job in run.jobs),
    }
    if target is not None:
        figures["target"] = target_figures(first, target)
    if len(run.jobs) > 1:
        rss = [_change(warm.rss, end.rss) for warm, end in zip(run.warm, run.end, strict=True)]
        pss = [_change(warm.pss, end.pss) for warm, end in zip(run.warm, run.end, strict=True)]
        figures["rss_drift"] = {
            "after_warmup_rss_mb": [_mb(memory.rss) for memory in run.warm],
            "at_end_rss_mb": [_mb(memory.rss) for memory in run.end],
            "rss_drift_pct": [round(d * 100, 1) for d in rss],
            "after_warmup_pss_mb": [_mb(memory.pss) for memory in run.warm],
            "at_end_pss_mb": [_mb(memory.pss) for memory in run.end],
            "pss_drift_pct": [round(d * 100, 1) for d in pss],
            "max_abs_rss_drift_pct": round(max(abs(d) for d in rss) * 100, 1),
        }
    return figures


def baseline_figures(root: Path, result: dict[str, Any], peak: Memory) -> dict[str, Any]:
    fetched = [page for page in result["pages"] if page.get("ok")]
    times = [page["ms"] for page in fetched]
    distinct = distinct_files(root, [page["url"] for page in fetched])
    duration = float(result["duration_s"])
    return {
        "kind": result["kind"],
        "pages": distinct,
        "fetches": len(fetched),
        "failed": len(result["pages"]) - len(fetched),
        "duration_s": round(duration, 3),
        "pages_per_s": _rate(distinct, duration),
        "fetches_per_s": _rate(len(fetched), duration),
        "p50_ms": percentile(times, 50) if times else None,
        "p95_ms": percentile(times, 95) if times else None,
        "peak_rss_mb": _mb(peak.rss),
        "peak_pss_mb": _mb(peak.pss),
    }


def _ratio(ours: float, theirs: float) -> float | None:
    return round(ours / theirs, 2) if theirs else None


def run_crawl_bench(args: argparse.Namespace) -> int:
    from deploy.cli.crawlfleet import reporting_errors

    return reporting_errors("deskpilot bench crawl", lambda: _bench(args))


def _bench(args: argparse.Namespace) -> int:
    from deploy.cli.crawlfleet import CrawlSetupError, check_browser

    root: Path = args.site
    if not root.is_dir():
        raise CrawlSetupError(f"{root} is not a folder")
    workers = args.workers
    concurrency = args.concurrency or 2 * workers
    if workers < 1 or concurrency < 1 or args.pages < 1:
        raise CrawlSetupError("--workers, --concurrency and --pages must be 1 or more")

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    load_before = os.getloadavg()[0]
    failed = ""
    report: dict[str, Any] = {
        "site": str(root),
        "seed": args.seed,
        "question": args.question,
        "sitemaps": args.sitemaps,
        "workers": workers,
        "concurrency": concurrency,
    }
    check_browser()
    with StaticSite(root) as site:
        seed = site.url(args.seed)
        say(f"crawling {seed} with {workers} workers, {concurrency} pages at once ...")
        fleet = asyncio.run(run_fleet(seed, workers, concurrency, args, say))
        report["deskpilot"] = fleet_figures(root, fleet, args.target)
        coverage = {"deskpilot": coverage_of(root, fleet.first_pages)}
        kind = baseline_kind(args.baseline)
        if kind is not None:
            say(f"crawling it with the {kind} baseline ...")
            try:
                result, peak = run_baseline(kind, seed, concurrency, args)
            except RuntimeError as exc:
                failed = str(exc)
            else:
                report["baseline"] = baseline = baseline_figures(root, result, peak)
                report["ratio"] = {
                    name: _ratio(report["deskpilot"][name], baseline[name])
                    for name in ("pages_per_s", "fetches_per_s")
                }
                coverage["baseline"] = coverage_of(
                    root, [(p["url"], p["text"]) for p in result["pages"] if p.get("ok")]
                )
    report["coverage"] = coverage
    report["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    report["targets"] = _targets(report)
    if failed:
        report["baseline_error"] = failed
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    if failed:
        print(f"deskpilot bench crawl: {failed}", file=sys.stderr)
        return 1
    return 0


def _targets(report: dict[str, Any]) -> dict[str, bool | None]:
    ratio = report.get("ratio", {}).get("pages_per_s")
    drift = report["deskpilot"].get("rss_drift")
    coverage = report["coverage"]["deskpilot"].get("content_min")
    return {
        "throughput_ratio_at_least_1_5": None if ratio is None else ratio >= TARGET_RATIO,
        "rss_flat_within_20_pct": None
        if drift is None
        else drift["max_abs_rss_drift_pct"] <= TARGET_DRIFT * 100,
        "coverage_min_at_least_95_pct": None if coverage is None else coverage >= TARGET_COVERAGE,
    }


def _lines(report: dict[str, Any]) -> Iterator[str]:
    ours = report["deskpilot"]
    yield (
        f"site {report['site']} from {report['seed']}: {report['workers']} workers, "
        f"{report['concurrency']} pages at once"
    )
    yield (
        f"deskpilot fleet (render {ours['render']}: {ours['rendered']} of its pages rendered in "
        f"Chromium): {ours['pages']} pages ({ours['fetches']} fetches) in "
        f"{ours['duration_s']:.2f} s = {ours['pages_per_s']:.2f} pages/s; page time p50 "
        f"{ours['p50_ms']} ms, p95 {ours['p95_ms']} ms; peak memory per worker with its "
        "Chromium (RSS / PSS) "
        + ", ".join(
            f"{rss:.0f} / {pss:.0f} MB"
            for rss, pss in zip(
                ours["peak_rss_mb_per_worker"], ours["peak_pss_mb_per_worker"], strict=True
            )
        )
    )
    target = ours.get("target")
    if target:
        where = f"read as page {target['read_as_page']}" if target["read_as_page"] else "not read"
        yield (
            f"target {target['path']} for {report['question']!r} (sitemaps {report['sitemaps']}): "
            f"{where} of {target['pages_read']}"
        )
    drift = ours.get("rss_drift")
    if drift:
        yield (
            f"memory over {ours['total_fetches']} fetches ({ours['jobs']} crawls), RSS after "
            f"warm-up {drift['after_warmup_rss_mb']} MB, at the end {drift['at_end_rss_mb']} MB: "
            f"drift {drift['rss_drift_pct']} % (PSS {drift['pss_drift_pct']} %)"
        )
    baseline = report.get("baseline")
    if baseline:
        yield (
            f"{baseline['kind']}: {baseline['pages']} pages ({baseline['fetches']} fetches) in "
            f"{baseline['duration_s']:.2f} s = {baseline['pages_per_s']:.2f} pages/s; page time "
            f"p50 {baseline['p50_ms']} ms, p95 {baseline['p95_ms']} ms; peak memory (RSS / PSS) "
            f"{baseline['peak_rss_mb']:.0f} / {baseline['peak_pss_mb']:.0f} MB"
        )
        ratio = report["ratio"]
        yield (
            f"ratio deskpilot / baseline: {ratio['pages_per_s']} (pages/s), "
            f"{ratio['fetches_per_s']} (fetches/s)"
        )
    for name, figures in report["coverage"].items():
        empty = figures.get("empty_pages", [])
        if figures.get("pages"):
            yield (
                f"coverage ({name}): content mean {figures['content_mean']:.1%}, min "
                f"{figures['content_min']:.1%} ({figures['content_pages_at_target']} of "
                f"{figures['pages']} pages at {TARGET_COVERAGE:.0%} or more, the worst "
                f"{figures['worst_content_page']}); whole page mean {figures['page_mean']:.1%}, "
                f"min {figures['page_min']:.1%}"
            )
        if empty:
            yield f"coverage ({name}): n/a for {len(empty)} empty pages: {', '.join(empty)}"
    yield f"load average (1 min) before / after: {report['load_avg_1m']}"
    yield f"targets: {report['targets']}"


def _print(report: dict[str, Any]) -> None:
    for line in _lines(report):
        print(line)
