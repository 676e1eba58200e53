"""The redactor must never reach out to the network ("offline by construction").

Presidio's stock e-mail recognizer validates domains with tldextract, which downloads the public
suffix list on first use and caches it under ``~/.cache``. tldextract swallows a failed download
and falls back to its snapshot, so a socket that merely raises would not expose the fetch: the
guard below records every attempt, and the test asserts there were none.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest
import tldextract.cache

from redactor.config import RedactorSettings
from redactor.service import Redactor


def _is_loopback(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def network_attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Refuse and record every connection or DNS lookup that is not to loopback."""
    attempts: list[str] = []

    def refuse(what: str) -> OSError:
        attempts.append(what)
        return OSError(f"network access attempted in an offline test: {what}")

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            raise refuse(f"connect {address!r}")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            raise refuse(f"connect_ex {address!r}")
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not _is_loopback(address[0]):
            raise refuse(f"create_connection {address!r}")
        return real_create_connection(address, *args, **kwargs)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not _is_loopback(host):
            raise refuse(f"getaddrinfo {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts


@pytest.fixture
def cache_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record tldextract creating its on-disk cache (it does so before every cached fetch)."""
    writes: list[str] = []
    monkeypatch.setattr(tldextract.cache, "_make_dir", writes.append)
    return writes


def test_guard_catches_a_real_attempt(network_attempts: list[str]) -> None:
    """The guard itself works: without it the test below would prove nothing."""
    with pytest.raises(OSError, match="network access attempted"):
        socket.create_connection(("publicsuffix.org", 443), timeout=1)

    assert network_attempts == ["create_connection ('publicsuffix.org', 443)"]


def test_construct_and_redact_without_network(
    network_attempts: list[str], cache_writes: list[str]
) -> None:
    # A fresh Redactor, not the session one: its e-mail recognizer must load its suffix data
    # while the guard is in place.
    redactor = Redactor(RedactorSettings())

    redaction = redactor.redact(
        "Mail anna.meier@contoso.co.uk or bob@fabrikam.com, the wiki is at "
        "https://intranet.contoso.com/wiki and www.fabrikam.org/help"
    )

    assert network_attempts == []
    assert cache_writes == []
    assert redaction.text == (
        "Mail <EMAIL_ADDRESS_1> or <EMAIL_ADDRESS_2>, the wiki is at <URL_1> and <URL_2>"
    )


def test_detect_secrets_runs_on_the_text_only(
    network_attempts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every detect-secrets plugin the redactor can run finds its values without the library's
    settings (which read baseline and config files), without verification (which calls the
    vendors' APIs), without opening any file and without the network."""
    import builtins
    import io

    from detect_secrets import settings as detect_secrets_settings
    from detect_secrets.plugins import base as detect_secrets_base

    from redactor.secrets import DETECT_SECRETS_PLUGINS, DetectSecretsRecognizer

    recognizer = DetectSecretsRecognizer(list(DETECT_SECRETS_PLUGINS))

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("detect-secrets' settings or verification were used")

    for module in (detect_secrets_settings, detect_secrets_base):
        monkeypatch.setattr(module, "get_settings", forbidden)
    monkeypatch.setattr(detect_secrets_settings, "default_settings", forbidden)
    monkeypatch.setattr(detect_secrets_base.BasePlugin, "verify", forbidden)
    opened: list[str] = []
    real_open = builtins.open

    def recording_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", recording_open)
    monkeypatch.setattr(io, "open", recording_open)
    text = (
        'api_key = "Zk3mP9qR2sT5vW8yB1nC6dF"\n'
        "mailchimp 0123456789abcdef0123456789abcdef-us12\n"
        "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc\n"
    )

    found = {text[r.start : r.end] for r in recognizer.analyze(text, entities=[])}

    assert {
        "Zk3mP9qR2sT5vW8yB1nC6dF",
        "0123456789abcdef0123456789abcdef-us12",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    } <= found
    assert network_attempts == []
    assert opened == []
