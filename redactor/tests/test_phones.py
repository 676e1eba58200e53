"""The phone recogniser parses only runs of digits that could be a number (redactor.phones).

Presidio's recogniser had phonenumbers parse every run of digits in every region, and every group
of a long run of digit groups again: 55,880 parses on 20,000 characters of "12 12 12 ...", about
6 s. The work is counted here in parse attempts (the library's ``parse``, as its matcher calls
it), not in seconds, and the numbers found are held to what Presidio's recogniser finds.
"""

from __future__ import annotations

from collections import Counter

import phonenumbers
import phonenumbers.phonenumbermatcher
import pytest
from phonenumbers import PhoneMetadata
from phonenumbers.phonenumberutil import COUNTRY_CODES_FOR_NON_GEO_REGIONS
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from redactor.phones import FEWEST_DIGITS_WITH_COUNTRY_CODE, VersionAwarePhoneRecognizer

LENGTH = 20_000


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the matcher's parse attempts per region."""
    counted: Counter[str] = Counter()
    parse = getattr(phonenumbers.phonenumbermatcher, "parse")  # noqa: B009 - not re-exported

    def counting(number: str, region: str | None = None, **options: object) -> object:
        counted[str(region)] += 1
        return parse(number, region, **options)

    monkeypatch.setattr(phonenumbers.phonenumbermatcher, "parse", counting)
    return counted


def _run(unit: str) -> str:
    return (unit * (LENGTH // len(unit) + 1))[:LENGTH] + "!"


def _found(recognizer: PhoneRecognizer, text: str) -> list[str]:
    return sorted(text[r.start : r.end] for r in recognizer.analyze(text, ["PHONE_NUMBER"]))


def test_a_run_of_digit_groups_longer_than_three_numbers_is_not_parsed(
    parses: Counter[str],
) -> None:
    assert _found(VersionAwarePhoneRecognizer(), _run("12 ")) == []
    assert sum(parses.values()) == 0  # Presidio's recogniser: 55,880


def test_a_run_is_parsed_only_where_it_holds_enough_digits(parses: Counter[str]) -> None:
    """Six digits with no plus sign can be a number in Germany (four digits and more) and
    nowhere else of the eight regions (a number from abroad needs an international prefix,
    a country code and at least four digits)."""
    VersionAwarePhoneRecognizer().analyze(_run("12 34 56 a "), ["PHONE_NUMBER"])

    assert set(parses) == {"DE"}
    assert sum(parses.values()) <= LENGTH // 2  # Presidio's recogniser: 58,184


def test_log_lines_cost_a_few_parses_each(parses: Counter[str]) -> None:
    line = (
        "2026-11-14 07:33:05,123 INFO [worker-3] pid=4412 GET /api/v1/items/88213 200 12ms "
        "10.0.44.17:51234 bytes=18233\n"
    )
    VersionAwarePhoneRecognizer().analyze(line * 100, ["PHONE_NUMBER"])

    # Presidio's recogniser: 112 a line (every number in every region, the time stamp's
    # pieces, the address's bytes); left: the one run of ten digits in eight regions.
    assert sum(parses.values()) <= 40 * 100


TEXTS = [
    "Call me back on (212) 555-0187 after lunch",
    "Tel. +44 20 7946 0958, extension 1234",
    "reach me at 555-123-4567 ext. 89 or 555-987-6543",
    "+49 (0) 89 1234 5678 / +49 171 2345678",
    "Fax 0049 89 12345678-0, Zentrale 089 1234560",
    "+1 212 555 0187;ext=44 in the evening",
    "my mobile is 07700 900123 and my desk 01632 960001",
    "06 12 34 56 78 (portable), bureau 01 23 45 67 89",
    "+972 3-123-4567 is the Tel Aviv office, +91 98765 43210 Bangalore",
    "(11) 91234-5678 no Brasil, 416-555-0187 in Toronto",
    "2026-11-26 10:15:33 backup finished",  # a time stamp
    "pages 211-227 (2003)",
    "abc8005001234 or 8005001234def",
    "the order 12 34 56 78 90 12 34 56 78 90 shipped",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_numbers_found_are_presidios(text: str) -> None:
    assert _found(VersionAwarePhoneRecognizer(), text) == _found(PhoneRecognizer(), text)


def test_an_extension_stays_with_its_number() -> None:
    assert _found(VersionAwarePhoneRecognizer(), "call 555-123-4567 ext. 89 now") == [
        "555-123-4567 ext. 89"
    ]


def test_the_fewest_digits_with_a_country_code_is_the_librarys() -> None:
    """The constant stands for loading every region's metadata, which takes most of a second."""
    lengths = [
        len(str(metadata.country_code)) + min(metadata.general_desc.possible_length)
        for metadata in [
            *(PhoneMetadata.metadata_for_region(r) for r in phonenumbers.SUPPORTED_REGIONS),
            *(
                PhoneMetadata.metadata_for_nongeo_region(c)
                for c in COUNTRY_CODES_FOR_NON_GEO_REGIONS
            ),
        ]
        if metadata is not None and metadata.general_desc is not None
    ]
    assert min(lengths) == FEWEST_DIGITS_WITH_COUNTRY_CODE
