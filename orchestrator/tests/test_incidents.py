"""Incidents: the Redis store on the real valkey server, matching a turn, and the user's notice."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
import redis.asyncio as aioredis

from contracts.events import Incident, IncidentReported
from orchestrator.incidents import (
    KEY_PREFIX,
    MIN_SCORE,
    IncidentStore,
    incident_notice,
    match,
    since_phrase,
    to_ref,
)

T0 = datetime(2025, 11, 25, 9, 10, tzinfo=UTC)


def vpn_incident(**changes: object) -> Incident:
    fields: dict[str, object] = {
        "id": "inc-vpn",
        "title": "VPN outage for remote workers",
        "status": "investigating",
        "affected_services": ["VPN", "Palo Alto GlobalProtect"],
        "error_signatures": ["0x80070005", "HTTP 503"],
        "started_at": T0,
        "updated_at": T0,
        "url": "https://status.northwind.example/incidents/inc-vpn",
        "latest_update": "We are restarting the EMEA gateway",
        "category": "connectivity",
    }
    fields.update(changes)
    return Incident.model_validate(fields)


def report(incident: Incident, **changes: object) -> IncidentReported:
    return IncidentReported(
        correlation_id=incident.id, conversation_id=incident.id, incident=incident, **changes
    )


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.from_url(redis_url)
    yield redis
    await redis.aclose()


@pytest.fixture
def prefix() -> str:
    """Each test its own namespace, so the active sets of tests never mix."""
    return f"{KEY_PREFIX}test-{uuid.uuid4().hex}:"


@pytest.fixture
def store(client: aioredis.Redis, prefix: str) -> IncidentStore:
    return IncidentStore(client, cache_s=0, prefix=prefix)


# -- the store ----------------------------------------------------------------------------------


async def test_newest_version_wins_whatever_the_order(store: IncidentStore) -> None:
    old = vpn_incident(status="investigating", latest_update="Looking into it")
    new = vpn_incident(
        status="identified", updated_at=T0 + timedelta(minutes=20), latest_update="Gateway found"
    )

    assert await store.apply(report(new)) == "active"
    assert await store.apply(report(old)) == "stale"  # a late, older report

    [active] = await store.active()
    assert (active.status, active.latest_update) == ("identified", "Gateway found")
    newer = vpn_incident(status="monitoring", updated_at=T0 + timedelta(minutes=40))
    assert await store.apply(report(newer)) == "active"
    assert [i.status for i in await store.active()] == ["monitoring"]


async def test_a_redelivered_report_changes_nothing(store: IncidentStore) -> None:
    event = report(vpn_incident())
    assert await store.apply(event) == "active"
    assert await store.apply(event) == "duplicate"
    assert await store.apply(event.model_copy()) == "duplicate"
    assert [i.id for i in await store.active()] == ["inc-vpn"]


async def test_without_updated_at_the_report_time_orders_versions(store: IncidentStore) -> None:
    first = report(vpn_incident(updated_at=None, status="investigating"), occurred_at=T0)
    later = report(
        vpn_incident(updated_at=None, status="identified"), occurred_at=T0 + timedelta(minutes=5)
    )
    assert await store.apply(later) == "active"
    assert await store.apply(first) == "stale"
    assert [i.status for i in await store.active()] == ["identified"]


async def test_resolution_removes_it_and_beats_a_late_older_update(
    store: IncidentStore, client: aioredis.Redis
) -> None:
    other = vpn_incident(id="inc-mail", affected_services=["Outlook"], title="Mail delays")
    await store.apply(report(other))
    await store.apply(report(vpn_incident()))
    assert {i.id for i in await store.active()} == {"inc-vpn", "inc-mail"}

    resolved = vpn_incident(
        status="resolved", resolved=True, updated_at=T0 + timedelta(hours=1), latest_update="Fixed"
    )
    assert await store.apply(report(resolved)) == "resolved"
    assert [i.id for i in await store.active()] == ["inc-mail"]

    # An update written before the resolution, delivered after it, does not bring it back.
    late = vpn_incident(status="identified", updated_at=T0 + timedelta(minutes=30))
    assert await store.apply(report(late)) == "stale"
    assert [i.id for i in await store.active()] == ["inc-mail"]

    # The resolved version is kept, briefly.
    kept = await store.get("inc-vpn")
    assert kept is not None
    assert kept.resolved
    assert kept.latest_update == "Fixed"
    ttl = await client.ttl(store.record_key("inc-vpn"))
    assert 0 < ttl <= store.resolved_keep_s


async def test_status_resolved_counts_without_the_flag(store: IncidentStore) -> None:
    await store.apply(report(vpn_incident()))
    done = vpn_incident(status="Resolved", updated_at=T0 + timedelta(minutes=1))
    assert await store.apply(report(done)) == "resolved"
    assert await store.active() == []


async def test_at_the_same_time_resolution_wins(store: IncidentStore) -> None:
    resolved = vpn_incident(status="resolved", resolved=True)
    assert await store.apply(report(resolved)) == "resolved"
    assert await store.apply(report(vpn_incident(status="monitoring"))) == "stale"
    assert await store.active() == []


async def test_an_update_after_the_resolution_reopens_it(store: IncidentStore) -> None:
    await store.apply(report(vpn_incident(status="resolved", resolved=True)))
    reopened = vpn_incident(status="investigating", updated_at=T0 + timedelta(hours=2))
    assert await store.apply(report(reopened)) == "active"
    assert [i.id for i in await store.active()] == ["inc-vpn"]


async def test_active_is_cached_per_process(client: aioredis.Redis, prefix: str) -> None:
    reader = IncidentStore(client, cache_s=3600, prefix=prefix)
    writer = IncidentStore(client, cache_s=0, prefix=prefix)  # another replica
    assert await reader.active() == []

    await writer.apply(report(vpn_incident()))
    assert await reader.active() == []  # served from this process's cache
    assert [i.id for i in await writer.active()] == ["inc-vpn"]

    # An apply on this replica drops its cache at once.
    await reader.apply(report(vpn_incident(id="inc-2", title="Printer queue down")))
    assert {i.id for i in await reader.active()} == {"inc-vpn", "inc-2"}


async def test_an_incident_nobody_updates_expires(
    store: IncidentStore, client: aioredis.Redis
) -> None:
    await store.apply(report(vpn_incident()))
    ttl = await client.ttl(store.record_key("inc-vpn"))
    assert store.stale_after_s - 5 < ttl <= store.stale_after_s

    await client.delete(store.record_key("inc-vpn"))  # what the expiry does
    assert await store.active() == []
    assert await client.scard(store.active_key) == 0  # and the active set is tidied


async def test_active_lists_the_most_recently_updated_first(store: IncidentStore) -> None:
    await store.apply(report(vpn_incident(id="a", updated_at=T0)))
    await store.apply(report(vpn_incident(id="b", updated_at=T0 + timedelta(minutes=3))))
    await store.apply(report(vpn_incident(id="c", updated_at=T0 + timedelta(minutes=1))))
    assert [i.id for i in await store.active()] == ["b", "c", "a"]


@pytest.mark.parametrize(
    "damaged", [b"\xff\xfe not utf-8", b"{not json", b'{"id": "x"}'], ids=["bytes", "json", "model"]
)
async def test_an_unreadable_record_is_skipped_and_the_others_still_listed(
    store: IncidentStore, client: aioredis.Redis, damaged: bytes
) -> None:
    await store.apply(report(vpn_incident(id="a")))
    await store.apply(report(vpn_incident(id="b")))
    await client.hset(store.record_key("b"), "incident", damaged)
    assert [i.id for i in await store.active()] == ["a"]
    assert await store.get("b") is None
    assert (await store.get("a") or vpn_incident(id="none")).id == "a"


# -- matching -----------------------------------------------------------------------------------

VPN = vpn_incident()
MAIL = Incident(
    id="inc-mail",
    title="Mail delivery delays",
    status="identified",
    affected_services=["Microsoft Exchange Online", "Outlook"],
    category="account",
    updated_at=T0,
)
WIFI = Incident(
    id="inc-wifi",
    title="Wi-Fi outage in Building 3",
    status="investigating",
    category="connectivity",
    updated_at=T0,
)
ALL = [VPN, MAIL, WIFI]


@pytest.mark.parametrize(
    "text",
    [
        "vpn keeps dropping",
        "My VPN won't connect since this morning",
        "both VPNs fail",
        "the vpn-client crashes",
        "GlobalProtect says the portal is unreachable",
        "global protect shows a red icon",
        "global-protect asks for my password again and again",
    ],
)
def test_matches_an_affected_service_by_name(text: str) -> None:
    found = match(ALL, text, [], None)
    assert found is not None
    assert found.incident.id == "inc-vpn"
    assert found.score >= MIN_SCORE
    assert found.reason.startswith("service ")


@pytest.mark.parametrize(
    "text",
    [
        "my printer is out of paper",
        "I cannot connect",  # nothing but the category
        "how do I get a VPNX licence",  # another word that starts like a listed name
        "the connection to sharepoint is slow",
    ],
)
def test_unrelated_text_does_not_match(text: str) -> None:
    assert match(ALL, text, [], "connectivity") is None


def test_the_category_alone_never_matches() -> None:
    assert match([VPN], "something is wrong with my laptop", [], "connectivity") is None
    assert match([VPN], "", [], "connectivity") is None


@pytest.mark.parametrize(
    ("signatures", "text"),
    [
        (["0x80070005"], "it fails at start"),
        (["0X80070005"], "it fails at start"),  # hex codes in any case
        ([], "I get error 0x80070005 when it starts"),
        ([], "error 0X80070005"),
    ],
)
def test_matches_by_error_signature(signatures: list[str], text: str) -> None:
    found = match(ALL, text, signatures, None)
    assert found is not None
    assert found.incident.id == "inc-vpn"
    assert "signature 0x80070005" in found.reason


def test_signatures_are_exact() -> None:
    exception = vpn_incident(affected_services=[], error_signatures=["AuthTokenExpiredException"])
    assert match([exception], "it fails", ["AuthTokenExpiredException"], None) is not None
    assert match([exception], "it fails", ["authtokenexpiredexception"], None) is None
    assert match([exception], "it fails", ["AuthTokenExpired"], None) is None
    assert match([VPN], "it fails", ["0x80070006"], None) is None
    assert match([VPN], "error 0x800700051", [], None) is None


def test_a_generic_signature_needs_another_clue() -> None:
    assert match([VPN], "the portal answers HTTP 503", [], None) is None
    found = match([VPN], "the portal answers HTTP 503", [], "connectivity")
    assert found is not None
    assert "generic signature HTTP 503" in found.reason


def test_no_synonyms_unless_listed() -> None:
    outlook_only = MAIL.model_copy(update={"title": "Delivery delays"})
    assert match([outlook_only], "my e-mail is not arriving", [], "account") is None
    assert match([outlook_only], "outlook keeps asking me to sign in", [], None) is not None

    listed = outlook_only.model_copy(update={"affected_services": ["Outlook", "E-mail"]})
    for text in ("my e-mail is not arriving", "email is not arriving", "no emails today"):
        found = match([listed], text, [], None)
        assert found is not None
        assert found.reason == "service E-mail"


def test_an_everyday_word_of_a_product_name_is_a_weak_clue() -> None:
    exchange = MAIL.model_copy(update={"title": "Delays", "affected_services": ["Exchange Online"]})
    mouse = "I want to exchange my broken mouse"
    assert match([exchange], mouse, [], "peripheral_exchange") is None
    assert match([exchange], "exchange online is down", [], None) is not None
    # A single word of a longer name, with the same category, is enough.
    assert match([exchange], "exchange does not sync", [], "account") is not None


def test_a_title_word_counts_with_the_category() -> None:
    assert match([WIFI], "wifi is down on my floor", [], "account") is None
    found = match([WIFI], "wifi is down on my floor", [], "connectivity")
    assert found is not None
    assert found.incident.id == "inc-wifi"
    assert found.reason == "word Wi-Fi; category connectivity"


def test_the_best_match_wins() -> None:
    other_vpn = vpn_incident(
        id="inc-vpn-apac", category="account", error_signatures=[], updated_at=T0 + timedelta(1)
    )
    # Both name the VPN: the category breaks the tie, though the other is newer.
    found = match([other_vpn, VPN], "vpn drops", [], "connectivity")
    assert found is not None
    assert found.incident.id == "inc-vpn"
    # Without a category the more recently updated one wins.
    found = match([VPN, other_vpn], "vpn drops", [], None)
    assert found is not None
    assert found.incident.id == "inc-vpn-apac"
    # A specific signature outweighs a name.
    found = match([other_vpn, VPN], "vpn drops", ["0x80070005"], "account")
    assert found is not None
    assert found.incident.id == "inc-vpn"


def test_resolved_incidents_never_match() -> None:
    resolved = vpn_incident(status="resolved")
    assert match([resolved], "vpn keeps dropping", ["0x80070005"], "connectivity") is None


def test_the_reason_holds_the_incidents_terms_not_the_users_text() -> None:
    text = "Hi, <PERSON_1> here: my VPN to the Oslo office keeps dropping"
    found = match([VPN], text, ["0x80070005"], "connectivity")
    assert found is not None
    assert found.reason == "signature 0x80070005; service VPN; category connectivity"
    assert "Oslo" not in found.reason
    assert "PERSON" not in found.reason


def test_names_in_attachment_signatures_count() -> None:
    agent = vpn_incident(affected_services=["vpnagent"], error_signatures=[], title="Agent down")
    found = match([agent], "see the attached log", ["component vpnagent"], None)
    assert found is not None
    assert found.reason == "service vpnagent"


# -- the notice ---------------------------------------------------------------------------------


def test_notice_says_what_is_known_and_what_to_do() -> None:
    text = incident_notice(VPN, now=T0 + timedelta(hours=2))
    assert text == (
        "This looks like an ongoing incident IT already knows about: VPN outage for remote "
        "workers (under investigation, since 09:10 UTC). Latest update: We are restarting the "
        "EMEA gateway. You don't need to keep troubleshooting on your side: it should work again "
        "once the incident is fixed. If you'd like a ticket anyway, just say so and I'll link it "
        "to this incident. Status updates: https://status.northwind.example/incidents/inc-vpn"
    )


def test_notice_without_start_update_or_link() -> None:
    bare = Incident(id="x", title="Printing is down.", status="identified")
    text = incident_notice(bare)
    assert text.startswith(
        "This looks like an ongoing incident IT already knows about: Printing is down "
        "(cause identified, a fix is being worked on)."
    )
    assert "since" not in text
    assert "Latest update" not in text
    assert "http" not in text
    assert "don't need to keep troubleshooting" in text
    assert "ticket" in text


def test_notice_shortens_a_long_update() -> None:
    long = vpn_incident(latest_update="word " * 200)
    update = incident_notice(long, now=T0).split("Latest update: ")[1].split("…")[0]
    assert 0 < len(update) <= 300


@pytest.mark.parametrize(
    ("started", "now", "expected"),
    [
        (T0, T0 + timedelta(hours=3), "since 09:10 UTC"),
        (T0, T0 + timedelta(days=1), "since 25 Nov 09:10 UTC"),
        (T0, datetime(2026, 1, 2, tzinfo=UTC), "since 25 Nov 2025 09:10 UTC"),
        (T0.replace(tzinfo=None), T0, "since 09:10 UTC"),  # naive means UTC
        (
            datetime(2025, 11, 25, 10, 10, tzinfo=timezone(timedelta(hours=1))),
            T0,
            "since 09:10 UTC",
        ),
        (T0 + timedelta(hours=2), T0, "starting 11:10 UTC"),  # announced maintenance
        (None, T0, ""),
    ],
)
def test_since_is_human_friendly(started: datetime | None, now: datetime, expected: str) -> None:
    assert since_phrase(started, now) == expected


def test_to_ref() -> None:
    ref = to_ref(VPN)
    assert ref.model_dump() == {
        "id": "inc-vpn",
        "title": "VPN outage for remote workers",
        "status": "investigating",
        "url": "https://status.northwind.example/incidents/inc-vpn",
        "since": T0,
        "latest_update": "We are restarting the EMEA gateway",
    }
