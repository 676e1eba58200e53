"""The Dispatch documentation (``../shared/data/sites/dispatch-docs``, read in place) as a
configured help site: its seed on loopback and its pages as the crawler fleet reports them."""

from __future__ import annotations

import html
import re

from tests.support import SHARED_DATA

SITE_DIR = SHARED_DATA / "sites" / "dispatch-docs"
SEED = "http://127.0.0.1:8000/dispatch/"
"""Where a stack serving the site on loopback has its seed."""


def dispatch_pages() -> list[tuple[str, str]]:
    """Every page of the Dispatch site as the fleet would report it: URL and title."""
    assert SITE_DIR.is_dir(), f"shared data missing: {SITE_DIR} (see ../shared/README.md)"
    pages = []
    for path in sorted(SITE_DIR.rglob("*.html")):
        found = re.search(r"<title[^>]*>(.*?)</title>", path.read_text(errors="replace"), re.S)
        title = html.unescape(found.group(1)).strip() if found else ""
        pages.append((f"http://127.0.0.1:8000/{path.relative_to(SITE_DIR).as_posix()}", title))
    return pages
