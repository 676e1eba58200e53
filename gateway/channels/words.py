"""What every channel says and links the same way."""

from __future__ import annotations

import re

FIXED_TEXT = "That fixed it"
STILL_BROKEN_TEXT = "Done, still broken"
"""The checklist buttons' words, and the text of the turn a press starts (the web chat's)."""

_SAFE_URL = re.compile(r"https?://[^\s<>|()\[\]]+")


def safe_url(url: str) -> str | None:
    """``url`` when it is a plain http(s) URL that no platform's link syntax can be broken out
    of (no spaces, angle brackets, pipes, parentheses or square brackets), else None."""
    return url if _SAFE_URL.fullmatch(url) else None
