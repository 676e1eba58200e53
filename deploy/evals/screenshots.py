"""``deskpilot screenshots --out DIR [--count N] [--seed S]``: screenshots with known text.

Renders small HTML scenes of its own in the system Chromium (headless, driven by Playwright; it
never downloads a browser): Windows- and macOS-style error dialogs with error codes, terminal
windows with commands and their error output, settings screens and browser error pages, in light
and dark themes, at several fonts (DejaVu Sans, Serif and Sans Mono, from the Debian package
``fonts-dejavu-core``) and sizes. The text is varied IT-support text: error codes, paths, host
names, user names, timestamps.

Each scene writes ``NAME.png`` and ``NAME.txt``, the ground truth: exactly the visible text, one
line per visual line, words of one line separated by single spaces, left to right. The same
``--seed`` and ``--count`` render the same scenes. ``deskpilot eval ocr --images DIR`` reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
)
SANS = "'DejaVu Sans', sans-serif"
SERIF = "'DejaVu Serif', serif"
MONO = "'DejaVu Sans Mono', monospace"

Row = list[str]
"""One visual line: its pieces, laid out left to right (a label and a value, two buttons)."""


@dataclass(frozen=True)
class Scene:
    name: str
    html: str
    lines: list[str]
    """The ground truth: one entry per visual line, pieces joined by single spaces."""


# -- the text ---------------------------------------------------------------------------------

USERS = ("jdoe", "amaier", "kchen", "lgarcia", "pnovak", "svasquez", "tokafor", "mrossi")
HOSTS = (
    "vpn.northwind.example",
    "fs02.corp.northwind.example",
    "mail.northwind.example",
    "intranet.northwind.example",
    "ts01.corp.northwind.example",
    "print03.northwind.local",
    "api.northwind.example",
    "sso.northwind.example",
    "git.northwind.example",
    "proxy.corp.northwind.example",
)
IPS = ("10.20.4.17", "10.0.12.5", "192.168.1.254", "172.16.8.40", "10.44.0.9")
PORTS = ("443", "8443", "3389", "445", "22", "8080", "5432")
FILES = ("Budget 2024.xlsx", "Q3 Report.docx", "onboarding.pdf", "timesheet_march.xlsx")
STAMPS = (
    "2024-03-05 14:22:01",
    "2024-11-18 09:03:47",
    "2025-01-27 17:45:12",
    "2024-06-30 23:59:08",
)
UNITS = (
    "nginx.service",
    "sshd.service",
    "docker.service",
    "cups.service",
    "NetworkManager.service",
)


@dataclass(frozen=True)
class Problem:
    """A dialog's message: the application showing it, its lines (at most ~60 characters each)
    and a detail line."""

    app: str
    lines: list[str]
    detail: str


def _problems(rng: random.Random) -> list[Problem]:
    user, host, ip, port = (
        rng.choice(USERS),
        rng.choice(HOSTS),
        rng.choice(IPS),
        rng.choice(PORTS),
    )
    file = rng.choice(FILES)
    return [
        Problem(
            "Windows Update",
            ["We couldn't install some updates.", "Error 0x80070005: Access is denied."],
            "Try again later or contact the IT Service Desk.",
        ),
        Problem(
            "Cisco AnyConnect",
            [f"The connection to {host} failed.", "The VPN server rejected the request."],
            "Error code: 0x800B0109",
        ),
        Problem(
            "Microsoft Excel",
            [f"Cannot open the file C:\\Users\\{user}\\Documents\\{file}", "The file is locked."],
            "It is in use by another user (error 0x80070020).",
        ),
        Problem(
            "File Explorer",
            [f"Windows cannot access \\\\{host}\\finance", "The network path was not found."],
            "Error code: 0x80070035",
        ),
        Problem(
            "Remote Desktop Connection",
            [f"Remote Desktop can't connect to {host}", "The remote computer refused the login."],
            f"Error code: 0x204 (port {port})",
        ),
        Problem(
            "Microsoft Office",
            ["Activation failed for this copy of Office.", "The license server did not respond."],
            f"Error 0xC004F074 at {rng.choice(STAMPS)}",
        ),
        Problem(
            "Microsoft Teams",
            [f"Sign-in failed for {user}@northwind.example", "Your password has expired."],
            "Error code: CAA20003 (0xCAA20003)",
        ),
        Problem(
            "Printers & scanners",
            [f"Printer {host} is offline.", "The print spooler stopped unexpectedly."],
            "Error 0x00000709: Operation could not be completed.",
        ),
        Problem(
            "OneDrive",
            ["The sync client stopped working.", f"Server {host} returned HTTP 503."],
            f"Service Unavailable at {rng.choice(STAMPS)}",
        ),
        Problem(
            "Company Portal",
            [f"Could not reach {ip}:{port}", "The request timed out after 30 seconds."],
            "Error 0x80072EE2: The operation timed out.",
        ),
    ]


def _terminal_sessions(rng: random.Random) -> list[list[str]]:
    user, host, ip, port, unit, stamp = (
        rng.choice(USERS),
        rng.choice(HOSTS),
        rng.choice(IPS),
        rng.choice(PORTS),
        rng.choice(UNITS),
        rng.choice(STAMPS),
    )
    node = f"ws-{rng.randint(1000, 9999)}"
    prompt = f"{user}@{node}:~$"
    ps = f"PS C:\\Users\\{user}>"
    return [
        [
            f"{prompt} curl -v https://{host}/v2/status",
            f"* Trying {ip}:{port}...",
            f"* connect to {ip} port {port} failed: Connection refused",
            f"curl: (7) Failed to connect to {host} port {port}",
            f"{prompt} echo $?",
            "7",
        ],
        [
            f"{prompt} sudo systemctl status {unit}",
            f"{unit} - failed",
            f"Active: failed (Result: exit-code) since {stamp} UTC",
            "Process: 2291 ExecStart (code=exited, status=1/FAILURE)",
            f"{prompt} journalctl -u {unit} -n 2",
            f"{stamp} {node} systemd[1]: Failed to start {unit}.",
        ],
        [
            f"{prompt} python3 sync.py --server {host}",
            "Traceback (most recent call last):",
            'File "/opt/sync/sync.py", line 42, in <module>',
            "client.connect()",
            "ConnectionRefusedError: [Errno 111] Connection refused",
        ],
        [
            f"{ps} Test-NetConnection {host} -Port {port}",
            f"WARNING: TCP connect to {ip}:{port} failed",
            f"ComputerName : {host}",
            f"RemoteAddress : {ip}",
            "TcpTestSucceeded : False",
        ],
        [
            f"{prompt} ssh {user}@{host}",
            f"ssh: connect to host {host} port 22: Connection timed out",
            f"{prompt} ping -c 2 {host}",
            f"ping: {host}: Name or service not known",
        ],
        [
            f"{ps} gpupdate /force",
            "Updating policy...",
            "Computer Policy update has completed successfully.",
            "User Policy could not be updated successfully.",
            "The processing of Group Policy failed (error 0x8007054B).",
        ],
    ]


def _settings_pages(rng: random.Random) -> list[tuple[str, str, list[Row]]]:
    host, ip, user, stamp = (
        rng.choice(HOSTS),
        rng.choice(IPS),
        rng.choice(USERS),
        rng.choice(STAMPS),
    )
    return [
        (
            "Settings",
            "Network and Internet > VPN",
            [
                ["Connection", "Northwind VPN"],
                ["Server address", host],
                ["Status", "Error 809: connection could not be established"],
                ["Last attempt", stamp],
            ],
        ),
        (
            "Settings",
            "Network and Internet > Proxy",
            [
                ["Use a proxy server", "On"],
                ["Address", f"http://{rng.choice(HOSTS)}"],
                ["Port", rng.choice(PORTS)],
                ["Status", "Proxy authentication required (HTTP 407)"],
            ],
        ),
        (
            "Accounts",
            "Access work or school",
            [
                ["Account", f"{user}@northwind.example"],
                ["Device sync", "Failed"],
                ["Error", "0x80190001 at " + stamp],
                ["Managed by", "Northwind Labs IT"],
            ],
        ),
        (
            "Windows Update",
            "Update history",
            [
                ["KB5034441", "Failed to install (0x80070643)"],
                ["KB5036893", f"Installed on {stamp[:10]}"],
                ["Defender update", "Failed (0x80240022)"],
                ["Update server", ip],
            ],
        ),
    ]


# -- scenes -------------------------------------------------------------------------------------


def _palette(dark: bool) -> dict[str, str]:
    if dark:
        return {"bg": "#202020", "fg": "#f2f2f2", "muted": "#c8c8c8", "bar": "#2b2b2b",
                "btn": "#3a3a3a", "accent": "#4cc2ff", "accent_fg": "#000000",
                "line": "#3d3d3d", "desk": "#0b3a5c"}  # fmt: skip
    return {"bg": "#ffffff", "fg": "#1b1b1b", "muted": "#4a4a4a", "bar": "#f3f3f3",
            "btn": "#e6e6e6", "accent": "#0067c0", "accent_fg": "#ffffff",
            "line": "#dddddd", "desk": "#3a6ea5"}  # fmt: skip


def _page(body: str, css: str, desk: str, font: str, size: int) -> str:
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
html, body {{ margin: 0; background: {desk}; }}
body {{ font-family: {font}; font-size: {size}px; }}
.shot {{ display: inline-block; padding: 18px; background: {desk}; }}
.row {{ display: flex; gap: 0.9em; white-space: pre; align-items: baseline; }}
{css}
</style></head><body><div class="shot">{body}</div></body></html>"""


def _row(pieces: Row, cls: str = "row", piece_cls: str = "") -> str:
    spans = "".join(f'<span class="{piece_cls}">{html.escape(p)}</span>' for p in pieces)
    return f'<div class="{cls}">{spans}</div>'


# Minimise, maximise and close, drawn with borders: a window's controls are icons, not text.
_CONTROLS = '<div class="ctl"><i class="min"></i><i class="max"></i><i class="close"></i></div>'


def windows_dialog(rng: random.Random, dark: bool, font: str, size: int) -> tuple[str, list[Row]]:
    c = _palette(dark)
    problem = rng.choice(_problems(rng))
    title = problem.app
    buttons = rng.choice(
        [["OK"], ["Retry", "Cancel"], ["Close", "Details"], ["Try again", "Close"]]
    )
    rows: list[Row] = [[title], *[[line] for line in problem.lines], [problem.detail], buttons]
    css = f"""
.win {{ background: {c["bg"]}; color: {c["fg"]}; border: 1px solid {c["line"]};
  box-shadow: 0 8px 24px rgba(0,0,0,.35); min-width: 360px; }}
.bar {{ background: {c["bar"]}; padding: 8px 12px; display: flex; justify-content: space-between;
  align-items: center; font-size: 0.9em; }}
.ctl {{ display: flex; gap: 22px; align-items: center; }}
.ctl i {{ width: 10px; height: 10px; display: block; position: relative; }}
.ctl .min {{ height: 0; border-top: 1px solid {c["muted"]}; }}
.ctl .max {{ border: 1px solid {c["muted"]}; }}
.ctl .close::before, .ctl .close::after {{ content: ""; position: absolute; left: 5px; top: -2px;
  height: 14px; border-left: 1px solid {c["muted"]}; transform: rotate(45deg); }}
.ctl .close::after {{ transform: rotate(-45deg); }}
.main {{ display: flex; gap: 16px; padding: 18px 22px 10px 18px; }}
.icon {{ width: 32px; height: 32px; border-radius: 50%; background: #c42b1c; flex: none; }}
.msg .row {{ margin-bottom: 6px; }} .detail {{ color: {c["muted"]}; margin-top: 8px; }}
.foot {{ background: {c["bar"]}; padding: 12px 18px; display: flex; justify-content: flex-end;
  gap: 10px; border-top: 1px solid {c["line"]}; }}
.foot span {{ background: {c["btn"]}; padding: 5px 22px; border: 1px solid {c["line"]};
  border-radius: 4px; }}
.foot span:first-child {{ background: {c["accent"]}; color: {c["accent_fg"]}; }}"""
    message = "".join(_row([line]) for line in problem.lines)
    body = f"""<div class="win">
<div class="bar"><span>{html.escape(title)}</span>{_CONTROLS}</div>
<div class="main"><div class="icon"></div><div class="msg">{message}
<div class="row detail">{html.escape(problem.detail)}</div></div></div>
{_row(buttons, "foot")}</div>"""
    return _page(body, css, c["desk"], font, size), rows


def mac_dialog(rng: random.Random, dark: bool, font: str, size: int) -> tuple[str, list[Row]]:
    c = _palette(dark)
    c["bg"] = "#2c2c2e" if dark else "#ececec"
    problem = rng.choice(_problems(rng))
    buttons = rng.choice([["OK"], ["Cancel", "Try Again"], ["Report...", "OK"]])
    heading = rng.choice(
        ["The operation couldn't be completed.", "Connection failed", "Sign-in problem"]
    )
    rows: list[Row] = [[heading], *[[line] for line in problem.lines], [problem.detail], buttons]
    css = f"""
.win {{ background: {c["bg"]}; color: {c["fg"]}; border-radius: 12px; padding: 20px 24px 16px;
  box-shadow: 0 10px 30px rgba(0,0,0,.45); min-width: 320px; display: flex;
  flex-direction: column; align-items: center; }}
.app {{ width: 56px; height: 56px; border-radius: 12px; margin-bottom: 12px;
  background: linear-gradient(#f5a623, #d0021b); }}
.win .row {{ margin-bottom: 5px; }} .h {{ font-weight: bold; margin-bottom: 10px !important; }}
.detail {{ color: {c["muted"]}; font-size: 0.92em; }}
.foot {{ margin-top: 14px; gap: 10px; align-self: stretch; justify-content: center; }}
.foot span {{ background: {c["btn"]}; padding: 4px 18px; border-radius: 6px; }}
.foot span:last-child {{ background: #0a84ff; color: #ffffff; }}"""
    message = "".join(_row([line]) for line in problem.lines)
    body = f"""<div class="win"><div class="app"></div>{_row([heading], "row h")}{message}
<div class="row detail">{html.escape(problem.detail)}</div>{_row(buttons, "row foot")}</div>"""
    return _page(body, css, "#6b7a8f" if not dark else "#1c1f26", font, size), rows


def terminal(rng: random.Random, dark: bool, _font: str, size: int) -> tuple[str, list[Row]]:
    lines = rng.choice(_terminal_sessions(rng))
    windows = lines[0].startswith("PS ")
    # The window title names the session the prompt shows (user@host: ~).
    title = "Windows PowerShell" if windows else f"{lines[0].split(':', 1)[0]}: ~"
    fg, bg = ("#cccccc", "#0c0c0c") if dark else ("#1e1e1e", "#fafafa")
    if windows and dark:
        bg = "#012456"
    css = f"""
.win {{ background: {bg}; color: {fg}; min-width: 520px; border: 1px solid #555;
  box-shadow: 0 8px 24px rgba(0,0,0,.4); }}
.bar {{ background: {"#2d2d2d" if dark else "#e1e1e1"}; color: {"#dddddd" if dark else "#222"};
  font-family: {SANS}; font-size: 12px; padding: 6px 10px; }}
.term {{ padding: 10px 14px 14px; font-family: {MONO}; line-height: 1.35; }}"""
    body = f"""<div class="win"><div class="bar">{html.escape(title)}</div>
<div class="term">{"".join(_row([line]) for line in lines)}</div></div>"""
    rows: list[Row] = [[title], *[[line] for line in lines]]
    return _page(body, css, "#2f4f4f", SANS, size), rows


def settings_screen(rng: random.Random, dark: bool, font: str, size: int) -> tuple[str, list[Row]]:
    c = _palette(dark)
    heading, crumb, fields = rng.choice(_settings_pages(rng))
    css = f"""
.win {{ background: {c["bg"]}; color: {c["fg"]}; padding: 18px 26px 22px; min-width: 480px;
  box-shadow: 0 8px 24px rgba(0,0,0,.3); }}
.h1 {{ font-size: 1.6em; font-weight: bold; margin-bottom: 4px; }}
.crumb {{ color: {c["muted"]}; margin-bottom: 14px; }}
.card {{ background: {c["bar"]}; border: 1px solid {c["line"]}; border-radius: 6px;
  padding: 10px 14px; margin-bottom: 6px; justify-content: space-between; gap: 3em; }}
.card span:last-child {{ color: {c["muted"]}; }}"""
    cards = "".join(_row(field, "row card") for field in fields)
    body = (
        f"""<div class="win">{_row([heading], "row h1")}{_row([crumb], "row crumb")}{cards}</div>"""
    )
    rows: list[Row] = [[heading], [crumb], *fields]
    return _page(body, css, c["desk"], font, size), rows


def browser_error(rng: random.Random, dark: bool, font: str, size: int) -> tuple[str, list[Row]]:
    c = _palette(dark)
    host = rng.choice(HOSTS)
    code, lines = rng.choice(
        [
            ("ERR_CONNECTION_REFUSED", [f"{host} refused to connect."]),
            ("ERR_NAME_NOT_RESOLVED", [f"{host}'s server IP address could not be found."]),
            ("ERR_CERT_DATE_INVALID", ["Your connection is not private.", f"Site: {host}"]),
            ("HTTP ERROR 503", [f"{host} is currently unable to handle this request."]),
        ]
    )
    heading = "This site can't be reached" if code.startswith("ERR_") else "This page isn't working"
    rows: list[Row] = [
        [f"https://{host}/"],
        [heading],
        *[[line] for line in lines],
        [code],
        ["Reload"],
    ]
    css = f"""
.win {{ background: {c["bg"]}; color: {c["fg"]}; width: 640px;
  box-shadow: 0 8px 24px rgba(0,0,0,.3); }}
.url {{ background: {c["bar"]}; padding: 8px 14px; }}
.url span {{ background: {c["btn"]}; padding: 4px 14px; border-radius: 14px; }}
.page {{ padding: 30px 40px 28px; }} .h {{ font-size: 1.5em; margin-bottom: 14px; }}
.page .row {{ margin-bottom: 8px; }} .code {{ color: {c["muted"]}; font-size: 0.85em; }}
.btn {{ margin-top: 16px; }} .btn span {{ background: {c["accent"]}; color: {c["accent_fg"]};
  padding: 6px 20px; border-radius: 4px; }}"""
    body = f"""<div class="win">{_row([f"https://{host}/"], "row url")}<div class="page">
{_row([heading], "row h")}{"".join(_row([line]) for line in lines)}{_row([code], "row code")}
{_row(["Reload"], "row btn")}</div></div>"""
    return _page(body, css, c["desk"], font, size), rows


SceneMaker = Callable[[random.Random, bool, str, int], tuple[str, list[Row]]]
KINDS: tuple[tuple[str, SceneMaker], ...] = (
    ("windows-dialog", windows_dialog),
    ("terminal", terminal),
    ("mac-dialog", mac_dialog),
    ("settings", settings_screen),
    ("browser-error", browser_error),
)
FONTS = ((SANS, "sans"), (SERIF, "serif"), (MONO, "mono"))
SIZES = (13, 14, 15, 16, 18)


def build_scenes(count: int, seed: int = 0) -> list[Scene]:
    """``count`` scenes cycling through every kind, each with its own theme, font and size."""
    scenes = []
    for index in range(count):
        rng = random.Random(f"{seed}:{index}")  # noqa: S311 (test data, not secrets)  # nosec B311
        kind, maker = KINDS[index % len(KINDS)]
        dark = rng.random() < 0.4
        font, font_name = rng.choice(FONTS[:2]) if kind != "terminal" else (MONO, "mono")
        size = rng.choice(SIZES)
        page, rows = maker(rng, dark, font, size)
        name = f"{index:03d}-{kind}-{'dark' if dark else 'light'}-{font_name}-{size}"
        scenes.append(Scene(name, page, [" ".join(row) for row in rows]))
    return scenes


async def render(scenes: list[Scene], out: Path, chromium: Path = DEFAULT_CHROMIUM) -> list[Path]:
    """Write each scene's PNG (the window and a margin of desktop) and its ground truth."""
    from playwright.async_api import async_playwright

    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    written = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=list(CHROMIUM_ARGS)
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            # Nothing to fetch: every scene is self-contained.
            await page.route("**/*", lambda route: route.abort())
            for scene in scenes:
                await page.set_content(scene.html, wait_until="load")
                # The ground truth has one entry per visual line: no piece of text may wrap.
                wrapped = await page.evaluate(_WRAPPED_JS)
                if wrapped:
                    raise RuntimeError(f"scene {scene.name}: {wrapped} text pieces wrap")
                png = out / f"{scene.name}.png"
                await page.locator(".shot").screenshot(path=str(png))
                (out / f"{scene.name}.txt").write_text("\n".join(scene.lines) + "\n")
                written.append(png)
        finally:
            await browser.close()
    return written


_WRAPPED_JS = """
() => [...document.querySelectorAll('.shot span')].filter((el) => {
  const style = getComputedStyle(el);
  const text = el.getBoundingClientRect().height
    - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  return el.getClientRects().length > 1 || text > 1.8 * parseFloat(style.fontSize);
}).length
"""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "screenshots",
        help="render screenshots of error dialogs and terminals with their ground-truth text",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for NAME.png + NAME.txt")
    parser.add_argument("--count", type=int, default=24, help="how many scenes (default 24)")
    parser.add_argument("--seed", type=int, default=0, help="varies the text, themes and fonts")
    parser.add_argument(
        "--chromium", type=Path, default=DEFAULT_CHROMIUM, help="the Chromium binary to drive"
    )
    return parser


def run_screenshots(args: argparse.Namespace) -> int:
    if args.count < 1:
        print("deskpilot screenshots: --count must be at least 1", file=sys.stderr)
        return 2
    if not args.chromium.exists():
        print(f"deskpilot screenshots: no Chromium at {args.chromium}", file=sys.stderr)
        return 2
    written = asyncio.run(render(build_scenes(args.count, args.seed), args.out, args.chromium))
    print(f"{len(written)} screenshots with ground truth written to {args.out}")
    return 0
