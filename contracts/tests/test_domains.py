"""The allowed-domain rule the crawler fetches by and the gateway checks seed URLs against."""

from __future__ import annotations

import pytest

from contracts.domains import DomainRule, canonical_host, within


@pytest.mark.parametrize(
    ("rule", "url", "allowed"),
    [
        ("example.com", "https://example.com/a", True),
        ("example.com", "https://help.example.com/a", True),
        ("example.com", "http://deep.help.example.com:8080/a", True),
        # Same letters at the end are not a subdomain.
        ("example.com", "https://evilexample.com/", False),
        ("example.com", "https://notexample.com/", False),
        ("example.com", "https://example.com.evil.net/", False),
        ("help.example.com", "https://example.com/", False),  # not the parent
        ("example.com", "mailto:someone@example.com", False),
        ("example.com", "/relative/path", False),
    ],
)
def test_a_domain_allows_itself_and_its_subdomains_only(rule: str, url: str, allowed: bool) -> None:
    assert DomainRule.parse(rule).matches(url) is allowed


@pytest.mark.parametrize(
    ("rule", "url", "allowed"),
    [
        ("127.0.0.1:8123", "http://127.0.0.1:8123/x", True),
        ("127.0.0.1:8123", "http://127.0.0.1:8124/x", False),
        ("127.0.0.1:8123", "http://127.0.0.1/x", False),
        # A URL without a port has its scheme's default one.
        ("example.com:443", "https://help.example.com/", True),
        ("example.com:443", "http://help.example.com/", False),
        ("example.com:80", "http://example.com/", True),
        ("example.com:8080", "http://help.example.com:8080/", True),
        # Without a port in the rule, any port.
        ("example.com", "http://example.com:9999/", True),
        # A URL whose port is no port matches nothing.
        ("example.com", "http://example.com:99999/", False),
        ("example.com", "http://example.com:port/", False),
    ],
)
def test_a_port_in_the_rule_pins_it(rule: str, url: str, allowed: bool) -> None:
    assert DomainRule.parse(rule).matches(url) is allowed


def test_a_rule_reads_a_domain_a_domain_and_port_or_a_url() -> None:
    assert DomainRule.parse("example.com") == DomainRule("example.com", None)
    assert DomainRule.parse(" Example.COM:8443 ") == DomainRule("example.com", 8443)
    assert DomainRule.parse("https://help.example.com") == DomainRule("help.example.com")
    assert DomainRule.parse("http://127.0.0.1:8123/path") == DomainRule("127.0.0.1", 8123)
    # Not a port: a rule that matches nothing, not an error.
    nothing = DomainRule.parse("example.com:https")
    assert not nothing.matches("https://example.com/")
    assert not DomainRule.parse("").matches("https://example.com/")


def test_host_names_compare_in_one_spelling() -> None:
    # Upper case, in the rule or the URL.
    assert DomainRule.parse("HELP.Example.com").matches("https://help.example.com/")
    assert DomainRule.parse("help.example.com").matches("https://HELP.EXAMPLE.COM/")
    # A fully qualified name's trailing dot, in the rule or the URL; a leading dot in a rule.
    assert DomainRule.parse("example.com.").matches("https://help.example.com/")
    assert DomainRule.parse("example.com").matches("https://help.example.com./")
    assert DomainRule.parse(".example.com").matches("https://example.com/")
    # International names: the Unicode and the ASCII (IDNA) spelling are one host.
    assert DomainRule.parse("bücher.example").matches("https://xn--bcher-kva.example/")
    assert DomainRule.parse("xn--bcher-kva.example").matches("https://shop.bücher.example/")
    assert DomainRule.parse("BÜCHER.example").matches("https://bücher.example/")
    assert not DomainRule.parse("bücher.example").matches("https://bucher.example/")
    assert DomainRule("Bücher.Example.") == DomainRule("xn--bcher-kva.example")


def test_canonical_host_keeps_what_has_no_ascii_form() -> None:
    assert canonical_host("Help.Example.COM.") == "help.example.com"
    too_long = "ü" * 70 + ".example"  # a label over 63 characters has no IDNA form
    assert canonical_host(too_long) == too_long


def test_within_any_of_several_domains() -> None:
    domains = ["help.example.com", "127.0.0.1:8765"]
    assert within("https://kb.help.example.com/start", domains)
    assert within("http://127.0.0.1:8765/help/", domains)
    assert not within("http://127.0.0.1:9999/help/", domains)
    assert not within("https://example.com/", domains)
    assert not within("https://help.example.com/", [])
