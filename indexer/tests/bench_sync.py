"""What a Confluence sync costs: a whole space indexed from nothing, then the same space synced
again unchanged, which must embed nothing at all.

Run ``python -m indexer.tests.bench_sync [--pages 2000] [--seed 16]`` from the repository root
(it needs the test helpers: the Confluence emulator of ``tests/support`` stands in for Confluence
Cloud, on loopback). It starts the emulator with one space (``IT``) of ``--pages`` generated
pages, a real ``valkey-server`` (AOF on, as the tests start it), an embedded Chroma and the
packaged embedding model, the last two in a temporary directory, and runs the indexer's own sync
(:class:`indexer.sources.sync.SourceSync` over :class:`indexer.sources.confluence.ConfluenceSource`
with the default page size, 50 pages a listing request) twice:

1. **First sync**, every page new: wall time, pages/s, chunks/s and texts embedded (semantic
   chunking embeds the sentences and steps of every section long enough to be cut, to place
   the boundaries, then every chunk: 3,038 texts for 1,017 chunks on 200 pages).
2. **Second sync**, nothing changed: wall time, texts embedded and page bodies fetched, both of
   which must be 0, and the run's summary, whose ``unchanged`` must be the page count. The bench
   exits with status 1 when either run's counts are not what they must be.

The indexer's settings are the service's defaults (chunk sizes, 32 texts a forward pass) and
torch gets every core (``--torch-threads``, default the machine's cores), as a lone indexer
replica does; the machine's cores and load average are printed, since figures on a shared
machine are upper bounds. On a machine busy with other work, ``--torch-threads 1``: two torch
threads competing for a core wait for each other (embedding eight sentences took 0.8-2.8 s with
two threads at load 10 on 2 cores, 0.09-0.17 s with one). The first sync's time includes the
one-off loads of a fresh indexer's first document (spaCy's sentence segmenter, Chroma's index).

The pages are generated from ``--seed`` (same seed, same space): IT-support articles about one of
16 systems (VPN, mail, MFA, printers, Wi-Fi, laptops and the like), each with a task and a
qualifier in its title ("Okta Verify: move it to a new phone for contractors"), an ``h1`` and
three to five ``h2`` sections drawn from eight kinds (before you start, steps, steps on another
system, if it still fails, why this happens, known issues, who to contact, for admins): prose
paragraphs of two to four sentences and numbered lists of three to seven steps, filled from the
system's own nouns, menus and commands and from shared pools (operating systems, offices, teams,
devices, error codes, durations), with a note, warning or tip panel on about a third of the pages
and a code macro on about a fifth; one page in five is readable only by one or two of four
groups (its read restriction). With seed 16 a page has 154-534 words (mean 321; 2,000 pages:
643,000 words, 4.2 MB of storage XHTML) and makes about five chunks at the default sizes, the
longer sections cut by the chunker where their sentences change topic.

Not collected by pytest (timings on shared machines are measurements, not pass/fail signals);
``indexer/tests/test_bench_sync.py`` runs it on 5 pages and checks its counts.
"""

from __future__ import annotations

import argparse
import html
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from indexer.config import IndexerSettings
from indexer.embedding import Embedder
from indexer.service import Ingestor
from indexer.sources.config import ConfluenceConfig
from indexer.sources.confluence import ConfluenceSource
from indexer.sources.state import SyncState
from indexer.sources.sync import SourceSync
from indexer.tests.bench_support import bench_store, load_average, reported
from indexer.tests.counting import CountingEmbedder
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence

SPACE = "IT"
SOURCE = "bench"
GROUPS = ("it-staff", "hr-team", "finance", "engineering")

# -- the generated space ------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    """What articles about one system talk about: its tasks and its own words."""

    name: str
    tasks: tuple[str, ...]
    things: tuple[str, ...]
    menus: tuple[str, ...]
    commands: tuple[str, ...]
    team: str


def _items(text: str) -> tuple[str, ...]:
    """``"a; b; c"`` as ``("a", "b", "c")``: the lists below stay one line each."""
    return tuple(item.strip() for item in text.split(";") if item.strip())


def _system(name: str, tasks: str, things: str, menus: str, commands: str, team: str) -> System:
    return System(name, _items(tasks), _items(things), _items(menus), _items(commands), team)


SYSTEMS = (
    _system(
        "GlobalProtect VPN",
        "connect from home; change the portal address; fix a certificate warning; "
        "keep video calls off the tunnel; reconnect after sleep",
        "portal; gateway; tunnel; host information check; client certificate",
        "the GlobalProtect tray icon, Settings; Connection, Portal; the gear icon, Refresh",
        "globalprotect show --status; ipconfig /flushdns; sudo killall PanGPS",
        "Network team",
    ),
    _system(
        "Outlook",
        "add a shared mailbox; set an automatic reply; recover deleted mail; "
        "free space in a full mailbox; rebuild the search index",
        "mailbox; offline cache; calendar delegate; mail rule; signature",
        "File, Account Settings; View, View Settings; Home, Rules, Manage Rules",
        "outlook.exe /safe; outlook.exe /resetnavpane; defaults delete com.microsoft.Outlook",
        "Messaging team",
    ),
    _system(
        "Okta Verify",
        "move it to a new phone; enrol a hardware key; stop repeated push prompts; "
        "sign in without your phone; reset your factors",
        "push notification; one-time code; security key; recovery code; enrolment QR code",
        "Settings, Security Methods; the Okta dashboard, your name, Settings; "
        "Account, Extra verification",
        "okta-verify --diagnostics",
        "Identity team",
    ),
    _system(
        "PaperCut printing",
        "add the floor printer; release a held print job; print in colour; "
        "scan to your mailbox; print from a guest laptop",
        "print queue; release station; cost centre; badge reader; scan profile",
        "Settings, Printers and scanners; System Settings, Printers; the PaperCut client, Jobs",
        "lpstat -p; rundll32 printui.dll,PrintUIEntry /il; Get-Printer | Format-Table",
        "Workplace team",
    ),
    _system(
        "Corporate Wi-Fi",
        "join Corp-WiFi; give a visitor the guest network; fix a limited connection; "
        "forget an old profile; roam between floors",
        "SSID; 802.1X profile; access point; captive portal; device certificate",
        "Settings, Network and Internet, Wi-Fi; System Settings, Wi-Fi, Details; "
        "the network icon, Manage known networks",
        "netsh wlan show interfaces; netsh wlan delete profile name=Corp-WiFi; "
        "networksetup -listpreferredwirelessnetworks en0",
        "Network team",
    ),
    _system(
        "BitLocker",
        "find your recovery key; resume protection after an update; "
        "unlock a drive after a board swap; encrypt a USB stick",
        "recovery key; TPM; startup PIN; encrypted volume; key protector",
        "Control Panel, BitLocker Drive Encryption; "
        "Settings, Privacy and security, Device encryption",
        "manage-bde -status; manage-bde -protectors -get C:; Resume-BitLocker -MountPoint C:",
        "Endpoint team",
    ),
    _system(
        "Microsoft Teams",
        "clear the cache; share a screen with sound; join a meeting room display; "
        "move a chat to a channel; fix a missing calendar tab",
        "meeting room; channel; presence status; cache folder; background effect",
        "Settings, Devices; More options, Settings, Privacy; Calendar, New meeting",
        "taskkill /IM ms-teams.exe /F; rm -rf ~/Library/Caches/com.microsoft.teams2",
        "Collaboration team",
    ),
    _system(
        "OneDrive",
        "restore a deleted file; stop syncing a library; fix a red cross on a folder; "
        "share a folder with a partner; free disk space with files on demand",
        "sync client; shared library; version history; recycle bin; file lock",
        "the cloud icon, Settings, Account; Help and Settings, Pause syncing; "
        "the file, Version history",
        "%localappdata%\\Microsoft\\OneDrive\\onedrive.exe /reset",
        "Collaboration team",
    ),
    _system(
        "Password self-service",
        "reset an expired password; unlock your account; register security questions; "
        "change your password from a Mac; update a saved password on your phone",
        "password policy; lockout counter; self-service portal; keychain; credential manager",
        "Ctrl+Alt+Del, Change a password; System Settings, Users and Groups; "
        "the portal, My account",
        "klist purge; dscl . -list /Users",
        "Identity team",
    ),
    _system(
        "Intune company portal",
        "enrol a personal phone; install an app from the portal; fix a non-compliant device; "
        "remove a device you no longer use; renew a device certificate",
        "compliance policy; work profile; management profile; app protection; sync check-in",
        "Company Portal, Devices; Company Portal, Apps; Settings, Accounts, Access work or school",
        "dsregcmd /status; sudo profiles renew -type enrollment",
        "Endpoint team",
    ),
    _system(
        "Docking stations",
        "use two external monitors; fix a dock that does not charge; update the dock firmware; "
        "get sound through the dock; wake the laptop with the keyboard",
        "USB-C dock; DisplayPort cable; power delivery; firmware update; Ethernet port",
        "Settings, System, Display; System Settings, Displays, Arrange",
        "dockupdate.exe /silent; system_profiler SPDisplaysDataType",
        "Field Services",
    ),
    _system(
        "Jira Service Management",
        "raise a request for software; follow up on a ticket; "
        "approve a request for your team; reopen a resolved ticket; add a colleague as a watcher",
        "request type; approval; service level; queue; customer portal",
        "the help centre, Requests; the ticket, Share; the portal, Approvals",
        "",
        "Service Desk",
    ),
    _system(
        "SAP GUI",
        "install it on a new laptop; add a system connection; fix a logon ticket error; "
        "export a report to a spreadsheet",
        "logon pad; system entry; transport; single sign-on ticket; role",
        "SAP Logon, New; System, User Profile, Own Data; List, Export, Spreadsheet",
        "sapshcut -system=PRD -client=100",
        "Finance applications",
    ),
    _system(
        "Zoom Rooms",
        "start a meeting in a room; share from a guest laptop; fix a room with no sound; "
        "book a room with video",
        "controller tablet; room camera; ceiling microphone; sharing key; room calendar",
        "the controller, Settings, Microphone; the controller, Share Screen",
        "",
        "Workplace team",
    ),
    _system(
        "GitHub Enterprise",
        "request access to an organisation; set up single sign-on for the command line; "
        "rotate a personal access token; add an SSH key",
        "organisation; personal access token; SSH key; SAML session; repository role",
        "Settings, Developer settings, Tokens; Settings, SSH and GPG keys; "
        "the organisation, People",
        "gh auth login --hostname github.example.com; ssh -T git@github.example.com; "
        "ssh-keygen -t ed25519 -C work-laptop",
        "Developer platform team",
    ),
    _system(
        "Badge and building access",
        "get a replacement badge; open a door on another floor; register a visitor; "
        "get access to the server room",
        "badge; door reader; visitor pass; access group; reception desk",
        "the facilities portal, Badges; the visitor system, New visit",
        "",
        "Facilities",
    ),
)

QUALIFIERS = _items(
    "on Windows 11; on macOS; on Linux; for new starters; for contractors; while travelling; "
    "from a hotel network; in the Berlin office; in the Toronto office; after a reinstall; "
    "on a shared desk; for team leads; with a hardware key; on a personal device; "
    "before your first day"
)
SYSTEMS_OS = _items(
    "Windows 11; Windows 10; macOS Sonoma; macOS Ventura; Ubuntu 22.04; iOS; Android"
)
OFFICES = _items("Berlin; Lisbon; Toronto; Leeds; Singapore; Austin; Krakow; Dublin")
DEVICES = _items("laptop; docking station; phone; desk phone; monitor; tablet")
WAITS = _items("five minutes; a quarter of an hour; an hour; half a day; two working days")
WEEKDAYS = _items("Monday; Tuesday; Wednesday; Thursday; Friday")
MONTHS = _items("January; March; May; July; September; November")

INTRO = (
    "This article explains how to {task} {qualifier}.",
    "Use these steps when you need to {task} {qualifier}.",
    "Most requests to {task} can be done without a ticket; this page shows how.",
    "It applies to {os} devices that the {team} manages.",
    "The {thing} behaves differently on {os2}, so check which system you use first.",
    "Colleagues in {office} reported that this takes about {wait} the first time.",
    "If you only want to {task2}, there is a separate article for that.",
    "Everything here also works on a {device}, though the menus are named differently.",
    "Read the whole page once before you start: the order of the steps matters.",
    "The screenshots were taken on {os} in {month}.",
)
BEFORE = (
    "Make sure your {device} is on the company network or connected to the VPN.",
    "You need your company account and a second factor to hand.",
    "Save your work first: the {thing} restarts during the change.",
    "Check that the {thing} shows your name, not a colleague's.",
    "Close {system} on every other {device} you are signed in on.",
    "Administrator rights are not needed for any of this.",
    "Allow {wait} for the change to reach every office.",
    "Keep your {device} plugged in: a battery below twenty percent stops the update.",
    "Write down the {thing} you use today in case you need to go back to it.",
    "Contractors need a sponsor from the {team} before they can do this.",
)
STEPS = (
    "Open {menu}.",
    "Sign in with your company account when {system} asks for it.",
    "Choose the {thing} that matches your office ({office}).",
    "Select {option} and confirm with Save.",
    "Restart the {device} and wait until the {thing} shows as ready.",
    "Run <code>{command}</code> in a terminal and note what it prints.",
    "Wait {wait}, then check the {thing} again.",
    "If you are asked for a code, use the one from Okta Verify, not an old text message.",
    "Remove the old {thing2} from the list before you add the new one.",
    "Approve the prompt on your phone within sixty seconds.",
    "Type the error code, for example {error}, into the search box of the help centre.",
    "Sign out of {system} completely and sign in again.",
    "Check that the {thing2} now shows a green tick next to your name.",
    "Close the window and open {system} from the start menu again.",
    "Pick {option} from the drop-down list; leave the other fields as they are.",
    "Confirm the change in the e-mail the {team} sends you within {wait}.",
    "Test it: send yourself a message or open an internal page.",
)
TROUBLE = (
    "If {system} shows the error {error}, the {thing} is out of date: repeat the steps above.",
    "An error {error} usually means the {thing2} was removed by the nightly clean-up.",
    "When nothing changes after {wait}, restart the {device} once more.",
    "The message about a missing {thing} can be ignored on {os}.",
    "On {os2} the {thing} may take longer to appear; this is expected.",
    "If colleagues in {office} have the same problem, it is probably an outage: check the "
    "status page before you raise a ticket.",
    "Still stuck? Raise a ticket and attach a screenshot of the error {error}.",
    "A {device} that was offline for more than thirty days must be brought to the {team}.",
    "Clearing the {thing2} fixes most cases where {system} keeps asking for a password.",
    "If the error {error} appears only in {office}, the local {thing} may be down.",
)
WHY = (
    "Since the {month} change, the {thing} is checked every time you sign in.",
    "The {team} rotates the {thing2} every ninety days, which is why old settings stop working.",
    "A stale {thing} is the most common cause, especially after a holiday.",
    "Security policy asks for a fresh {thing} whenever a {device} changes hands.",
    "The {thing} is tied to your device, not to your account.",
    "{system} caches the {thing2} for {wait}, so changes do not show at once.",
    "Older {device}s cannot run the current version, which is why the {team} replaces them.",
)
CONTACT = (
    "The {team} owns {system}; raise a ticket in the service desk portal for them.",
    "For urgent problems call the service desk; outside office hours the {team} is on call.",
    "Office {office} has a walk-in desk on {weekday} mornings.",
    "Requests for more than ten people go to the {team} through a bulk request.",
    "Mention the article number in your ticket so the right queue picks it up.",
    "Managers can ask for a change on behalf of their team in the same portal.",
)
ADMINS = (
    "Administrators find the {thing} settings under {menu}.",
    "Changes to the {thing2} need approval from the {team}.",
    "Check the audit log before you reset a {thing} for somebody else.",
    "Never send a {thing} by chat or e-mail; use the secure share instead.",
    "Bulk changes run overnight; schedule them before six in the evening.",
    "The {thing2} report in {menu} lists every account still on the old setting.",
)
PANELS = (
    (
        "note",
        "The {thing} on {os} is managed centrally: local changes are undone at the next sync.",
    ),
    ("warning", "Do not share your {thing2} with anyone, the service desk included."),
    ("tip", "Pin {system} to the taskbar so you find it faster next time."),
    ("info", "This changed in {month}: older screenshots may show another menu."),
)


def _sentences(
    rng: random.Random, pool: Sequence[str], count: int, slots: Callable[[], dict[str, str]]
) -> list[str]:
    return [template.format_map(slots()) for template in rng.sample(pool, min(count, len(pool)))]


def generate_page(rng: random.Random, number: int) -> tuple[str, str, list[str]]:
    """One page: its title, its storage-format body and the groups its read restriction allows
    (empty: everyone)."""
    system = rng.choice(SYSTEMS)
    task, qualifier = rng.choice(system.tasks), rng.choice(QUALIFIERS)
    title = f"{system.name}: {task} {qualifier} (KB{number:05d})"

    def slots() -> dict[str, str]:
        """Values for one sentence's slots, escaped: the templates are markup."""
        os_names = rng.sample(SYSTEMS_OS, 2)
        values = {
            "task": task,
            "task2": rng.choice(system.tasks),
            "qualifier": qualifier,
            "system": system.name,
            "thing": rng.choice(system.things),
            "thing2": rng.choice(system.things),
            "menu": rng.choice(system.menus),
            "option": rng.choice(system.things).capitalize(),
            "command": rng.choice(system.commands or ("whoami",)),
            "team": system.team,
            "os": os_names[0],
            "os2": os_names[1],
            "office": rng.choice(OFFICES),
            "device": rng.choice(DEVICES),
            "wait": rng.choice(WAITS),
            "weekday": rng.choice(WEEKDAYS),
            "month": rng.choice(MONTHS),
            "error": rng.choice(
                (
                    f"0x{rng.randrange(16**8):08X}",
                    f"E{rng.randint(100, 999)}",
                    f"AADSTS{rng.randint(50000, 90000)}",
                )
            ),
        }
        return {name: html.escape(value) for name, value in values.items()}

    def prose(pool: Sequence[str], low: int, high: int) -> str:
        return "<p>" + " ".join(_sentences(rng, pool, rng.randint(low, high), slots)) + "</p>"

    def steps() -> str:
        items = _sentences(rng, STEPS, rng.randint(4, 10), slots)
        return "<ol>" + "".join(f"<li>{item}</li>" for item in items) + "</ol>"

    sections: dict[str, Callable[[], str]] = {
        "Before you start": lambda: prose(BEFORE, 2, 5),
        "Steps": steps,
        f"Steps on {rng.choice(SYSTEMS_OS)}": steps,
        "If it still fails": lambda: prose(TROUBLE, 3, 7),
        "Why this happens": lambda: prose(WHY, 2, 5),
        "Known issues": lambda: prose(TROUBLE, 2, 5),
        "Who to contact": lambda: prose(CONTACT, 2, 4),
        "For administrators": lambda: prose(ADMINS, 2, 5),
    }
    chosen = [
        "Steps",
        *rng.sample([name for name in sections if name != "Steps"], rng.randint(2, 4)),
    ]
    order = list(sections)
    parts = [f"<h1>{html.escape(title)}</h1>", prose(INTRO, 2, 5)]
    for name in sorted(chosen, key=order.index):
        parts.append(f"<h2>{html.escape(name)}</h2>")
        parts.append(sections[name]())
    if rng.random() < 0.35:
        kind, template = rng.choice(PANELS)
        text = template.format_map(slots())
        parts.append(
            f'<ac:structured-macro ac:name="{kind}"><ac:rich-text-body><p>{text}</p>'
            "</ac:rich-text-body></ac:structured-macro>"
        )
    if system.commands and rng.random() < 0.25:
        commands = "\n".join(rng.sample(system.commands, min(2, len(system.commands))))
        parts.append(
            '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">shell'
            f"</ac:parameter><ac:plain-text-body><![CDATA[{commands}]]></ac:plain-text-body>"
            "</ac:structured-macro>"
        )
    groups = sorted(rng.sample(GROUPS, rng.randint(1, 2))) if rng.random() < 0.2 else []
    return title, "".join(parts), groups


def generate_space(fake: FakeConfluence, pages: int, seed: int) -> dict[str, int]:
    """Fill the emulator's space with ``pages`` pages made from ``seed``; their size."""
    rng = random.Random(seed)
    words = xhtml = 0
    for number in range(1, pages + 1):
        title, body, groups = generate_page(rng, number)
        fake.add_page(SPACE, title, body, read_groups=groups)
        words += len(re.sub(r"<[^>]+>", " ", body).split())
        xhtml += len(body.encode())
    return {"words": words, "xhtml_bytes": xhtml}


# -- the runs -----------------------------------------------------------------------------------


def sync_once(
    fake: FakeConfluence, ingestor: Ingestor, client: redis.Redis, counting: CountingEmbedder
) -> dict[str, Any]:
    """One sync of the whole space, timed; what it embedded and fetched."""
    config = ConfluenceConfig(
        name=SOURCE, base_url=fake.base_url, spaces=(SPACE,), email=EMAIL, api_token=TOKEN
    )
    source = ConfluenceSource(config)
    texts, reads = counting.texts, len(fake.body_reads)
    try:
        started = time.perf_counter()
        result = SourceSync(source, ingestor, SyncState(client, SOURCE)).run()
        wall = time.perf_counter() - started
    finally:
        source.close()
    return {
        "wall_s": round(wall, 2),
        "texts_embedded": counting.texts - texts,
        "bodies_fetched": len(fake.body_reads) - reads,
        "summary": result.summary.model_dump(),
        "error": result.error,
        "failures": result.failures,
    }


def problems(figures: dict[str, Any]) -> list[str]:
    """What is wrong with a bench's figures: empty when both runs did what they must."""
    pages, first, second = figures["pages"], figures["first"], figures["second"]
    found = []
    for name, run in (("first", first), ("second", second)):
        if run["error"] is not None or run["summary"]["failed"]:
            found.append(f"{name} sync: error {run['error']!r}, failures {run['failures']}")
        if run["summary"]["total"] != pages:
            found.append(f"{name} sync: total {run['summary']['total']}, not {pages}")
    if first["summary"]["new"] != pages or figures["chunks"] == 0:
        found.append(f"first sync: {first['summary']['new']} new, {figures['chunks']} chunks")
    if second["summary"]["unchanged"] != pages:
        found.append(f"second sync: {second['summary']['unchanged']} unchanged, not {pages}")
    if second["texts_embedded"] or second["bodies_fetched"]:
        found.append(
            f"second sync embedded {second['texts_embedded']} texts and fetched "
            f"{second['bodies_fetched']} bodies of unchanged pages"
        )
    return found


def bench(pages: int, seed: int, embedder: Embedder) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "pages": pages,
        "seed": seed,
        "cpus": os.cpu_count(),
        "load_average_start": load_average(),
    }
    counting = CountingEmbedder(embedder)
    with bench_store("bench-sync") as (client, collection, settings):
        ingestor = Ingestor(counting, collection, settings)
        with FakeConfluence({SPACE: "Information Technology"}) as fake:
            figures |= generate_space(fake, pages, seed)
            figures["first"] = sync_once(fake, ingestor, client, counting)
            figures["chunks"] = collection.count()
            figures["second"] = sync_once(fake, ingestor, client, counting)
    first = figures["first"]
    first["pages_per_s"] = round(pages / first["wall_s"], 2)
    first["chunks_per_s"] = round(figures["chunks"] / first["wall_s"], 2)
    figures["load_average_end"] = load_average()
    return figures


def report(figures: dict[str, Any]) -> None:
    pages, first, second = figures["pages"], figures["first"], figures["second"]
    print(
        f"space: {pages} pages (seed {figures['seed']}), {figures['words']} words "
        f"({figures['words'] / pages:.0f} a page), {figures['xhtml_bytes'] / 1e6:.2f} MB of "
        f"storage XHTML; cpus={figures['cpus']}, load average at the start "
        f"{figures['load_average_start']}"
    )
    print(
        f"first sync (all new):    {first['wall_s']:8.2f} s  {first['pages_per_s']:7.2f} pages/s  "
        f"{figures['chunks']} chunks, {first['chunks_per_s']:.2f} chunks/s  "
        f"texts embedded {first['texts_embedded']}"
    )
    print(f"  summary {first['summary']}")
    print(
        f"second sync (unchanged): {second['wall_s']:8.2f} s  texts embedded "
        f"{second['texts_embedded']}, page bodies fetched {second['bodies_fetched']}"
    )
    print(f"  summary {second['summary']}")
    print(f"load average at the end: {figures['load_average_end']}")


def main(argv: Sequence[str] | None = None, embedder: Embedder | None = None) -> dict[str, Any]:
    """Run the bench, print its figures and return them; exits with status 1 when a run's counts
    are wrong. ``embedder``: a loaded one to share (a test's), else the service's default."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000, help="pages in the space")
    parser.add_argument("--seed", type=int, default=16, help="seed the pages are made from")
    parser.add_argument(
        "--torch-threads", type=int, default=os.cpu_count() or 1, help="torch's CPU threads"
    )
    args = parser.parse_args(argv)
    if args.pages < 1:
        parser.error("--pages must be at least 1")
    if embedder is None:
        defaults = IndexerSettings(torch_threads=args.torch_threads)
        embedder = Embedder.from_settings(defaults).load()
    return reported(bench(args.pages, args.seed, embedder), report, problems)


if __name__ == "__main__":
    main()
