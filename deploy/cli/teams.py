"""``deskpilot teams-app``: the Teams app package (a zip) an admin uploads to the tenant.

The zip holds ``manifest.json`` (schema 1.17: the bot, its scopes personal, team and group chat,
the gateway's host as a valid domain) and the two icons Teams requires (``color.png`` 192x192,
``outline.png`` 32x32 white on transparent), drawn here so that nothing is downloaded. The bot's
messaging endpoint is not in the package: it is set on the Azure Bot resource
(``https://<host>/teams/messages``), see docs/operators/teams.md.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import struct
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

SCHEMA = "https://developer.microsoft.com/json-schemas/teams/v1.17/MicrosoftTeams.schema.json"
ACCENT = (0x1F, 0x3A, 0x5F)
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}(:\d{1,5})?")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("teams-app", help="build the Teams app package (zip) to upload")
    parser.add_argument("--app-id", required=True, help="the bot's Microsoft App ID (a GUID)")
    parser.add_argument("--host", required=True, help="the gateway's public host name")
    parser.add_argument("--out", type=Path, default=Path("deskpilot-teams.zip"))
    parser.add_argument("--name", default="Deskpilot", help="the app's name in Teams")
    parser.add_argument("--developer", default="IT department", help="who publishes it")
    parser.add_argument("--version", default="1.0.0", help="raise it for every upload")


def manifest(app_id: str, host: str, *, name: str, developer: str, version: str) -> dict[str, Any]:
    site = f"https://{host}/"
    return {
        "$schema": SCHEMA,
        "manifestVersion": "1.17",
        "version": version,
        "id": app_id,
        "developer": {
            "name": developer,
            "websiteUrl": site,
            "privacyUrl": site,
            "termsOfUseUrl": site,
        },
        "name": {"short": name[:30], "full": f"{name}: IT help"[:100]},
        "description": {
            "short": "IT help with cited answers, checklists and tickets."[:80],
            "full": "Ask IT questions in a chat, a group chat or a channel (mention the bot). "
            "Answers cite the company's knowledge base, walk you through checklists, and hand "
            "over to a technician with a ticket when needed.",
        },
        "icons": {"color": "color.png", "outline": "outline.png"},
        "accentColor": "#{:02X}{:02X}{:02X}".format(*ACCENT),
        "bots": [
            {
                "botId": app_id,
                "scopes": ["personal", "team", "groupChat"],
                "supportsFiles": False,
                "isNotificationOnly": False,
                "commandLists": [
                    {
                        "scopes": ["personal", "team", "groupChat"],
                        "commands": [
                            {"title": "help", "description": "What I can do"},
                        ],
                    }
                ],
            }
        ],
        "permissions": ["identity", "messageTeamMembers"],
        "validDomains": [host],
    }


def png(size: int, pixel: Any) -> bytes:
    """An RGBA PNG of ``size``x``size`` whose pixel (x, y) is ``pixel(x, y)``."""
    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(size)) for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def _ring(size: int, x: int, y: int) -> bool:
    """A ring (the app's mark): between 55 % and 80 % of the radius from the centre."""
    centre = (size - 1) / 2
    distance = math.hypot(x - centre, y - centre) / (size / 2)
    return 0.55 <= distance <= 0.8


def package(app_id: str, host: str, **fields: str) -> bytes:
    """The zip's bytes."""
    if not _GUID.fullmatch(app_id):
        raise ValueError("the app id is a GUID (the Entra app registration's client id)")
    if not _HOST.fullmatch(host) or host.startswith(("-", ".")):
        raise ValueError("the host is a bare host name, such as deskpilot.example.com")
    white, clear = (255, 255, 255, 255), (0, 0, 0, 0)
    color = png(192, lambda x, y: white if _ring(192, x, y) else (*ACCENT, 255))
    outline = png(32, lambda x, y: white if _ring(32, x, y) else clear)
    document = manifest(
        app_id,
        host,
        name=fields.get("name", "Deskpilot"),
        developer=fields.get("developer", "IT department"),
        version=fields.get("version", "1.0.0"),
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(document, indent=2))
        archive.writestr("color.png", color)
        archive.writestr("outline.png", outline)
    return buffer.getvalue()


def run_teams_app(args: argparse.Namespace) -> int:
    try:
        data = package(
            args.app_id, args.host, name=args.name, developer=args.developer, version=args.version
        )
    except ValueError as exc:
        print(f"deskpilot teams-app: {exc}", file=sys.stderr)
        return 2
    args.out.write_bytes(data)
    print(f"Wrote {args.out}: upload it in Teams (Apps, Manage your apps, Upload an app).")
    return 0
