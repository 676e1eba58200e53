"""Which pages may open the chat's WebSocket: the ``Origin`` check of the handshake.

A browser sends the page's origin with every WebSocket handshake and lets any page open a
socket to any host, so without a check a page on another site could talk to the gateway in its
visitor's name (cross-site WebSocket hijacking). The gateway accepts a handshake whose
``Origin`` is

* its own origin: the same host and port as the request's ``Host`` header (the scheme is not
  compared, so a TLS-terminating proxy in front changes nothing; a proxy that rewrites ``Host``
  must pass it on, or the public origin must be listed below);
* or one of the configured pages: ``GATEWAY_FRAME_ANCESTORS`` (the pages that embed the chat;
  matched as CSP source expressions: ``'self'``, ``https://intranet.example``,
  ``https://*.sharepoint.com``, ``https:``, ``*``) and ``GATEWAY_CORS_ORIGINS``.

A handshake without ``Origin`` is accepted: browsers always send one, so it comes from a
program (a script, a bot, a test), which could as well have sent any ``Origin`` it liked. The
check protects people using a browser; what protects a conversation from programs is that only
its owner's credentials reach it. ``Origin: null`` (sandboxed frames, local files) is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int | None


def _parse_origin(value: str) -> _Origin | None:
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or parts.path not in ("", "/"):
        return None
    scheme = parts.scheme.lower()
    return _Origin(scheme, parts.hostname.lower(), port or DEFAULT_PORTS.get(scheme))


def _host_and_port(host_header: str) -> tuple[str, int | None] | None:
    try:
        parts = urlsplit(f"//{host_header.strip()}")
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None


class OriginPolicy:
    """Decides whether a handshake's ``Origin`` may open the chat (see the module docstring)."""

    def __init__(self, sources: Iterable[str]) -> None:
        self.sources = [source.strip() for source in sources if source.strip()]

    def allows(self, origin: str | None, host_header: str | None) -> bool:
        if origin is None:
            return True
        parsed = _parse_origin(origin)
        if parsed is None:
            return False  # "null", garbage
        if host_header and self._same_origin(parsed, host_header):
            return True
        return any(self._matches(source, parsed, host_header) for source in self.sources)

    @staticmethod
    def _same_origin(origin: _Origin, host_header: str) -> bool:
        own = _host_and_port(host_header)
        if own is None or not own[0]:
            return False
        host, port = own
        if origin.host != host:
            return False
        # The Host header of a default-port request carries no port: either default matches,
        # since the scheme seen here may be the proxy's, not the browser's.
        if port is None:
            return origin.port in (80, 443)
        return origin.port == port

    def _matches(self, source: str, origin: _Origin, host_header: str | None) -> bool:
        lowered = source.lower()
        if lowered == "'self'":
            return bool(host_header) and self._same_origin(origin, host_header or "")
        if lowered == "'none'" or lowered.startswith("'"):
            return False
        if lowered == "*":
            return True
        if lowered.endswith(":") and "/" not in lowered:  # a scheme source such as https:
            return _scheme_matches(lowered[:-1], origin.scheme)
        scheme, _, rest = lowered.rpartition("://")
        if scheme and not _scheme_matches(scheme, origin.scheme):
            return False
        hostport = rest.split("/", 1)[0]
        host, _, port = hostport.partition(":")
        if host.startswith("*."):
            if not origin.host.endswith(host[1:]):
                return False
        elif host != origin.host:
            return False
        if port == "*":
            return True
        if port:
            return port.isdigit() and int(port) == origin.port
        return origin.port == DEFAULT_PORTS.get(origin.scheme)


def _scheme_matches(source_scheme: str, origin_scheme: str) -> bool:
    # CSP: a source naming http also matches https (an upgrade), never the reverse.
    return source_scheme == origin_scheme or (source_scheme, origin_scheme) == ("http", "https")
