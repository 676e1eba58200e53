"""Small PDFs with a real text layer, written by hand, for extraction and upload tests.

pypdf can read text but not lay it out, and no PDF writer is a dependency, so this module writes the
few objects a valid PDF needs (catalog, page tree, a standard Helvetica font, one content stream
per page, an optional info dictionary) and computes the cross-reference table itself.
"""

from __future__ import annotations

from collections.abc import Sequence

Line = tuple[float, str] | tuple[float, str, str]
"""One line of text: its font size in points, the text (Latin-1), and optionally ``"mono"`` to set
it in Courier instead of Helvetica. An empty text leaves a paragraph's worth of space."""

PAGE_WIDTH, PAGE_HEIGHT = 612, 792


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _content(lines: Sequence[Line]) -> bytes:
    """Text operators placing ``lines`` top-down; an empty line leaves a paragraph gap."""
    ops = ["BT"]
    y = PAGE_HEIGHT - 72.0
    for size, text, *font in lines:
        if not text:
            y -= 12
            continue
        y -= size * 1.25
        name = "F2" if font == ["mono"] else "F1"
        ops.append(f"/{name} {size:g} Tf 1 0 0 1 72 {y:g} Tm ({_escape(text)}) Tj")
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def build_pdf(pages: Sequence[Sequence[Line]], *, title: str | None = None) -> bytes:
    """A PDF with one page per entry of ``pages``; ``title`` goes into the info dictionary.

    A page without lines has an empty content stream, like a scanned page without a text layer.
    """
    objects: list[bytes] = []  # object n is objects[n - 1]
    page_ids = [5 + 2 * index for index in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{pid} 0 R" for pid in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    for font in (b"Helvetica", b"Courier"):
        objects.append(
            b"<< /Type /Font /Subtype /Type1 /BaseFont /" + font + b" /Encoding /WinAnsiEncoding >>"
        )
    for pid, lines in zip(page_ids, pages, strict=True):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {PAGE_WIDTH} {PAGE_HEIGHT}] "
            f"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents {pid + 1} 0 R >>".encode()
        )
        stream = _content(lines)
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    info_ref = ""
    if title is not None:
        objects.append(f"<< /Title ({_escape(title)}) /Producer (deskpilot tests) >>".encode())
        info_ref = f" /Info {len(objects)} 0 R"

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info_ref} >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)
