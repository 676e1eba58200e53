"""An approved article as the HTML a draft page holds: its Markdown rendered, its sources cited.

Both systems take XHTML: Confluence's storage format is XHTML with its own macros, and a
SharePoint text web part's ``innerHtml`` is plain HTML. markdown-it renders CommonMark with raw
HTML switched off (an article drafted from users' questions and crawled pages is text, never
markup to trust) and void tags closed (``<br />``), which storage format requires.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from markdown_it import MarkdownIt

from indexer.sources.base import Draft, DraftCitation

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "xhtmlOut": True})
SOURCES_HEADING = "Sources"
NOTE = "Drafted by Deskpilot from a reviewed knowledge-base proposal; review it before publishing."


def draft_html(draft: Draft) -> str:
    """The article's body (a leading ``# title`` dropped: the page has its own title), a list
    of its sources, and a line saying where the draft came from."""
    markdown = draft.markdown.lstrip()
    first, _, rest = markdown.partition("\n")
    if first.startswith("# ") and first[2:].strip() == draft.title.strip():
        markdown = rest
    parts = [_MARKDOWN.render(markdown).strip()]
    if draft.citations:
        items = "".join(f"<li>{_citation(c)}</li>" for c in draft.citations)
        parts.append(f"<h2>{SOURCES_HEADING}</h2><ol>{items}</ol>")
    parts.append(f"<p><em>{escape(NOTE)}</em></p>")
    return "".join(parts)


def _citation(citation: DraftCitation) -> str:
    title = escape(citation.title or citation.ref)
    if urlsplit(citation.ref).scheme in ("http", "https"):
        return f'<a href="{escape(citation.ref, quote=True)}">{title}</a>'
    return f"{title} ({escape(citation.ref)})" if citation.title else title
