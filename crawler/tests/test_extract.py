"""Extraction: a rendered page in, title, Markdown, text and links out (no browser needed)."""

from __future__ import annotations

from crawler.extract import extract_html, extract_pdf
from tests.support.pdf import build_pdf

PAGE = """<!doctype html><html><head><title>Reset your VPN password | IT Help</title>
<script>var tracking = "never in the text";</script><style>p { color: red }</style></head>
<body>
<header><nav><a href="/">Home</a> <a href="/vpn/">VPN</a></nav></header>
<div class="cookie" role="dialog">We use cookies</div>
<main>
  <h1>Reset your VPN password</h1>
  <p>Passwords expire every <strong>90 days</strong>. Use <code>vpnctl</code> to check.</p>
  <h2>Steps</h2>
  <ol>
    <li>Open the <a href="portal.html#reset">self-service portal</a>.</li>
    <li>Choose <em>Reset</em>.
      <ul><li>On a phone, use the app.</li></ul>
    </li>
  </ol>
  <pre><code>vpnctl status
vpnctl reset</code></pre>
  <table><tr><th>OS</th><th>Client</th></tr><tr><td>Windows</td><td>GlobalProtect</td></tr></table>
  <p hidden>Hidden text</p>
  <p>See also <a href="https://other.example/help?utm_source=x">the vendor's guide</a>.</p>
</main>
<footer>Copyright Northwind <a href="/legal">Legal</a></footer>
</body></html>"""


def test_markdown_keeps_structure_and_drops_chrome() -> None:
    page = extract_html(PAGE, "https://it.example/vpn/reset")
    assert page.title == "Reset your VPN password | IT Help"
    md = page.markdown
    assert md.startswith("# Reset your VPN password")
    assert "## Steps" in md
    assert "1. Open the self-service portal." in md
    assert "2. Choose *Reset*" in md
    assert "  - On a phone, use the app." in md
    assert "```\nvpnctl status\nvpnctl reset\n```" in md
    assert "| OS | Client |" in md
    assert "| Windows | GlobalProtect |" in md
    assert "**90 days**" in md
    assert "`vpnctl`" in md
    for chrome in ("never in the text", "color: red", "We use cookies", "Copyright", "Hidden"):
        assert chrome not in md
    assert "**" not in page.text
    assert "Passwords expire every 90 days" in page.text


def test_links_come_from_the_whole_page_normalised_with_context() -> None:
    page = extract_html(PAGE, "https://it.example/vpn/reset")
    links = {link.url: link for link in page.links}
    assert list(links) == [
        "https://it.example/",
        "https://it.example/vpn",
        "https://it.example/vpn/portal.html",
        "https://other.example/help",
        "https://it.example/legal",
    ]
    portal = links["https://it.example/vpn/portal.html"]
    assert portal.anchor == "self-service portal"
    assert "Open the self-service portal" in portal.context


def test_base_href_and_javascript_links() -> None:
    html = """<html><head><base href="https://docs.example/v2/"></head><body>
    <a href="intro">Intro</a><a href="javascript:void(0)">x</a><a href="mailto:a@b">m</a>
    <a href="#top">top</a><a href="/img.png" title="Diagram"></a></body></html>"""
    page = extract_html(html, "https://docs.example/somewhere/else")
    assert [(link.url, link.anchor) for link in page.links] == [
        ("https://docs.example/v2/intro", "Intro"),
        ("https://docs.example/img.png", "Diagram"),
    ]


def test_same_text_under_different_markup_hashes_alike() -> None:
    a = extract_html("<html><body><main><p>Same   words here.</p></main></body></html>", "u1")
    b = extract_html(
        "<html><body><div class='x'><main><p>Same words\nhere.</p></main></div></body></html>", "u2"
    )
    c = extract_html("<html><body><main><p>Other words.</p></main></body></html>", "u3")
    assert a.content_hash == b.content_hash != c.content_hash


def test_a_page_without_title_uses_its_first_heading() -> None:
    page = extract_html("<html><body><h1>Printers</h1><p>Add one.</p></body></html>", "u")
    assert page.title == "Printers"


def test_code_lines_broken_by_br_stay_lines() -> None:
    """Syntax highlighters write one span per line ending in <br> (no newline character)."""
    html = (
        '<html><body><main><pre class="prism"><code>'
        '<span class="token-line">dispatch server start<br></span>'
        '<span class="token-line">dispatch <span class="t">--help</span><br></span>'
        "</code></pre></main></body></html>"
    )
    page = extract_html(html, "https://docs.example.com/cli")
    assert "```\ndispatch server start\ndispatch --help\n```" in page.markdown
    assert page.text.splitlines() == ["dispatch server start", "dispatch --help"]


def test_a_count_badge_stays_a_word_of_its_own_and_button_labels_are_text() -> None:
    html = (
        '<html><body><main><ul><li><a href="/tags/start">Getting started<span>1</span></a></li>'
        "</ul><p>Unicode<sup>2</sup> and H2O stay.</p>"
        '<div class="toc"><button type="button">On this page</button></div></main></body></html>'
    )
    page = extract_html(html, "https://docs.example.com/tags")
    assert "Getting started 1" in page.text
    assert "Unicode 2 and H2O stay." in page.text
    assert "On this page" in page.text


def test_pdf_text_layer() -> None:
    data = build_pdf([[(18, "VPN client guide"), (11, "Install the client from the portal.")]])
    page = extract_pdf(data, "https://it.example/guide.pdf")
    assert "Install the client from the portal." in page.text
    assert page.title == "VPN client guide"
    assert page.markdown.startswith("# VPN client guide")
