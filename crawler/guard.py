"""The SSRF guard: the crawler only talks to hosts on the public internet, unless allowlisted.

A link on a help page could point the crawler at the metadata service of the cloud it runs in
(``169.254.169.254``), at Redis on ``127.0.0.1`` or at an admin panel on the private network.
:meth:`AddressGuard.resolve` resolves a host once and refuses it when any of its addresses is not
globally routable and lies in none of the operator's ``CRAWLER_ALLOW_NETWORKS``. What it answers is
what the crawler connects to: the HTTP client's network backend (:mod:`crawler.fetch`) asks the
guard for the addresses of every connection it opens and connects to those, so a DNS server that
answers differently a moment later (DNS rebinding) is not asked again; and Chromium never resolves
or connects at all (:mod:`crawler.browser` serves every request of a page through that client).

What counts as not public:

* IPv4: private, loopback, link-local (the metadata address among them), carrier-grade NAT,
  "this network" (``0.0.0.0/8``), multicast, broadcast, reserved, documentation and benchmarking
  ranges;
* IPv6: loopback, unspecified, link-local, site-local, unique local (``fd00:ec2::254`` is a
  metadata address), multicast, documentation, local-use NAT64 (``64:ff9b:1::/48``) and whatever
  else the standard library does not call global;
* IPv6 forms that carry an IPv4 address are judged by that address as well: IPv4-mapped
  (``::ffff:10.0.0.1``), IPv4-compatible (``::127.0.0.1``), IPv4-translated, NAT64
  (``64:ff9b::a9fe:a9fe``), 6to4 (``2002:7f00:1::``), Teredo (server and client) and ISATAP
  interface identifiers.

Host names are read the way browsers read them before anything is resolved: IDNA (UTS 46) maps
``ⓛⓞⓒⓐⓛⓗⓞⓢⓣ`` to ``localhost`` and full-width digits to ASCII, and a host whose last label is a
number is an IPv4 address in any of its legacy spellings (``2130706433``, ``0177.0.0.1``,
``0x7f.1``, ``127.1``, with or without a trailing dot), never a name to look up.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna

from crawler.config import IPNetwork

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

CACHE_S = 60.0
"""How long a host's addresses (or its refusal) are reused: connections within this time go to
the addresses checked, whatever DNS answers meanwhile."""

Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
"""(host name, port) → its addresses; raises :class:`OSError` when the name does not resolve."""

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Ranges refused whatever the running Python's ``is_global`` says (its tables changed between
# versions), with the word a refusal uses for them. Order matters: the first match names it.
_NOT_PUBLIC_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("169.254.169.254/32"), "the cloud metadata service (link-local)"),
    (_V4("0.0.0.0/8"), "'this network' (unspecified)"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT (shared address space)"),
    (_V4("169.254.0.0/16"), "link-local"),
    (_V4("192.0.0.0/24"), "IETF protocol assignments"),
    (_V4("192.0.2.0/24"), "documentation"),
    (_V4("198.51.100.0/24"), "documentation"),
    (_V4("203.0.113.0/24"), "documentation"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast (deprecated)"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("255.255.255.255/32"), "broadcast"),
    (_V4("240.0.0.0/4"), "reserved"),
)
_NOT_PUBLIC_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("fd00:ec2::254/128"), "the cloud metadata service (unique local)"),
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local (deprecated)"),
    (_V6("fc00::/7"), "unique local (private)"),
    (_V6("ff00::/8"), "multicast"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64"),
    (_V6("2001:db8::/32"), "documentation"),
    (_V6("3fff::/20"), "documentation"),
    (_V6("100::/64"), "discard-only"),
    (_V6("5f00::/16"), "segment routing"),
)

_NAT64 = _V6("64:ff9b::/96")
_SIXTOFOUR = _V6("2002::/16")
_COMPATIBLE = _V6("::/96")
_TRANSLATED = _V6("::ffff:0:0:0/96")
_SAME_SOCKET = frozenset({"IPv4-mapped", "IPv4-translated", "IPv4-compatible"})
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)")


class AddressRefused(Exception):
    """The host resolves to an address the crawler must not reach (or does not resolve).

    ``refused`` holds each address refused with the reason, so a message can say which address
    the guard refused and what would exempt it.
    """

    def __init__(
        self, host: str, detail: str, refused: Sequence[tuple[IPAddress, str]] = ()
    ) -> None:
        super().__init__(detail)
        self.host = host
        self.refused = tuple(refused)


@dataclass(frozen=True)
class _Verdict:
    expires: float
    addresses: tuple[IPAddress, ...]
    refusal: str | None = None
    refused: tuple[tuple[IPAddress, str], ...] = ()


def canonical_host(host: str) -> str:
    """``host`` as a browser reads it: an IP address in its usual spelling, or an ASCII name.

    Raises :class:`AddressRefused` for a host no browser would accept (an empty label, an
    IPv4-looking host that is not a valid address, a name IDNA refuses).
    """
    text = host.strip().strip("[]").lower()
    if not text:
        raise AddressRefused(host, "the URL has no host")
    if ":" in text:
        try:
            return str(ipaddress.IPv6Address(text))
        except ValueError:
            raise AddressRefused(host, f"{host!r} is not a valid IPv6 address") from None
    try:
        name = idna.encode(text, uts46=True).decode("ascii")
    except idna.IDNAError:
        if not text.isascii() or ".." in text or text.startswith("."):
            raise AddressRefused(host, f"{host!r} is not a valid host name") from None
        name = text  # e.g. an underscore, which IDNA refuses and resolvers accept
    labels = name.removesuffix(".").split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        # Like the URL standard: a host ending in a number is an IPv4 address, in any of the
        # spellings inet_aton() accepts (decimal, octal, hex, fewer than four parts), or invalid.
        if not all(_NUMERIC_LABEL.fullmatch(label) for label in labels):
            raise AddressRefused(host, f"{host!r} is not a valid IPv4 address")
        try:
            return socket.inet_ntoa(socket.inet_aton(".".join(labels)))
        except OSError:
            raise AddressRefused(host, f"{host!r} is not a valid IPv4 address") from None
    return name


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[tuple[ipaddress.IPv4Address, str]]:
    """The IPv4 addresses an IPv6 address carries, each with the name of the form."""
    found: list[tuple[ipaddress.IPv4Address, str]] = []
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        found.append((address.ipv4_mapped, "IPv4-mapped"))
    elif address in _TRANSLATED:
        found.append((low32, "IPv4-translated"))
    elif address in _COMPATIBLE and int(address) > 1:
        found.append((low32, "IPv4-compatible"))
    if address in _NAT64:
        found.append((low32, "NAT64"))
    if address.sixtofour is not None:
        found.append((address.sixtofour, "6to4"))
    if address.teredo is not None:
        server, client = address.teredo
        found += [(server, "Teredo server"), (client, "Teredo client")]
    interface_id = (int(address) >> 32) & 0xFFFFFFFF
    if interface_id in (0x00005EFE, 0x02005EFE):
        found.append((low32, "ISATAP"))
    return found


def _ipv4_problem(address: ipaddress.IPv4Address) -> str | None:
    for network, kind in _NOT_PUBLIC_V4:
        if address in network:
            return kind
    if not address.is_global:
        return "not publicly routable"
    return None


def refusal_reason(address: IPAddress, allow: Sequence[IPNetwork] = ()) -> str | None:
    """Why ``address`` must not be reached, or None when it may (public, or allowlisted)."""
    if any(address in network for network in allow):
        return None
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_problem(address)
    carried = embedded_ipv4(address)
    if carried and carried[0][1] in _SAME_SOCKET:
        # The same socket as the IPv4 address itself: its verdict, allowlist included.
        v4, form = carried[0]
        problem = refusal_reason(v4, allow)
        return f"{form} {v4}, {problem}" if problem else None
    for network, kind in _NOT_PUBLIC_V6:
        if address in network:
            return kind
    for v4, form in carried:
        problem = refusal_reason(v4, allow)
        if problem:
            return f"carries {v4} ({form}), {problem}"
    if address in _NAT64 or address in _SIXTOFOUR:
        return None  # the address it carries is public: what the translator reaches
    if address.is_multicast or not address.is_global:
        return "not publicly routable"
    return None


def address_allowed(address: IPAddress, allow: Sequence[IPNetwork] = ()) -> bool:
    return refusal_reason(address, allow) is None


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The host's addresses from the operating system's resolver (``getaddrinfo``)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


class AddressGuard:
    """Resolves hosts, checks every address, and remembers both for :data:`CACHE_S`."""

    def __init__(
        self, allow: Sequence[IPNetwork | str], resolver: Resolver = system_resolver
    ) -> None:
        self.allow = tuple(ipaddress.ip_network(network, strict=False) for network in allow)
        self.resolver = resolver
        self._verdicts: dict[str, _Verdict] = {}

    async def check(self, url: str) -> None:
        """Raise :class:`AddressRefused` unless every address of ``url``'s host is allowed."""
        parts = urlsplit(url)
        await self.resolve(parts.hostname or "", parts.port or 443)

    async def resolve(self, host: str, port: int = 443) -> tuple[IPAddress, ...]:
        """The allowed addresses of ``host``, the only ones a connection to it may use; raises
        :class:`AddressRefused` if any of them is not allowed or the name does not resolve."""
        key = canonical_host(host)
        now = time.monotonic()
        verdict = self._verdicts.get(key)
        if verdict is None or verdict.expires < now:
            verdict = await self._judge(key, port, now + CACHE_S)
            if len(self._verdicts) > 10_000:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        if verdict.refusal is not None:
            raise AddressRefused(key, verdict.refusal, verdict.refused)
        return verdict.addresses

    def cached_verdict(self, url: str) -> bool | None:
        """True/False if ``url``'s host was checked recently, else None (no I/O)."""
        try:
            key = canonical_host(urlsplit(url).hostname or "")
        except AddressRefused:
            return False
        verdict = self._verdicts.get(key)
        if verdict is None or verdict.expires < time.monotonic():
            return None
        return verdict.refusal is None

    async def _judge(self, host: str, port: int, expires: float) -> _Verdict:
        try:
            addresses: list[IPAddress] = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                addresses = await self.resolver(host, port)
            except OSError as exc:
                return _Verdict(expires, (), f"{host} does not resolve ({type(exc).__name__})")
        unique = tuple(dict.fromkeys(addresses))
        if not unique:
            return _Verdict(expires, (), f"{host} has no address")
        refused = [
            (address, reason)
            for address in unique
            if (reason := refusal_reason(address, self.allow)) is not None
        ]
        if not refused:
            return _Verdict(expires, unique, None)
        listed = ", ".join(f"{address} ({reason})" for address, reason in refused)
        if host == str(refused[0][0]):
            detail = f"{listed} is not a public address"
        else:
            detail = f"{host} resolves to a non-public address: {listed}"
        return _Verdict(expires, (), detail, tuple(refused))
