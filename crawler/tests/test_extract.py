"""What the crawler reads of a page for itself: title, links, visible text and its hash (no
browser needed). The knowledge base's content is the indexer's extraction of the page's HTML."""

from __future__ import annotations

import hashlib

from crawler.extract import decode_html, html_text, is_pdf, read_html, read_pdf
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


def test_visible_text_leaves_chrome_out_and_keeps_the_page_for_the_event() -> None:
    page = read_html(PAGE, "https://it.example/vpn/reset")
    assert page.title == "Reset your VPN password | IT Help"
    assert page.html == PAGE  # published as read: the indexer extracts it
    assert page.text.splitlines() == [
        "Reset your VPN password",
        "Passwords expire every 90 days. Use vpnctl to check.",
        "Steps",
        "Open the self-service portal.",
        "Choose Reset.",
        "On a phone, use the app.",
        "vpnctl status",
        "vpnctl reset",
        "OS",
        "Client",
        "Windows",
        "GlobalProtect",
        "See also the vendor's guide.",
    ]
    assert page.words == len(page.text.split())
    assert page.content_hash == hashlib.sha256(" ".join(page.text.split()).encode()).hexdigest()
    assert html_text(PAGE) == page.text


def test_links_come_from_the_whole_page_normalised_with_context() -> None:
    page = read_html(PAGE, "https://it.example/vpn/reset")
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
    page = read_html(html, "https://docs.example/somewhere/else")
    assert [(link.url, link.anchor) for link in page.links] == [
        ("https://docs.example/v2/intro", "Intro"),
        ("https://docs.example/img.png", "Diagram"),
    ]


def test_same_text_under_different_markup_hashes_alike() -> None:
    a = read_html("<html><body><main><p>Same   words here.</p></main></body></html>", "u1")
    b = read_html(
        "<html><body><div class='x'><main><p>Same words\nhere.</p></main></div></body></html>", "u2"
    )
    c = read_html("<html><body><main><p>Other words.</p></main></body></html>", "u3")
    assert a.content_hash == b.content_hash != c.content_hash


def test_a_page_without_title_uses_its_first_heading() -> None:
    page = read_html("<html><body><h1>Printers</h1><p>Add one.</p></body></html>", "u")
    assert page.title == "Printers"


def test_code_lines_broken_by_br_stay_lines() -> None:
    """Syntax highlighters write one span per line ending in <br> (no newline character)."""
    html = (
        '<html><body><main><pre class="prism"><code>'
        '<span class="token-line">dispatch server start<br></span>'
        '<span class="token-line">dispatch <span class="t">--help</span><br></span>'
        "</code></pre></main></body></html>"
    )
    page = read_html(html, "https://docs.example.com/cli")
    assert page.text.splitlines() == ["dispatch server start", "dispatch --help"]


def test_a_page_that_asks_for_javascript_says_so() -> None:
    html = (
        "<html><body><noscript>You need to enable JavaScript to run this app.</noscript>"
        "<main><p>Loading</p></main></body></html>"
    )
    assert read_html(html, "u").asks_for_javascript
    assert not read_html(PAGE, "u").asks_for_javascript


def test_served_bytes_are_decoded_by_the_http_charset_else_the_document() -> None:
    page = (
        "<html><head><meta charset='windows-1252'></head>"
        "<body><p>Caf\xe9 \u2013 menu</p></body></html>"
    )
    data = page.encode("cp1252")
    assert decode_html(data) == page  # by the <meta charset>
    assert decode_html(data, "windows-1252") == page
    assert decode_html(page.encode("utf-8"), "utf-8") == page


def test_a_pdf_is_known_by_its_file_name_and_its_bytes_hash() -> None:
    data = build_pdf([[(18, "VPN client guide"), (11, "Install the client from the portal.")]])
    page = read_pdf(data, "https://it.example/docs/VPN%20client%20guide.pdf")
    assert page.title == "VPN client guide.pdf"
    assert page.content_hash == hashlib.sha256(data).hexdigest()
    assert (page.text, page.html, page.links) == ("", "", ())
    assert is_pdf(data)
    assert is_pdf(b"\n  %PDF-1.7\n")
    assert not is_pdf(b"<html>Not found</html>")
