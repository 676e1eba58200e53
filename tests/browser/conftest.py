"""Fixtures of the browser tests: the whole stack, a help site and a host page on loopback, and
Playwright driving the system Chromium.

* ``site``: one loopback server for everything that is not the gateway: the company's help site
  the crawler reads (tests/sites, with script and markup planted in one page), and the intranet
  host page that embeds the launcher (``/intranet/``, cross-origin to the gateway).
* ``stack``: every service as ``deskpilot up`` starts it, crawler included, with this module's
  admin token, user-token secret, and the host page's origin as an allowed frame ancestor.
* ``chat``: a fresh browser context (new localStorage, so a new anonymous user) on the chat page,
  which fails the test on any script error or CSP violation in the page.
* ``shots``: where screenshots of the key screens go: ``DESKPILOT_SCREENSHOTS`` if set, else a
  folder under pytest's temporary directory (printed at the end of the session).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, sync_playwright

from crawler.tests.siteserver import Reply, SiteServer
from deploy.runner import Stack
from tests.support.stack import HELP_SITE, help_site_env, running_stack

# What headless Chromium needs on these machines (as the crawler launches it).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic"]
ADMIN_TOKEN = f"admin-{uuid4().hex}"
JWT_SECRET = f"browser-tests-{uuid4().hex}{uuid4().hex}"
STATIC = Path(__file__).resolve().parents[2] / "gateway" / "static"

# Injection planted in what the assistant reads: literal markup in the text (which survives
# extraction and ends up quoted in answers) and real elements (which extraction drops).
INJECTION = '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>'

# Records, in every document, each stage a pending answer shows and every upload percentage,
# so tests can assert on progress that flashes by faster than a poll would see.
WATCH_PROGRESS = """
(() => {
  window.__stages = [];
  window.__uploadPercents = [];
  const watch = () => new MutationObserver((records) => {
    for (const r of records) {
      const el = r.target;
      if (r.attributeName === 'data-stage' && el.dataset.stage)
        window.__stages.push(el.dataset.stage);
      if (r.attributeName === 'aria-valuenow' && el.classList.contains('upload-bar'))
        window.__uploadPercents.push(Number(el.getAttribute('aria-valuenow')));
    }
  }).observe(document.documentElement, {subtree: true, attributes: true,
                                       attributeFilter: ['data-stage', 'aria-valuenow']});
  if (document.documentElement) watch(); else document.addEventListener('DOMContentLoaded', watch);
})();
"""

CRAWLED_PAGE = "/help/tablets/wacom-calibrate.html"
"""The help-site page that answers the crawl test's question; served with injection planted."""


def planted_help_page() -> str:
    """The Wacom page of the test help site with markup in a step's text (escaped, so it is
    text the assistant quotes) and real script and image elements (which extraction drops)."""
    html = (HELP_SITE / CRAWLED_PAGE.lstrip("/")).read_text()
    step = "<li>Choose OK to save the calibration.</li>"
    assert step in html
    planted = (
        "<li>Choose OK to save the calibration; a corrupt profile shows "
        '&lt;img src=x onerror="window.__pwned=3"&gt;&lt;script&gt;window.__pwned=4&lt;/script&gt;'
        " instead.</li>"
        '<img src="/missing.png" onerror="window.__pwnedCrawler=1">'
        "<script>window.__pwnedCrawler=2</script>"
    )
    return html.replace(step, planted)


def intranet_page(gateway: str, token: str | None = None) -> str:
    """embed-demo.html as a host site would copy it: the script from the gateway, a user token
    when given, and the host's own aggressive styles the launcher must not inherit."""
    html = (STATIC / "embed-demo.html").read_text()
    attrs = f'src="{gateway}/static/embed.js" data-deskpilot'
    if token:
        attrs += f' data-token="{token}"'
    html = html.replace('src="/static/embed.js" data-deskpilot', attrs)
    hostile = (
        "<style>* { font-family: serif !important; box-sizing: content-box; }"
        " button { background: #f00 !important; padding: 40px !important; }"
        " iframe { border: 8px solid #f0f !important; }</style>"
    )
    return html.replace("</head>", hostile + "</head>")


@dataclass
class Site:
    server: SiteServer
    gateway: str = ""
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return self.server.url("/").rstrip("/")


@pytest.fixture(scope="package")
def site() -> Iterator[Site]:
    with SiteServer(HELP_SITE) as server:
        holder = Site(server)
        server.page(CRAWLED_PAGE, planted_help_page())

        def intranet(_: int, token: str | None = None) -> Reply:
            return Reply(body=intranet_page(holder.gateway, token).encode())

        server.route("/intranet/", intranet)
        server.route(
            "/intranet/signed-in.html",
            lambda n: intranet(n, holder.tokens.get("signed-in")),
        )
        yield holder


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory, site: Site) -> Iterator[Stack]:
    env = {
        **help_site_env(site.server.url("/help/index.html")),
        "DESKPILOT_ADMIN_TOKEN": ADMIN_TOKEN,
        "GATEWAY_JWT_SECRET": JWT_SECRET,
        "GATEWAY_FRAME_ANCESTORS": f"'self',{site.origin}",
        "ORCHESTRATOR_CRAWL_MAX_PAGES": "4",
        "ORCHESTRATOR_CRAWL_DEADLINE_S": "30",
        # Local tickets get links a browser can open, as Jira's would be.
        "TICKETING_LOCAL_URL_BASE": "https://servicedesk.northwind.example/browse/",
    }
    with running_stack(tmp_path_factory.mktemp("browser"), env, crawler="on") as running:
        site.gateway = running.url
        yield running


@pytest.fixture(scope="package")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("DESKPILOT_SCREENSHOTS")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="package")
def playwright(chromium: Path) -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright: Playwright, chromium: Path) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


@dataclass
class PageProblems:
    """Script errors and CSP violations a page reported; a test fails on any."""

    errors: list[str] = field(default_factory=list)
    socket_failures_expected: bool = False
    """Set by a test that takes the gateway down: the browser logs the refused reconnects."""
    refusals_expected: set[int] = field(default_factory=set)
    """HTTP statuses a test provokes on purpose (the browser logs each failed request)."""

    def watch(self, page: Page) -> None:
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        page.on("console", self._console)

    def _console(self, message: ConsoleMessage) -> None:
        # Chromium reports CSP violations and failed loads as console errors.
        if message.type != "error" or message.location.get("url", "").endswith("/favicon.ico"):
            return
        refused = re.search(r"status of (\d{3})", message.text)
        if refused and int(refused.group(1)) in self.refusals_expected:
            return
        if self.socket_failures_expected and (
            "WebSocket connection" in message.text or "ERR_CONNECTION_REFUSED" in message.text
        ):
            return
        self.errors.append(f"console: {message.text}")


def new_page(browser: Browser, problems: PageProblems, **options: Any) -> Page:
    context = browser.new_context(**{"viewport": {"width": 1200, "height": 860}, **options})
    context.add_init_script(WATCH_PROGRESS)
    page = context.new_page()
    page.set_default_timeout(90_000)
    problems.watch(page)
    return page


@pytest.fixture
def problems() -> PageProblems:
    return PageProblems()


@pytest.fixture
def chat(browser: Browser, stack: Stack, problems: PageProblems) -> Iterator[Page]:
    page = new_page(browser, problems)
    page.goto(f"{stack.url}/")
    try:
        yield page
    finally:
        page.context.close()
    assert not problems.errors, problems.errors


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get("DESKPILOT_SCREENSHOTS")
    if folder:
        print(f"\nscreenshots in {folder}")
