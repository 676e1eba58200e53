"""Markdown articles, with optional ``key: value`` front matter (title, url, category, os)."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from indexer.extract.html import HtmlWalker, drop_boilerplate, list_start
from indexer.extract.model import (
    BlockSink,
    ExtractedDocument,
    ItemCollector,
    SectionBuilder,
    clean_inline,
    fence,
    render_item,
)

_MARKDOWN = MarkdownIt("commonmark").enable("table")
_FRONT_MATTER_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$")


def extract_markdown(text: str, *, fallback_title: str, fallback_url: str) -> ExtractedDocument:
    """Extract a Markdown article.

    Front matter (``---`` lines around ``key: value`` pairs) may give ``title``, ``url``,
    ``category`` and ``os``. Title: front matter, else the first ``# heading``, else
    ``fallback_title``. URL: front matter, else ``fallback_url``.
    """
    meta, body = split_front_matter(text)
    builder = SectionBuilder()
    _MarkdownWalker(builder).walk(SyntaxTreeNode(_MARKDOWN.parse(body)))
    title = meta.get("title") or builder.first_h1 or fallback_title
    return ExtractedDocument(
        title=title,
        url=meta.get("url") or fallback_url,
        sections=builder.sections(title),
        category=meta.get("category") or None,
        os=meta.get("os") or None,
    )


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split ``---``-delimited front matter of simple ``key: value`` lines from the body.

    Deliberately not YAML: the demo articles need flat strings only, and a YAML parser would be
    one more dependency. Keys are lower-cased; surrounding quotes are stripped; lines that are not
    ``key: value`` (comments, blank lines) are ignored. Text without a closing ``---`` (or ``...``)
    line is treated as having no front matter.
    """
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            meta: dict[str, str] = {}
            for line in lines[1:index]:
                match = _FRONT_MATTER_KEY.match(line.strip())
                if match:
                    meta[match.group(1).lower()] = _unquote(match.group(2).strip())
            return meta, "".join(lines[index + 1 :])
    return {}, text


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


class _MarkdownWalker:
    """Walks markdown-it's syntax tree, emitting headings and typed blocks to a sink."""

    def __init__(self, sink: BlockSink) -> None:
        self._sink = sink

    def walk(self, node: SyntaxTreeNode) -> None:
        for child in node.children:
            self._visit(child)

    def _visit(self, node: SyntaxTreeNode) -> None:
        kind = node.type
        if kind == "heading":
            self._sink.heading(int(node.tag[1:]), _md_inline_text(node))
        elif kind == "paragraph":
            self._sink.block("paragraph", clean_inline(_md_inline_text(node)))
        elif kind in ("fence", "code_block"):
            language = node.info.split()[0] if node.info.strip() else ""
            self._sink.block("code", fence(node.content, language))
        elif kind in ("bullet_list", "ordered_list"):
            self._emit_list(node, ordered=kind == "ordered_list")
        elif kind == "table":
            self._sink.block("table", _md_table_text(node))
        elif kind == "html_block":
            soup = BeautifulSoup(node.content, "html.parser")
            drop_boilerplate(soup)
            HtmlWalker(self._sink).walk(soup)
        elif kind == "hr":
            return
        else:  # blockquote and any container a plugin adds: their content counts
            self.walk(node)

    def _emit_list(self, node: SyntaxTreeNode, *, ordered: bool) -> None:
        number = list_start(node.attrs.get("start", 1)) if ordered else 1
        for item in node.children:
            collector = ItemCollector()
            _MarkdownWalker(collector).walk(item)
            if not collector.blocks:
                continue
            marker = f"{number}." if ordered else "-"
            rendered = render_item(marker, collector.blocks)
            self._sink.block("step" if ordered else "bullet", rendered)
            number += 1


def _md_inline_text(node: SyntaxTreeNode) -> str:
    """Plain text of a node's inline content: link text kept, images and raw HTML dropped."""
    parts: list[str] = []

    def visit(current: SyntaxTreeNode) -> None:
        for child in current.children:
            if child.type in ("text", "code_inline"):
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            elif child.type in ("image", "html_inline"):
                continue
            else:
                visit(child)

    visit(node)
    return "".join(parts)


def _md_table_text(table: SyntaxTreeNode) -> str:
    rows: list[str] = []

    def visit(node: SyntaxTreeNode) -> None:
        for child in node.children:
            if child.type == "tr":
                cells = [clean_inline(_md_inline_text(cell)) for cell in child.children]
                if any(cells):
                    rows.append(" | ".join(cells))
            else:
                visit(child)

    visit(table)
    return "\n".join(rows)
