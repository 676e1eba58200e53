"""``deskpilot ingest``, ``reindex`` and ``cases import`` on a data directory without a running
stack (Chroma's persistent directory, a real Redis given with ``--redis-url``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pytest

Parse = Callable[[list[str]], argparse.Namespace]

ARTICLE = """# Reset the Quasar badge printer

The Quasar badge printer at reception stops when its ribbon runs low.

1. Open the cover and take out the ribbon.
2. Hold the reset key for ten seconds.
"""


def run(parse: Parse, argv: list[str]) -> int:
    args = parse(argv)
    code: int = args.run(args)
    return code


def last_json(out: str) -> dict[str, object]:
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "quasar.md").write_text(ARTICLE)
    return folder


def test_ingest_records_documents_and_reindex_rebuilds_them(
    parse: Parse, fresh_redis: str, kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path / "data"), "--redis-url", fresh_redis]
    assert run(parse, ["ingest", str(kb), "--json", *data]) == 0
    ingested = last_json(capsys.readouterr().out)
    assert ingested["files_indexed"] == 1
    assert ingested["documents_recorded"] == 1

    assert run(parse, ["reindex", "--json", *data]) == 0
    quiet = last_json(capsys.readouterr().out)
    assert (quiet["documents"], quiet["unchanged"], quiet["chunks_written"]) == (1, 1, 0)

    assert run(parse, ["reindex", "--force", *data]) == 0
    out = capsys.readouterr().out
    assert "documents=1, indexed=1" in out


def test_without_redis_ingest_notes_it_and_reindex_refuses(
    parse: Parse, kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(parse, ["ingest", str(kb), "--json", *data]) == 0
    captured = capsys.readouterr()
    assert last_json(captured.out)["documents_recorded"] == 0
    assert "not recorded" in captured.err

    assert run(parse, ["reindex", *data]) == 2
    assert "--redis-url" in capsys.readouterr().err


def test_reindex_will_not_empty_a_collection_nobody_recorded(
    parse: Parse, fresh_redis: str, kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(parse, ["ingest", str(kb), *data]) == 0  # no Redis: not recorded
    assert run(parse, ["reindex", *data, "--redis-url", fresh_redis]) == 1
    assert "--keep-orphans" in capsys.readouterr().err


def test_cases_import_reports_bad_rows_and_imports_the_rest(
    parse: Parse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "cases.csv"
    cases.write_text(
        "id,summary,symptoms,resolution\n"
        "IT-1,VPN drops,On hotel Wi-Fi,Switched to TCP\n"
        "IT-2,,Nothing,Something\n"
        "IT-3,Locked out,After a password change,Unlocked the account\n"
    )
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(parse, ["cases", "import", str(cases), "--json", *data]) == 1
    captured = capsys.readouterr()
    assert "cases.csv: row 3: summary is empty" in captured.err
    outcome = last_json(captured.out)
    assert outcome == {
        "cases": 2,
        "written": 2,
        "unchanged": 0,
        "rejected": 1,
        "problems": ["row 3: summary is empty"],
    }
    assert run(parse, ["cases", "import", str(cases), *data]) == 1
    assert "cases=2, written=0, unchanged=2, rejected=1" in capsys.readouterr().out


def test_cases_import_refuses_a_file_without_the_required_columns(
    parse: Parse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"tickets": []}))
    assert run(parse, ["cases", "import", str(cases), "--data-dir", str(tmp_path)]) == 2
    assert "expected a JSON list" in capsys.readouterr().err
    cases = tmp_path / "cases.csv"
    cases.write_text("key,title\nIT-1,VPN\n")
    assert run(parse, ["cases", "import", str(cases), "--data-dir", str(tmp_path)]) == 2
    assert "missing required column(s): summary, resolution" in capsys.readouterr().err
