"""Phone numbers found by the phonenumbers library, without paying for what cannot be one.

Presidio's phone recogniser runs phonenumbers' matcher over the whole text once per region (eight
of them), and the matcher parses every run of digits it meets, one, two or three digits
included, and inside a long run of digit groups each group again: about 0.3 ms a character on a
log, 6 s on 20,000 characters of "12 12 12 ...". Nearly all of that work is on runs no region
could accept. :class:`VersionAwarePhoneRecognizer` finds the runs once with one linear pattern
and hands each region's matcher only the runs that hold enough digits to be a valid number
there (and not more than :data:`MOST_DIGITS_IN_A_RUN`: a table of figures), each with the
characters around it that the matcher looks at, so what it finds is what Presidio's recogniser
finds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import product
from typing import NamedTuple

import phonenumbers
from phonenumbers import PhoneMetadata, PhoneNumberMatch, PhoneNumberMatcher
from presidio_analyzer import EntityRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

# What phonenumbers lets stand between the digit groups of one number (its valid punctuation:
# dashes, "x", spaces, brackets, dots, slashes, tildes), at most four in a row, and what may
# lead a number (opening brackets, plus signs), at most twice.
_PUNCTUATION = (
    "\\-x\u2010-\u2015\u2212\u30fc\uff0d-\uff0f \u00a0\u00ad\u200b\u2060\u3000"
    "()\uff08\uff09\uff3b\uff3d.\\[\\]/~\u2053\u223c\uff5e"
)
_LEAD = "(\\[\uff08\uff3b+\uff0b"
_RUN = re.compile(rf"(?:[{_LEAD}][{_PUNCTUATION}]{{0,4}}){{0,2}}\d+(?:[{_PUNCTUATION}]{{0,4}}\d+)*")
_DIGIT = re.compile(r"\d")
_PLUS = re.compile("[+\uff0b]")

# A date, with or without its hour, which phone patterns also match: "2024-10-11", "2025-03-12
# 11" of a log line, "11.10.2024".
DATE = re.compile(
    r"(?:19|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])(?:[ T]\d{1,2})?"
    r"|(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|1[0-2])[-/.](?:19|20)\d\d"
)
# A run of digit groups holding more digits than three of the longest numbers side by side
# (15 digits, E.164's limit, and a two-digit international prefix) is a table, a dump or a list
# of figures; the matcher would try every group of it in every region.
MOST_DIGITS_IN_A_RUN = 3 * 17
# The fewest digits any number written with its country code has: a two-digit code and a
# four-digit number (Austria, Germany). A test derives it from the library's metadata, whose
# loading for every region takes most of a second.
FEWEST_DIGITS_WITH_COUNTRY_CODE = 6
# After a run, the matcher looks at the next character (no number is glued to a letter) and at
# a time stamp's minutes (":15" after "2026-11-26 10"), and it may take an extension into the
# number ("555-0187 ext. 12", "x12", "#12", "доб. 12"): a window holds a run, the three
# characters after it, and the next run on its line if it is short and only punctuation or an
# extension's word stands between them.
_AFTER_A_RUN = 3
_NEXT_RUN_WITHIN = 12
_BEFORE_AN_EXTENSION = re.compile(
    r"[^\w\n]*(?:e?xt\w*|x|int|anexo|доб|ｅ?ｘｔｎ?|ｘ|ｉｎｔ)?[^\w\n]*", re.I
)
_MOST_DIGITS_OF_AN_EXTENSION = 20
# Numbers the matcher may try in one run before it gives up on it (a found number does not
# count): a run holding two numbers ("555-123-4567 / 555-987-6543") needs one or two, a run of
# digit groups as long as three numbers about thirty in each region.
TRIES_PER_RUN = 10


class _Run(NamedTuple):
    """Digits joined by what phonenumbers accepts between them, and how many digits."""

    start: int
    end: int
    digits: int
    plus: bool


def _shortest_match(pattern: str | None) -> int:
    """How many digits the shortest string ``pattern`` (an international prefix) matches has."""
    if not pattern:
        return 0
    for length in range(1, 4):
        if any(re.fullmatch(pattern, "".join(d)) for d in product("0123456789", repeat=length)):
            return length
    return 4


def fewest_digits(region: str, plus: bool) -> int:
    """The fewest digits a run must hold for the matcher to find a valid number in it for
    ``region``: a national number's shortest length there, or a number dialled abroad (its
    country code and number, after a plus sign or else after the region's international
    prefix)."""
    metadata = PhoneMetadata.metadata_for_region(region)
    if metadata is None or metadata.general_desc is None:
        return 1
    national = min(metadata.general_desc.possible_length or (1,))
    abroad = FEWEST_DIGITS_WITH_COUNTRY_CODE
    if not plus:
        abroad += _shortest_match(metadata.international_prefix)
    return max(1, min(national, abroad))


class VersionAwarePhoneRecognizer(PhoneRecognizer):
    """Presidio's phone recogniser (phonenumbers' matcher, region by region), given only the
    runs of digits that could hold a valid number in each region (see the module), less what
    only looks like a number to call: a version or build after its word ("version
    126.0.6478.127"), digits glued to letters before them ("PO-2024-008812", an order
    number), and a date ("2024-10-11", "2025-03-12 11" of a log line)."""

    _VERSION_BEFORE = re.compile(
        r"(?i:\b(?:version|ver|v|build|release|firmware|bios|driver|update|kb|patch)\.?\s*:?\s*)$"
    )

    def load(self) -> None:
        """The fewest digits per region, with and without a plus sign, from the metadata."""
        self._fewest = {
            (region, plus): fewest_digits(region, plus)
            for region in self.supported_regions
            for plus in (False, True)
        }

    def analyze(
        self,
        text: str,
        entities: list[str],
        nlp_artifacts: NlpArtifacts | None = None,
    ) -> list[RecognizerResult]:
        runs = [
            _Run(
                run.start(),
                run.end(),
                len(_DIGIT.findall(run.group(0))),
                _PLUS.search(run.group(0)) is not None,
            )
            for run in _RUN.finditer(text)
        ]
        results = []
        seen: set[tuple[int, int]] = set()
        for region in self.supported_regions:
            for match in self._matches(text, runs, region):
                if (match.start, match.end) in seen:
                    continue  # found in an earlier region ("+1 415 555 0142" in each of them)
                seen.add((match.start, match.end))
                found = phonenumbers.region_code_for_number(match.number) or region
                results.append(
                    self._get_recognizer_result(  # type: ignore[no-untyped-call]  # Presidio's
                        match, text, found, nlp_artifacts
                    )
                )
        kept = []
        for result in EntityRecognizer.remove_duplicates(results):
            before = text[max(0, result.start - 20) : result.start]
            glued = (
                result.start >= 2
                and text[result.start - 1] in "-_/#"
                and text[result.start - 2].isalnum()
            )
            if (
                glued
                or self._VERSION_BEFORE.search(before)
                or DATE.fullmatch(text[result.start : result.end])
            ):
                continue
            kept.append(result)
        return kept

    def _matches(self, text: str, runs: list[_Run], region: str) -> Iterator[PhoneNumberMatch]:
        """The matcher's numbers for ``region`` in windows around the runs that could hold one
        there: from the character before a run (the matcher refuses a number glued to a letter)
        to what it may read after it (see :data:`_AFTER_A_RUN`), never ending inside another
        run; windows that overlap are one. The matcher skips candidates shorter than the fewest
        digits and gives up on a window after :data:`TRIES_PER_RUN` failed tries per run."""
        windows: list[list[int]] = []  # start, end, runs in it
        for index, run in enumerate(runs):
            if not self._fewest[(region, run.plus)] <= run.digits <= MOST_DIGITS_IN_A_RUN:
                continue
            start, end = max(0, run.start - 1), min(len(text), run.end + _AFTER_A_RUN)
            if index + 1 < len(runs):
                following = runs[index + 1]
                gap = text[run.end : following.start]
                if (
                    len(gap) <= _NEXT_RUN_WITHIN
                    and following.digits <= _MOST_DIGITS_OF_AN_EXTENSION
                    and _BEFORE_AN_EXTENSION.fullmatch(gap)
                ):
                    end = max(end, min(len(text), following.end + 1))
                elif following.start < end:
                    end = following.start
            if windows and start <= windows[-1][1]:
                windows[-1][1] = max(windows[-1][1], end)
                windows[-1][2] += 1
            else:
                windows.append([start, end, 1])
        shortest = self._fewest[(region, True)]
        for start, end, count in windows:
            for match in PhoneNumberMatcher(
                text[start:end],
                region,
                leniency=1 if self.leniency is None else self.leniency,  # Presidio's default
                max_tries=TRIES_PER_RUN * count,
                min_candidate_length=shortest,
            ):
                yield PhoneNumberMatch(start + match.start, match.raw_string, match.number)
