"""The embedded runner's seal key: one per data directory, shared by every service it starts,
kept across restarts, readable by its owner only, and never overriding a configured one."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from contracts.sealing import KeyRing, new_key_entry
from deploy.runner import SEAL_KEYS_FILE, RunnerSettings, Stack, seal_keys_of


def test_the_key_is_made_once_per_data_directory_and_kept(tmp_path: Path) -> None:
    first = seal_keys_of(tmp_path)

    assert seal_keys_of(tmp_path) == first  # a restart opens what was sealed before it
    assert KeyRing.parse(first).key_ids  # a valid DESKPILOT_SEAL_KEYS value
    mode = stat.S_IMODE((tmp_path / SEAL_KEYS_FILE).stat().st_mode)
    assert mode == 0o600
    assert seal_keys_of(tmp_path / "other") != first


def test_every_service_gets_the_stacks_key_unless_one_is_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DESKPILOT_SEAL_KEYS", raising=False)
    stack = Stack(RunnerSettings(data_dir=tmp_path), port=0, say=lambda _: None)
    assert stack._service_env()["DESKPILOT_SEAL_KEYS"] == seal_keys_of(tmp_path)

    configured = new_key_entry("ops")
    monkeypatch.setenv("DESKPILOT_SEAL_KEYS", configured)
    stack = Stack(RunnerSettings(data_dir=tmp_path), port=0, say=lambda _: None)
    assert stack._service_env()["DESKPILOT_SEAL_KEYS"] == configured
