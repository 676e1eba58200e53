"""Reading one sitemap file: the formats sites serve, and the files an attacker would serve.

No services: :func:`crawler.sitemaps.parse_sitemap` on bytes. Each attack has a test that fails
without its guard: the entity tests fail on the standard library's parser (which expands internal
entities), the gzip bomb and the huge file without the byte and URL caps.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from crawler.config import CrawlerSettings
from crawler.sitemaps import (
    HostMap,
    SitemapEntry,
    SitemapFile,
    SitemapReader,
    locations_for,
    parse_lastmod,
    parse_sitemap,
)

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
NEWS = 'xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"'
MB = 1024 * 1024


def urlset(*entries: str, head: str = "") -> bytes:
    xml = f'<?xml version="1.0" encoding="UTF-8"?>{head}<urlset {NS}>{"".join(entries)}</urlset>'
    return xml.encode()


def url(loc: str, extra: str = "") -> str:
    return f"<url><loc>{loc}</loc>{extra}</url>"


def parse(body: bytes, *, max_bytes: int = MB, max_urls: int = 1000) -> SitemapFile:
    return parse_sitemap(body, max_bytes=max_bytes, max_urls=max_urls)


def test_a_urlset_gives_its_urls_lastmods_and_titles() -> None:
    body = urlset(
        url("https://help.example/vpn", "<lastmod>2026-01-02</lastmod><priority>0.5</priority>"),
        url(
            " https://help.example/news/outage ",
            f"<news:news {NEWS}><news:title>Mail outage on Monday</news:title></news:news>",
        ),
        "<url><changefreq>weekly</changefreq></url>",  # no <loc>: nothing to crawl
    )
    found = parse(body)
    assert found.error == ""
    assert [(e.url, e.title) for e in found.entries] == [
        ("https://help.example/vpn", ""),
        ("https://help.example/news/outage", "Mail outage on Monday"),
    ]
    assert found.entries[0].lastmod == datetime(2026, 1, 2, tzinfo=UTC).timestamp()
    assert found.entries[1].lastmod is None


def test_an_index_lists_its_sitemaps_and_gzip_reads_the_same() -> None:
    index = (
        f"<sitemapindex {NS}><sitemap><loc>https://help.example/a.xml.gz</loc>"
        "<lastmod>2026-01-01</lastmod></sitemap>"
        "<sitemap><loc>/b.xml</loc></sitemap></sitemapindex>"
    ).encode()
    found = parse(index)
    assert (found.entries, found.sitemaps) == ([], ["https://help.example/a.xml.gz", "/b.xml"])
    body = urlset(url("https://help.example/a"), url("https://help.example/b"))
    assert parse(gzip.compress(body)) == parse(body)
    assert len(parse(body).entries) == 2


def test_a_text_sitemap_is_one_url_a_line() -> None:
    found = parse(b"\xef\xbb\xbfhttps://help.example/a\r\nnot a url\nhttps://help.example/b")
    assert [e.url for e in found.entries] == ["https://help.example/a", "https://help.example/b"]


@pytest.mark.parametrize(
    ("head", "loc"),
    [
        pytest.param(
            '<!DOCTYPE urlset [<!ENTITY page "http://169.254.169.254/latest/meta-data/">]>',
            "&page;",
            id="internal-entity",
        ),
        pytest.param(
            '<!DOCTYPE urlset [<!ENTITY page SYSTEM "pyproject.toml">]>',
            "https://help.example/&page;",
            id="external-entity-xxe",
        ),
        pytest.param(
            '<!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
            '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;">]>',
            "https://help.example/&d;",
            id="entity-expansion",
        ),
        pytest.param("<!DOCTYPE urlset>", "https://help.example/a", id="any-dtd"),
    ],
)
def test_a_file_with_a_document_type_is_refused_whole(head: str, loc: str) -> None:
    """No entity is expanded or fetched: the standard library's parser would expand the internal
    ones (the first and third cases would yield a URL); here nothing of the file is kept."""
    found = parse(urlset(url("https://help.example/first"), url(loc), head=head))
    assert found.entries == []
    assert found.error.startswith("refused: ")


def test_a_gzip_bomb_stops_at_the_byte_cap() -> None:
    """100 MB of spaces inside a urlset compress to about 100 KB; decompression stops at the cap
    (without it the whole file would be inflated and read)."""
    bomb = gzip.compress(urlset(url("https://help.example/a"), " " * (100 * MB)))
    assert len(bomb) < 200_000
    found = parse(bomb, max_bytes=MB)
    assert found.error == f"more than {MB} bytes (CRAWLER_SITEMAP_MAX_BYTES)"
    assert [e.url for e in found.entries] == ["https://help.example/a"]


def test_a_huge_sitemap_keeps_its_first_urls() -> None:
    body = urlset(*(url(f"https://help.example/p{n}") for n in range(5000)))
    found = parse(body, max_urls=100)
    assert len(found.entries) == 100
    assert found.entries[-1].url == "https://help.example/p99"
    assert found.error == "more than 100 URLs (CRAWLER_SITEMAP_MAX_URLS)"
    text = "\n".join(f"https://help.example/t{n}" for n in range(5000)).encode()
    assert len(parse(text, max_urls=100).entries) == 100


def test_a_file_that_breaks_off_keeps_what_came_before() -> None:
    body = urlset(url("https://help.example/a"), url("https://help.example/b"))[:-40]
    found = parse(body)
    assert [e.url for e in found.entries] == ["https://help.example/a"]
    assert found.error.startswith("malformed: ParseError")
    assert parse(b"<html><body>Not found</body></html>").error == (
        "not a sitemap (the root element is <html>)"
    )
    assert parse(b"\x1f\x8b\x08\x00garbage").error.startswith("malformed: ")


def test_lastmod_reads_w3c_datetimes_and_ignores_the_future() -> None:
    now = datetime(2026, 11, 27, 12, tzinfo=UTC).timestamp()
    day = datetime(2026, 11, 27, tzinfo=UTC).timestamp()
    assert parse_lastmod("2026-11-27", now) == day
    assert parse_lastmod("2026-11", now) == datetime(2026, 11, 1, tzinfo=UTC).timestamp()
    assert parse_lastmod("2026", now) == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert parse_lastmod("2026-11-27T05:30:00+01:00", now) == day + 4.5 * 3600
    assert parse_lastmod("2026-11-27T04:30:00.5Z", now) == day + 4.5 * 3600 + 0.5
    assert parse_lastmod("2026-11-28", now) is None  # tomorrow: not believed
    assert parse_lastmod("last tuesday", now) is None


def test_the_host_map_moves_a_sitemaps_urls_onto_the_allowed_host() -> None:
    mapping = HostMap({"docs.example.com": "staging.example.com:8443", "cdn.example": "http://a"})
    read_from = "https://staging.example.com:8443/sitemap.xml"
    assert mapping.apply("https://docs.example.com/vpn?x=1#top", read_from) == (
        "https://staging.example.com:8443/vpn?x=1"
    )
    assert mapping.apply("https://cdn.example/p", read_from) == "http://a/p"
    assert mapping.apply("https://other.example/p", read_from) == "https://other.example/p"
    settings = CrawlerSettings(sitemap_host_map={"Docs.Example.com": "HTTP://127.0.0.1:8081/"})
    assert settings.sitemap_host_map == {"docs.example.com": "http://127.0.0.1:8081"}
    with pytest.raises(ValidationError, match="only http and https"):
        CrawlerSettings(sitemap_host_map={"docs.example.com": "ftp://files"})
    with pytest.raises(ValidationError, match="is not an allowed host"):
        CrawlerSettings(sitemap_host_map={"docs.example.com": "staging.example.com/docs"})


def test_a_seed_site_is_looked_up_in_robots_at_its_root_and_beside_the_seed() -> None:
    assert locations_for("http://127.0.0.1:8081/dispatch/", ["/maps/index.xml"]) == [
        "http://127.0.0.1:8081/maps/index.xml",
        "http://127.0.0.1:8081/sitemap.xml",
        "http://127.0.0.1:8081/dispatch/sitemap.xml",
    ]
    assert locations_for("https://help.example/vpn", []) == ["https://help.example/sitemap.xml"]


async def test_a_sites_list_is_announced_once_until_it_changes(fresh_redis_url: str) -> None:
    client = aioredis.from_url(fresh_redis_url)
    reader = SitemapReader(
        client, prefix="t:", ttl_s=60, max_bytes=1_000_000, max_urls=100, max_files=5
    )
    listed = [SitemapEntry("https://help.example/a"), SitemapEntry("https://docs.example/b")]
    try:
        first = await reader.newly_mapped(listed)
        assert {site: [e.url for e in entries] for site, entries in first.items()} == {
            "https://help.example": ["https://help.example/a"],
            "https://docs.example": ["https://docs.example/b"],
        }
        assert await reader.newly_mapped(reversed(listed)) == {}  # the same list, in any order
        grown = [*listed, SitemapEntry("https://help.example/c", title="Printers")]
        assert list(await reader.newly_mapped(grown)) == ["https://help.example"]
        assert 0 < await client.ttl(reader.mapped_key("https://help.example")) <= 60
    finally:
        await client.aclose()
