"""Past cases: reading CSV and JSON files of resolved tickets, and the idempotent upsert."""

from __future__ import annotations

import csv
import io
import json
import warnings
from pathlib import Path

import pytest

from indexer.cases import (
    CaseFileError,
    CaseStore,
    ResolvedCase,
    open_cases_collection,
    parse_csv,
    parse_json,
    read_cases,
)
from indexer.config import IndexerSettings
from indexer.embedding import Embedder

ROWS = [
    ["Ticket ID", "Summary", "Symptoms", "Resolution", "Category", "Opened At", "Resolved At"]
    + ["Agent"],
    ["IT-1", "VPN drops every few minutes", "Disconnects on hotel Wi-Fi\nreconnects after a minute"]
    + ["Switched the VPN protocol to TCP", "connectivity", "2024-03-01", "2024-03-02T10:00:00"]
    + ["ann"],
    ["IT-2", "", "No summary here", "Reset", "account", "", "", "bob"],
    ["IT-3", "Password expired while travelling", "Cannot sign in off network"]
    + ["Reset via self-service portal", "account", "2024-03-05", "yesterday", "ann"],
    ["IT-4", "Headset silent in Teams", "No audio", "Picked the headset as speaker device"]
    + ["peripheral", "2024-03-09", "2024-03-08", "bob"],
    ["IT-1", "VPN again", "Same", "Same", "connectivity", "", "", "ann"],
    ["IT-5", "Monitor flickers", "Flickers when docked", "Replaced the DisplayPort cable"]
    + ["peripheral", "", "", "bob", "extra"],
    ["IT-6", "Printer offline", "Shows offline on the 3rd floor", "Re-added the printer by its IP"]
    + ["", "2024-04-01T09:00:00Z", "2024-04-01T11:30:00+02:00", ""],
    [],
]


def to_csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


CSV = to_csv(ROWS)


def test_csv_rows_are_read_and_bad_rows_reported_by_their_row() -> None:
    parsed = parse_csv(CSV)

    assert [case.id for case in parsed.cases] == ["IT-1", "IT-6"]
    vpn = parsed.cases[0]
    assert vpn.symptoms == "Disconnects on hotel Wi-Fi\nreconnects after a minute"
    assert vpn.category == "connectivity"
    assert vpn.opened_at is not None
    assert vpn.opened_at.isoformat() == "2024-03-01T00:00:00+00:00"
    assert parsed.cases[1].category is None
    assert parsed.ignored_columns == ["agent"]
    # Rows are numbered as a spreadsheet shows them: the header is row 1, IT-1 spans rows 2-3.
    assert [str(problem) for problem in parsed.problems] == [
        "row 4: summary is empty",
        "row 5: resolved_at is not a date (use ISO, e.g. 2024-03-01 or 2024-03-01T14:30)",
        "row 6: resolved_at is before opened_at",
        "row 7: duplicate id 'IT-1' (first in row 2); skipped",
        "row 8: 9 fields, the header has 8",
    ]


def test_a_csv_without_a_required_column_is_refused_whole() -> None:
    with pytest.raises(CaseFileError, match=r"missing required column\(s\): summary, resolution"):
        parse_csv("id,title,fix\nIT-1,VPN,Restart\n")
    with pytest.raises(CaseFileError, match="empty"):
        parse_csv("")


def test_json_lists_and_case_objects_are_read() -> None:
    items = [
        {"id": 42, "summary": "Laptop charger broken", "resolution": "Sent a new charger"},
        {"ticket_id": "IT-7", "summary": "Locked out", "resolution": "Unlocked", "extra": 1},
        "not an object",
        {"id": "IT-8", "summary": "No resolution"},
        {"id": "IT-9", "summary": "Bad date", "resolution": "x", "opened_at": "soon"},
    ]
    for text in (json.dumps(items), json.dumps({"cases": items})):
        parsed = parse_json(text)
        assert [case.id for case in parsed.cases] == ["42", "IT-7"]
        assert [str(problem) for problem in parsed.problems] == [
            "item 3: not an object",
            "item 4: missing resolution",
            "item 5: opened_at is not a date (use ISO, e.g. 2024-03-01 or 2024-03-01T14:30)",
        ]
    with pytest.raises(CaseFileError, match="expected a JSON list"):
        parse_json('{"tickets": []}')
    with pytest.raises(CaseFileError, match="not valid JSON"):
        parse_json("[{")


def test_files_are_read_by_extension(tmp_path: Path) -> None:
    (tmp_path / "cases.csv").write_text("id,summary,resolution\nIT-1,A,B\n", encoding="utf-8-sig")
    assert [case.id for case in read_cases(tmp_path / "cases.csv").cases] == ["IT-1"]
    (tmp_path / "cases.xlsx").write_bytes(b"PK")
    with pytest.raises(CaseFileError, match=r"use \.csv or \.json"):
        read_cases(tmp_path / "cases.xlsx")
    with pytest.raises(CaseFileError, match="cannot read"):
        read_cases(tmp_path / "missing.json")


def test_upsert_is_idempotent_by_ticket_id(embedder: Embedder, settings: IndexerSettings) -> None:
    settings = settings.model_copy(update={"cases_collection": settings.chroma_collection + "-c"})
    collection = open_cases_collection(settings)
    store = CaseStore(embedder, collection)
    cases = [
        ResolvedCase(
            id="IT-1",
            summary="VPN drops every few minutes",
            symptoms="Disconnects on hotel Wi-Fi",
            resolution="Switched the VPN protocol to TCP",
            category="connectivity",
        ),
        ResolvedCase(id="IT-2", summary="Locked out", resolution="Unlocked the account"),
    ]

    first = store.upsert(cases)
    assert (first.written, first.unchanged) == (2, 0)
    again = store.upsert(cases)
    assert (again.written, again.unchanged) == (0, 2)
    changed = [cases[0], cases[1].model_copy(update={"resolution": "Reset the password"})]
    assert store.upsert(changed).written == 1
    assert store.count() == 2

    record = collection.get(ids=["IT-1"], include=["metadatas", "documents"])
    assert record["documents"] == ["VPN drops every few minutes\nDisconnects on hotel Wi-Fi"]
    meta = (record["metadatas"] or [])[0]
    assert meta["resolution"] == "Switched the VPN protocol to TCP"
    assert meta["category"] == "connectivity"
    assert meta["opened_at"] == ""
    with warnings.catch_warnings():  # Chroma warns about collections without an embedding fn
        warnings.simplefilter("ignore", DeprecationWarning)
        assert (collection.configuration.get("hnsw") or {}).get("space") == "cosine"


def test_a_blank_or_missing_symptoms_cell_is_no_symptoms() -> None:
    from indexer.cases import ResolvedCase

    for symptoms in ("", "   ", None):
        case = ResolvedCase.model_validate(
            {"id": "IT-1", "summary": "VPN drops", "resolution": "New cable", "symptoms": symptoms}
        )
        assert case.symptoms == ""
