"""The documentation builds, offline, and says what the code says.

``mkdocs build --strict`` (broken links, anchors and navigation fail it) runs here with every
socket refused, so building the site needs no network. The generated parts are held to their
generators: the settings table to the settings classes (``deploy.envdoc``), the table of streams
to the committed AsyncAPI document (``deskpilot asyncapi``). The diagrams of the services and
streams are held to the document the contracts generate, the README's figures to the figures
page, and every ``deskpilot`` command the pages show to the real command line.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from argparse import ArgumentParser, Namespace, _SubParsersAction
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.topics import REPLY_PREFIX
from deploy import envdoc
from deploy.cli import asyncapi
from deploy.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md"))
ASYNCAPI = ROOT / "contracts" / "asyncapi.yaml"
SETTINGS_PAGE = ROOT / envdoc.PAGE
STREAMS_PAGE = DOCS / "reference" / "asyncapi.md"
FIGURES_PAGE = DOCS / "figures.md"
FIGURES_BEGIN, FIGURES_END = "<!-- figures:begin -->", "<!-- figures:end -->"
SERVICES = {"gateway", "redactor", "ocr", "orchestrator", "crawler", "indexer", "ticketing"}

OFFLINE_BUILD = """
import socket, sys

def refuse(*args, **kwargs):
    sys.stderr.write(f"NETWORK ATTEMPT {args!r}\\n")
    raise OSError("the documentation build must not use the network")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from mkdocs.__main__ import cli
sys.argv = ["mkdocs", "build", "--strict", "--site-dir", sys.argv[1]]
cli()
"""


def _between(text: str, begin: str, end: str) -> str:
    assert text.count(begin) == 1, begin
    assert text.count(end) == 1, end
    _, rest = text.split(begin, 1)
    return rest.split(end, 1)[0].strip()


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- the site ------------------------------------------------------------------------------------


def test_the_site_builds_strictly_without_network(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-c", OFFLINE_BUILD, str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    output = result.stdout + result.stderr
    assert "NETWORK ATTEMPT" not in output, output
    assert result.returncode == 0, output
    for page in PAGES:
        relative = page.relative_to(DOCS).with_suffix("")
        built = site / ("index.html" if relative.name == "index" else relative / "index.html")
        assert built.is_file(), f"{_shown(page)} was not built"
    home = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in home, "theme.font must stay false: no web fonts"
    assert '<pre class="mermaid">' in home, "the diagram is rendered by Mermaid"
    # Repository files the pages link to are published with the site (docs/hooks).
    assert (site / "repository" / "index.html").is_file(), "the README, with its tour"
    assert (site / "repository" / "deploy" / "k8s" / "index.html").is_file()
    assert (site / "repository" / "contracts" / "asyncapi.yaml").read_bytes() == (
        ASYNCAPI.read_bytes()
    )


_LINK = re.compile(r"(?<!!)\[[^\]\n]+\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```", re.MULTILINE | re.DOTALL)


def _slug(heading: str) -> str:
    """The anchor both GitHub and Python-Markdown's toc give a plain heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page: Path) -> set[str]:
    prose = _FENCE.sub("", page.read_text())
    return {_slug(m[1]) for m in re.finditer(r"^#{1,6}\s+(.+)$", prose, re.MULTILINE)}


@pytest.mark.parametrize("page", [README, *PAGES], ids=_shown)
def test_every_link_leads_somewhere(page: Path) -> None:
    """Relative links name an existing file of the repository, and an existing heading in it.
    (Inside docs/ mkdocs checks this too; this also covers the README and links out of docs/.)"""
    prose = _FENCE.sub("", page.read_text())
    for target in _LINK.findall(prose):
        if ":" in target or target.startswith("/"):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{_shown(page)} links to {target}: no such file"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{_shown(page)} links to {target}: no heading"


def test_the_hook_rewrites_links_that_leave_docs() -> None:
    """A link out of docs/ follows a published file into the site, becomes a path as code for
    any other file of the repository, and is left for mkdocs to report when it leads nowhere."""
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        import repository_files as hook
    finally:
        sys.path.remove(str(DOCS / "hooks"))

    published = {"repository/SECURITY.md"}
    files = Namespace(get_file_from_path=lambda uri: uri if uri in published else None)
    page = Namespace(file=Namespace(src_uri="reference/asyncapi.md"))
    policy = Namespace(file=Namespace(src_uri="repository/SECURITY.md"))
    markdown = (
        "[policy](../../SECURITY.md#report) [rooms](../../gateway/) [gone](../../nowhere.md) "
        "[users](../users.md#ratings) [site](https://example.org/x)\n"
        "```\n[kept](../../gateway/)\n```\n"
    )
    config = Namespace(config_file_path=str(ROOT / "mkdocs.yml"))
    out = hook.on_page_markdown(markdown, page, config, files)
    assert "[policy](../repository/SECURITY.md#report)" in out
    assert "rooms (`gateway`)" in out
    assert "[gone](../../nowhere.md)" in out
    assert "[users](../users.md#ratings)" in out
    assert "[site](https://example.org/x)" in out
    assert "[kept](../../gateway/)" in out, "code blocks are shown as written"
    back = hook.on_page_markdown("[page](docs/security.md#defences)", policy, config, files)
    assert back == "[page](../security.md#defences)"


# -- generated reference -------------------------------------------------------------------------


def test_settings_table_matches_the_settings_classes() -> None:
    documented = _between(SETTINGS_PAGE.read_text(), envdoc.BEGIN, envdoc.END)
    assert documented == envdoc.table(), f"run: python -m deploy.envdoc --write {envdoc.PAGE}"


def test_every_variable_has_a_meaning() -> None:
    for row in envdoc.table().splitlines()[2:]:
        assert row.rstrip(" |").split("|")[-1].strip(), row


def test_envdoc_write_replaces_only_the_table(tmp_path: Path) -> None:
    page = tmp_path / "settings.md"
    page.write_text(f"# Settings\n\nbefore\n\n{envdoc.BEGIN}\n| stale |\n{envdoc.END}\n\nafter\n")
    assert envdoc.main(["--write", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("# Settings\n\nbefore\n\n")
    assert text.endswith("\n\nafter\n")
    assert _between(text, envdoc.BEGIN, envdoc.END) == envdoc.table()


def test_streams_table_matches_the_committed_asyncapi_document() -> None:
    document = yaml.safe_load(ASYNCAPI.read_text())
    documented = _between(STREAMS_PAGE.read_text(), asyncapi.DOCS_BEGIN, asyncapi.DOCS_END)
    assert documented == asyncapi.streams_table(document), (
        f"run: deskpilot asyncapi --docs {_shown(STREAMS_PAGE)}"
    )
    for channel in document["channels"].values():
        assert f"| `{channel['address']}` |" in documented


def test_asyncapi_docs_option_replaces_only_the_table(tmp_path: Path) -> None:
    page = tmp_path / "asyncapi.md"
    page.write_text(f"# Bus\n\n{asyncapi.DOCS_BEGIN}\nstale\n{asyncapi.DOCS_END}\n\nafter\n")
    parser, runners = build_parser()
    assert runners["asyncapi"](parser.parse_args(["asyncapi", "--docs", str(page)])) == 0
    text = page.read_text()
    assert text.startswith("# Bus\n\n")
    assert text.endswith("\n\nafter\n")
    expected = asyncapi.streams_table(asyncapi.build_document())
    assert _between(text, asyncapi.DOCS_BEGIN, asyncapi.DOCS_END) == expected


# -- diagrams ------------------------------------------------------------------------------------

_EDGE = re.compile(r'^\s*(\w+)(?:[\[(][^\n]*?[\])])?\s*--\s*"([^"]+)"\s*-->\s*(\w+)', re.MULTILINE)


@functools.cache
def _bus() -> frozenset[tuple[str, str, str]]:
    """(writer, stream, reading group) for every stream, from the AsyncAPI document the contracts
    generate now (the committed copy may lag behind them until it is regenerated)."""
    document = asyncapi.build_document()
    writers: dict[str, set[str]] = {}
    readers: dict[str, set[str]] = {}
    for operation in document["operations"].values():
        channel = operation["channel"]["$ref"].rsplit("/", 1)[1]
        if operation["action"] == "send":
            writers.setdefault(channel, set()).add(operation["tags"][0]["name"])
        elif group := operation.get("bindings", {}).get("redis", {}).get("groupName"):
            readers.setdefault(channel, set()).add(group)  # not `deskpilot dlq`: it has no group
    return frozenset(
        (writer, channel, reader)
        for channel in writers
        for writer in writers[channel]
        for reader in readers.get(channel, ())
    )


def _diagram_edges(page: Path) -> Iterator[tuple[str, str, str]]:
    [diagram] = re.findall(r"^```mermaid\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL)
    edges = _EDGE.findall(diagram)
    assert len(edges) >= 10, f"{_shown(page)}: the diagram's arrows were not found"
    for source, label, target in edges:
        for stream in (part.strip() for part in label.split(",")):
            if "." in stream:
                channel = "reply" if stream.startswith(REPLY_PREFIX) else stream
                yield source, channel, target


@pytest.mark.parametrize("page", [README, DOCS / "index.md", DOCS / "developers.md"], ids=_shown)
def test_every_arrow_of_a_diagram_is_a_real_stream(page: Path) -> None:
    bus = _bus()
    drawn = list(_diagram_edges(page))
    for edge in drawn:
        assert {edge[0], edge[2]} <= SERVICES, f"{_shown(page)}: {edge}"
        assert edge in bus, f"{_shown(page)}: {edge[0]} does not write {edge[1]} for {edge[2]}"


NOT_DRAWN = {("audit.log", "gateway"), ("conversation.purged", "gateway")}
"""What the developers' diagram leaves out, and says so under it."""


def test_the_developers_diagram_draws_every_stream_between_services() -> None:
    drawn = set(_diagram_edges(DOCS / "developers.md"))
    missing = sorted(
        edge
        for edge in _bus()
        if edge[0] in SERVICES and edge[0] != edge[2] and (edge[1], edge[2]) not in NOT_DRAWN
    )
    missing = [edge for edge in missing if edge not in drawn]
    assert not missing, f"draw these in docs/developers.md: {missing}"


# -- figures and commands ------------------------------------------------------------------------

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def test_the_readme_quotes_its_figures_from_the_figures_page() -> None:
    figures = _between(FIGURES_PAGE.read_text(), FIGURES_BEGIN, FIGURES_END)
    section = README.read_text().split("## Measured", 1)[1].split("\n## ", 1)[0]
    quoted = set(_NUMBER.findall(section))
    assert len(quoted) >= 15, "the README's summary of the key figures"
    measured = set(_NUMBER.findall(figures))
    assert quoted <= measured, f"not on docs/figures.md: {sorted(quoted - measured)}"


def _subcommands(parser: ArgumentParser) -> dict[str, Any]:
    for action in parser._actions:
        if isinstance(action, _SubParsersAction):
            return dict(action.choices)
    return {}


_INLINE_COMMAND = re.compile(r"`(?:\.venv/bin/)?deskpilot ([a-z][a-z-]*(?: [a-z][a-z-]*)*)")
_COMMAND_LINE = re.compile(r"^[ \t]*(?:[^#\n]*\|\s*)?\.venv/bin/deskpilot (.+)$", re.MULTILINE)
_SH_BLOCK = re.compile(r"^[ \t]*```sh\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("page", [README, *PAGES], ids=_shown)
def test_every_deskpilot_command_shown_exists(page: Path) -> None:
    """Inline, ``deskpilot <command> [<kind>]`` names a real command; a whole command line in a
    code block parses with the real parser, options and all."""
    parser, _ = build_parser()
    commands = _subcommands(parser)
    text = page.read_text()
    for words in _INLINE_COMMAND.findall(text):
        command, *rest = words.split()
        assert command in commands, f"{_shown(page)}: no command deskpilot {command}"
        kinds = _subcommands(commands[command])
        if kinds and rest:
            assert rest[0] in kinds, f"{_shown(page)}: no command deskpilot {command} {rest[0]}"
    lines_checked = 0
    for block in _SH_BLOCK.findall(text):
        for line in _COMMAND_LINE.findall(block):
            argv = shlex.split(line, comments=True)
            try:
                parser.parse_args(argv)
            except SystemExit as exc:
                raise AssertionError(f"{_shown(page)}: deskpilot {line!r} does not parse") from exc
            lines_checked += 1
    expected = {README: 1, DOCS / "operators.md": 10}.get(page, 0)
    assert lines_checked >= expected, f"{_shown(page)}: its command lines were not found"
