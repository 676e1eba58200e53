"""The allowed-domain rule of a crawl, written once for everyone who applies it.

An admin or an operator names the sites a crawl may read as domains (``help.example.com``,
optionally ``:port``); the crawler keeps every fetch inside them and the gateway refuses seed
URLs outside them. Both must read a domain the same way, or the gateway accepts a seed the
crawler then refuses (or the other way round). The rule:

* ``example.com`` allows ``example.com`` and every subdomain (``help.example.com``), on any port,
  and nothing that merely ends in the same letters (``evilexample.com``, ``example.com.evil.net``);
* ``example.com:8080`` allows the same hosts on port 8080 only (a URL without a port has its
  scheme's default port: ``http`` 80, ``https`` 443);
* a URL (``https://help.example.com:8443/path``) given as a domain stands for its host and port;
* host names compare case-insensitively, without a trailing dot (``example.com.`` is the same
  host) and in their ASCII form (``bücher.example`` is ``xn--bcher-kva.example``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
"""The port a URL of each crawlable scheme has when it names none."""


def canonical_host(name: str) -> str:
    """``name`` as hosts are compared: lower case, without the dots of a fully qualified name
    (``example.com.``) or of a "subdomains of" spelling (``.example.com``), international names
    in their ASCII (IDNA) form. A name that has no ASCII form is only lower-cased."""
    host = name.strip().lower().strip(".")
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return host


@dataclass(frozen=True)
class DomainRule:
    """One allowed domain: it and its subdomains, on any port or on ``port`` only. The domain
    is kept as :func:`canonical_host` spells it, however it was given."""

    domain: str
    port: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "domain", canonical_host(self.domain))

    @classmethod
    def parse(cls, text: str) -> DomainRule:
        """The rule ``text`` names: ``domain``, ``domain:port`` or a URL (its host and port).

        Text that is none of these (``host:notaport``) becomes a rule that matches nothing
        rather than an error: the settings that carry domains validate them before.
        """
        text = text.strip().lower()
        if "://" in text:
            parts = urlsplit(text)
            return cls(parts.hostname or "", parts.port)
        host, _, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
        if host and port.isdigit():
            return cls(host, int(port))
        return cls(text)

    def matches(self, url: str) -> bool:
        """Whether ``url``'s host is the domain or one of its subdomains, on the rule's port."""
        try:
            parts = urlsplit(url)
            url_port = parts.port
        except ValueError:  # a port that is not a number, or out of range
            return False
        host = canonical_host(parts.hostname or "")
        if not host or not self.domain:
            return False
        if host != self.domain and not host.endswith("." + self.domain):
            return False
        if self.port is None:
            return True
        return (url_port or DEFAULT_PORTS.get(parts.scheme.lower())) == self.port


def within(url: str, domains: Iterable[str]) -> bool:
    """Whether any of ``domains`` (as :meth:`DomainRule.parse` reads them) allows ``url``."""
    return any(DomainRule.parse(domain).matches(url) for domain in domains)
