"""The crawler's HTTP client: every connection goes through the SSRF guard, to the address the
guard checked, with the URL's own host name in ``Host``; redirects are never followed by it."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator

import pytest

from crawler.fetch import Fetcher
from crawler.guard import AddressGuard, AddressRefused, IPAddress
from crawler.tests.siteserver import LOOPBACK_ONE, Reply, SiteServer, twin_servers


class Answers:
    """A resolver for ``docs.rebind.test``: first the allowed site, then the internal server."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, host: str, _port: int) -> list[IPAddress]:
        assert host == "docs.rebind.test"
        self.asked += 1
        return [ipaddress.ip_address("127.0.0.1" if self.asked == 1 else "127.0.0.2")]


@pytest.fixture
async def answers() -> Answers:
    return Answers()


@pytest.fixture
async def fetcher(answers: Answers) -> AsyncIterator[Fetcher]:
    client = Fetcher("TestCrawler/1.0", 10.0, AddressGuard([LOOPBACK_ONE], answers))
    try:
        yield client
    finally:
        await client.close()


def wants_all(_status: int, _kind: str) -> bool:
    return True


async def test_connections_go_to_the_address_the_guard_checked(
    fetcher: Fetcher, answers: Answers
) -> None:
    with twin_servers() as (site, internal):
        site.page("/", "<p>allowed</p>")
        site.route("/robots.txt", Reply(body=b"User-agent: *\n", content_type="text/plain"))
        internal.page("/", "<p>internal</p>")
        url = f"http://docs.rebind.test:{site.port}"
        # The server closes the first connection, so the second request connects again; by then
        # the name points at the internal server for whoever asks DNS.
        first = await fetcher.request(
            "GET", f"{url}/robots.txt", max_bytes=10_000, headers={"Connection": "close"}
        )
        second = await fetcher.get(f"{url}/", max_bytes=10_000, want_body=wants_all)
    assert (first.status, second.body) == (200, b"<p>allowed</p>")
    assert internal.hits == []
    assert [hit.host for hit in site.hits] == [f"docs.rebind.test:{site.port}"] * 2
    assert answers.asked == 1


async def test_a_refused_address_is_refused_at_connect_time(fetcher: Fetcher) -> None:
    """Nobody called the guard first: the client's own connection asks it."""
    with SiteServer(host="127.0.0.2") as internal:
        internal.page("/", "<p>internal</p>")
        with pytest.raises(AddressRefused, match=r"127\.0\.0\.2"):
            await fetcher.get(internal.url("/"), max_bytes=10_000, want_body=wants_all)
        with pytest.raises(AddressRefused, match="loopback"):
            await fetcher.get(
                f"http://0x7f.2:{internal.port}/", max_bytes=10_000, want_body=wants_all
            )
    assert internal.hits == []


async def test_a_redirect_is_returned_not_followed(fetcher: Fetcher) -> None:
    with SiteServer() as site, SiteServer(host="127.0.0.2") as internal:
        site.route("/away", Reply(302, headers={"Location": internal.url("/")}))
        response = await fetcher.get(site.url("/away"), max_bytes=10_000, want_body=wants_all)
    assert response.status == 302
    assert response.headers["location"] == internal.url("/")
    assert internal.hits == []
