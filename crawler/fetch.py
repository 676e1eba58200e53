"""Downloading one HTTP resource with the limits a crawler needs: no redirects followed on its own,
a size cap checked before and while reading, the body read only when it is wanted, and every
connection made to an address the SSRF guard checked.

The client's connections go through :class:`GuardedBackend`: for each connection httpx opens, it
asks :meth:`AddressGuard.resolve` for the host's addresses (refused ones raise
:class:`~crawler.guard.AddressRefused`) and connects to one of those, never resolving the name a
second time. The URL keeps its host name, so the ``Host`` header, TLS SNI and certificate checks
are the name's. Connection pooling stays per host name.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import httpcore
import httpx

from crawler.guard import AddressGuard, AddressRefused

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf"})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
THROTTLE_STATUSES = frozenset({429, 503})


class TooLarge(Exception):
    """The resource is larger than the page size limit."""


@dataclass(frozen=True)
class Response:
    url: str
    status: int
    headers: httpx.Headers
    body: bytes
    ms: int

    @property
    def content_type(self) -> str:
        return media_type(self.headers.get("content-type", ""))

    @property
    def charset(self) -> str | None:
        return charset_of(self.headers.get("content-type", ""))


def media_type(header: str) -> str:
    return header.split(";", 1)[0].strip().lower()


def charset_of(header: str) -> str | None:
    """The ``charset`` parameter of a Content-Type header, if it names one."""
    for parameter in header.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip(" \"'"):
            return value.strip(" \"'").lower()
    return None


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), if any."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to the addresses the guard allowed."""

    def __init__(
        self, guard: AddressGuard, inner: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self.guard = guard
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async with asyncio.timeout(timeout):
            addresses = await self.guard.resolve(host, port)
        failure: Exception = httpcore.ConnectError(f"{host} has no address")
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused(path, "the crawler does not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (request and error mapping unchanged) on a connection pool whose
    connections go through :class:`GuardedBackend`.

    httpx takes no network backend, so the pool it builds is replaced by an equivalent one with
    the guarded backend (``crawler/tests/test_fetch.py`` checks that connections really go where
    the guard said).
    """

    def __init__(self, guard: AddressGuard, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        # One TLS context for both pools (loading the CA bundle costs 0.2-0.4 s a time).
        tls = httpx.create_ssl_context()
        super().__init__(verify=tls, limits=limits)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(guard),
        )


class Fetcher:
    """One HTTP client per worker (connection pooling across pages of a site); every connection
    is checked by ``guard`` and made to the address it checked."""

    def __init__(self, user_agent: str, timeout_s: float, guard: AddressGuard) -> None:
        self.client = httpx.AsyncClient(
            transport=GuardedTransport(guard),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(timeout_s),
            headers={
                "User-Agent": user_agent,
                "Accept": "text/html,application/xhtml+xml,application/pdf;q=0.9,*/*;q=0.5",
            },
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def get(
        self,
        url: str,
        *,
        max_bytes: int,
        want_body: Callable[[int, str], bool],
    ) -> Response:
        """GET ``url``; the body is read (up to ``max_bytes``) only if ``want_body(status,
        media type)``; raises :class:`TooLarge` past the limit."""
        return await self.request("GET", url, max_bytes=max_bytes, want_body=want_body)

    async def request(
        self,
        method: str,
        url: str,
        *,
        max_bytes: int,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        want_body: Callable[[int, str], bool] = lambda _status, _kind: True,
    ) -> Response:
        """One request, no redirect followed; the body is read as :meth:`get` reads it."""
        started = time.monotonic()
        request = self.client.build_request(method, url, headers=headers, content=content)
        response = await self.client.send(request, stream=True)
        try:
            body = b""
            if want_body(
                response.status_code, media_type(response.headers.get("content-type", ""))
            ):
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise TooLarge(f"{declared} bytes declared")
                chunks = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise TooLarge(f"more than {max_bytes} bytes")
                    chunks.append(chunk)
                body = b"".join(chunks)
            return Response(
                str(response.url),
                response.status_code,
                response.headers,
                body,
                int((time.monotonic() - started) * 1000),
            )
        finally:
            await response.aclose()
