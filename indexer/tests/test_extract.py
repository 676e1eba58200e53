"""Extraction keeps what a reader reads, in sections, and drops the page chrome around it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from indexer.extract import (
    Block,
    ExtractedDocument,
    UnsupportedDocument,
    extract_document,
    split_front_matter,
)
from tests.support import SHARED_DATA

GNOME_HELP = SHARED_DATA / "kb" / "gnome-help"

HELP_PAGE = """<!DOCTYPE html>
<html><head>
<title>Printer help | Example Corp IT</title>
<link rel="canonical" href="https://it.example.com/kb/printer-setup">
<style>.hidden { display: none }</style>
<script>window.trackingSecret = "SCRIPT-TEXT";</script>
</head>
<body>
<header><a href="/">Example Corp IT</a> <span>HEADER-TEXT</span></header>
<nav><ul><li><a href="/kb">NAV-TEXT home</a></li></ul></nav>
<main>
  <nav class="breadcrumbs">BREADCRUMB-TEXT</nav>
  <h1>Add a network printer</h1>
  <p>Network printers are shared by a whole floor.</p>
  <div class="note">Loose text in a div is content too.</div>
  <h2>On Windows</h2>
  <ol>
    <li><p>Open <b>Settings</b>.</p></li>
    <li>Choose <em>Printers &amp; scanners</em>.<p>It may take a moment to load.</p></li>
    <li>Click <span class="gui">Add device</span>.</li>
  </ol>
  <h3>If the printer is not listed</h3>
  <ul><li>Check the cable.</li><li>Restart the print spooler.</li></ul>
  <pre class="language-powershell"><code>Restart-Service -Name Spooler
Get-Printer | Format-Table</code></pre>
  <h2>On macOS</h2>
  <p>Open System Settings and choose Printers.</p>
  <form><label>Was this helpful?</label><button>FORM-TEXT yes</button></form>
  <aside>ASIDE-TEXT related articles</aside>
  <noscript>NOSCRIPT-TEXT</noscript>
</main>
<footer>FOOTER-TEXT Copyright Example Corp</footer>
</body></html>
"""


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _blocks(doc: ExtractedDocument) -> list[Block]:
    return [block for section in doc.sections for block in section.blocks]


def _raw_title(html: str) -> str:
    match = re.search(r"<title>(.*?)</title>", html, re.S)
    assert match, "fixture page has no <title>"
    return " ".join(match.group(1).split())


# -- HTML --------------------------------------------------------------------------------------


def test_html_drops_navigation_scripts_forms_and_footer(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "printer.html", HELP_PAGE))

    for boilerplate in (
        "SCRIPT-TEXT",
        "HEADER-TEXT",
        "NAV-TEXT",
        "BREADCRUMB-TEXT",
        "FORM-TEXT",
        "ASIDE-TEXT",
        "NOSCRIPT-TEXT",
        "FOOTER-TEXT",
        "display: none",
    ):
        assert boilerplate not in doc.text
    assert "Network printers are shared by a whole floor." in doc.text
    assert "Loose text in a div is content too." in doc.text


def test_html_title_url_and_section_paths(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "printer.html", HELP_PAGE))

    assert doc.title == "Add a network printer"  # the first <h1>, not the <title> with site name
    assert doc.url == "https://it.example.com/kb/printer-setup"
    assert [section.path for section in doc.sections] == [
        ("Add a network printer",),
        ("Add a network printer", "On Windows"),
        ("Add a network printer", "On Windows", "If the printer is not listed"),
        ("Add a network printer", "On macOS"),
    ]
    assert (
        doc.sections[2].heading
        == "Add a network printer > On Windows > If the printer is not listed"
    )


def test_html_lists_become_numbered_steps_and_bullets(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "printer.html", HELP_PAGE))
    windows = doc.sections[1]

    assert [block.kind for block in windows.blocks] == ["step", "step", "step"]
    assert windows.blocks[0].text == "1. Open Settings."
    # A step with several paragraphs stays one block, continuation indented under the number.
    assert (
        windows.blocks[1].text == "2. Choose Printers & scanners.\n   It may take a moment to load."
    )
    assert windows.blocks[2].text == "3. Click Add device."
    bullets = [block.text for block in doc.sections[2].blocks if block.kind == "bullet"]
    assert bullets == ["- Check the cable.", "- Restart the print spooler."]


def test_html_code_is_kept_as_a_fenced_block(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "printer.html", HELP_PAGE))

    code = [block.text for block in _blocks(doc) if block.kind == "code"]
    assert code == ["```powershell\nRestart-Service -Name Spooler\nGet-Printer | Format-Table\n```"]


def test_html_without_h1_or_canonical_falls_back_to_title_tag_and_file_uri(tmp_path: Path) -> None:
    page = (
        "<html><head><title>Badge  reader FAQ</title></head><body><p>Tap twice.</p></body></html>"
    )
    path = _write(tmp_path / "badge.htm", page)

    doc = extract_document(path)

    assert doc.title == "Badge reader FAQ"
    assert doc.url == path.resolve().as_uri()
    assert doc.sections[0].path == ("Badge reader FAQ",)


def test_html_without_any_title_uses_the_file_name(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "loose-notes.html", "<p>Just a fragment.</p>"))
    assert doc.title == "loose-notes"
    assert "Just a fragment." in doc.text


def test_html_prefers_main_content_over_the_rest_of_the_body(tmp_path: Path) -> None:
    page = (
        "<html><body><div class='sidebar'>SIDEBAR-TEXT</div>"
        "<div role='main'><h1>Real article</h1><p>Body text.</p></div></body></html>"
    )
    doc = extract_document(_write(tmp_path / "page.html", page))
    assert doc.title == "Real article"
    assert "SIDEBAR-TEXT" not in doc.text
    assert "Body text." in doc.text


# -- Markdown ----------------------------------------------------------------------------------

ARTICLE_MD = """---
title: "Reset your VPN password"
url: https://it.example.com/kb/vpn-password
category: connectivity
os: windows
# comments and unknown lines are ignored
---

Your VPN password expires every 180 days.

## On Windows

3. Open **Northwind Connect**.
4. Click [Forget password](https://example.com/forget).
   Then follow the e-mail link.

```powershell
ipconfig /flushdns
```

## On macOS

- Open the menu bar icon.
  - Choose *Settings*.
- Sign in again.
"""


def test_markdown_front_matter_gives_metadata_and_is_not_content(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "vpn.md", ARTICLE_MD))

    assert doc.title == "Reset your VPN password"
    assert doc.url == "https://it.example.com/kb/vpn-password"
    assert doc.category == "connectivity"
    assert doc.os == "windows"
    assert "category:" not in doc.text
    assert "---" not in doc.text


def test_markdown_sections_start_with_the_front_matter_title(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "vpn.md", ARTICLE_MD))

    assert [section.heading for section in doc.sections] == [
        "Reset your VPN password",
        "Reset your VPN password > On Windows",
        "Reset your VPN password > On macOS",
    ]


def test_markdown_steps_code_and_nested_bullets(tmp_path: Path) -> None:
    doc = extract_document(_write(tmp_path / "vpn.md", ARTICLE_MD))
    windows, macos = doc.sections[1].blocks, doc.sections[2].blocks

    # The list's own start number is kept; inline markup and link targets are dropped.
    assert [(b.kind, b.text) for b in windows] == [
        ("step", "3. Open Northwind Connect."),
        ("step", "4. Click Forget password. Then follow the e-mail link."),
        ("code", "```powershell\nipconfig /flushdns\n```"),
    ]
    assert [(b.kind, b.text) for b in macos] == [
        ("bullet", "- Open the menu bar icon.\n  - Choose Settings."),
        ("bullet", "- Sign in again."),
    ]


def test_markdown_without_front_matter_uses_h1_then_file_name(tmp_path: Path) -> None:
    with_h1 = extract_document(_write(tmp_path / "a.md", "# Map a drive\n\nUse File Explorer.\n"))
    without = _write(tmp_path / "unmap-a-drive.markdown", "Right-click and choose Disconnect.\n")

    assert with_h1.title == "Map a drive"
    assert with_h1.sections[0].path == ("Map a drive",)
    assert extract_document(without).title == "unmap-a-drive"
    assert extract_document(without).url == without.resolve().as_uri()
    assert with_h1.category is None
    assert with_h1.os is None


@pytest.mark.parametrize(
    ("text", "expected_meta"),
    [
        ("---\ntitle: A\n---\nbody\n", {"title": "A"}),
        ("---\nTitle: 'Quoted: with colon'\n...\nbody\n", {"title": "Quoted: with colon"}),
        ("---\ntitle: never closed\nbody\n", {}),
        ("Intro\n---\n", {}),
    ],
)
def test_split_front_matter(text: str, expected_meta: dict[str, str]) -> None:
    meta, body = split_front_matter(text)
    assert meta == expected_meta
    if expected_meta:
        assert body.strip() == "body"
    else:
        assert body == text


# -- Plain text and decoding -------------------------------------------------------------------


def test_plain_text_paragraphs_and_numbered_steps(tmp_path: Path) -> None:
    text = (
        "Clear the Teams cache.\n\n"
        "1. Quit Teams.\n2) Delete the cache folder.\n\n"
        "Then start it again.\n"
    )
    doc = extract_document(_write(tmp_path / "teams-cache.txt", text))

    assert doc.title == "teams-cache"
    assert [(b.kind, b.text) for b in _blocks(doc)] == [
        ("paragraph", "Clear the Teams cache."),
        ("step", "1. Quit Teams."),
        ("step", "2. Delete the cache folder."),
        ("paragraph", "Then start it again."),
    ]


def test_latin1_files_are_decoded_not_rejected(tmp_path: Path) -> None:
    doc = extract_document(
        _write(tmp_path / "cafe.txt", "Caf\xe9 Wi-Fi password".encode("latin-1"))
    )
    assert "Café Wi-Fi password" in doc.text


def test_utf8_bom_is_not_part_of_the_text(tmp_path: Path) -> None:
    doc = extract_document(
        _write(tmp_path / "bom.md", "\ufeff---\ntitle: BOM\n---\nHello\n".encode())
    )
    assert doc.title == "BOM"
    assert "\ufeff" not in doc.text


@pytest.mark.parametrize("name", ["manual.docx", "scan.png", "Makefile"])
def test_unsupported_files_raise_a_clear_error(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path / name, "whatever")
    with pytest.raises(UnsupportedDocument, match="unsupported file type") as caught:
        extract_document(path)
    assert caught.value.path == path
    assert ".html" in str(caught.value)  # tells the operator what is supported


# -- Identity ----------------------------------------------------------------------------------


def test_doc_id_follows_the_url_and_content_hash_follows_the_content(tmp_path: Path) -> None:
    first = extract_document(_write(tmp_path / "one" / "vpn.md", ARTICLE_MD))
    moved = extract_document(_write(tmp_path / "moved.md", ARTICLE_MD))
    edited = extract_document(_write(tmp_path / "edited.md", ARTICLE_MD.replace("180", "90")))
    recategorised = extract_document(
        _write(
            tmp_path / "recat.md", ARTICLE_MD.replace("category: connectivity", "category: account")
        )
    )

    assert first.doc_id == moved.doc_id == edited.doc_id  # same front-matter URL
    assert first.content_hash == moved.content_hash
    assert edited.content_hash != first.content_hash
    assert recategorised.content_hash != first.content_hash


# -- Real pages, read in place -----------------------------------------------------------------

REAL_PAGES = [
    "net-vpn-connect.html",
    "user-changepassword.html",
    "net-wireless-troubleshooting-hardware-check.html",
]


@pytest.mark.parametrize("name", REAL_PAGES)
def test_real_gnome_help_pages(name: str) -> None:
    path = GNOME_HELP / name
    assert path.is_file(), f"shared corpus missing: {path} (see ../shared/README.md)"
    raw = path.read_text(encoding="utf-8")

    doc = extract_document(path)

    assert doc.title == _raw_title(raw)
    assert all(section.path[0] == doc.title for section in doc.sections)
    assert len(doc.text) > 600
    assert any(block.kind == "step" and block.text.startswith("1. ") for block in _blocks(doc))
    # Breadcrumb trail, related-link lists, the credits footer and the highlighter script.
    for boilerplate in (
        "»",
        "More Information",
        "See Also",
        "Written By",
        "Creative Commons",
        "hljs",
    ):
        assert boilerplate not in doc.text, boilerplate


# -- Navigation and link cards ------------------------------------------------------------------


def _html_text(tmp_path: Path, main: str) -> str:
    page = tmp_path / "page.html"
    page.write_text(f"<html><body><main>{main}</main></body></html>", encoding="utf-8")
    return extract_document(page).text


def test_link_cards_of_an_index_page_are_left_out(tmp_path: Path) -> None:
    """A card's description says what another page is for; the index holds that page itself,
    which its description on the index page would outrank (see ``drop_boilerplate``)."""
    text = _html_text(
        tmp_path,
        "<h1>Sound</h1><p>Sound settings and troubleshooting.</p>"
        "<ul><li><a href='volume.html'>Change the volume</a> Make sounds louder.</li>"
        "<li><a href='mic.html'>Use another microphone</a> Pick the input device.</li></ul>"
        "<ol><li>Open <a href='settings.html'>Settings</a>.</li><li>Choose Sound.</li></ol>",
    )

    assert (
        text
        == "Sound\n\nSound settings and troubleshooting.\n\n1. Open Settings.\n2. Choose Sound."
    )


def test_cards_drawn_as_boxes_are_link_cards_and_their_headings_no_sections(
    tmp_path: Path,
) -> None:
    """Docusaurus' category cards (``<a class=card><h2>title</h2><p>description</p></a>`` in
    a grid) and GNOME help's link boxes (title and description spans inside the link, in
    columns, one of which may hold a single box)."""
    text = _html_text(
        tmp_path,
        "<h1>Settings</h1><p>Who is paged, and for what.</p><section class='row'>"
        "<article class='col'><a class='card' href='/settings/contact/team'>"
        "<h2 class='cardTitle'>Team</h2><p class='cardDescription'>Who gets paged.</p></a>"
        "</article>"
        "<article class='col'><a class='card' href='/settings/contact/service'>"
        "<h2 class='cardTitle'>Service</h2><p class='cardDescription'>What is on call.</p></a>"
        "</article></section>"
        "<div class='links-twocolumn'><div class='links-divs'>"
        "<div class='linkdiv'><a href='backup-how.html'><span class='title'>How to back up</span>"
        "<span class='desc'> \u2014 Use a backup application.</span></a></div>"
        "<div class='linkdiv'><a href='backup-what.html'><span class='title'>What to back up"
        "</span><span class='desc'> \u2014 Anything you cannot lose.</span></a></div></div>"
        "<div class='links-divs'><div class='linkdiv'><a href='backup-where.html'>"
        "<span class='title'>Where to store it</span><span class='desc'> \u2014 Devices to use."
        "</span></a></div></div></div>",
    )

    assert text == "Settings\n\nWho is paged, and for what."


def test_tables_of_contents_and_lists_of_bare_links_are_navigation(tmp_path: Path) -> None:
    text = _html_text(
        tmp_path,
        "<div class='theme-doc-toc-mobile'><button>On this page</button></div>"
        "<h1>Zoom</h1><p>Configure the Zoom plugin.</p>"
        "<ul><li><a href='#api-key'>API key</a></li><li><a href='#api-secret'>API secret</a>"
        "<ul><li><a href='#rotation'>Rotation</a></li></ul></li></ul>"
        "<h2 id='api-key'>ZOOM_API_KEY</h2><p>The key of the application.</p>"
        "<ul class='tags'><li><a href='/tags/plugins'>Plugins <span>4</span></a></li>"
        "<li><a href='/tags/video'>Video</a></li></ul>"
        "<ul><li><a href='/docs/slack'>Slack</a> ›</li><li><a href='/docs/jira'>Jira</a></li></ul>",
    )

    assert text == (
        "Zoom\n\nConfigure the Zoom plugin.\n\nZoom > ZOOM_API_KEY\n\nThe key of the application."
    )


def test_prose_whose_only_markup_is_links_is_kept(tmp_path: Path) -> None:
    """A paragraph whose child elements are all links (wrapped, as GNOME help writes them) is
    no list of links."""
    text = _html_text(
        tmp_path,
        "<h1>Backups</h1><p>Copy your files to <span class='link'><a href='drive.html'>an "
        "external drive</a></span> or <span class='link'><a href='cloud.html'>an online storage "
        "service</a></span>.</p>",
    )
    assert text == "Backups\n\nCopy your files to an external drive or an online storage service."


def test_real_gnome_help_prose_with_links_is_kept() -> None:
    text = extract_document(GNOME_HELP / "power-percentage.html").text
    assert "It can also display the charge as a percentage." in text


def test_real_gnome_help_index_page_keeps_its_text_not_its_link_cards() -> None:
    text = extract_document(GNOME_HELP / "a11y.html").text

    assert "The system includes assistive technologies" in text
    assert "Ignore quickly-repeated key presses of the same key." not in text
    assert "»" not in text  # the breadcrumb trail
