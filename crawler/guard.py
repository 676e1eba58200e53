"""The SSRF guard: the crawler only talks to hosts on the public internet, unless allowlisted.

A link on a help page could point the crawler at the metadata service of the cloud it runs in
(``169.254.169.254``), at Redis on ``127.0.0.1`` or at an admin panel on the private network. Before
any request, :meth:`AddressGuard.check` resolves the host and refuses it when any of its addresses
is not globally routable (private, loopback, link-local, CGNAT, multicast, reserved, unspecified,
IPv4-mapped forms of those) and lies in none of the operator's ``CRAWLER_ALLOW_NETWORKS``.

The check resolves the name separately from the connection that follows, so a DNS server that
answers differently within the cache time (DNS rebinding) is not covered; run the fleet behind an
egress firewall where that matters.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from crawler.config import IPNetwork

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

CACHE_S = 60.0


class AddressRefused(Exception):
    """The host resolves to an address the crawler must not reach (or does not resolve)."""


def address_allowed(address: IPAddress, allow: Sequence[IPNetwork]) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allow):
        return True
    return address.is_global and not address.is_multicast


class AddressGuard:
    """Resolves hosts and remembers the verdict for a minute."""

    def __init__(self, allow: Sequence[IPNetwork]) -> None:
        self.allow = tuple(allow)
        self._verdicts: dict[str, tuple[float, str | None]] = {}

    async def check(self, url: str) -> None:
        """Raise :class:`AddressRefused` unless every address of ``url``'s host is allowed."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        cached = self._verdicts.get(host)
        now = time.monotonic()
        if cached is None or cached[0] < now:
            problem = await self._resolve(host, parts.port or 443)
            cached = (now + CACHE_S, problem)
            self._verdicts[host] = cached
        if cached[1] is not None:
            raise AddressRefused(cached[1])

    def cached_verdict(self, url: str) -> bool | None:
        """True/False if ``url``'s host was checked recently, else None (no I/O)."""
        host = (urlsplit(url).hostname or "").lower()
        cached = self._verdicts.get(host)
        if cached is None or cached[0] < time.monotonic():
            return None
        return cached[1] is None

    async def _resolve(self, host: str, port: int) -> str | None:
        if not host:
            return "no host"
        try:
            literal = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            addresses: set[IPAddress] = {literal}
        else:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                return f"{host} does not resolve ({type(exc).__name__})"
            addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}
        refused = sorted(str(a) for a in addresses if not address_allowed(a, self.allow))
        if refused:
            return f"{host} resolves to a non-public address ({', '.join(refused)})"
        return None
