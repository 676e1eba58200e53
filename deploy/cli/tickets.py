"""``deskpilot tickets export``: resolved tickets as past cases, for ``deskpilot cases import``.

Reads the tickets of the configured ticket backend (TICKETING_BACKEND: the local store in the
data directory by default, or Jira with the JIRA_* settings) and writes the resolved ones as a
JSON file of past cases, exactly what `deskpilot cases import FILE` reads.

Which tickets: those whose status is in the done category (local: Done; Jira: any status of
the Done category, such as Done, Closed or Resolved). Open and in-progress tickets are counted
and left out. Only Deskpilot's tickets are read (Jira: the issues labelled `deskpilot`).

How the resolution is chosen, first match wins:
  1. the last comment that starts with "Resolution:", "Resolved:", "Solution:", "Fix:",
     "Fixed:" or "Workaround:" (the label is dropped), so a technician can mark the answer even
     when thanks or questions follow it;
  2. otherwise the last comment written by a person: Deskpilot's own notes (follow-ups on the
     same problem, incident links, incident resolved) are never a resolution;
  3. otherwise, for a ticket Deskpilot filed already resolved (label dp-silent, a checklist
     fixed the problem), the checklist step(s) that fixed it.
A resolved ticket with none of these is skipped and its key is listed on stderr.

Each case: id (the ticket key), summary, symptoms (the Problem section of a Deskpilot ticket's
description, else the description on one line), resolution, category, opened_at (created)
and resolved_at (the ticket's last update). Ticket texts are already redacted; nothing else
is added.

The local store is read in full. The Jira backend lists at most the newest 100 Deskpilot
issues (the ticket-backend interface has no paging); the command says so when it hits that
limit.

Exit status: 0 when every ticket was read and the file written, 1 when it was written but the
backend could not list every ticket, 2 when nothing could be exported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contracts.events import TicketRecord
    from indexer.cases import ResolvedCase
    from ticketing.backends.base import TicketBackend

PAGE = 100
"""The most tickets one search of the backend interface returns."""
MAX_SYMPTOMS = 2000
"""Symptoms from a free-form description are cut to this many characters (they are embedded)."""

_LABELLED = re.compile(
    r"^\s*(?:resolution|resolved|solution|fix|fixed|workaround)\s*:\s*", re.IGNORECASE
)
# Comments Deskpilot writes itself (ticketing.content): never a resolution.
_REQUEST_MARKER = re.compile(r"\[deskpilot-request:[0-9a-f]+\]")
_INCIDENT_LINKED = re.compile(r"^Deskpilot linked this ticket to incident ")
_INCIDENT_RESOLVED = re.compile(r"^Incident .+ is resolved\.(?:\n|$)")
_SECTION = re.compile(r"^h3\. (.+)$", re.MULTILINE)
_FIXED_STEP = re.compile(r"^\* (.+?) — fixed$")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``tickets`` (with ``export``) to ``deskpilot``'s sub-commands."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "tickets",
        help="work with the ticket backend's tickets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="tickets_action", required=True)
    export = actions.add_parser(
        "export",
        help="write resolved tickets as past cases (JSON for `deskpilot cases import`)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument(
        "--resolved",
        action="store_true",
        default=True,
        help="export the resolved tickets (the default, and the only selection: a past case "
        "is a resolved ticket)",
    )
    export.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the JSON file to write (replaced whole; default: standard output)",
    )
    export.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the data directory whose local ticket store is read "
        "(default: $DESKPILOT_DATA_DIR or ~/.deskpilot; not used with TICKETING_BACKEND=jira)",
    )
    parser.set_defaults(run=run_tickets)
    return parser


def run_tickets(args: argparse.Namespace) -> int:
    if args.tickets_action == "export":
        return _export(args)
    return 2


# -- choosing what a case says ---------------------------------------------------------------


def is_deskpilot_note(comment: str) -> bool:
    """Whether Deskpilot wrote ``comment`` (a follow-up or an incident note), not a person."""
    return bool(
        _REQUEST_MARKER.search(comment)
        or _INCIDENT_LINKED.match(comment)
        or _INCIDENT_RESOLVED.match(comment)
    )


def choose_resolution(record: TicketRecord) -> str | None:
    """The resolution text of a resolved ticket, by the rules of the module docstring."""
    from ticketing.content import SILENT_LABEL

    human: list[tuple[bool, str]] = []  # (labelled, text without the label)
    for comment in record.comments:
        if is_deskpilot_note(comment):
            continue
        label = _LABELLED.match(comment)
        text = comment[label.end() :].strip() if label else comment.strip()
        if text:
            human.append((label is not None, text))
    labelled = [text for is_labelled, text in human if is_labelled]
    if labelled:
        return labelled[-1]
    if human:
        return human[-1][1]
    if SILENT_LABEL in record.labels:
        fixed = [
            match.group(1).strip()
            for line in _section(record.description, "What was tried").splitlines()
            if (match := _FIXED_STEP.match(line.strip()))
        ]
        if fixed:
            return "Fixed by: " + "; ".join(fixed)
    return None


def symptoms_of(record: TicketRecord) -> str:
    """The Problem section of a Deskpilot description, else the description on one line."""
    from ticketing.content import one_line

    if _SECTION.search(record.description):
        problem = _section(record.description, "Problem").strip()
    else:
        problem = one_line(record.description, MAX_SYMPTOMS)
    return "" if problem == record.summary.strip() else problem


def _section(description: str, title: str) -> str:
    """The plain text under ``h3. <title>`` ('' when there is none), as the ticketing service
    wrote it (user text in ``{noformat}`` blocks, which are dropped here)."""
    from ticketing.content import section_text

    return section_text(description, title)


def to_case(record: TicketRecord) -> ResolvedCase | None:
    """The past case of a resolved ticket; None when it has no resolution text."""
    from indexer.cases import ResolvedCase

    resolution = choose_resolution(record)
    if resolution is None or not record.summary.strip():
        return None
    symptoms = symptoms_of(record)
    # Absent rather than empty: the case parser refuses a blank symptoms value.
    optional = {"symptoms": symptoms} if symptoms else {}
    return ResolvedCase(
        id=record.key,
        summary=record.summary,
        resolution=resolution,
        category=record.category,
        opened_at=record.created_at,
        resolved_at=record.updated_at,
        **optional,
    )


# -- reading the backend ---------------------------------------------------------------------


@dataclass
class Reading:
    """What an export found."""

    cases: list[ResolvedCase] = field(default_factory=list)
    not_resolved: int = 0
    without_resolution: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    """Resolved tickets a case cannot be made of (e.g. updated before created)."""
    complete: bool = True
    """False when the backend may hold tickets this reading did not see."""


async def read_tickets(backend: TicketBackend) -> tuple[list[TicketRecord], bool]:
    """Every ticket the backend lets us list, and whether that is all of them.

    One search returns at most :data:`PAGE` tickets, newest first. The local store numbers its
    keys ``<prefix>-1``, ``<prefix>-2``... so when a search comes back full, the older ones are
    fetched by key; other backends are read as far as one search goes.
    """
    from ticketing.backends.base import TicketNotFound, TicketQuery
    from ticketing.backends.local import LocalBackend

    newest = await backend.search(TicketQuery(limit=PAGE))
    if len(newest) < PAGE:
        return newest, True
    if not isinstance(backend, LocalBackend):
        return newest, False
    prefix = f"{backend.config.key_prefix}-"
    numbers = [
        int(r.key.removeprefix(prefix))
        for r in newest
        if r.key.startswith(prefix) and r.key.removeprefix(prefix).isdigit()
    ]
    seen = {record.key for record in newest}
    records = list(newest)
    for number in range(1, max(numbers, default=0) + 1):
        key = f"{prefix}{number}"
        if key in seen:
            continue
        try:
            records.append(await backend.get(key))
        except TicketNotFound:
            continue
    return records, True


async def export_cases(backend: TicketBackend) -> Reading:
    """The resolved tickets of ``backend`` as past cases, oldest first."""
    from pydantic import ValidationError

    records, complete = await read_tickets(backend)
    reading = Reading(complete=complete)
    for record in records:
        if not backend.is_done(record):
            reading.not_resolved += 1
            continue
        try:
            case = to_case(record)
        except ValidationError:  # its text may quote the ticket: only the key is kept
            reading.invalid.append(record.key)
            continue
        if case is None:
            reading.without_resolution.append(record.key)
        else:
            reading.cases.append(case)
    reading.cases.sort(key=_oldest_first)
    reading.without_resolution.sort(key=_natural)
    reading.invalid.sort(key=_natural)
    return reading


def _natural(key: str) -> list[str | int]:
    """DP-2 before DP-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


def _oldest_first(case: ResolvedCase) -> tuple[float, str]:
    return (case.opened_at.timestamp() if case.opened_at else math.inf, case.id)


def render(cases: list[ResolvedCase]) -> str:
    """The file ``deskpilot cases import`` reads: ``{"cases": [...]}``."""
    # Unset fields are left out: the case parser refuses a blank symptoms value.
    items = [case.model_dump(mode="json", exclude_defaults=True) for case in cases]
    return json.dumps({"cases": items}, indent=2, ensure_ascii=False) + "\n"


# -- the command -----------------------------------------------------------------------------


def _fail(message: str) -> int:
    print(f"deskpilot tickets export: {message}", file=sys.stderr)
    return 2


def _export(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from ticketing.backends import build_backend
    from ticketing.backends.base import BackendError
    from ticketing.config import TicketingSettings

    out: Path | None = args.out
    if out is not None and out.suffix.lower() != ".json":
        return _fail(
            f"--out must name a .json file (cases import reads it by its extension), "
            f"not {out.suffix or 'a file without one'}"
        )
    try:
        settings = TicketingSettings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    except ValidationError as exc:
        problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        return _fail(f"the ticketing settings are not valid: {problems}")
    settings = settings.model_copy(update={"data_dir": settings.data_dir.expanduser().resolve()})
    if settings.backend == "local" and not settings.local_config().path.is_file():
        return _fail(
            f"no local ticket store in {settings.data_dir} (no ticket was filed there yet; "
            "pass the stack's --data-dir, or set TICKETING_BACKEND=jira for Jira)"
        )

    backend = build_backend(settings)

    async def run() -> Reading:
        try:
            return await export_cases(backend)
        finally:
            await backend.close()

    try:
        reading = asyncio.run(run())
    except BackendError as exc:  # its message never carries ticket content or secrets
        return _fail(f"cannot read the {backend.name} backend's tickets: {exc}")

    text = render(reading.cases)
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            _write_whole(out, text)
        except OSError as exc:
            return _fail(f"cannot write {out}: {exc.strerror or type(exc).__name__}")
    where = "standard output" if out is None else str(out)
    print(
        f"exported {len(reading.cases)} resolved ticket(s) as past cases to {where}; "
        f"left out: {reading.not_resolved} not resolved, "
        f"{len(reading.without_resolution)} resolved without a resolution text",
        file=sys.stderr,
    )
    if reading.without_resolution:
        print(
            "resolved without a resolution text (add a 'Resolution: ...' comment): "
            + ", ".join(reading.without_resolution),
            file=sys.stderr,
        )
    if reading.invalid:
        print(
            "resolved but not valid as a case (check their dates and summary): "
            + ", ".join(reading.invalid),
            file=sys.stderr,
        )
    if not reading.complete:
        print(
            f"warning: the {backend.name} backend lists at most the newest {PAGE} tickets; "
            "older resolved tickets were not exported",
            file=sys.stderr,
        )
        return 1
    return 0


def _write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` at once: a failed export never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
