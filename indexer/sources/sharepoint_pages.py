"""SharePoint site pages and list items as documents: what Graph returns for them, turned into
the indexer's extracted form.

A site page (``sitePage`` with ``$expand=canvasLayout``) is its text web parts' ``innerHtml``,
in reading order (horizontal sections, their columns, then the vertical section), under the
page's title; it goes through the indexer's HTML extractor, so the page's headings become
sections exactly as in an HTML file. Other web parts (quick links, a call to action) give the
texts SharePoint marks for its own search index; those without text (an image) give nothing.
Only published pages are indexed: a checked-out draft (such as one this project writes back) is
nobody's knowledge yet.

A list item is its title column and its body columns; rich-text columns arrive as HTML and are
kept so, other values are escaped. With several body columns each is a section named after the
column.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterator
from typing import Any

from indexer.extract import ExtractedDocument, extract_html
from indexer.sources.base import Change, DocumentError

PAGE_PREFIX = "page/"
LIST_PREFIX = "list/"
TEXT_WEB_PART = "textWebPart"


def page_key(page_id: str) -> str:
    return f"{PAGE_PREFIX}{page_id}"


def list_item_key(list_id: str, item_id: str) -> str:
    return f"{LIST_PREFIX}{list_id}/{item_id}"


def page_change(page: dict[str, Any]) -> Change | None:
    """The change a listed page stands for; None for a page that is not published."""
    state = page.get("publishingState") or {}
    if not isinstance(state, dict) or state.get("level") != "published":
        return None
    version = f"{page.get('eTag') or ''}@{page.get('lastModifiedDateTime') or ''}"
    if version == "@":
        raise DocumentError("Microsoft Graph listed a page without eTag or lastModifiedDateTime")
    return Change(page_key(str(page["id"])), version)


def list_item_change(list_id: str, item: dict[str, Any], config_tag: str) -> Change:
    """The change a delta listed; its version carries ``config_tag`` (what the list's settings
    make of an item), so a change of columns or readers changes every item's version."""
    key = list_item_key(list_id, str(item.get("id", "")))
    if "deleted" in item:
        return Change(key, "", deleted=True)
    version = str(item.get("eTag") or item.get("lastModifiedDateTime") or "")
    return Change(key, f"{version}#{config_tag}")


def _web_parts(page: dict[str, Any]) -> Iterator[dict[str, Any]]:
    layout = page.get("canvasLayout") or {}
    for section in layout.get("horizontalSections") or []:
        for column in section.get("columns") or []:
            yield from column.get("webparts") or []
    yield from (layout.get("verticalSection") or {}).get("webparts") or []


def _web_part_html(part: Any) -> str:
    """A text web part's HTML; for another web part (quick links, a call to action) the texts
    SharePoint itself search-indexes (``serverProcessedContent``: ``htmlStrings`` and
    ``searchablePlainTexts``); nothing for one without text (an image)."""
    if not isinstance(part, dict):
        return ""
    if str(part.get("@odata.type", "")).endswith(TEXT_WEB_PART):
        return str(part.get("innerHtml") or "")
    content = (part.get("data") or {}).get("serverProcessedContent") or {}
    pairs = [
        (kind, pair.get("value"))
        for kind in ("htmlStrings", "searchablePlainTexts")
        for pair in content.get(kind) or []
        if isinstance(pair, dict)
    ]
    return "".join(
        str(value) if kind == "htmlStrings" else f"<p>{html.escape(str(value))}</p>"
        for kind, value in pairs
        if value
    )


def page_document(page: dict[str, Any], fallback_url: str) -> ExtractedDocument:
    """The page's text, its headings as sections, titled and linked as Graph names it."""
    title = str(page.get("title") or page.get("name") or "Untitled page")
    url = str(page.get("webUrl") or fallback_url)
    texts = [_web_part_html(part) for part in _web_parts(page)]
    body = "\n".join(f"<div>{text}</div>" for text in texts if text)
    document = extract_html(
        f"<article><h1>{html.escape(title)}</h1>{body}</article>",
        fallback_title=title,
        fallback_url=url,
    )
    # The page's own URL, whatever a web part's HTML claims (a canonical link in innerHtml).
    return dataclasses.replace(document, url=url)


def _column_html(value: Any) -> str:
    if isinstance(value, list):
        value = ", ".join(
            str(v.get("LookupValue", v)) if isinstance(v, dict) else str(v) for v in value
        )
    elif isinstance(value, dict):
        value = str(value.get("LookupValue") or value.get("Label") or value.get("Url") or "")
    text = str(value)
    if text.lstrip().startswith("<"):
        return text  # a rich-text column: SharePoint's HTML
    return "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"


def list_item_document(
    item: dict[str, Any], title_column: str, body_columns: list[tuple[str, str]], fallback_url: str
) -> ExtractedDocument:
    """An item: ``title_column`` (internal name) titles it; ``body_columns`` (display name,
    internal name) make its text, each a section when there are several."""
    fields = item.get("fields")
    if not isinstance(fields, dict):
        raise DocumentError("Microsoft Graph returned the item without its fields")
    title = str(fields.get(title_column) or "").strip() or f"Item {item.get('id', '')}"
    url = str(item.get("webUrl") or fallback_url)
    parts: list[str] = []
    for shown, internal in body_columns:
        value = fields.get(internal)
        if value in (None, "", []):
            continue
        heading = f"<h2>{html.escape(shown)}</h2>" if len(body_columns) > 1 else ""
        parts.append(heading + _column_html(value))
    if not parts:
        raise DocumentError(
            f"no text in its body columns ({', '.join(shown for shown, _ in body_columns)})"
        )
    document = extract_html(
        f"<article><h1>{html.escape(title)}</h1>{''.join(parts)}</article>",
        fallback_title=title,
        fallback_url=url,
    )
    return dataclasses.replace(document, url=url)
