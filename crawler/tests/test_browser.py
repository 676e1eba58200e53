"""The browser pool: recycling after K pages, recovery from a browser crash, no process left,
Chromium's sandbox wherever it can run."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

import crawler.browser
from crawler.browser import BrowserPool, Fulfilment, SubRequest, SubrequestRefused
from crawler.config import CrawlerSettings
from crawler.extract import html_text
from crawler.tests.conftest import SHARED_BROWSER_PIDS, CrawlClient, RunCrawler, needs_chromium
from crawler.tests.siteserver import Reply, SiteServer

pytestmark = needs_chromium


def is_chromium(name: str) -> bool:
    """A Chromium process's name (``chromium``, ``chrome``, ``chrome_crashpad_handler``), not
    another child of the test process such as a Chroma server (``chroma``) of a stack that an
    earlier test of the same worker started."""
    return name.startswith(("chromium", "chrome"))


def browser_processes() -> list[psutil.Process]:
    """Chromium processes descended from this test process through Playwright's driver: the
    shared browser other modules' workers attach to (``SHARED_BROWSER_PIDS``) is left out."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            lineage = {child.pid} | {parent.pid for parent in child.parents()}
            if is_chromium(child.name()) and not lineage & SHARED_BROWSER_PIDS:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def zombies() -> list[psutil.Process]:
    """Chromium processes left as zombies (nobody waited for them)."""
    out = []
    for child in browser_processes():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.NoSuchProcess:
            continue
    return out


def main_browser_process() -> psutil.Process:
    """The browser process itself: the Chromium whose parent is not a Chromium."""
    for process in browser_processes():
        if not is_chromium(process.parent().name()):
            return process
    raise AssertionError("no browser process found")


async def fetch_nothing(request: SubRequest) -> Fulfilment:
    raise SubrequestRefused(request.url)


async def test_the_browser_is_recycled_after_k_pages(crawler_settings: CrawlerSettings) -> None:
    settings = crawler_settings.model_copy(update={"recycle_after_pages": 2, "contexts": 1})
    pool = BrowserPool(settings)
    await pool.start()
    try:
        for n in range(5):
            body = f"<html><body><p>Page {n}</p></body></html>".encode()
            url = f"http://127.0.0.1:9/{n}"
            rendered = await pool.render(url, body, "text/html", fetch_nothing)
            assert f"Page {n}" in rendered.html
        assert pool.launches == 3  # pages 1-2, 3-4, 5
        assert len([p for p in browser_processes() if not is_chromium(p.parent().name())]) == 1
    finally:
        await pool.close()
    assert browser_processes() == []
    assert zombies() == []


async def test_a_browser_crash_is_recovered_and_the_page_retried(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    killed: list[int] = []

    def hang(n: int) -> Reply:
        # The first time the page asks for its script, the browser dies under it.
        if n == 1:
            victim = main_browser_process()
            killed.append(victim.pid)
            os.kill(victim.pid, signal.SIGKILL)
            # Answered at once (empty): a fetch still in flight when the retry's browser asks
            # for the script again is shared with it (crawler/subresources.py), and a slow
            # empty answer (1 s before) reached the retried page on a quiet machine.
            return Reply(delay_s=0.05, content_type="application/javascript")
        return Reply(body=b"document.body.append('script ran');", content_type="text/javascript")

    with SiteServer() as site:
        page = '<html><head><title>Home</title><script src="/app.js" defer></script></head>'
        site.page("/", page + "<body><p>Hello.</p></body></html>")
        site.route("/app.js", hang)
        async with run_crawler(contexts=1, cdp_url=None):  # its own browser, to crash
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            pages = await client.pages(request)
            assert zombies() == []
            assert killed
            assert not psutil.pid_exists(killed[0]) or (
                psutil.Process(killed[0]).status() != psutil.STATUS_ZOMBIE
            )
    assert [p.title for p in finished.pages] == ["Home"]
    assert "script ran" in html_text(pages[site.url("/")].html)
    assert site.count("/") == 2  # the page was fetched again after the crash
    assert browser_processes() == []
    assert zombies() == []


UNPRIVILEGED = 65534  # nobody
"""Who Chromium runs as in the sandbox test when the tests run as root (the image's user is
10001; any user without privileges shows the same)."""


@contextlib.contextmanager
def chromium_as_unprivileged_user(
    chromium: Path, args: list[str]
) -> Iterator[subprocess.Popen[bytes]]:
    """The system Chromium with ``args``, as this user, or as ``nobody`` when this is root
    (Chromium refuses to run sandboxed as root, which is why the pool adds ``--no-sandbox``
    there: the tests run as root on CI machines, the image does not)."""
    profile = tempfile.mkdtemp(prefix="sandbox-test-")
    as_root = os.geteuid() == 0
    if as_root:
        os.chown(profile, UNPRIVILEGED, UNPRIVILEGED)
    command = [str(chromium), "--headless", f"--user-data-dir={profile}", *args]
    process = subprocess.Popen(
        [*command, "data:text/html,<p>sandboxed</p>"],
        env={"HOME": profile, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        user=UNPRIVILEGED if as_root else None,
        group=UNPRIVILEGED if as_root else None,
        extra_groups=[] if as_root else None,
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)


def renderer_seccomp(
    process: subprocess.Popen[bytes], *, settled: Callable[[list[str]], bool], timeout_s: float = 60
) -> list[str]:
    """The ``Seccomp`` mode of each renderer of ``process`` (2: filtered, the sandbox's
    seccomp-bpf; 0: none) once ``settled`` holds for them, or as last read at the deadline.

    A renderer is forked by the zygote and shows ``--type=renderer`` a moment before it starts
    its seccomp filter, so a single early read can see 0 in a sandboxed browser (it did once on a
    loaded CI machine); the caller says what a settled reading is."""
    deadline = time.monotonic() + timeout_s
    modes: list[str] = []
    while time.monotonic() < deadline:
        assert process.poll() is None, f"Chromium exited with {process.returncode}"
        modes = []
        for child in psutil.Process(process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error, OSError):
                if "--type=renderer" in child.cmdline():
                    status = Path(f"/proc/{child.pid}/status").read_text()
                    modes.append(status.split("Seccomp:", 1)[1].split()[0])
        if modes and settled(modes):
            return modes
        time.sleep(0.2)
    assert modes, "no renderer started"
    return modes


def all_filtered(modes: list[str]) -> bool:
    return set(modes) == {"2"}


def unfiltered_for(seconds: float) -> Callable[[list[str]], bool]:
    """Settled when renderers have read unfiltered for ``seconds`` in a row (a sandboxed one
    would have started its filter by then)."""
    since: list[float] = []

    def settled(modes: list[str]) -> bool:
        if set(modes) != {"0"}:
            since.clear()
            return True  # a filtered renderer: report it, the caller's assertion fails
        if not since:
            since.append(time.monotonic())
        return time.monotonic() - since[0] >= seconds

    return settled


def test_chromium_runs_sandboxed_when_the_worker_is_not_root(
    crawler_settings: CrawlerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flags the pool launches Chromium with as an unprivileged user (the image's) start a
    sandboxed browser: its renderers run under seccomp-bpf."""
    monkeypatch.setattr(crawler.browser, "running_as_root", lambda: False)
    args = BrowserPool(crawler_settings).launch_args()
    assert "--no-sandbox" not in args
    assert crawler.browser.RESOLVE_NOTHING in args
    with chromium_as_unprivileged_user(crawler_settings.chromium_path, args) as chromium:
        assert set(renderer_seccomp(chromium, settled=all_filtered)) == {"2"}


def test_without_the_sandbox_renderers_run_unconfined(
    crawler_settings: CrawlerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the check above tells apart: with ``--no-sandbox`` (root, or the sandbox switched
    off for a runtime without user namespaces) the renderers have no seccomp filter."""
    monkeypatch.setattr(crawler.browser, "running_as_root", lambda: False)
    settings = crawler_settings.model_copy(update={"chromium_sandbox": False})
    args = BrowserPool(settings).launch_args()
    assert "--no-sandbox" in args
    with chromium_as_unprivileged_user(crawler_settings.chromium_path, args) as chromium:
        assert set(renderer_seccomp(chromium, settled=unfiltered_for(3.0))) == {"0"}


def test_as_root_chromium_runs_without_its_sandbox_and_says_so(
    crawler_settings: CrawlerSettings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(crawler.browser, "running_as_root", lambda: True)
    with caplog.at_level(logging.WARNING, logger="deskpilot.crawler.browser"):
        args = BrowserPool(crawler_settings).launch_args()
    assert "--no-sandbox" in args
    assert any(
        r.getMessage() == "Chromium runs without its sandbox"
        and r.__dict__["why"] == "running as root"
        for r in caplog.records
    )
