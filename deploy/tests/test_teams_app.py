"""``deskpilot teams-app``: a package Teams accepts, for this bot and this gateway."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from deploy.cli.main import main
from deploy.cli.teams import package

APP_ID = "6f1d3c2b-8e4a-4b7c-9d2e-1a2b3c4d5e6f"


def png_size(data: bytes) -> tuple[int, int, int]:
    """Width, height and colour type of a PNG (its IHDR)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, _, colour = struct.unpack(">IIBB", data[16:26])
    return width, height, colour


def test_the_package_holds_the_manifest_and_the_icons_teams_requires(tmp_path: Path) -> None:
    out = tmp_path / "app.zip"
    assert (
        main(["teams-app", "--app-id", APP_ID, "--host", "it.northwind.example", "--out", str(out)])
        == 0
    )
    with zipfile.ZipFile(out) as archive:
        assert sorted(archive.namelist()) == ["color.png", "manifest.json", "outline.png"]
        manifest = json.loads(archive.read("manifest.json"))
        assert png_size(archive.read("color.png")) == (192, 192, 6)
        assert png_size(archive.read("outline.png")) == (32, 32, 6)
    assert manifest["manifestVersion"] == "1.17"
    assert manifest["id"] == APP_ID
    [bot] = manifest["bots"]
    assert bot["botId"] == APP_ID
    assert set(bot["scopes"]) == {"personal", "team", "groupChat"}
    assert manifest["validDomains"] == ["it.northwind.example"]
    assert manifest["icons"] == {"color": "color.png", "outline": "outline.png"}
    assert len(manifest["name"]["short"]) <= 30
    assert len(manifest["description"]["short"]) <= 80


def test_the_outline_icon_is_white_on_transparent() -> None:
    with zipfile.ZipFile(io.BytesIO(package(APP_ID, "it.example"))) as archive:
        data = archive.read("outline.png")
    raw = zlib.decompress(data[data.index(b"IDAT") + 4 : data.index(b"IEND") - 8])
    pixels = {
        raw[row * 129 + 1 + i * 4 : row * 129 + 1 + i * 4 + 4]
        for row in range(32)
        for i in range(32)
    }
    assert pixels == {b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"}


@pytest.mark.parametrize(
    ("app_id", "host"),
    [("not-a-guid", "it.example"), (APP_ID, "https://it.example/"), (APP_ID, "it.example/x")],
)
def test_a_wrong_app_id_or_host_is_refused(app_id: str, host: str, tmp_path: Path) -> None:
    out = tmp_path / "app.zip"
    assert main(["teams-app", "--app-id", app_id, "--host", host, "--out", str(out)]) == 2
    assert not out.exists()
