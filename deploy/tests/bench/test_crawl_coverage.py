"""``deskpilot bench crawl``'s extraction coverage: what counts as a page's content (its words
less navigation, by the extractor's own rule), what counts as lost, and pages with nothing to
cover."""

from __future__ import annotations

from pathlib import Path

from deploy.bench.crawl import Coverage, coverage_of, reference_texts
from indexer.extract import extract_html
from tests.support import SHARED_DATA

DISPATCH = SHARED_DATA / "sites" / "dispatch-docs"

PAGE = """<!doctype html><html><head><title>Zoom | Docs</title></head><body>
<nav class="navbar"><a href="/">Docs</a></nav>
<main><div class="row"><div class="col"><article>
<nav class="breadcrumbs"><ul><li><a href="/docs/plugins">Plugins</a></li></ul></nav>
<div class="theme-doc-toc-mobile"><button>On this page</button></div>
<h1>Configuring Zoom</h1>
<p>Dispatch creates a Zoom meeting for every incident.</p>
<h2 id="key"><code>ZOOM_API_KEY</code> [Required. Secret: True]</h2>
<p>The key of the Zoom application.</p>
%s
<footer><a href="/edit">Edit this page</a></footer>
</article>
<nav class="pagination-nav"><a href="/docs/prev">Previous</a></nav></div>
<div class="col col--3"><div class="theme-doc-toc-desktop"><ul class="table-of-contents">
<li><a href="#key">ZOOM_API_KEY [Required. Secret: True]</a></li></ul></div></div>
</div></main></body></html>"""

CARDS = """<ul><li><a href="/docs/zoom/meetings">Meetings</a> Who joins and when.</li>
<li><a href="/docs/zoom/recordings">Recordings</a> Where recordings are kept.</li></ul>"""


def _coverage(html: str, extracted: str, url: str = "http://site/docs/zoom") -> Coverage:
    coverage = Coverage()
    coverage.add(html, extracted, url)
    return coverage


def test_tables_of_contents_breadcrumbs_and_pager_are_not_content() -> None:
    html = PAGE % ""
    extracted = extract_html(html, fallback_title="", fallback_url="").text

    assert _coverage(html, extracted).content == [1.0]
    reference = reference_texts(html).content
    for navigation in ("On this page", "Plugins", "Previous", "Edit this page"):
        assert navigation not in reference
    assert reference.split().count("ZOOM_API_KEY") == 1  # the heading, not its TOC entry


def test_link_cards_and_lost_text_count_as_lost() -> None:
    """The reference is not cut to what the extractor keeps: link cards are no navigation (the
    extractor leaves them out for retrieval's sake, and that shows), and text missing from the
    extraction lowers coverage."""
    plain = PAGE % ""
    with_cards = PAGE % CARDS
    assert "Where recordings are kept." in " ".join(reference_texts(with_cards).content.split())

    extracted = extract_html(with_cards, fallback_title="", fallback_url="").text
    assert "Where recordings are kept." not in extracted
    without_paragraph = extracted.replace("Dispatch creates a Zoom meeting for every incident.", "")
    assert _coverage(plain, extracted).content == [1.0]
    assert 0.6 < _coverage(with_cards, extracted).content[0] < 0.85
    assert _coverage(plain, without_paragraph).content[0] < 0.85


def test_a_page_with_only_a_title_is_not_applicable_not_zero() -> None:
    empty = (PAGE % "").split("<p>")[0] + "</article></div></div></main></body></html>"
    assert reference_texts(empty).empty

    coverage = Coverage()
    coverage.add(empty, "", "http://site/docs/contact")
    coverage.add(PAGE % "", "Dispatch creates a Zoom meeting", "http://site/docs/zoom")
    summary = coverage.summary()

    assert summary["empty_pages"] == ["http://site/docs/contact"]
    assert summary["pages"] == 1
    assert summary["worst_content_page"] == "http://site/docs/zoom"
    assert 0 < summary["content_min"] == summary["content_mean"] < 0.5


def test_only_empty_pages_give_no_figures() -> None:
    coverage = Coverage()
    coverage.add("<html><body><main><h1>Contact</h1></main></body></html>", "", "http://s/c")
    assert coverage.summary() == {"pages": 0, "empty_pages": ["http://s/c"]}


def _served(path: str) -> Path:
    file = DISPATCH / "dispatch" / "docs" / f"{path}.html"
    assert file.is_file(), f"shared data missing: {file} (see ../shared/README.md)"
    return file


def test_real_docusaurus_pages_read_in_place() -> None:
    """The Dispatch docs as served: a settings page loses nothing but its table of contents;
    the contact category page, whose cards are drawn by JavaScript, holds only its title."""
    plugin = _served("administration/settings/plugins/configuring-opsgenie")
    contact = _served("administration/settings/contact")
    site = "http://127.0.0.1:8000/dispatch/docs/administration/settings"
    pages = [
        (f"{site}/{name}", extract_html(file.read_text(), fallback_title="", fallback_url="").text)
        for name, file in (("plugins/configuring-opsgenie", plugin), ("contact", contact))
    ]

    summary = coverage_of(DISPATCH, pages)

    assert summary["empty_pages"] == [f"{site}/contact"]
    assert (summary["pages"], summary["content_min"]) == (1, 1.0)
