"""URL normalisation, allowed-domain scope and URL patterns (no I/O)."""

from __future__ import annotations

import pytest

from crawler.urls import DomainRule, Scope, normalise, url_pattern, url_words


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP://Help.Example.COM/Docs/", "http://help.example.com/Docs"),
        ("https://help.example.com:443/a#section-2", "https://help.example.com/a"),
        ("http://help.example.com:80/", "http://help.example.com/"),
        ("http://help.example.com:8080/", "http://help.example.com:8080/"),
        (
            "https://h.example/p?utm_source=x&b=2&a=1&gclid=abc&fbclid=z",
            "https://h.example/p?a=1&b=2",
        ),
        ("https://h.example", "https://h.example/"),
        ("https://h.example//a//b/", "https://h.example/a/b"),
        ("https://h.example/%7euser", "https://h.example/%7Euser"),
        ("mailto:it@example.com", None),
        ("javascript:void(0)", None),
        ("ftp://h.example/file", None),
        ("", None),
        ("http://[::1]:8000/x", "http://[::1]:8000/x"),
    ],
)
def test_normalise(raw: str, expected: str | None) -> None:
    assert normalise(raw) == expected


def test_relative_links_resolve_against_the_page() -> None:
    base = "https://h.example/docs/guide/"
    assert normalise("../faq.html#top", base) == "https://h.example/docs/faq.html"
    assert normalise("intro", base) == "https://h.example/docs/guide/intro"
    assert normalise("/", base) == "https://h.example/"


def test_spellings_of_one_page_normalise_alike() -> None:
    spellings = [
        "http://h.example/docs",
        "http://h.example/docs/",
        "http://H.EXAMPLE:80/docs#install",
        "http://h.example/docs?utm_campaign=spring",
    ]
    assert len({normalise(s) for s in spellings}) == 1


def test_domain_rules_allow_the_domain_and_its_subdomains() -> None:
    rule = DomainRule.parse("example.com")
    assert rule.matches("https://example.com/a")
    assert rule.matches("https://help.example.com/a")
    assert rule.matches("http://deep.help.example.com:8080/a")
    assert not rule.matches("https://notexample.com/")
    assert not rule.matches("https://example.com.evil.net/")


def test_a_rule_with_a_port_pins_it() -> None:
    rule = DomainRule.parse("127.0.0.1:8123")
    assert rule.matches("http://127.0.0.1:8123/x")
    assert not rule.matches("http://127.0.0.1:8124/x")
    assert DomainRule.parse("https://help.example.com") == DomainRule("help.example.com")


def test_empty_allowed_domains_mean_the_seeds_own_sites() -> None:
    scope = Scope.build([], ["http://127.0.0.1:8123/start", "https://docs.example.org/"])
    assert scope.allows("http://127.0.0.1:8123/other")
    assert not scope.allows("http://127.0.0.1:9999/other")
    assert scope.allows("https://docs.example.org/page")
    assert not scope.allows("https://example.org/page")  # the seed's host, not its parent


def test_patterns_fold_digits_so_a_calendar_is_one_pattern() -> None:
    a = url_pattern("http://h.example/calendar/2031/07?day=1")
    b = url_pattern("http://h.example/calendar/1999/12?day=30")
    assert a == b
    assert url_pattern("http://h.example/docs/a") != url_pattern("http://h.example/docs/b")


def test_url_words() -> None:
    assert url_words("https://h.example/docs/vpn-password_reset.html?os=linux") == [
        "docs",
        "vpn",
        "password",
        "reset",
        "html",
        "os",
        "linux",
    ]
