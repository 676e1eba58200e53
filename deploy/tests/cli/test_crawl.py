"""``deskpilot crawl`` and ``deskpilot bench crawl`` as a user runs them: subprocesses that start
their own crawler workers against a loopback site, on the session's valkey. Refusals that come
before any worker starts run the command in the test's process (``run_cli``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from crawler.tests.siteserver import Reply, SiteServer
from deploy.tests.cli.inprocess import RunCli
from tests.support import REPO_ROOT, deskpilot, wait_until_sync
from tests.support.chromium import needs_chromium

ROOT = REPO_ROOT


def html(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"


def links(*paths: str) -> str:
    return "<ul>" + "".join(f'<li><a href="{p}">Go to {p}</a></li>' for p in paths) + "</ul>"


@needs_chromium
def test_crawl_prints_the_pages_depths_and_skips_the_site_implies(redis_url: str) -> None:
    with SiteServer() as other, SiteServer() as site:
        site.route(
            "/robots.txt",
            Reply(body=b"User-agent: *\nDisallow: /private\n", content_type="text/plain"),
        )
        site.page("/", html("Home", links("/guide", "/private/notes", "/away", "/missing")))
        site.page("/guide", html("Guide", "<p>Reset the VPN token.</p>" + links("/guide/more")))
        site.page("/guide/more", html("More", "<p>Two levels down.</p>" + links("/deeper")))
        site.page("/deeper", html("Deeper", "<p>Past the depth limit.</p>"))
        site.page("/private/notes", html("Private", "<p>Robots say no.</p>"))
        site.route("/away", Reply(302, headers={"Location": other.url("/landing")}))
        other.page("/landing", html("Elsewhere", "<p>Not an allowed domain.</p>"))

        result = deskpilot(
            "crawl",
            site.url("/"),
            "--allow",
            f"127.0.0.1:{site.port}",
            "--max-pages",
            "10",
            "--max-depth",
            "2",
            "--workers",
            "2",
            "--allow-network",
            "127.0.0.0/8",
            "--redis-url",
            redis_url,
            "--json",
        )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) >= {"pages", "pages_per_s", "duration_s", "skipped"}
    depths = {page["url"].removeprefix(site.url("")): page["depth"] for page in report["pages"]}
    assert depths == {"/": 0, "/guide": 1, "/guide/more": 2}
    page = next(p for p in report["pages"] if p["url"] == site.url("/guide"))
    assert page["title"] == "Guide"
    assert page["status"] == 200
    assert page["bytes"] > 0
    assert page["ms"] >= 0
    assert report["skipped"]["robots"] == 1
    assert report["skipped"]["off_domain"] == 1  # the redirect to the other server
    assert report["skipped"]["error"] == 1  # the 404
    assert report["skipped"]["duplicate"] == 0
    assert report["reason"] == "frontier_empty"
    assert other.count("/landing") == 0
    assert site.count("/deeper") == 0


@needs_chromium
def test_ctrl_c_stops_the_job_and_prints_what_was_read(redis_url: str) -> None:
    with SiteServer(delay_s=0.3) as site:
        site.page("/", html("Home", links(*(f"/p{n}" for n in range(30)))))
        for n in range(30):
            site.page(f"/p{n}", html(f"Page {n}", f"<p>Slow page number {n}.</p>"))
        process = subprocess.Popen(
            [sys.executable, "-m", "deploy.cli", "crawl", site.url("/"), "--max-pages", "30"]
            + ["--workers", "1", "--concurrency", "1", "--allow-network", "127.0.0.0/8"]
            + ["--redis-url", redis_url],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until_sync(
                lambda: site.count("/p1") + site.count("/p0") > 0,
                60,
                message=lambda: "the crawl fetched nothing",
            )
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=60)
        finally:
            process.kill()
    assert process.returncode == 0, stderr
    assert "ended: stopped (stopped with Ctrl-C)" in stdout
    assert site.count("/p29") == 0


@needs_chromium
def test_a_seed_the_ssrf_guard_refuses_is_named_with_what_exempts_it(
    run_cli: RunCli, redis_url: str
) -> None:
    """Issue 14: this answered zero pages, ``"blocked": 1`` and exit 0, with no word of why."""
    with SiteServer() as site:
        site.page("/", html("Home", "<p>A site on this host.</p>"))
        result = run_cli(
            "crawl", site.url("/"), "--allow", "127.0.0.1", "--redis-url", redis_url, "--json"
        )
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert f"{site.url('/')}: 127.0.0.1 (loopback) is not a public address" in result.stderr
    assert "--allow-network 127.0.0.1/32 exempts it" in result.stderr
    assert site.hits == []  # stopped before any worker started


@needs_chromium
def test_urls_refused_during_the_job_are_listed_with_their_addresses(redis_url: str) -> None:
    with SiteServer(host="127.0.0.2") as internal, SiteServer() as site:
        internal.page("/", html("Internal", "<p>Behind the firewall.</p>"))
        site.page("/", html("Home", "<p>A help page.</p>" + links(internal.url("/"))))
        result = deskpilot(
            "crawl",
            site.url("/"),
            "--allow",
            "127.0.0.1",
            "127.0.0.2",
            "--allow-network",
            "127.0.0.1/32",
            "--workers",
            "1",
            "--redis-url",
            redis_url,
            "--json",
        )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [page["title"] for page in report["pages"]] == ["Home"]
    assert report["skipped"]["blocked"] == 1
    assert report["refused"] == [
        {
            "url": internal.url("/"),
            "detail": "127.0.0.2 (loopback) is not a public address",
            "addresses": ["127.0.0.2"],
        }
    ]
    assert "to crawl them anyway pass --allow-network 127.0.0.2/32" in result.stderr
    assert internal.hits == []


def test_an_invalid_url_is_refused_with_exit_code_2(run_cli: RunCli) -> None:
    result = run_cli("crawl", "not-a-url", "--json")
    assert result.returncode == 2
    assert "not a crawlable URL: 'not-a-url'" in result.stderr
    assert result.stdout == ""


def test_unreachable_redis_is_refused_with_exit_code_2(run_cli: RunCli) -> None:
    result = run_cli("crawl", "http://127.0.0.1:9/", "--redis-url", "redis://127.0.0.1:9/0")
    assert result.returncode == 2
    assert "Redis at redis://127.0.0.1:9/0 (from --redis-url) is unreachable" in result.stderr


def test_the_running_fleet_is_required_when_asked_for(run_cli: RunCli, redis_url: str) -> None:
    """No crawler worker writes a heartbeat on this Redis (a database no other test uses)."""
    empty = f"{redis_url.rsplit('/', 1)[0]}/9"
    result = run_cli("crawl", "http://127.0.0.1:9/", "--use-running-fleet", "--redis-url", empty)
    assert result.returncode == 2
    assert "--use-running-fleet: no crawler worker is running on" in result.stderr


@needs_chromium
def test_bench_crawl_reports_every_figure(tmp_path: Path, redis_url: str) -> None:
    """A smoke test on a three-page site: the figures are printed, not judged."""
    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    (site / "index.html").write_text(
        html("Home", "<main><p>Start here.</p></main>" + links("/docs/a"))
    )
    (site / "docs" / "a.html").write_text(
        html("A", "<nav>Menu</nav><main><p>Page a of the docs.</p></main>" + links("b"))
    )
    (site / "docs" / "b.html").write_text(html("B", "<p>Page b, the last one.</p>"))

    result = deskpilot(
        "bench",
        "crawl",
        "--site",
        str(site),
        "--workers",
        "1",
        "--concurrency",
        "1",
        "--pages",
        "5",
        "--fetches",
        "6",
        "--baseline",
        "playwright",
        "--redis-url",
        redis_url,
        "--json",
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    ours = report["deskpilot"]
    assert ours["pages"] == 3
    assert ours["jobs"] == 2  # crawled again until 6 fetches
    assert (ours["render"], ours["rendered"]) == ("auto", 3)  # a few words each: all rendered
    assert {"pages_per_s", "p95_ms", "peak_rss_mb_per_worker", "rss_drift"} <= set(ours)
    assert len(ours["peak_rss_mb_per_worker"]) == 1
    assert report["baseline"]["kind"].startswith("plain Playwright")
    assert report["baseline"]["pages"] == 3
    assert {"pages_per_s", "fetches_per_s"} <= set(report["ratio"])
    assert report["coverage"]["deskpilot"]["pages"] == 3
    assert {"content_mean", "content_min", "page_mean"} <= set(report["coverage"]["deskpilot"])
    assert set(report["targets"]) == {
        "throughput_ratio_at_least_1_5",
        "rss_flat_within_20_pct",
        "coverage_min_at_least_95_pct",
    }
