"""URLs as the crawler compares them: normalised, scoped to the allowed domains, grouped by pattern.

The allowed-domain rule itself (:class:`contracts.domains.DomainRule`: a domain allows its
subdomains, ``domain:port`` that port only) is shared with the gateway, which checks seed URLs
against it; :class:`Scope` applies it to a job.

Two spellings of one page must become one string, or the visited set lets the page through twice:
:func:`normalise` drops the fragment and tracking parameters, lower-cases the scheme and host, drops
default ports, sorts the query and removes a trailing slash (the root path stays ``/``). It does not
guess at anything a server may treat differently (case of the path, ``index.html``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from contracts.domains import DEFAULT_PORTS, DomainRule

TRACKING_PARAMS = frozenset(
    {
        "fbclid",
        "gclid",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "yclid",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_ga",
        "_gl",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        "ref_src",
        "spm",
    }
)
"""Query parameters that only say where a visitor came from; ``utm_*`` are dropped as well."""

_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_DIGITS = re.compile(r"\d+")
_WORDS = re.compile(r"[a-z][a-z0-9]+")


def _is_tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("utm_") or lowered in TRACKING_PARAMS


def normalise(url: str, base: str | None = None) -> str | None:
    """The canonical form of ``url`` (resolved against ``base``), or None if it is not crawlable.

    Only ``http`` and ``https`` URLs with a host are crawlable.
    """
    url = url.strip()
    if not url:
        return None
    if base is not None:
        url = urljoin(base, url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        host = parts.hostname.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = _PERCENT.sub(lambda m: m.group(0).upper(), parts.path or "/")
    path = re.sub(r"/{2,}", "/", path)
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    query_pairs = [
        (name, value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if not _is_tracking(name)
    ]
    query = urlencode(sorted(query_pairs))
    return urlunsplit((scheme, netloc, path, query, ""))


def host_of(url: str) -> str:
    """The lower-case host of ``url`` (no port)."""
    return (urlsplit(url).hostname or "").lower()


def host_key(url: str) -> str:
    """Host and port: what politeness rules (rate limits, robots.txt) are kept per."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


@dataclass(frozen=True)
class Scope:
    """The hosts a job may fetch from (documents and sub-requests alike)."""

    rules: tuple[DomainRule, ...]

    @classmethod
    def build(cls, allowed_domains: Sequence[str], seed_urls: Iterable[str]) -> Scope:
        """Rules from ``allowed_domains``; when empty, each seed URL's own host and port."""
        if allowed_domains:
            return cls(tuple(DomainRule.parse(d) for d in allowed_domains if d.strip()))
        rules = []
        for seed in seed_urls:
            parts = urlsplit(seed)
            if parts.hostname:
                rules.append(DomainRule(parts.hostname, parts.port))
        return cls(tuple(dict.fromkeys(rules)))

    def allows(self, url: str) -> bool:
        return any(rule.matches(url) for rule in self.rules)


def url_pattern(url: str) -> str:
    """The URL with every run of digits replaced by ``N``, query names kept, values too.

    A calendar trap (``/calendar/2031/07``, ``?month=2031-08``) yields endless URLs of one pattern;
    the planner caps pages per pattern.
    """
    parts = urlsplit(url)
    return _DIGITS.sub("N", f"{parts.netloc}{parts.path}?{parts.query}")


def url_words(url: str) -> list[str]:
    """Words of the URL's path and query, for the link planner (``/docs/vpn-reset`` → docs, vpn,
    reset)."""
    parts = urlsplit(url)
    return _WORDS.findall(f"{parts.path} {parts.query}".lower().replace("_", " "))
