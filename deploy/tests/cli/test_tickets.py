"""``deskpilot tickets export``: tickets filed in a real local store (and in the fake Jira) are
exported through ``deploy.cli.main`` and read back by the real ``cases import``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts.events import (
    EscalationReason,
    EscalationRequested,
    Incident,
    TicketRecord,
    TranscriptLine,
    TriedStep,
)
from deploy.cli.main import main
from deploy.cli.tickets import choose_resolution, is_deskpilot_note
from indexer.cases import open_cases_collection, parse_json, read_cases
from indexer.config import IndexerSettings
from tests.support.fake_jira import FakeJira
from ticketing.backends.base import TicketBackend, TicketDraft
from ticketing.backends.jira import JiraBackend
from ticketing.backends.local import LocalBackend
from ticketing.config import TicketingSettings
from ticketing.content import (
    build_ticket,
    follow_up_comment,
    incident_comment,
    incident_resolved_comment,
)


@pytest.fixture(autouse=True)
def local_backend_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller's ticketing settings must not leak into the command."""
    for name in ("TICKETING_BACKEND", "JIRA_BASE_URL", "JIRA_EMAIL", "JIRA_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def escalation(n: int, **overrides: Any) -> EscalationRequested:
    values: dict[str, Any] = {
        "correlation_id": f"turn-{n}",
        "conversation_id": f"conv-{n}",
        "user_id": f"user-{n}",
        "reason": EscalationReason.USER_REQUEST,
        "summary": "VPN: cannot connect after password change (Windows)",
        "problem": "The VPN client fails with error 0x80070005 since <DATE_TIME_1>.",
        "topic": "connectivity:vpn",
        "category": "connectivity",
        "environment": {"os": "windows", "error_codes": "0x80070005"},
        "tried": [TriedStep(step="Restart the VPN client", outcome="failed")],
        "transcript": [TranscriptLine(role="user", text="my vpn is broken")],
        "idempotency_key": f"esc-{n}",
    }
    values.update(overrides)
    return EscalationRequested.model_validate(values)


INCIDENT = Incident(
    id="inc-7", title="VPN gateway down", status="resolved", latest_update="Gateway replaced."
)


async def file(backend: TicketBackend, event: EscalationRequested, *, silent: bool = False) -> str:
    routes = TicketingSettings().category_routes
    record = await backend.create(build_ticket(event, routes, silent=silent).draft)
    return record.key


async def fill_local_store(data_dir: Path) -> dict[str, str]:
    """Tickets as the ticketing service and technicians leave them; returns role -> key."""
    backend = LocalBackend(TicketingSettings(data_dir=data_dir).local_config())
    keys: dict[str, str] = {}
    try:
        vpn = escalation(1)
        keys["labelled"] = await file(backend, vpn)
        await backend.comment(keys["labelled"], follow_up_comment(escalation(11)))
        await backend.comment(
            keys["labelled"], "Resolution: re-enrolled the VPN certificate from the portal."
        )
        await backend.comment(keys["labelled"], "Thanks, it works again!")
        await backend.resolve(keys["labelled"])

        keys["last_comment"] = await file(
            backend,
            escalation(
                2,
                summary="Monitor stays black after docking",
                problem="The external monitor stays black when the laptop is docked.",
                category="peripheral_question",
                topic="peripheral:dock",
            ),
        )
        await backend.comment(keys["last_comment"], "Could you send a photo of the dock?")
        await backend.comment(
            keys["last_comment"], "Replaced the dock's power supply; the monitor wakes again."
        )
        await backend.resolve(keys["last_comment"])

        keys["open"] = await file(backend, escalation(3, summary="Printer jams on tray 2"))
        await backend.comment(keys["open"], "Resolution: not yet, waiting for a part.")

        keys["no_comment"] = await file(backend, escalation(4, summary="Laptop fan is loud"))
        await backend.resolve(keys["no_comment"])

        keys["silent"] = await file(
            backend,
            escalation(
                5,
                reason=EscalationReason.RESOLVED,
                summary="Teams: calls drop after a minute",
                problem="Teams calls drop after about a minute.",
                topic="connectivity:teams",
                tried=[
                    TriedStep(step="Sign out of Teams and back in", outcome="failed"),
                    TriedStep(step="Clear the Teams cache", outcome="fixed"),
                ],
            ),
            silent=True,
        )
        await backend.resolve(keys["silent"])

        keys["notes_only"] = await file(backend, escalation(6, summary="Wi-Fi drops on floor 3"))
        await backend.comment(keys["notes_only"], incident_comment(INCIDENT))
        await backend.comment(keys["notes_only"], incident_resolved_comment(INCIDENT))
        await backend.resolve(keys["notes_only"])
    finally:
        await backend.close()
    return keys


def test_export_of_a_local_store_round_trips_through_cases_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    keys = asyncio.run(fill_local_store(data))
    out = tmp_path / "export" / "cases.json"

    assert (
        main(["tickets", "export", "--resolved", "--out", str(out), "--data-dir", str(data)]) == 0
    )
    err = capsys.readouterr().err
    assert "exported 3 resolved ticket(s)" in err
    assert "1 not resolved, 2 resolved without a resolution text" in err
    assert f"{keys['no_comment']}, {keys['notes_only']}" in err

    parsed = read_cases(out)  # the parser `cases import` uses
    assert parsed.problems == []
    cases = {case.id: case for case in parsed.cases}
    assert [case.id for case in parsed.cases] == [
        keys["labelled"],
        keys["last_comment"],
        keys["silent"],
    ]
    labelled = cases[keys["labelled"]]
    assert labelled.resolution == "re-enrolled the VPN certificate from the portal."
    assert labelled.summary == "VPN: cannot connect after password change (Windows)"
    assert labelled.symptoms == "The VPN client fails with error 0x80070005 since <DATE_TIME_1>."
    assert labelled.category == "connectivity"
    assert labelled.opened_at is not None
    assert labelled.resolved_at is not None
    assert labelled.opened_at <= labelled.resolved_at
    assert cases[keys["last_comment"]].resolution == (
        "Replaced the dock's power supply; the monitor wakes again."
    )
    assert cases[keys["last_comment"]].category == "peripheral_question"
    assert cases[keys["silent"]].resolution == "Fixed by: Clear the Teams cache"

    assert main(["cases", "import", str(out), "--json", "--data-dir", str(data)]) == 0
    imported = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (imported["cases"], imported["written"], imported["rejected"]) == (3, 3, 0)
    stored = open_cases_collection(IndexerSettings(data_dir=data)).get(
        ids=[keys["labelled"]], include=["metadatas"]
    )
    metadata = (stored["metadatas"] or [{}])[0]
    assert metadata["resolution"] == "re-enrolled the VPN certificate from the portal."
    assert metadata["category"] == "connectivity"


async def resolved_then_a_full_page_of_open(data_dir: Path) -> None:
    backend = LocalBackend(TicketingSettings(data_dir=data_dir).local_config())
    try:
        old = await backend.create(
            TicketDraft(summary="Badge printer out of ribbon", idempotency_key="old")
        )
        await backend.comment(old.key, "Fitted a new ribbon.")
        await backend.resolve(old.key)
        for n in range(100):
            await backend.create(TicketDraft(summary=f"Open ticket {n}", idempotency_key=f"o{n}"))
    finally:
        await backend.close()


def test_the_whole_local_store_is_read_not_only_the_newest_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(resolved_then_a_full_page_of_open(tmp_path))
    assert main(["tickets", "export", "--data-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    parsed = parse_json(captured.out)  # standard output holds the file
    assert parsed.problems == []
    assert [(c.id, c.resolution, c.symptoms) for c in parsed.cases] == [
        ("DP-1", "Fitted a new ribbon.", "")
    ]
    assert "100 not resolved" in captured.err
    assert "warning" not in captured.err


def test_refusals_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cases.json"
    assert main(["tickets", "export", "--out", str(out), "--data-dir", str(tmp_path)]) == 2
    assert "no local ticket store" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # neither the output nor an empty store

    csv = tmp_path / "cases.csv"
    assert main(["tickets", "export", "--out", str(csv), "--data-dir", str(tmp_path)]) == 2
    assert "--out must name a .json file" in capsys.readouterr().err
    assert not csv.exists()


def test_deskpilot_notes_are_never_a_resolution() -> None:
    notes = [
        follow_up_comment(escalation(1)),
        incident_comment(INCIDENT),
        incident_resolved_comment(INCIDENT),
    ]
    assert all(is_deskpilot_note(note) for note in notes)
    assert not is_deskpilot_note("Incident response team replaced the switch.")
    assert not is_deskpilot_note("Deskpilot was right: re-enrolling fixed it.")

    def record(*comments: str) -> TicketRecord:
        return TicketRecord(key="DP-9", url="x", status="Done", summary="s", comments=[*comments])

    assert choose_resolution(record(*notes)) is None
    assert choose_resolution(record("Fix: swap the cable", "ok", *notes)) == "swap the cable"
    assert choose_resolution(record("Swapped the cable.", "Resolution:  ")) == "Swapped the cable."
    assert choose_resolution(record("Swapped the cable.", "resolved : new cable")) == "new cable"


# -- Jira, chosen by the settings ------------------------------------------------------------


@pytest.fixture
def jira(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJira]:
    with FakeJira() as fake:
        monkeypatch.setenv("TICKETING_BACKEND", "jira")
        monkeypatch.setenv("JIRA_BASE_URL", fake.base_url)
        monkeypatch.setenv("JIRA_EMAIL", fake.email)
        monkeypatch.setenv("JIRA_API_TOKEN", fake.token)
        monkeypatch.setenv("JIRA_PROJECT_KEY", fake.project_key)
        yield fake


async def fill_jira(fake: FakeJira, open_tickets: int) -> str:
    backend = JiraBackend(TicketingSettings().jira_config())
    try:
        key = await file(backend, escalation(1))
        await backend.comment(key, "Resolution: re-enrolled the VPN certificate.")
        await backend.resolve(key)
        for n in range(open_tickets):
            await file(backend, escalation(100 + n, summary=f"Open ticket {n}"))
    finally:
        await backend.close()
    return key


def test_jira_tickets_are_exported_when_the_settings_choose_jira(
    jira: FakeJira, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = asyncio.run(fill_jira(jira, open_tickets=1))
    out = tmp_path / "cases.json"
    assert main(["tickets", "export", "--out", str(out)]) == 0
    parsed = read_cases(out)
    assert [(c.id, c.resolution, c.category) for c in parsed.cases] == [
        (key, "re-enrolled the VPN certificate.", "connectivity")
    ]
    assert "1 not resolved" in capsys.readouterr().err


def test_jira_refusing_the_credentials_exports_nothing(
    jira: FakeJira, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jira.reject_credentials()
    out = tmp_path / "cases.json"
    assert main(["tickets", "export", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cannot read the jira backend's tickets" in err
    assert "credentials refused" in err
    assert jira.token not in err
    assert not out.exists()


def test_a_jira_export_past_one_search_says_it_is_incomplete(
    jira: FakeJira, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(fill_jira(jira, open_tickets=100))  # the resolved one is the oldest
    out = tmp_path / "cases.json"
    assert main(["tickets", "export", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "lists at most the newest 100 tickets" in err
    assert "100 not resolved" in err
    assert read_cases(out).cases == []
