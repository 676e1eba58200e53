"""Extraction: a knowledge-base file in, the text a reader would see out, organised by section.

The chunker needs more than flat text: it must know where headings are (chunks never cross them),
which lines are numbered steps and which are code (those are never split). So extraction keeps the
document's structure as :class:`Section` objects, each with its heading path and a list of typed
:class:`Block` s, and drops everything a reader skips: navigation, headers and footers, scripts,
styles, forms.

Supported: HTML (``.html``, ``.htm``), Markdown (``.md``, ``.markdown``, with optional
``key: value`` front matter), plain text (``.txt``) and PDF (``.pdf``, its text layer only: a
scanned PDF without one yields no text). Anything else raises :class:`UnsupportedDocument`; a PDF
that cannot be parsed or is password-protected, or a text file that holds binary data, raises
:class:`UnreadableDocument`. Nothing here
touches the network.

One module per part: :mod:`~indexer.extract.model` (the extracted form and the section builder),
:mod:`~indexer.extract.html`, :mod:`~indexer.extract.markdown`, :mod:`~indexer.extract.text` (plain
text and decoding) and :mod:`~indexer.extract.pdf`; this package's top level picks the reader by
file type.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from indexer.extract.html import extract_html
from indexer.extract.markdown import extract_markdown, split_front_matter
from indexer.extract.model import (
    HTML_SUFFIXES,
    MARKDOWN_SUFFIXES,
    PDF_SUFFIXES,
    SECTION_SEPARATOR,
    SUPPORTED_SUFFIXES,
    TEXT_SUFFIXES,
    Block,
    BlockKind,
    ExtractedDocument,
    Section,
    UnreadableDocument,
    UnsupportedDocument,
    join_blocks,
)
from indexer.extract.pdf import extract_pdf
from indexer.extract.text import NotText, decode_text, extract_plain_text

__all__ = [
    "HTML_SUFFIXES",
    "MARKDOWN_SUFFIXES",
    "PDF_SUFFIXES",
    "SECTION_SEPARATOR",
    "SUPPORTED_SUFFIXES",
    "TEXT_SUFFIXES",
    "Block",
    "BlockKind",
    "ExtractedDocument",
    "NotText",
    "Section",
    "UnreadableDocument",
    "UnsupportedDocument",
    "decode_text",
    "extract_bytes",
    "extract_document",
    "extract_html",
    "extract_markdown",
    "extract_pdf",
    "extract_plain_text",
    "join_blocks",
    "split_front_matter",
]


def extract_document(path: Path) -> ExtractedDocument:
    """Read ``path`` and extract its title, URL, metadata and sectioned text.

    Raises :class:`UnsupportedDocument` for file types other than HTML, Markdown, plain text and
    PDF (and its subclass :class:`UnreadableDocument` for a PDF that cannot be read or a text
    file that holds binary data). The URL falls back to the file's ``file://`` URI, so every
    document has a stable identity.
    """
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise UnsupportedDocument(path)
    doc = _extract(path.read_bytes(), path, fallback_url=path.resolve().as_uri())
    return dataclasses.replace(doc, source_path=path)


def extract_bytes(data: bytes, filename: str, url: str) -> ExtractedDocument:
    """Extract an uploaded file's content; its type comes from ``filename``'s extension.

    ``url`` names the document whatever its content claims (a Markdown front-matter ``url`` or an
    HTML canonical link are ignored): an upload is known, cited and deleted by its upload URL.
    The title falls back to the file name without its extension. Raises like
    :func:`extract_document`.
    """
    path = Path(filename)
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise UnsupportedDocument(path)
    doc = _extract(data, path, fallback_url=url)
    return dataclasses.replace(doc, url=url)


def _extract(data: bytes, path: Path, *, fallback_url: str) -> ExtractedDocument:
    suffix = path.suffix.lower()
    fallback_title = path.stem
    if suffix in PDF_SUFFIXES:
        return extract_pdf(
            data, fallback_title=fallback_title, fallback_url=fallback_url, path=path
        )
    try:
        text = decode_text(data)
    except NotText as exc:
        raise UnreadableDocument(path, str(exc)) from None
    if suffix in HTML_SUFFIXES:
        return extract_html(text, fallback_title=fallback_title, fallback_url=fallback_url)
    if suffix in MARKDOWN_SUFFIXES:
        return extract_markdown(text, fallback_title=fallback_title, fallback_url=fallback_url)
    return extract_plain_text(text, fallback_title=fallback_title, fallback_url=fallback_url)
