"""The one ``Retry-After`` reader of the gateway (the directory and the Teams connector use it):
delta-seconds and HTTP-dates honoured, anything else the caller's default, always within the
caller's floor and cap."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from gateway.retry_after import retry_after_s

NOW = datetime(2026, 11, 27, 14, 0, 0, tzinfo=UTC)


def wait(value: str | None, *, floor: float = 0.0) -> float:
    return retry_after_s(value, default=7.0, cap=60.0, floor=floor, now=NOW.timestamp())


@pytest.mark.parametrize(
    ("value", "seconds"), [("5", 5.0), ("0", 0.0), (" 12 ", 12.0), ("1.5", 1.5)]
)
def test_delta_seconds_are_waited(value: str, seconds: float) -> None:
    assert wait(value) == seconds


def test_an_http_date_is_waited_until() -> None:
    assert wait("Fri, 27 Nov 2026 14:00:30 GMT") == 30.0
    assert wait(format_datetime(NOW.replace(second=45), usegmt=True)) == 45.0
    # RFC 850 and asctime forms are HTTP-dates too; asctime carries no zone and is GMT.
    assert wait("Friday, 27-Nov-26 14:00:20 GMT") == 20.0
    assert wait("Fri Nov 27 14:00:10 2026") == 10.0


def test_a_date_already_past_waits_no_longer_than_the_floor() -> None:
    assert wait("Fri, 27 Nov 2026 13:59:00 GMT") == 0.0
    assert wait("Fri, 27 Nov 2026 13:59:00 GMT", floor=1.0) == 1.0


@pytest.mark.parametrize(
    "value", [None, "", "   ", "soon", "5s", "nan", "Fri, 32 Nov 2026 14:00:00 GMT", "\x00"]
)
def test_a_missing_or_unreadable_header_is_the_default(value: str | None) -> None:
    assert wait(value) == 7.0


@pytest.mark.parametrize("value", ["-5", "-0.5", "-inf"])
def test_a_negative_wait_is_the_floor(value: str) -> None:
    assert wait(value) == 0.0
    assert wait(value, floor=1.0) == 1.0


@pytest.mark.parametrize(
    "value",
    ["61", "86400", "1e308", "inf", "99999999999999999999", "Thu, 01 Jan 2099 00:00:00 GMT"],
)
def test_a_huge_wait_is_capped(value: str) -> None:
    assert wait(value) == 60.0


def test_the_default_is_kept_within_floor_and_cap() -> None:
    assert retry_after_s("soon", default=30.0, cap=10.0) == 10.0
    assert retry_after_s(None, default=0.0, cap=10.0, floor=1.0) == 1.0


def test_the_clock_is_used_when_no_time_is_given() -> None:
    ahead = datetime.now(UTC).timestamp() + 3600
    header = format_datetime(datetime.fromtimestamp(ahead, UTC), usegmt=True)
    assert 3590.0 <= retry_after_s(header, default=0.0, cap=7200.0) <= 3600.0
