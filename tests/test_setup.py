"""Set-up on a fresh machine: ``make up``/``make test`` provide Chromium and the fonts, and a test
that needs Chromium never passes by skipping on CI.

The Makefile's ``system-packages`` target runs with stand-ins for ``id`` and ``apt-get`` first on
``PATH`` (nothing is installed for real), against a Chromium path and a font file under the test's
own directory.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO_ROOT
from tests.support.chromium import INSTALL_COMMAND, TestEnvironment, require_chromium

APT_INSTALL = "apt-get install -y --no-install-recommends chromium fonts-dejavu-core"


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    """A bin folder with ``id`` (uid from ``$FAKE_UID``) and an ``apt-get`` that logs its
    arguments and, on ``install``, creates the Chromium binary and the font file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text('#!/bin/sh\necho "$FAKE_UID"\n')
    (bin_dir / "apt-get").write_text(
        "#!/bin/sh\n"
        'echo "$*" >> "$APT_LOG"\n'
        'if [ "$1" = install ] && [ -n "$APT_PROVIDES" ]; then\n'
        '    printf "#!/bin/sh\\n" > "$CHROMIUM_PATH"; chmod +x "$CHROMIUM_PATH"\n'
        '    touch "$FONT"\n'
        "fi\n"
    )
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    return tmp_path


def system_packages(machine: Path, *, uid: int, apt_provides: bool = True) -> tuple[int, str, str]:
    """Run ``make system-packages`` on the stand-in machine; return code, apt's log, stderr."""
    chromium, font, apt_log = machine / "chromium", machine / "DejaVuSans.ttf", machine / "apt.log"
    env = {
        **os.environ,
        "PATH": f"{machine / 'bin'}:{os.environ['PATH']}",
        "FAKE_UID": str(uid),
        "APT_LOG": str(apt_log),
        "APT_PROVIDES": "1" if apt_provides else "",
        "CHROMIUM_PATH": str(chromium),
        "FONT": str(font),
    }
    result = subprocess.run(
        ["make", "-s", "system-packages", f"DEJAVU_FONT={font}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    log = apt_log.read_text() if apt_log.exists() else ""
    return result.returncode, log, result.stderr


def test_present_packages_are_not_installed_again(machine: Path) -> None:
    (machine / "chromium").write_text("#!/bin/sh\n")
    (machine / "chromium").chmod(0o755)
    (machine / "DejaVuSans.ttf").touch()
    code, apt_log, stderr = system_packages(machine, uid=0)
    assert code == 0, stderr
    assert apt_log == ""


def test_as_root_missing_packages_are_installed_with_apt(machine: Path) -> None:
    code, apt_log, stderr = system_packages(machine, uid=0)
    assert code == 0, stderr
    assert apt_log.splitlines() == ["update -q", APT_INSTALL.removeprefix("apt-get ")]
    assert os.access(machine / "chromium", os.X_OK)


def test_as_root_an_install_that_brings_no_chromium_stops(machine: Path) -> None:
    code, _, stderr = system_packages(machine, uid=0, apt_provides=False)
    assert code != 0
    assert f"still no Chromium at {machine / 'chromium'}" in stderr


def test_not_root_stops_at_once_naming_the_one_command(machine: Path) -> None:
    code, apt_log, stderr = system_packages(machine, uid=1000)
    assert code != 0
    assert apt_log == "", "nothing is attempted without root"
    assert f"sudo {APT_INSTALL}" in stderr
    assert f"sudo {APT_INSTALL}" == INSTALL_COMMAND, "tests name the same command as make"


@pytest.mark.parametrize("target", ["up", "test"])
def test_the_readme_commands_check_the_system_packages_first(target: str) -> None:
    database = subprocess.run(
        ["make", "-pn", target], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    first_prerequisite = {
        line.split(":", 1)[0]: (line.split(":", 1)[1].split() or [""])[0]
        for line in database.splitlines()
        if re.match(r"^[\w-]+:( |$)", line)
    }
    chain = [target]
    while chain[-1] in first_prerequisite and len(chain) < 10:  # test: test-... : system-...
        chain.append(first_prerequisite[chain[-1]])
    assert "system-packages" in chain, chain


def test_without_chromium_a_test_skips_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CHROMIUM_PATH", str(tmp_path / "no-chromium"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=INSTALL_COMMAND):
        require_chromium()


@pytest.mark.parametrize("ci", ["true", "1"])
def test_without_chromium_on_ci_a_test_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str
) -> None:
    monkeypatch.setenv("CHROMIUM_PATH", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_chromium()


def test_with_chromium_its_path_is_returned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    binary = tmp_path / "chromium"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("CHROMIUM_PATH", str(binary))
    monkeypatch.setenv("CI", "true")
    assert require_chromium() == binary
    assert TestEnvironment().ci is True
