"""``deskpilot eval escalation``: recall of hand-over requests and false escalations on a small
Rasa NLU file written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.cli.main import build_parser, main
from deploy.evals.escalation import evaluate, run_eval_escalation

RASA = """\
version: "3.1"
nlu:
- intent: human_handoff
  examples: |
    - could I chat with a [real](kind) technician
    - put me through to the service desk please
    - I'd like a human to look at this
    - which printer queue should I use
- intent: open_incident
  examples: |
    - please raise an incident for the broken [projector](device)
    - my projector is broken
- intent: troubleshoot
  examples: |
    - the badge reader at the door is broken
    - this is a bit annoying, the wifi drops sometimes
    - how do I create a ticket in Jira for my team's project?
    - THIS IS USELESS, THE DOCK STILL DOES NOT WORK!!!
    - the badge reader at the door is broken
- intent: greet
  examples: |
    - good morning
    - are you a real person?
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "nlu.yml"
    path.write_text(RASA)
    return path


def test_the_report_counts_recall_false_escalations_and_ticket_requests(data: Path) -> None:
    report = evaluate(data)
    assert report["n"] == 12  # one duplicate removed
    assert report["duplicates_removed"] == 1
    recall = report["handoff_recall"]
    assert (recall["escalated"], recall["n"], recall["rate"]) == (3, 4, 0.75)
    assert recall["met"] is False
    assert [m["text"] for m in recall["misses"]] == ["which printer queue should I use"]
    false = report["false_escalation"]
    # Other labels: 4 troubleshoot + 2 greet; only the shouted, angry one escalates.
    assert (false["escalated"], false["n"]) == (1, 6)
    assert false["false_positives"][0]["reason"] == "anger"
    assert false["false_positives"][0]["text"] == "THIS IS USELESS, THE DOCK STILL DOES NOT WORK!!!"
    tickets = report["ticket_requests"]
    assert (tickets["escalated"], tickets["n"]) == (1, 2)
    assert tickets["not_escalated"] == ["my projector is broken"]
    assert report["strict_false_escalation"] == {"escalated": 2, "n": 8, "rate": 0.25}
    assert report["per_label"]["greet"] == {"n": 2, "escalated": 0}
    # The sweep: at 0.3 the anger score alone escalates more than at 0.8.
    by_threshold = {row["threshold"]: row for row in report["sweep"]}
    assert (
        by_threshold[0.3]["anger_escalations_outside_handoff"]
        >= by_threshold[0.8]["anger_escalations_outside_handoff"]
    )


def test_no_ticket_labels_counts_them_as_other(data: Path) -> None:
    report = evaluate(data, ticket_labels=())
    assert report["false_escalation"]["n"] == 8
    assert report["false_escalation"]["escalated"] == 2


def test_the_threshold_changes_anger_escalations(data: Path) -> None:
    assert evaluate(data, threshold=1.0)["false_escalation"]["escalated"] == 0


def test_the_command_is_registered_and_prints_text_and_json(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, runners = build_parser()
    assert runners["eval escalation"] is run_eval_escalation

    assert main(["eval", "escalation", "--data", str(data)]) == 0
    text = capsys.readouterr().out
    assert "human_handoff recall: 3/4 = 75.0% (target >= 95%: NOT MET" in text
    assert "false escalation on other labels: 1/6 = 16.7% (target <= 5%: NOT MET)" in text
    assert "ticket requests (open_incident; " in text
    assert "  - which printer queue should I use (anger 0.00)" in text
    assert "messages/s" in text

    # --check: exit 1 when a target is not met
    assert main(["eval", "escalation", "--data", str(data), "--json", "--check"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["handoff_recall"]["rate"] == 0.75
    assert report["anger_threshold"] == 0.5


def test_check_passes_when_targets_are_met(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "good.yml"
    path.write_text(
        "nlu:\n- intent: human_handoff\n  examples: |\n    - let me talk to a person\n"
        "- intent: other\n  examples: |\n    - where is the VPN client\n"
    )
    assert main(["eval", "escalation", "--data", str(path), "--check"]) == 0
    assert "1/1 = 100.0%" in capsys.readouterr().out


def test_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "escalation", "--data", str(tmp_path / "missing.yml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.yml"
    bad.write_text("version: '3.1'\n")
    assert main(["eval", "escalation", "--data", str(bad)]) == 2
    assert "no `nlu:` list" in capsys.readouterr().err
    assert main(["eval", "escalation", "--data", str(bad), "--threshold", "2"]) == 2
    assert "--threshold" in capsys.readouterr().err
