"""The SSRF guard: non-public addresses are refused unless allowlisted."""

from __future__ import annotations

import ipaddress

import pytest

from crawler.config import CrawlerSettings
from crawler.guard import AddressGuard, AddressRefused

REFUSED = [
    "http://127.0.0.1/",
    "http://localhost:6379/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://0.0.0.0/",
    "http://[::1]/",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",  # AWS metadata over IPv6 (unique local)
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped loopback
    "http://224.0.0.1/",
]


@pytest.mark.parametrize("url", REFUSED)
async def test_non_public_addresses_are_refused(url: str) -> None:
    with pytest.raises(AddressRefused):
        await AddressGuard([]).check(url)


async def test_public_addresses_pass() -> None:
    await AddressGuard([]).check("http://93.184.216.34/")
    await AddressGuard([]).check("http://[2606:4700::1111]/")


async def test_allowlisted_networks_pass_and_only_those() -> None:
    guard = AddressGuard([ipaddress.ip_network("127.0.0.0/8")])
    await guard.check("http://127.0.0.1:8000/")
    if await _localhost_is_v4_only():
        await guard.check("http://localhost:8000/")
    with pytest.raises(AddressRefused):
        await guard.check("http://169.254.169.254/")
    assert guard.cached_verdict("http://127.0.0.1/other") is True
    assert guard.cached_verdict("http://169.254.169.254/x") is False


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(AddressRefused, match="does not resolve"):
        await AddressGuard([]).check("http://no-such-host.invalid/")


def test_allowlist_is_read_from_a_comma_separated_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRAWLER_ALLOW_NETWORKS", "127.0.0.0/8, ::1/128")
    monkeypatch.setenv("CHROMIUM_PATH", "/opt/chromium/chrome")
    settings = CrawlerSettings()
    assert [str(n) for n in settings.allow_networks] == ["127.0.0.0/8", "::1/128"]
    assert str(settings.chromium_path) == "/opt/chromium/chrome"


async def _localhost_is_v4_only() -> bool:
    import asyncio
    import socket

    infos = await asyncio.get_running_loop().getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)
    return all(info[0] == socket.AF_INET for info in infos)
