"""MkDocs hook: the repository files the documentation links to, published with the site.

The pages in ``docs/`` link to a few files that live elsewhere in the repository (the README's
tour and the security policy at the root, the Kubernetes notes beside the manifests, the bus's
AsyncAPI document in ``contracts/``) with relative links, which work wherever the Markdown is
read in the repository. MkDocs knows only ``docs/``: in the built site those links would lead
nowhere, and ``mkdocs build --strict`` refuses them. This hook adds the files of
:data:`PUBLISHED` that exist to the site under ``repository/<their path>`` and rewrites every link
that leaves ``docs/``:

- to a published file: the link follows it into the site;
- to any other file or folder of the repository: the link becomes that path as code, since the
  site holds no copy of it;
- to a path that does not exist: the link is left alone, so MkDocs reports it.

Links inside a published page are read from the file's own place in the repository, so the
README's and the security policy's links into ``docs/`` lead to the site's pages.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

PUBLISHED = (
    "README.md",
    "SECURITY.md",
    "deploy/k8s/README.md",
    "contracts/asyncapi.yaml",
    "deploy/slack/manifest.yaml",
)
"""Repository files outside ``docs/`` that the site carries (when they exist)."""

PREFIX = "repository/"
DOCS = "docs/"

_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")
_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1", re.MULTILINE | re.DOTALL)


def _root(config: MkDocsConfig) -> Path:
    return Path(str(config.config_file_path)).resolve().parent


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = _root(config)
    nav_text = repr(config.nav)
    for path in PUBLISHED:
        source = root / path
        if source.is_file():
            # Files the navigation does not name are linked from pages instead: no nav warning.
            listed = PREFIX + path in nav_text
            inclusion = InclusionLevel.UNDEFINED if listed else InclusionLevel.NOT_IN_NAV
            files.append(
                File.generated(config, PREFIX + path, abs_src_path=str(source), inclusion=inclusion)
            )
    return files


def _place_in_repository(page: Page) -> str:
    source = page.file.src_uri
    return source.removeprefix(PREFIX) if source.startswith(PREFIX) else DOCS + source


def _rewrite_links(text: str, page: Page, files: Files, root: Path) -> str:
    here = posixpath.dirname(_place_in_repository(page))
    site_here = posixpath.dirname(page.file.src_uri)

    def rewrite(match: re.Match[str]) -> str:
        target = match["target"]
        if ":" in target or target.startswith(("#", "/")):
            return match[0]  # a URL, an anchor on this page or an absolute path: not ours
        path, _, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(here, path))
        if resolved.startswith(DOCS):
            in_site = resolved.removeprefix(DOCS)
        elif files.get_file_from_path(PREFIX + resolved) is not None:
            in_site = PREFIX + resolved
        elif (root / resolved).exists():
            return f"{match['text']} (`{resolved}`)"
        else:
            return match[0]
        relative = posixpath.relpath(in_site, site_here or ".")
        return f"[{match['text']}]({relative}{'#' + anchor if anchor else ''})"

    return _LINK.sub(rewrite, text)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    root = _root(config)
    # Code blocks are shown as written; only the prose between them is rewritten.
    parts, last = [], 0
    for fence in _FENCE.finditer(markdown):
        parts.append(_rewrite_links(markdown[last : fence.start()], page, files, root))
        parts.append(fence[0])
        last = fence.end()
    parts.append(_rewrite_links(markdown[last:], page, files, root))
    return "".join(parts)
