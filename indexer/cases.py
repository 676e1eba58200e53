"""Past cases: resolved tickets in their own Chroma collection, imported from CSV or JSON.

A case is a resolved ticket: its id, summary, symptoms, resolution, category and dates. The
orchestrator offers the closest ones as "similar resolved cases" after the knowledge-base answer,
so what is embedded is what a user's question resembles: the summary and the symptoms (the
resolution is what the user wants to learn, not how they describe the problem).

The collection (``DESKPILOT_CASES_COLLECTION``) is created like the knowledge base's: cosine
space through ``configuration`` and no embedding function (Chroma's default one would download a
model). Its record id is the ticket id, so importing the same file twice writes nothing the
second time, and a changed ticket replaces its earlier version.

Files: CSV with a header row, or JSON (a list of objects, or ``{"cases": [...]}``). Columns and
keys: ``id`` (or ``ticket_id``), ``summary``, ``resolution`` (these three are required),
``symptoms``, ``category``, ``opened_at``, ``resolved_at`` (ISO dates or date-times). A file
without a required column is refused as a whole; a bad row is reported with its number and the
good rows are imported.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from indexer.extract import NotText, decode_text
from indexer.store import open_collection

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Metadata, PyEmbedding

    from indexer.config import IndexerSettings
    from indexer.embedding import Embedder

logger = logging.getLogger(__name__)

REQUIRED_FIELDS = ("id", "summary", "resolution")
OPTIONAL_FIELDS = ("symptoms", "category", "opened_at", "resolved_at")
ALIASES = {"ticket_id": "id", "ticket": "id", "key": "id"}
_WRITE_BATCH = 500


class ResolvedCase(BaseModel):
    """One resolved ticket as the cases collection holds it."""

    model_config = ConfigDict(str_strip_whitespace=True, extra="ignore")

    id: str = Field(min_length=1, max_length=200, description="The ticket's id, e.g. IT-1042.")
    summary: str = Field(min_length=1)
    symptoms: str = ""
    resolution: str = Field(min_length=1)
    category: str | None = None
    opened_at: datetime | None = None
    resolved_at: datetime | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _numbers_are_ids_too(cls, value: object) -> object:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("category", "opened_at", "resolved_at", mode="before")
    @classmethod
    def _blank_is_missing(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("symptoms", mode="before")
    @classmethod
    def _no_symptoms(cls, value: object) -> object:
        """A blank or missing symptoms cell (a CSV column left empty) is no symptoms."""
        return "" if value is None else value

    @field_validator("opened_at", "resolved_at", mode="after")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """Dates without a zone are taken as UTC, so any two can be compared."""
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _resolved_after_opened(self) -> ResolvedCase:
        if self.opened_at and self.resolved_at and self.resolved_at < self.opened_at:
            raise ValueError("resolved_at is before opened_at")
        return self

    @property
    def embedded_text(self) -> str:
        """What a similar question is matched against: the summary, then the symptoms."""
        return f"{self.summary}\n{self.symptoms}".strip()

    @property
    def content_hash(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def metadata(self) -> dict[str, str]:
        """Chroma metadata (strings only; an absent value is the empty string)."""
        return {
            "ticket_id": self.id,
            "summary": self.summary,
            "symptoms": self.symptoms,
            "resolution": self.resolution,
            "category": self.category or "",
            "opened_at": self.opened_at.isoformat() if self.opened_at else "",
            "resolved_at": self.resolved_at.isoformat() if self.resolved_at else "",
            "content_hash": self.content_hash,
        }


class CaseFileError(ValueError):
    """The file as a whole cannot be imported: unreadable, wrong shape, or a required column
    missing. Nothing is imported."""


@dataclass(frozen=True, slots=True)
class RowProblem:
    """A row (CSV: its line in the file, the header being line 1) or item (JSON: its position,
    from 1) that was not imported, and why."""

    kind: Literal["row", "item"]
    number: int
    problem: str

    def __str__(self) -> str:
        return f"{self.kind} {self.number}: {self.problem}"


@dataclass(slots=True)
class CaseFile:
    """What a file holds: the good cases, and a problem per bad row."""

    cases: list[ResolvedCase] = field(default_factory=list)
    problems: list[RowProblem] = field(default_factory=list)
    ignored_columns: list[str] = field(default_factory=list)


def read_cases(path: Path) -> CaseFile:
    """Parse a CSV or JSON file of resolved tickets, by its extension."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".json"):
        raise CaseFileError(
            f"{path.name}: unsupported file type {suffix or '(none)'!r}; use .csv or .json"
        )
    try:
        text = decode_text(path.read_bytes())
    except OSError as exc:
        raise CaseFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except NotText as exc:
        raise CaseFileError(f"{path.name}: {exc}") from None
    return parse_csv(text) if suffix == ".csv" else parse_json(text)


def parse_csv(text: str) -> CaseFile:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise CaseFileError("the file is empty; the first row must name the columns") from None
    except csv.Error as exc:
        raise CaseFileError(f"not valid CSV: {exc}") from None
    columns = [_column(name) for name in header]
    _require_columns(columns)
    result = CaseFile(ignored_columns=_ignored(columns))
    seen: dict[str, int] = {}
    line = reader.line_num
    while True:
        first_line = line + 1
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            result.problems.append(RowProblem("row", first_line, f"not valid CSV: {exc}"))
            break
        line = reader.line_num
        if not any(value.strip() for value in values):
            continue
        if len(values) > len(columns):
            result.problems.append(
                RowProblem(
                    "row", first_line, f"{len(values)} fields, the header has {len(columns)}"
                )
            )
            continue
        row = dict(zip(columns, values, strict=False))
        _add(result, row, RowProblemFactory("row", first_line), seen)
    return result


def parse_json(text: str) -> CaseFile:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CaseFileError(f"not valid JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        data = data["cases"]
    if not isinstance(data, list):
        raise CaseFileError('expected a JSON list of cases, or {"cases": [...]}')
    result = CaseFile()
    seen: dict[str, int] = {}
    for number, item in enumerate(data, start=1):
        problem = RowProblemFactory("item", number)
        if not isinstance(item, dict):
            result.problems.append(problem("not an object"))
            continue
        row = {_column(str(key)): value for key, value in item.items()}
        missing = [name for name in REQUIRED_FIELDS if name not in row]
        if missing:
            result.problems.append(problem(f"missing {', '.join(missing)}"))
            continue
        _add(result, row, problem, seen)
    return result


@dataclass(frozen=True, slots=True)
class RowProblemFactory:
    kind: Literal["row", "item"]
    number: int

    def __call__(self, problem: str) -> RowProblem:
        return RowProblem(self.kind, self.number, problem)


def _add(
    result: CaseFile, row: dict[str, Any], problem: RowProblemFactory, seen: dict[str, int]
) -> None:
    try:
        case = ResolvedCase.model_validate(row)
    except ValidationError as exc:
        result.problems.append(problem(_explain(exc)))
        return
    if case.id in seen:
        result.problems.append(
            problem(f"duplicate id {case.id!r} (first in {problem.kind} {seen[case.id]}); skipped")
        )
        return
    seen[case.id] = problem.number
    result.cases.append(case)


def _explain(exc: ValidationError) -> str:
    """One line per problem, naming the field; long values are never quoted."""
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        if error["type"] in ("string_too_short", "missing"):
            problems.append(f"{where} is empty")
        elif error["type"] == "value_error":
            problems.append(str(error["msg"]).removeprefix("Value error, "))
        elif where in ("opened_at", "resolved_at"):
            problems.append(f"{where} is not a date (use ISO, e.g. 2024-03-01 or 2024-03-01T14:30)")
        else:
            problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def _column(name: str) -> str:
    key = name.strip().lower().replace(" ", "_").replace("-", "_")
    return ALIASES.get(key, key)


def _require_columns(columns: list[str]) -> None:
    missing = [name for name in REQUIRED_FIELDS if name not in columns]
    if missing:
        found = ", ".join(name for name in columns if name) or "none"
        raise CaseFileError(
            f"missing required column(s): {', '.join(missing)} (found: {found}); the columns are "
            f"{', '.join(REQUIRED_FIELDS)} (required) and {', '.join(OPTIONAL_FIELDS)}"
        )


def _ignored(columns: list[str]) -> list[str]:
    known = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS)
    return [name for name in columns if name and name not in known]


# --------------------------------------------------------------------------------------------
# The collection


def open_cases_collection(settings: IndexerSettings) -> Collection:
    """The cases collection, on the same Chroma and with the same creation rules as the
    knowledge base's (:func:`indexer.store.open_collection`)."""
    return open_collection(
        settings.model_copy(update={"chroma_collection": settings.cases_collection})
    )


@dataclass(slots=True)
class CaseImport:
    written: int = 0
    unchanged: int = 0


class CaseStore:
    """Upserts resolved tickets, embedding only new or changed ones."""

    def __init__(self, embedder: Embedder, collection: Collection) -> None:
        self._embedder = embedder
        self._collection = collection

    def upsert(self, cases: list[ResolvedCase]) -> CaseImport:
        """Idempotent by ticket id: an unchanged ticket is neither embedded nor written."""
        report = CaseImport()
        for start in range(0, len(cases), _WRITE_BATCH):
            batch = cases[start : start + _WRITE_BATCH]
            stored = self._collection.get(ids=[case.id for case in batch], include=["metadatas"])
            hashes = {
                id_: str((meta or {}).get("content_hash"))
                for id_, meta in zip(stored["ids"], stored["metadatas"] or [], strict=False)
            }
            changed = [case for case in batch if hashes.get(case.id) != case.content_hash]
            report.unchanged += len(batch) - len(changed)
            if not changed:
                continue
            embeddings: list[PyEmbedding] = list(
                self._embedder.encode([case.embedded_text for case in changed])
            )
            indexed_at = datetime.now(UTC).isoformat(timespec="seconds")
            metadatas: list[Metadata] = [
                {**case.metadata(), "indexed_at": indexed_at} for case in changed
            ]
            self._collection.upsert(
                ids=[case.id for case in changed],
                embeddings=embeddings,
                documents=[case.embedded_text for case in changed],
                metadatas=metadatas,
            )
            report.written += len(changed)
        logger.info("cases imported: %d written, %d unchanged", report.written, report.unchanged)
        return report

    def count(self) -> int:
        return self._collection.count()
