"""The SSRF guard: non-public addresses are refused unless allowlisted."""

from __future__ import annotations

import ipaddress

import pytest

from crawler.config import CrawlerSettings
from crawler.guard import AddressGuard, AddressRefused, IPAddress, canonical_host

REFUSED = [
    "http://127.0.0.1/",
    "http://localhost:6379/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://100.100.100.200/",  # a cloud's metadata service inside the CGNAT range
    "http://0.0.0.0/",
    "http://[::1]/",
    "http://[::]/",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",  # AWS metadata over IPv6 (unique local)
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped loopback
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://255.255.255.255/",
    "http://192.0.2.1/",  # documentation
]

# IPv6 forms carrying a non-public IPv4 address, and IPv4 addresses spelled the legacy ways
# browsers and inet_aton() still accept: each one reached a non-public address before.
EMBEDDED_AND_DISGUISED = [
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[::ffff:10.0.0.1]/",  # IPv4-mapped private
    "http://[::ffff:0:7f00:1]/",  # IPv4-translated loopback
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "http://[64:ff9b::7f00:1]/",  # NAT64 of loopback
    "http://[64:ff9b:1::a00:1]/",  # local-use NAT64
    "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
    "http://[2002:a9fe:a9fe::1]/",  # 6to4 of the metadata address
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",  # Teredo, client 127.0.0.1
    "http://[2a00:1450:4001::5efe:a00:1]/",  # ISATAP interface id carrying 10.0.0.1
    "http://[fec0::1]/",  # site-local
    "http://2130706433/",  # decimal 127.0.0.1
    "http://0177.0.0.1/",  # octal
    "http://0x7f.1/",  # hex, short form
    "http://127.1/",  # short form
    "http://0x7f000001/",
    "http://127.0.0.1./",  # trailing dot
    "http://0/",
    "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/",  # full-width 127.0.0.1
    "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3/",  # circled localhost
    "http://08.1.1.1/",  # not a valid IPv4 address: refused, never looked up as a name
]


@pytest.mark.parametrize("url", REFUSED + EMBEDDED_AND_DISGUISED)
async def test_non_public_addresses_are_refused(url: str) -> None:
    with pytest.raises(AddressRefused):
        await AddressGuard([]).check(url)


@pytest.mark.parametrize(
    ("url", "address", "reason"),
    [
        ("http://[::127.0.0.1]/", "::7f00:1", "127.0.0.1, loopback"),
        ("http://[64:ff9b::a9fe:a9fe]/", "64:ff9b::a9fe:a9fe", "169.254.169.254 (NAT64)"),
        ("http://[2002:7f00:1::]/", "2002:7f00:1::", "127.0.0.1 (6to4), loopback"),
        ("http://0x7f.1/", "127.0.0.1", "loopback"),
        ("http://169.254.169.254/", "169.254.169.254", "cloud metadata"),
    ],
)
async def test_a_refusal_names_the_address_and_why(url: str, address: str, reason: str) -> None:
    with pytest.raises(AddressRefused) as refused:
        await AddressGuard([]).check(url)
    assert [str(a) for a, _ in refused.value.refused] == [address]
    assert reason in refused.value.refused[0][1]
    assert address in str(refused.value)


@pytest.mark.parametrize(
    ("host", "canonical"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("\uff11\uff12\uff17.\uff10.\uff10.\uff11", "127.0.0.1"),
        ("\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3", "localhost"),
        ("[::FFFF:7F00:1]", "::ffff:7f00:1"),
        ("B\u00fccher.Example", "xn--bcher-kva.example"),
        ("my_host.example", "my_host.example"),
    ],
)
def test_hosts_are_read_the_way_browsers_read_them(host: str, canonical: str) -> None:
    assert canonical_host(host) == canonical


async def test_public_addresses_pass() -> None:
    await AddressGuard([]).check("http://93.184.216.34/")
    await AddressGuard([]).check("http://[2606:4700::1111]/")
    # Translation forms of public IPv4 addresses are public (IPv6-only networks use NAT64).
    await AddressGuard([]).check("http://[64:ff9b::5db8:d822]/")
    await AddressGuard([]).check("http://[2002:5db8:d822::1]/")


async def test_allowlisted_networks_pass_and_only_those() -> None:
    guard = AddressGuard([ipaddress.ip_network("127.0.0.0/8")])
    await guard.check("http://127.0.0.1:8000/")
    if await _localhost_is_v4_only():
        await guard.check("http://localhost:8000/")
    with pytest.raises(AddressRefused):
        await guard.check("http://169.254.169.254/")
    assert guard.cached_verdict("http://127.0.0.1/other") is True
    assert guard.cached_verdict("http://169.254.169.254/x") is False


async def test_an_allowlisted_address_passes_in_its_ipv6_mapped_form_too() -> None:
    guard = AddressGuard([ipaddress.ip_network("10.0.0.0/8")])
    await guard.check("http://[::ffff:10.1.2.3]/")
    with pytest.raises(AddressRefused):
        await guard.check("http://[::ffff:127.0.0.1]/")


async def test_a_name_is_resolved_once_and_every_address_checked() -> None:
    """One private address among public ones refuses the name; a second look within the cache
    time asks no resolver (what was checked is what connections use)."""
    asked: list[str] = []

    async def resolver(host: str, _port: int) -> list[IPAddress]:
        asked.append(host)
        if host == "mixed.example":
            return [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.0.0.7")]
        return [ipaddress.ip_address("93.184.216.34")]

    guard = AddressGuard([], resolver)
    with pytest.raises(AddressRefused, match=r"10\.0\.0\.7"):
        await guard.check("http://mixed.example/")
    assert await guard.resolve("docs.example") == (ipaddress.ip_address("93.184.216.34"),)
    await guard.check("https://docs.example/other")
    assert asked.count("docs.example") == 1


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
