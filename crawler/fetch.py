"""Downloading one HTTP resource with the limits a crawler needs: no redirects followed on its own,
a size cap checked before and while reading, and the body read only when it is wanted."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

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


class Fetcher:
    """One HTTP client per worker (connection pooling across pages of a site)."""

    def __init__(self, user_agent: str, timeout_s: float) -> None:
        self.client = httpx.AsyncClient(
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
        started = time.monotonic()
        async with self.client.stream("GET", url) as response:
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
