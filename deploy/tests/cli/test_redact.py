"""``deskpilot redact`` and ``deskpilot eval redaction``.

One run of each command is a subprocess, as a user runs it (standard input, ``--json``, the exit
code); the others call the command line's ``main`` in this process with the output captured,
around one :class:`Redactor` for the module: building one loads spaCy and every recognizer, about
five CPU-seconds, which a subprocess per test spent again for a few lines of input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.cli import redact
from deploy.tests.cli.inprocess import RunCli, in_process
from redactor.config import RedactorSettings
from redactor.service import Redactor
from tests.support import deskpilot


@pytest.fixture(scope="module")
def shared_redactor() -> Redactor:
    return Redactor(RedactorSettings())


@pytest.fixture
def run_cli(
    shared_redactor: Redactor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> RunCli:
    """``deskpilot`` in this process (deploy/tests/cli/inprocess.py), on the module's redactor."""
    monkeypatch.setattr(redact, "load_redactor", lambda settings: shared_redactor)
    return in_process(monkeypatch, capsys)


LINES = [
    "my password is Hunter-77x, mail jo.leak@fastmail.com",
    "the key AKIAZ7QW3ERT5YUI9OPL stopped working",
    "nothing to remove here",
]


def test_redact_prints_each_line_redacted_with_offsets_and_never_the_values() -> None:
    """A subprocess: standard input, a redactor built by the command itself, exit code 0."""
    result = deskpilot("redact", "-", "--json", stdin="\n".join(LINES) + "\n")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["text"] for row in rows] == [
        "my password is <PASSWORD_1>, mail <EMAIL_ADDRESS_1>",  # the sentence keeps its comma
        "the key <AWS_ACCESS_KEY_1> stopped working",
        "nothing to remove here",
    ]
    first = rows[0]["entities"]
    assert [(e["type"], LINES[0][e["start"] : e["end"]]) for e in first] == [
        ("PASSWORD", "Hunter-77x"),
        ("EMAIL_ADDRESS", "jo.leak@fastmail.com"),
    ]
    assert rows[2]["entities"] == []
    for secret in ("Hunter-77x", "jo.leak", "AKIAZ7QW3ERT5YUI9OPL"):
        assert secret not in result.stdout


def test_redact_reads_a_file_and_refuses_a_missing_one(run_cli: RunCli, tmp_path: Path) -> None:
    source = tmp_path / "chat.txt"
    source.write_text(LINES[1] + "\n")
    assert run_cli("redact", str(source)).stdout == "the key <AWS_ACCESS_KEY_1> stopped working\n"
    missing = run_cli("redact", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2
    assert "is not a file" in missing.stderr


def test_eval_redaction_counts_overlaps_per_type(run_cli: RunCli, tmp_path: Path) -> None:
    text = "Call Maria Lopez at maria.lopez@fastmail.com about Outlook"
    records = [
        {
            "full_text": text,
            "spans": [
                {"entity_type": "PERSON", "start_position": 5, "end_position": 16},
                {"entity_type": "EMAIL_ADDRESS", "start_position": 20, "end_position": 44},
                {"entity_type": "US_SSN", "start_position": 51, "end_position": 58},  # no SSN
            ],
        },
        {"full_text": "Nothing personal here.", "spans": []},
    ]
    data = tmp_path / "synth.json"
    data.write_text(json.dumps(records))
    result = run_cli("eval", "redaction", "--data", str(data), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["records"] == 2
    assert report["per_type"]["EMAIL_ADDRESS"]["recall"] == 1.0
    assert report["per_type"]["PERSON"]["recall"] == 1.0
    assert report["per_type"]["US_SSN"]["recall"] == 0.0  # labelled, not reported
    assert report["recall"] == 0.6667  # 2 of the 3 in-scope gold spans
    assert report["precision"] == 1.0  # everything it reported overlaps a labelled span
    assert report["pii_recall"] == 0.6667  # the same three spans are all personal data
    assert report["targets"] == {
        "recall_at_least_0_92": False,
        "precision_at_least_0_85": True,
        "pii_recall_at_least_0_95": False,
    }


def test_eval_redaction_refuses_a_file_of_another_format(tmp_path: Path) -> None:
    """A subprocess: the evaluation's message on standard error and exit code 2."""
    data = tmp_path / "other.json"
    data.write_text(json.dumps({"texts": ["a"]}))
    result = deskpilot("eval", "redaction", "--data", str(data))
    assert result.returncode == 2
    assert "full_text" in result.stderr


MARKED_UP = """# a comment line before the first record
=== chat
my password is ⟦PASSWORD|Hunter2x⟧, please reset it
=== email
Hi,
DOB ⟦DATE_OF_BIRTH|07/22/1990⟧
Thanks, ⟦PERSON|Lena Hoffmann⟧
=== log
Windows Update fails with 0x80070005 on KB5034441
"""


def test_marked_up_records_become_texts_and_spans() -> None:
    from deploy.evals.redaction import parse_marked_up

    records = parse_marked_up(MARKED_UP)

    assert [r["kind"] for r in records] == ["chat", "email", "log"]
    assert records[0]["full_text"] == "my password is Hunter2x, please reset it"
    values = [
        (s["entity_type"], r["full_text"][s["start_position"] : s["end_position"]])
        for r in records
        for s in r["spans"]
    ]
    assert values == [
        ("PASSWORD", "Hunter2x"),
        ("DATE_OF_BIRTH", "07/22/1990"),
        ("PERSON", "Lena Hoffmann"),
    ]
    assert records[1]["full_text"] == "Hi,\nDOB 07/22/1990\nThanks, Lena Hoffmann"
    assert records[2]["spans"] == []


def test_a_broken_mark_is_refused(run_cli: RunCli, tmp_path: Path) -> None:
    data = tmp_path / "broken.txt"
    data.write_text("=== chat\nmy password is ⟦Hunter2x⟧\n", encoding="utf-8")

    result = run_cli("eval", "redaction", "--data", str(data))

    assert result.returncode == 2
    assert "mark" in result.stderr


def test_eval_redaction_reports_secrets_and_pii_recall_and_near_misses(
    run_cli: RunCli, tmp_path: Path
) -> None:
    data = tmp_path / "secrets.txt"
    data.write_text(MARKED_UP, encoding="utf-8")

    result = run_cli("eval", "redaction", "--data", str(data), "--json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["records"] == 3
    assert report["secrets_recall"] == 1.0
    assert report["pii_recall"] == 1.0
    assert report["near_misses"] == {"log": {"records": 1, "reported": 0}}
    assert report["targets"]["secrets_recall_at_least_0_98"] is True
    assert report["targets"]["pii_recall_at_least_0_95"] is True
    assert "Hunter2x" not in result.stdout


def test_eval_redaction_counts_wrong_reports_per_type_and_internal_hosts(
    run_cli: RunCli, tmp_path: Path
) -> None:
    data = tmp_path / "hosts.txt"
    data.write_text(
        "=== shell\nping fs01.corp.local works, my password is ⟦PASSWORD|Hunter2x⟧\n"
        "=== chat\nthe build 5.2.0 is out\n",
        encoding="utf-8",
    )

    result = run_cli("eval", "redaction", "--data", str(data), "--json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["wrong_reports"] == {"HOSTNAME": 1}  # the policy's, unlabelled in this set
    assert report["wrong_reports_on_internal_hosts"] == 1
    assert report["precision"] == 0.5
    assert report["precision_without_internal_hosts"] == 1.0
