"""Word documents (``.docx``) through python-docx: headings become sections, list paragraphs
steps or bullets, tables tables, so a .docx chunks like the same article in Markdown.

Word marks structure with paragraph styles: ``Title`` and ``Heading 1``-``Heading 9`` (by their
built-in names, whatever the document's language shows), ``List Number*`` and ``List Bullet*``
(or any paragraph with numbering properties). Body text keeps its paragraphs; tables are rendered
as Markdown rows.
"""

from __future__ import annotations

import io
import re
import zipfile

from indexer.extract.model import ExtractedDocument, SectionBuilder, clean_inline

_HEADING = re.compile(r"^Heading ([1-9])$")


class UnreadableDocx(ValueError):
    """Not a Word document python-docx can open (corrupt, encrypted, another format)."""


def extract_docx(data: bytes, *, fallback_title: str, url: str) -> ExtractedDocument:
    """``data``'s headings, paragraphs, lists and tables; raises :class:`UnreadableDocx`."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise UnreadableDocx(f"not a readable .docx file ({type(exc).__name__})") from None
    builder = SectionBuilder()
    title = clean_inline(document.core_properties.title or "")
    number = 0
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = [
                "| " + " | ".join(clean_inline(cell.text) for cell in row.cells) + " |"
                for row in block.rows
            ]
            builder.block("table", "\n".join(rows))
            continue
        if not isinstance(block, Paragraph):
            continue
        text = clean_inline(block.text)
        if not text:
            continue
        style = block.style.name if block.style is not None else ""
        heading = _HEADING.match(style or "")
        if style == "Title":
            title = title or text
            builder.heading(1, text)
        elif heading:
            builder.heading(int(heading.group(1)), text)
        elif style.startswith("List Number"):
            number += 1
            builder.block("step", f"{number}. {text}")
            continue
        elif style.startswith("List Bullet") or (
            block._p.pPr is not None and (block._p.pPr.numPr is not None)
        ):
            builder.block("bullet", f"- {text}")
        else:
            builder.block("paragraph", text)
        number = 0
    title = title or builder.first_h1 or fallback_title
    return ExtractedDocument(title=title, url=url, sections=builder.sections(title))
