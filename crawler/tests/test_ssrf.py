"""SSRF through a rendered page, with the real Chromium against sites on loopback.

An allowed page is crawled (``render="always"``); its scripts and workers try to reach an
"internal" server: a second loopback host (``127.0.0.2``, outside ``CRAWLER_ALLOW_NETWORKS``, so
the SSRF guard refuses it) or another port of the site's own host (allowed by the guard, outside
the job's scope). The internal server records every request, so a request that got through is
seen there, whatever the page makes of the answer. The site's own server records that the page
did try (``/hop``, the worker script).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections import Counter
from typing import Any

import pytest

from crawler.extract import html_text
from crawler.tests.conftest import CrawlClient, RunCrawler, needs_chromium
from crawler.tests.siteserver import (
    INTERNAL_BODY,
    LOOPBACK_ONE,
    Reply,
    SiteServer,
    internal_server,
    twin_servers,
)

pytestmark = needs_chromium


# The body stays empty until the worker reports, so the crawler reads the page only then.
PAGE_WITH_WORKER = """<!doctype html><html><head><title>Worker page</title></head><body>
<script>
const worker = new Worker('/worker.js');
worker.onmessage = (event) => {
  const line = document.createElement('p');
  line.textContent = 'The worker says: ' + event.data;
  document.body.append(line);
};
</script></body></html>"""

WORKER_FETCHING_HOP = """
fetch('/hop')
  .then((response) => response.text())
  .then((text) => postMessage('read ' + text), () => postMessage('the fetch failed'));
"""


def page_text(pages: dict[str, Any], url: str) -> str:
    assert url in pages, list(pages)
    return html_text(pages[url].html)


@pytest.mark.parametrize(
    "internal_host",
    [
        pytest.param("127.0.0.2", id="another-loopback-host-refused-by-the-guard"),
        pytest.param("127.0.0.1", id="another-port-out-of-scope"),
    ],
)
async def test_every_redirect_hop_of_a_page_request_is_checked(
    client: CrawlClient, run_crawler: RunCrawler, internal_host: str
) -> None:
    """A worker of the page fetches ``/hop`` on the page's own site, which redirects to the
    internal server. Chromium used to follow the redirect itself (only the first hop was
    checked); now the crawler follows it and refuses the second hop."""
    with SiteServer() as site, internal_server(internal_host) as internal:
        site.page("/", PAGE_WITH_WORKER)
        site.route(
            "/worker.js", Reply(body=WORKER_FETCHING_HOP.encode(), content_type="text/javascript")
        )
        site.route("/hop", Reply(302, headers={"Location": internal.url("/secret")}))
        if internal_host == "127.0.0.2":
            # In scope, so only the SSRF guard stands between the page and the internal host.
            allowed = [f"127.0.0.1:{site.port}", "127.0.0.2"]
            networks = [LOOPBACK_ONE]
        else:
            # The guard allows all of loopback: only the job's scope (this port) refuses.
            allowed = [f"127.0.0.1:{site.port}"]
            networks = [ipaddress.ip_network("127.0.0.0/8")]
        async with run_crawler(render="always", allow_networks=networks):
            request = await client.start([site.url("/")], allowed=allowed)
            finished = await client.finished(request)
            pages = await client.pages(request)
    assert [page.title for page in finished.pages] == ["Worker page"]
    assert site.count("/hop") == 1  # the page did ask
    assert internal.hits == []
    text = page_text(pages, site.url("/"))
    assert "The worker says: the fetch failed" in text
    assert INTERNAL_BODY.decode() not in text


async def test_websockets_of_a_page_and_its_workers_never_connect(
    client: CrawlClient, run_crawler: RunCrawler
) -> None:
    with SiteServer() as site, internal_server("127.0.0.2") as internal:
        worker = (
            f"const socket = new WebSocket('ws://127.0.0.2:{internal.port}/ws');"
            "socket.onopen = () => postMessage('open');"
            "socket.onclose = () => postMessage('closed');"
        )
        page = """<!doctype html><html><head><title>Sockets</title></head><body><script>
const seen = [];
function report(what) {
  seen.push(what);
  if (seen.length < 2) return;  // the body stays empty until both sockets are settled
  for (const line of seen) {
    const p = document.createElement('p'); p.textContent = line; document.body.append(p);
  }
}
const own = new WebSocket('ws://' + location.host + '/ws-own');
own.onopen = () => report('own socket open');
own.onclose = () => report('own socket closed');
const worker = new Worker('/socket-worker.js');
worker.onmessage = (event) => report('worker socket ' + event.data);
</script></body></html>"""
        site.page("/", page)
        site.route("/socket-worker.js", Reply(body=worker.encode(), content_type="text/javascript"))
        async with run_crawler(render="always", allow_networks=[LOOPBACK_ONE]):
            request = await client.start([site.url("/")])
            finished = await client.finished(request)
            pages = await client.pages(request)
    assert [page.title for page in finished.pages] == ["Sockets"]
    assert site.count("/socket-worker.js") == 1
    assert internal.hits == []
    assert site.count("/ws-own") == 0
    text = page_text(pages, site.url("/"))
    assert "own socket closed" in text
    assert "worker socket closed" in text


class RebindingDNS:
    """The event loop's resolver with a name of the test's own: its first answer is the allowed
    site, every later answer the internal server (DNS rebinding). Other names resolve as usual."""

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str, first: str, then: str) -> None:
        self.name, self.first, self.then = name, first, then
        self.asked: Counter[str] = Counter()
        self._system = loop.getaddrinfo

    async def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.rstrip(".").lower() != self.name:
            return await self._system(host, port, *args, **kwargs)
        self.asked[name] += 1
        address = self.first if sum(self.asked.values()) == 1 else self.then
        number = int(port) if port else 0
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, number))]


@pytest.fixture
async def rebinding_dns(monkeypatch: pytest.MonkeyPatch) -> RebindingDNS:
    loop = asyncio.get_running_loop()
    dns = RebindingDNS(loop, "docs.rebind.test", first="127.0.0.1", then="127.0.0.2")
    monkeypatch.setattr(loop, "getaddrinfo", dns.getaddrinfo)
    return dns


async def test_every_connection_goes_to_the_address_the_guard_checked(
    client: CrawlClient, run_crawler: RunCrawler, rebinding_dns: RebindingDNS
) -> None:
    """DNS rebinding: the guard saw an allowed address; the document, robots.txt and the page's
    script all come from that address, although the name now points at the internal server.
    Chromium itself never resolves the name (it could not: only this test's resolver knows it)."""
    page = (
        "<!doctype html><html><head><title>Rebinding</title>"
        '<script src="/app.js" defer></script></head><body></body></html>'
    )
    script = b"const p = document.createElement('p'); p.textContent = 'The allowed script ran.';"
    script += b"document.body.append(p);"
    with twin_servers() as (site, internal):
        site.page("/", page)
        site.route("/app.js", Reply(body=script, content_type="text/javascript"))
        internal.page("/", "<html><head><title>Internal</title></head><body>INTERNAL</body></html>")
        internal.route("/app.js", Reply(body=b"document.body.append('INTERNAL');"))
        seed = f"http://docs.rebind.test:{site.port}/"
        async with run_crawler(render="always", allow_networks=[LOOPBACK_ONE]):
            request = await client.start([seed])
            finished = await client.finished(request)
            pages = await client.pages(request)
    assert internal.hits == []
    assert [page.title for page in finished.pages] == ["Rebinding"]
    assert "The allowed script ran." in page_text(pages, seed)
    assert {hit.host for hit in site.hits} == {f"docs.rebind.test:{site.port}"}
    assert {"/", "/app.js"} <= set(site.paths())
    assert sum(rebinding_dns.asked.values()) == 1
